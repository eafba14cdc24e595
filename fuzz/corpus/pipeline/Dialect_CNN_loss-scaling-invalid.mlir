// RUN: cnnc-opt %s -split-input-file -verify-diagnostics

func.func @all_finite_empty() {
  // expected-error @+1 {{needs at least one input}}
  %ok = cnn.all_finite : () -> tensor<f32>
  return
}

// -----

func.func @all_finite_result(%g: tensor<4xf16>) {
  // expected-error @+1 {{result #0 must be 0D tensor of 32-bit float values}}
  %ok = cnn.all_finite %g : (tensor<4xf16>) -> tensor<f16>
  return
}

// -----

func.func @growth_interval(%s: tensor<f32>) {
  // expected-error @+1 {{'growth_interval' must be >= 1, got 0}}
  %a, %b = cnn.loss_scale_update %s, %s, %s {growth_interval = 0} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @growth_factor(%s: tensor<f32>) {
  // expected-error @+1 {{'growth_factor' must be > 1, got 1}}
  %a, %b = cnn.loss_scale_update %s, %s, %s {growth_factor = 1.0 : f32} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @backoff_factor(%s: tensor<f32>) {
  // expected-error @+1 {{'backoff_factor' must be in (0, 1), got 1.5}}
  %a, %b = cnn.loss_scale_update %s, %s, %s {backoff_factor = 1.5 : f32} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @scale_not_scalar(%s: tensor<f32>, %v: tensor<2xf32>) {
  // expected-error @+1 {{operand #0 must be 0D tensor of 32-bit float values}}
  %a, %b = cnn.loss_scale_update %v, %s, %s : (tensor<2xf32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @unscale_shape(%g: tensor<4xf16>, %s: tensor<f32>) {
  // expected-error @+1 {{'input' 'tensor<4xf16>' and result 'tensor<5xf32>' must have the same shape}}
  %u = cnn.unscale %g, %s : (tensor<4xf16>, tensor<f32>) -> tensor<5xf32>
  return
}

// -----

func.func @sgd_one_scaling_operand(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{takes either no loss-scaling operands or two (grad_scale, finite), got 1}}
  %a, %b = cnn.sgd_update %p, %p, %p, %s, %s, %s {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adam_three_scaling_operands(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{takes either no loss-scaling operands or two (grad_scale, finite), got 3}}
  %a, %b, %c = cnn.adam_update %p, %p, %p, %p, %s, %s, %s, %s, %s {beta1 = 0.9 : f32, beta2 = 0.999 : f32, epsilon = 1.0e-8 : f32, weight_decay = 0.0 : f32, decoupled = false} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sgd_scale_not_scalar(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{operand #5 must be variadic of 0D tensor of 32-bit float values}}
  %a, %b = cnn.sgd_update %p, %p, %p, %s, %s, %p, %s {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}
