// RUN: cnnc-opt %s -cnn-autodiff="weight-decay=0.0001" | FileCheck %s --check-prefix=ALL
// RUN: cnnc-opt %s -cnn-autodiff="weight-decay=0.0001 no-bn-weight-decay=true" | FileCheck %s --check-prefix=NOBN
// RUN: cnnc-opt %s -cnn-autodiff="optimizer=adamw weight-decay=0.05 no-bn-weight-decay=true" | FileCheck %s --check-prefix=ADAMW

// --no-bn-weight-decay: 1-D parameters (biases, BN scale/shift) get weight
// decay 0, the others keep it.
func.func @forward(%x: tensor<2x3x8x8xf32> {cnn.input},
                   %w1: tensor<4x3x3x3xf32> {cnn.param = "conv.weight"},
                   %b1: tensor<4xf32> {cnn.param = "conv.bias"},
                   %w2: tensor<10x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b1 : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.global_avg_pool %cb : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %f, %w2 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// ALL-LABEL: func.func @train_step
// ALL: cnn.sgd_update %{{.*}} weight_decay = 9.99999974E-5 : f32} : (tensor<4x3x3x3xf32>
// ALL: cnn.sgd_update %{{.*}} weight_decay = 9.99999974E-5 : f32} : (tensor<4xf32>
// ALL: cnn.sgd_update %{{.*}} weight_decay = 9.99999974E-5 : f32} : (tensor<10x4xf32>

// NOBN-LABEL: func.func @train_step
// NOBN: cnn.sgd_update %{{.*}} weight_decay = 9.99999974E-5 : f32} : (tensor<4x3x3x3xf32>
// NOBN: cnn.sgd_update %{{.*}} weight_decay = 0.000000e+00 : f32} : (tensor<4xf32>
// NOBN: cnn.sgd_update %{{.*}} weight_decay = 9.99999974E-5 : f32} : (tensor<10x4xf32>

// ADAMW-LABEL: func.func @train_step
// ADAMW: cnn.adam_update %{{.*}} decoupled = true, {{.*}} weight_decay = 5.000000e-02 : f32} : (tensor<4x3x3x3xf32>
// ADAMW: cnn.adam_update %{{.*}} decoupled = true, {{.*}} weight_decay = 0.000000e+00 : f32} : (tensor<4xf32>
// ADAMW: cnn.adam_update %{{.*}} decoupled = true, {{.*}} weight_decay = 5.000000e-02 : f32} : (tensor<10x4xf32>
