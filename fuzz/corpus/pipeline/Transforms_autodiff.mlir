// RUN: cnnc-opt %s -cnn-autodiff | FileCheck %s
// RUN: cnnc-opt %s -cnn-autodiff=optimizer=adamw | FileCheck %s --check-prefix=ADAM
// RUN: cnnc-opt %s -cnn-autodiff=optimizer=none | FileCheck %s --check-prefix=GRAD

// A two-layer net: conv + bias + relu -> global pool -> flatten -> linear.
func.func @forward(%x: tensor<2x3x8x8xf32> {cnn.input},
                   %w1: tensor<4x3x3x3xf32> {cnn.param = "conv.weight"},
                   %b1: tensor<4xf32> {cnn.param = "conv.bias"},
                   %w2: tensor<10x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b1 : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.relu %cb : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.global_avg_pool %r : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %f, %w2 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// CHECK-LABEL: func.func @forward
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x8x8xf32> {cnn.input}
// CHECK-SAME: %[[LABELS:[a-z0-9]+]]: tensor<2xi32> {cnn.labels}
// CHECK-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {cnn.lr}
// CHECK-SAME: %[[STEP:[a-z0-9]+]]: tensor<f32> {cnn.step}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<4x3x3x3xf32> {cnn.param = "conv.weight"}
// CHECK-SAME: %[[B1:[a-z0-9]+]]: tensor<4xf32> {cnn.param = "conv.bias"}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<10x4xf32> {cnn.param = "fc.weight"}
// CHECK-SAME: {cnn.state = "conv.weight.momentum_buffer"}
// CHECK-SAME: {cnn.state = "conv.bias.momentum_buffer"}
// CHECK-SAME: %[[M3:[a-z0-9]+]]: tensor<10x4xf32> {cnn.state = "fc.weight.momentum_buffer"}
// CHECK-SAME: -> (tensor<f32> {cnn.loss}, tensor<4x3x3x3xf32> {cnn.param = "conv.weight"}
// CHECK: %[[C:.*]] = cnn.conv2d %[[X]], %[[W1]]
// CHECK: %[[R:.*]] = cnn.relu
// CHECK: %[[F:.*]] = cnn.flatten
// CHECK: %[[Y:.*]] = cnn.matmul %[[F]], %[[W2]] {transpose_rhs = true}
// CHECK: %[[LOSS:.*]] = cnn.softmax_cross_entropy %[[Y]], %[[LABELS]]
// CHECK: %[[ONE:.*]] = cnn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = cnn.softmax_cross_entropy_grad %[[Y]], %[[LABELS]], %[[ONE]]
// dfc.weight = dY^T . F ; dF = dY . W2
// CHECK-DAG: %[[DF:.*]] = cnn.matmul %[[DY]], %[[W2]] :
// CHECK-DAG: %[[DW2:.*]] = cnn.matmul %[[DY]], %[[F]] {transpose_lhs = true}
// CHECK: %[[DG:.*]] = cnn.reshape %[[DF]] : (tensor<2x4xf32>) -> tensor<2x4x1x1xf32>
// CHECK: %[[DR:.*]] = cnn.global_avg_pool_grad %[[DG]]
// CHECK: %[[DCB:.*]] = cnn.relu_grad %[[DR]], %[[R]]
// CHECK: %[[DB1:.*]] = cnn.bias_grad %[[DCB]]
// The input needs no gradient: no conv2d_bwd_data.
// CHECK-NOT: cnn.conv2d_bwd_data
// CHECK: %[[DW1:.*]] = cnn.conv2d_bwd_filter %[[X]], %[[DCB]]
// CHECK: cnn.sgd_update %[[W1]], %[[DW1]], {{.*}}, %[[LR]], %[[STEP]] {{.*}}momentum = 0.899999976
// CHECK: cnn.sgd_update %[[B1]], %[[DB1]]
// CHECK: cnn.sgd_update %[[W2]], %[[DW2]], %[[M3]]
// CHECK: return %[[LOSS]]

// ADAM-LABEL: func.func @train_step
// ADAM-SAME: {cnn.state = "fc.weight.exp_avg"}
// ADAM-SAME: {cnn.state = "fc.weight.exp_avg_sq"}
// ADAM-COUNT-3: cnn.adam_update {{.*}} decoupled = true

// GRAD-LABEL: func.func @train_step
// GRAD-SAME: -> (tensor<f32> {cnn.loss}, tensor<4x3x3x3xf32> {cnn.grad = "conv.weight"}, tensor<4xf32> {cnn.grad = "conv.bias"}, tensor<10x4xf32> {cnn.grad = "fc.weight"})
// GRAD-NOT: update
