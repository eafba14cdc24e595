// RUN: cnnc-opt %s -split-input-file -cnn-autodiff -verify-diagnostics

// expected-error @+1 {{cnn-autodiff: cnn.param_options of 'fc.weight': 'beta1' is not a setting of optimizer 'sgd'}}
func.func @forward(%x: tensor<2x4xf32> {cnn.input},
                   %w: tensor<10x4xf32> {cnn.param = "fc.weight", cnn.param_options = {beta1 = 0.5 : f32}}) -> tensor<2x10xf32> {
  %y = cnn.matmul %x, %w {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// -----

// expected-error @+1 {{cnn-autodiff: cnn.param_options of 'fc.weight': unknown setting 'amsgrad'}}
func.func @forward(%x: tensor<2x4xf32> {cnn.input},
                   %w: tensor<10x4xf32> {cnn.param = "fc.weight", cnn.param_options = {amsgrad = 1.0 : f32}}) -> tensor<2x10xf32> {
  %y = cnn.matmul %x, %w {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// -----

// expected-error @+1 {{cnn-autodiff: cnn.param_options of 'fc.weight': an 'lr' of its own needs a 'group' >= 1}}
func.func @forward(%x: tensor<2x4xf32> {cnn.input},
                   %w: tensor<10x4xf32> {cnn.param = "fc.weight", cnn.param_options = {lr = 0.5 : f32}}) -> tensor<2x10xf32> {
  %y = cnn.matmul %x, %w {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// -----

// expected-error @+1 {{cnn-autodiff: cnn.param_options of 'b.weight': group 1 has lr 0.250000 here and 0.500000 elsewhere}}
func.func @forward(%x: tensor<2x4xf32> {cnn.input},
                   %w1: tensor<6x4xf32> {cnn.param = "a.weight", cnn.param_options = {group = 1, lr = 0.5 : f32}},
                   %w2: tensor<10x6xf32> {cnn.param = "b.weight", cnn.param_options = {group = 1, lr = 0.25 : f32}}) -> tensor<2x10xf32> {
  %h = cnn.matmul %x, %w1 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<6x4xf32>) -> tensor<2x6xf32>
  %y = cnn.matmul %h, %w2 {transpose_rhs = true} : (tensor<2x6xf32>, tensor<10x6xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// -----

// expected-error @+1 {{cnn-autodiff: cnn.param_options of 'fc.weight': nesterov needs momentum > 0 and dampening 0}}
func.func @forward(%x: tensor<2x4xf32> {cnn.input},
                   %w: tensor<10x4xf32> {cnn.param = "fc.weight", cnn.param_options = {nesterov = true, momentum = 0.0 : f32}}) -> tensor<2x10xf32> {
  %y = cnn.matmul %x, %w {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// -----

// expected-error @+1 {{cnn-autodiff: 'forward' has only frozen parameters (cnn.frozen): nothing to train}}
func.func @forward(%x: tensor<2x4xf32> {cnn.input},
                   %w: tensor<10x4xf32> {cnn.param = "fc.weight", cnn.frozen}) -> tensor<2x10xf32> {
  %y = cnn.matmul %x, %w {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
