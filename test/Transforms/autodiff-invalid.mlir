// RUN: cnnc-opt %s -split-input-file -cnn-autodiff -verify-diagnostics

// An op without a gradient rule (a backward op, here pad_grad, used in the
// forward function) is named.
func.func @forward(%x: tensor<2x4xf32> {cnn.input},
                   %w: tensor<14x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %y = cnn.matmul %x, %w {transpose_rhs = true} : (tensor<2x4xf32>, tensor<14x4xf32>) -> tensor<2x14xf32>
  // expected-error @+1 {{cnn-autodiff: no gradient rule for 'cnn.pad_grad', which lies between the parameters and the loss}}
  %s = cnn.pad_grad %y {mode = "edge", pads = array<i64: 0, 2, 0, 2>} : (tensor<2x14xf32>) -> tensor<2x10xf32>
  return %s : tensor<2x10xf32>
}

// -----

// expected-error @+1 {{cnn-autodiff: 'forward' has no parameters (arguments tagged cnn.param): nothing to train}}
func.func @forward(%x: tensor<2x4x1x1xf32> {cnn.input}) -> tensor<2x4xf32> {
  %f = cnn.flatten %x {axis = 1} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  return %f : tensor<2x4xf32>
}

// -----

// expected-error @+1 {{cnn-autodiff: no function named 'forward'}}
module {
  func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %x : tensor<2x4xf32>
  }
}

// -----

// expected-error @+1 {{cnn-autodiff: 'forward' must return N x C logits tensors, or N x C x H x W per-pixel logits (the main classifier's, then any auxiliary classifiers' of the same rank, batch and H x W), got '(tensor<2x4xf32>, tensor<3x4xf32>) -> (tensor<2x4xf32>, tensor<3x4xf32>)'}}
func.func @forward(%x: tensor<2x4xf32> {cnn.input}, %w: tensor<3x4xf32> {cnn.param = "w"}) -> (tensor<2x4xf32>, tensor<3x4xf32>) {
  return %x, %w : tensor<2x4xf32>, tensor<3x4xf32>
}

// -----

// Per-pixel logits: an auxiliary head of another H x W cannot share the
// N x H x W labels.
// expected-error @+1 {{cnn-autodiff: 'forward' must return N x C logits tensors, or N x C x H x W per-pixel logits (the main classifier's, then any auxiliary classifiers' of the same rank, batch and H x W), got '(tensor<2x3x4x4xf32>, tensor<2x3x2x2xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x2x2xf32>)'}}
func.func @forward(%x: tensor<2x3x4x4xf32> {cnn.input}, %w: tensor<2x3x2x2xf32> {cnn.param = "w"}) -> (tensor<2x3x4x4xf32>, tensor<2x3x2x2xf32>) {
  return %x, %w : tensor<2x3x4x4xf32>, tensor<2x3x2x2xf32>
}

// -----

// Per-pixel and per-image logits do not mix (one labels argument).
// expected-error @+1 {{cnn-autodiff: 'forward' must return N x C logits tensors, or N x C x H x W per-pixel logits (the main classifier's, then any auxiliary classifiers' of the same rank, batch and H x W), got '(tensor<2x3x4x4xf32>, tensor<2x3xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3xf32>)'}}
func.func @forward(%x: tensor<2x3x4x4xf32> {cnn.input}, %w: tensor<2x3xf32> {cnn.param = "w"}) -> (tensor<2x3x4x4xf32>, tensor<2x3xf32>) {
  return %x, %w : tensor<2x3x4x4xf32>, tensor<2x3xf32>
}

// -----

// Rank 3 is neither.
// expected-error @+1 {{cnn-autodiff: 'forward' must return N x C logits tensors, or N x C x H x W per-pixel logits}}
func.func @forward(%x: tensor<2x3x4xf32> {cnn.input}, %w: tensor<2x3x4xf32> {cnn.param = "w"}) -> tensor<2x3x4xf32> {
  %y = cnn.add %x, %w : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}
