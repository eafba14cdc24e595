// RUN: cnnc-opt %s -split-input-file -verify-diagnostics
// Each constraint of cnn.nll_loss, cnn.nll_loss_grad, cnn.arg_max,
// cnn.arg_min, cnn.reduce_prod, cnn.gather_elements(_grad) and cnn.select
// (CNNOps.td) rejected with one message.

func.func @nll_rank(%x: tensor<4xf32>, %y: tensor<4xi64>) {
  // expected-error @+1 {{'input' must be N x C x d1 x ... (rank >= 2), got tensor<4xf32>}}
  %0 = cnn.nll_loss %x, %y : (tensor<4xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

func.func @nll_labels(%x: tensor<2x3x4xf32>, %y: tensor<2x3xi64>) {
  // expected-error @+1 {{'labels' tensor<2x3xi64> must have the shape [2, 4] of 'input' tensor<2x3x4xf32> without dimension 1}}
  %0 = cnn.nll_loss %x, %y : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<f32>
  return
}

// -----

func.func @nll_weight(%x: tensor<2x3xf32>, %y: tensor<2xi32>, %w: tensor<2xf32>) {
  // expected-error @+1 {{'weight' tensor<2xf32> must be 1-D with one value per class (3)}}
  %0 = cnn.nll_loss %x, %y, %w : (tensor<2x3xf32>, tensor<2xi32>, tensor<2xf32>) -> tensor<f32>
  return
}

// -----

func.func @nll_float_labels(%x: tensor<2x3xf32>, %y: tensor<2xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = cnn.nll_loss %x, %y : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<f32>
  return
}

// -----

func.func @nll_result(%x: tensor<2x3xf32>, %y: tensor<2xi64>) {
  // expected-error @+1 {{result #0 has type 'tensor<f32>' but the operands give 'tensor<2xf32>'}}
  %0 = cnn.nll_loss %x, %y {reduction = #cnn.loss_reduction<none>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return
}

// -----

func.func @nll_reduction(%x: tensor<2x3xf32>, %y: tensor<2xi64>) {
  // expected-error @+2 {{expected ::cnnc::cnn::LossReduction to be one of: none, sum, mean}}
  // expected-error @+1 {{failed to parse CNN_LossReductionAttr parameter 'value'}}
  %0 = cnn.nll_loss %x, %y {reduction = #cnn.loss_reduction<max>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return
}

// -----

func.func @nll_reduction_string(%x: tensor<2x3xf32>, %y: tensor<2xi64>) {
  // expected-error @+1 {{attribute 'reduction' failed to satisfy constraint: Loss reduction: none (per position), sum or mean}}
  %0 = cnn.nll_loss %x, %y {reduction = "sum"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return
}

// -----

func.func @nll_grad_loss(%g: tensor<2xf32>, %y: tensor<2xi64>) {
  // expected-error @+1 {{'grad_loss' 'tensor<2xf32>' must be 'tensor<f32>' for reduction 'mean'}}
  %0 = cnn.nll_loss_grad %g, %y : (tensor<2xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @nll_grad_labels(%g: tensor<f32>, %y: tensor<3xi64>) {
  // expected-error @+1 {{'labels' tensor<3xi64> must have the shape [2] of 'input' tensor<2x3xf32> without dimension 1}}
  %0 = cnn.nll_loss_grad %g, %y : (tensor<f32>, tensor<3xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @arg_max_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'axis' 2 must lie in [0, 2) for 'input' tensor<2x3xf32>}}
  %0 = cnn.arg_max %x {axis = 2} : (tensor<2x3xf32>) -> tensor<2x1xi64>
  return
}

// -----

func.func @arg_min_result(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x1xi64>' but the operands give 'tensor<2xi64>'}}
  %0 = cnn.arg_min %x {axis = 1, keepdims = false} : (tensor<2x3xf32>) -> tensor<2x1xi64>
  return
}

// -----

func.func @reduce_prod_axes(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'axes' [1, 1] must be distinct}}
  %0 = cnn.reduce_prod %x {axes = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @gather_axis(%x: tensor<2x3xf32>, %i: tensor<2x1xi64>) {
  // expected-error @+1 {{'axis' 2 must lie in [0, 2) for 'input' tensor<2x3xf32>}}
  %0 = cnn.gather_elements %x, %i {axis = 2} : (tensor<2x3xf32>, tensor<2x1xi64>) -> tensor<2x1xf32>
  return
}

// -----

func.func @gather_rank(%x: tensor<2x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{'indices' tensor<2xi64> must have the rank of 'input' tensor<2x3xf32>}}
  %0 = cnn.gather_elements %x, %i {axis = 1} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @gather_sizes(%x: tensor<2x3xf32>, %i: tensor<1x5xi64>) {
  // expected-error @+1 {{'indices' tensor<1x5xi64> must have the sizes of 'input' tensor<2x3xf32> except along 'axis' 1}}
  %0 = cnn.gather_elements %x, %i {axis = 1} : (tensor<2x3xf32>, tensor<1x5xi64>) -> tensor<1x5xf32>
  return
}

// -----

func.func @gather_grad_shape(%g: tensor<2x2xf32>, %i: tensor<2x1xi64>) {
  // expected-error @+1 {{'grad_output' 'tensor<2x2xf32>' must have the shape of 'indices' 'tensor<2x1xi64>'}}
  %0 = cnn.gather_elements_grad %g, %i {axis = 1} : (tensor<2x2xf32>, tensor<2x1xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @select_rank(%c: tensor<2xf32>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'condition' tensor<2xf32>, 'on_true' tensor<2x3xf32> and 'on_false' tensor<2x3xf32> must have the same rank}}
  %0 = cnn.select %c, %x, %x : (tensor<2xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @select_broadcast(%c: tensor<2x2xf32>, %x: tensor<2x3xf32>) {
  // expected-error @+1 {{'condition' tensor<2x2xf32>, 'on_true' tensor<2x3xf32> and 'on_false' tensor<2x3xf32> do not broadcast: each dimension must be 1 or one size in all three}}
  %0 = cnn.select %c, %x, %x : (tensor<2x2xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}
