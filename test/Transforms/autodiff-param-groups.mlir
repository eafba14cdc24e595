// RUN: cnnc-opt %s -cnn-autodiff="weight-decay=0.0001 momentum=0.9" | FileCheck %s
// RUN: cnnc-opt %s -cnn-autodiff="weight-decay=0.0001 no-bn-weight-decay=true" | FileCheck %s --check-prefix=NOBN

// Param groups (cnn.param_options): the conv is group 1 with its own LR (a
// run-time state "optimizer.group1.lr" whose cnn.init is the group's
// starting LR, read by its update in place of %lr) and its own momentum /
// nesterov / weight decay; the bias is group 2 without an LR (it reads the
// step's %lr) and no decay; fc.weight is group 0 (the pass options).
// no-bn-weight-decay makes the 1-D parameters that set no weight_decay a
// decay-free group: conv.bias keeps its explicit 0, and so does it without.
func.func @forward(%x: tensor<2x3x8x8xf32> {cnn.input},
                   %w1: tensor<4x3x3x3xf32> {cnn.param = "conv.weight", cnn.param_options = {group = 1, lr = 1.0e-3 : f32, momentum = 0.5 : f32, nesterov = true, weight_decay = 0.0 : f32}},
                   %b1: tensor<4xf32> {cnn.param = "conv.bias", cnn.param_options = {group = 2, weight_decay = 0.0 : f32}},
                   %w2: tensor<10x4xf32> {cnn.param = "fc.weight"},
                   %b2: tensor<10xf32> {cnn.param = "fc.bias"}) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b1 : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.global_avg_pool %cb : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %f, %w2 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  %yb = cnn.bias_add %y, %b2 : (tensor<2x10xf32>, tensor<10xf32>) -> tensor<2x10xf32>
  return %yb : tensor<2x10xf32>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {cnn.lr}
// CHECK-SAME: {cnn.state = "fc.bias.momentum_buffer"}
// CHECK-SAME: %[[LR1:[a-z0-9]+]]: tensor<f32> {cnn.init = 1.000000e-03 : f32, cnn.state = "optimizer.group1.lr"}
// CHECK-SAME: -> (
// CHECK-NOT: optimizer.group1.lr
// CHECK: cnn.sgd_update {{.*}}, %[[LR1]], %{{.*}} {dampening = 0.000000e+00 : f32, momentum = 5.000000e-01 : f32, nesterov = true, weight_decay = 0.000000e+00 : f32} : (tensor<4x3x3x3xf32>
// CHECK: cnn.sgd_update {{.*}}, %[[LR]], %{{.*}} {dampening = 0.000000e+00 : f32, momentum = 0.899999976 : f32, nesterov = false, weight_decay = 0.000000e+00 : f32} : (tensor<4xf32>
// CHECK: cnn.sgd_update {{.*}}, %[[LR]], %{{.*}} {dampening = 0.000000e+00 : f32, momentum = 0.899999976 : f32, nesterov = false, weight_decay = 9.99999974E-5 : f32} : (tensor<10x4xf32>
// CHECK: cnn.sgd_update {{.*}}, %[[LR]], %{{.*}} {dampening = 0.000000e+00 : f32, momentum = 0.899999976 : f32, nesterov = false, weight_decay = 9.99999974E-5 : f32} : (tensor<10xf32>

// NOBN-LABEL: func.func @train_step(
// NOBN: cnn.sgd_update {{.*}} weight_decay = 0.000000e+00 : f32} : (tensor<4x3x3x3xf32>
// NOBN: cnn.sgd_update {{.*}} weight_decay = 0.000000e+00 : f32} : (tensor<4xf32>
// NOBN: cnn.sgd_update {{.*}} weight_decay = 9.99999974E-5 : f32} : (tensor<10x4xf32>
// NOBN: cnn.sgd_update {{.*}} weight_decay = 0.000000e+00 : f32} : (tensor<10xf32>
