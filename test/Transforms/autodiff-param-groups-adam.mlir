// RUN: cnnc-opt %s -cnn-autodiff="optimizer=adamw weight-decay=0.05" | FileCheck %s --check-prefix=ADAM

// Adam groups: betas and epsilon per group.
func.func @forward(%x: tensor<2x4xf32> {cnn.input},
                   %w1: tensor<6x4xf32> {cnn.param = "a.weight", cnn.param_options = {group = 1, lr = 2.0e-2 : f32, beta1 = 0.5 : f32, beta2 = 0.75 : f32, epsilon = 1.0e-3 : f32}},
                   %w2: tensor<10x6xf32> {cnn.param = "b.weight"}) -> tensor<2x10xf32> {
  %h = cnn.matmul %x, %w1 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<6x4xf32>) -> tensor<2x6xf32>
  %y = cnn.matmul %h, %w2 {transpose_rhs = true} : (tensor<2x6xf32>, tensor<10x6xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// ADAM-LABEL: func.func @train_step(
// ADAM: cnn.adam_update {{.*}} {beta1 = 5.000000e-01 : f32, beta2 = 7.500000e-01 : f32, decoupled = true, epsilon = 1.000000e-03 : f32, weight_decay = 5.000000e-02 : f32} : (tensor<6x4xf32>
// ADAM: cnn.adam_update {{.*}} {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, decoupled = true, epsilon = 9.99999993E-9 : f32, weight_decay = 5.000000e-02 : f32} : (tensor<10x6xf32>
