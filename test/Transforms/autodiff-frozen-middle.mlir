// RUN: cnnc-opt %s -cnn-autodiff | FileCheck %s

// A frozen conv between two trained layers: the gradient flows through it
// (its input gradient, conv2d_bwd_data, is built for conv1 below) but its
// weight gradient (conv2d_bwd_filter of conv2) is not: one conv2d_bwd_filter,
// conv1's, and two updates.
func.func @forward(%x: tensor<2x3x8x8xf32> {cnn.input},
                   %w1: tensor<4x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %w2: tensor<4x4x3x3xf32> {cnn.param = "conv2.weight", cnn.frozen},
                   %w3: tensor<10x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c1 = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %r1 = cnn.relu %c1 : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %c2 = cnn.conv2d %r1, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.global_avg_pool %c2 : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %f, %w3 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x8x8xf32> {cnn.input}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<4x3x3x3xf32> {cnn.param = "conv1.weight"}
// CHECK-SAME: %[[W3:[a-z0-9]+]]: tensor<10x4xf32> {cnn.param = "fc.weight"}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<4x4x3x3xf32> {cnn.frozen, cnn.param = "conv2.weight"}
// CHECK-NOT: conv2.weight.momentum_buffer
// CHECK: cnn.conv2d_bwd_data %{{.*}}, %[[W2]]
// CHECK-NOT: cnn.conv2d_bwd_filter %{{.*}} -> tensor<4x4x3x3xf32>
// CHECK: cnn.conv2d_bwd_filter %[[X]], {{.*}} -> tensor<4x3x3x3xf32>
// CHECK-NOT: cnn.conv2d_bwd_filter
// CHECK: cnn.sgd_update %[[W1]]
// CHECK-NEXT: cnn.sgd_update %[[W3]]
// CHECK-NOT: cnn.sgd_update
// CHECK: return
