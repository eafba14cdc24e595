// RUN: cnnc-opt %s -cnn-autodiff | FileCheck %s
// RUN: cnnc-opt %s -cnn-autodiff=optimizer=adam | FileCheck %s --check-prefix=ADAM
// RUN: cnnc-opt %s -cnn-autodiff=optimizer=none | FileCheck %s --check-prefix=GRAD

// A frozen backbone (torch's requires_grad=False on the conv): the conv's
// weight and bias get no gradient, no update, no optimizer state and are not
// returned; the weight-gradient convolution and the bias gradient, which only
// they need, are not built, nor is the input gradient of the conv (nothing
// below it trains). Only the head (fc.weight) trains.
func.func @forward(%x: tensor<2x3x8x8xf32> {cnn.input},
                   %w1: tensor<4x3x3x3xf32> {cnn.param = "conv.weight", cnn.frozen},
                   %b1: tensor<4xf32> {cnn.param = "conv.bias", cnn.frozen},
                   %w2: tensor<10x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b1 : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.relu %cb : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.global_avg_pool %r : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %f, %w2 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: {cnn.lr}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<10x4xf32> {cnn.param = "fc.weight"}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<4x3x3x3xf32> {cnn.frozen, cnn.param = "conv.weight"}
// CHECK-SAME: %[[B1:[a-z0-9]+]]: tensor<4xf32> {cnn.frozen, cnn.param = "conv.bias"}
// CHECK-SAME: {cnn.state = "fc.weight.momentum_buffer"}
// CHECK-NOT: conv.weight.momentum_buffer
// CHECK-SAME: -> (tensor<f32> {cnn.loss}, tensor<10x4xf32> {cnn.param = "fc.weight"}, tensor<10x4xf32> {cnn.state = "fc.weight.momentum_buffer"})
// CHECK: cnn.conv2d %{{.*}}, %[[W1]]
// CHECK: cnn.bias_add %{{.*}}, %[[B1]]
// CHECK: cnn.matmul %{{.*}}, %[[W2]] {transpose_rhs = true}
// CHECK: cnn.softmax_cross_entropy_grad
// CHECK-NOT: cnn.global_avg_pool_grad
// CHECK-NOT: cnn.relu_grad
// CHECK-NOT: cnn.bias_grad
// CHECK-NOT: cnn.conv2d_bwd_filter
// CHECK-NOT: cnn.conv2d_bwd_data
// CHECK: cnn.sgd_update %[[W2]]
// CHECK-NOT: cnn.sgd_update
// CHECK: return

// ADAM-LABEL: func.func @train_step(
// ADAM-NOT: conv.weight.exp_avg
// ADAM-NOT: conv.bias.exp_avg
// ADAM: cnn.adam_update
// ADAM-NOT: cnn.adam_update
// ADAM: return

// Gradients only: one gradient result, the head's.
// GRAD-LABEL: func.func @train_step(
// GRAD-SAME: -> (tensor<f32> {cnn.loss}, tensor<10x4xf32> {cnn.grad = "fc.weight"})
// GRAD-NOT: cnn.conv2d_bwd_filter
