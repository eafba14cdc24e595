// RUN: cnnc-opt %s -split-input-file -verify-diagnostics

// The constraints of cnn.clip_divisor, cnn.accumulate_grad and
// cnn.accumulation_step (CNNAmpOps.td).

func.func @clip_no_grads(%s: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'cnn.clip_divisor' op needs at least one gradient}}
  %d = cnn.clip_divisor %s {max_norm = 1.0 : f32} : (tensor<f32>) -> tensor<f32>
  return %d : tensor<f32>
}

// -----

func.func @clip_zero_norm(%s: tensor<f32>, %g: tensor<4xf16>) -> tensor<f32> {
  // expected-error @+1 {{'cnn.clip_divisor' op 'max_norm' must be > 0, got 0}}
  %d = cnn.clip_divisor %s, %g {max_norm = 0.0 : f32} : (tensor<f32>, tensor<4xf16>) -> tensor<f32>
  return %d : tensor<f32>
}

// -----

func.func @accumulate_every_one(%a: tensor<4xf32>, %g: tensor<4xf32>, %step: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'cnn.accumulate_grad' op 'every' must be >= 2, got 1}}
  %s, %n = cnn.accumulate_grad %a, %g, %step {every = 1} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %s : tensor<4xf32>
}

// -----

// The gradient has the sums' type, or its f16 form (loss scaling); an f16
// sum of an f32 gradient is not one of them.
func.func @accumulate_types(%a: tensor<4xf16>, %g: tensor<4xf32>, %step: tensor<f32>) -> tensor<4xf16> {
  // expected-error @+1 {{'cnn.accumulate_grad' op acc, sum and new_acc must have one type and grad that type or its f16 form, got 'tensor<4xf16>' and 'tensor<4xf32>'}}
  %s, %n = cnn.accumulate_grad %a, %g, %step {every = 2} : (tensor<4xf16>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf16>, tensor<4xf16>)
  return %s : tensor<4xf16>
}

// -----

func.func @accumulate_shapes(%a: tensor<4xf32>, %g: tensor<5xf16>, %step: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'cnn.accumulate_grad' op acc, sum and new_acc must have one type and grad that type or its f16 form, got 'tensor<4xf32>' and 'tensor<5xf16>'}}
  %s, %n = cnn.accumulate_grad %a, %g, %step {every = 2} : (tensor<4xf32>, tensor<5xf16>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %s : tensor<4xf32>
}

// -----

func.func @accumulation_step_every(%step: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'cnn.accumulation_step' op 'every' must be >= 2, got 0}}
  %a, %o = cnn.accumulation_step %step {every = 0} : (tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return %a : tensor<f32>
}
