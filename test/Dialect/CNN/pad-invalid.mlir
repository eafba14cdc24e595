// RUN: cnnc-opt %s -split-input-file -verify-diagnostics
// Each constraint of cnn.pad / cnn.pad_grad (CNNOps.td) rejected with one
// message.

func.func @pad_count(%x: tensor<2x3x4x4xf32>) {
  // expected-error @+1 {{'pads' must have 8 entries, got [1, 1, 1, 1]}}
  %0 = cnn.pad %x {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x4x4xf32>) -> tensor<2x3x6x6xf32>
  return
}

// -----

func.func @pad_negative(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'pads' entries must be >= 0, got [0, -1, 0, 0]}}
  %0 = cnn.pad %x {pads = array<i64: 0, -1, 0, 0>} : (tensor<4x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @pad_mode(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'mode' must be "constant", "reflect" or "edge", got "wrap"}}
  %0 = cnn.pad %x {pads = array<i64: 0, 1, 0, 1>, mode = "wrap"} : (tensor<4x4xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @pad_reflect_too_wide(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{"reflect" pads [0, 3, 0, 0] must be smaller than each dimension of 'input' [4, 3]}}
  %0 = cnn.pad %x {pads = array<i64: 0, 3, 0, 0>, mode = "reflect"} : (tensor<4x3xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @pad_result_type(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'cnn.pad' op result #0 has type 'tensor<4x5xf32>' but the operands give 'tensor<4x6xf32>'}}
  %0 = cnn.pad %x {pads = array<i64: 0, 1, 0, 1>} : (tensor<4x4xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @pad_element_type(%x: tensor<4x4xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or 16-bit float values}}
  %0 = cnn.pad %x {pads = array<i64: 0, 1, 0, 1>} : (tensor<4x4xi32>) -> tensor<4x6xi32>
  return
}

// -----

func.func @pad_grad_count(%dy: tensor<4x6xf32>) {
  // expected-error @+1 {{'pads' must have 4 entries, got [1, 1]}}
  %0 = cnn.pad_grad %dy {pads = array<i64: 1, 1>, mode = "edge"} : (tensor<4x6xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @pad_grad_empty(%dy: tensor<4x6xf32>) {
  // expected-error @+1 {{'pads' [0, 3, 0, 3] leave no element of 'grad_output' tensor<4x6xf32> in dimension 1}}
  %0 = cnn.pad_grad %dy {pads = array<i64: 0, 3, 0, 3>, mode = "edge"} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  return
}

// -----

func.func @pad_grad_reflect(%dy: tensor<4x6xf32>) {
  // expected-error @+1 {{"reflect" pads [0, 2, 0, 2] must be smaller than each dimension of the result [4, 2]}}
  %0 = cnn.pad_grad %dy {pads = array<i64: 0, 2, 0, 2>, mode = "reflect"} : (tensor<4x6xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @pad_grad_mode(%dy: tensor<4x6xf32>) {
  // expected-error @+1 {{'mode' must be "constant", "reflect" or "edge", got "symmetric"}}
  %0 = cnn.pad_grad %dy {pads = array<i64: 0, 1, 0, 1>, mode = "symmetric"} : (tensor<4x6xf32>) -> tensor<4x4xf32>
  return
}
