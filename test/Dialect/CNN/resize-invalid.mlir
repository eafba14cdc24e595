// RUN: cnnc-opt %s -split-input-file -verify-diagnostics
// Each constraint of cnn.resize / cnn.resize_grad (CNNOps.td) rejected with
// one message.

func.func @resize_rank(%x: tensor<3x5x4xf32>) {
  // expected-error @+1 {{'input' must be 4-D (NCHW), got tensor<3x5x4xf32>}}
  %0 = cnn.resize %x {size = array<i64: 10, 8>} : (tensor<3x5x4xf32>) -> tensor<3x10x8xf32>
  return
}

// -----

func.func @resize_size_count(%x: tensor<1x3x5x4xf32>) {
  // expected-error @+1 {{'size' must have 2 entries, got [1, 3, 10, 8]}}
  %0 = cnn.resize %x {size = array<i64: 1, 3, 10, 8>} : (tensor<1x3x5x4xf32>) -> tensor<1x3x10x8xf32>
  return
}

// -----

func.func @resize_size_zero(%x: tensor<1x3x5x4xf32>) {
  // expected-error @+1 {{'size' entries must be >= 1, got [0, 8]}}
  %0 = cnn.resize %x {size = array<i64: 0, 8>} : (tensor<1x3x5x4xf32>) -> tensor<1x3x0x8xf32>
  return
}

// -----

func.func @resize_overflow(%x: tensor<1x3x5x4xf32>) {
  // expected-error @+1 {{resizing 'input' tensor<1x3x5x4xf32> to [4611686018427387904, 8] gives more elements than int64 can count}}
  %0 = cnn.resize %x {size = array<i64: 4611686018427387904, 8>} : (tensor<1x3x5x4xf32>) -> tensor<1x3x10x8xf32>
  return
}

// -----

func.func @resize_mode(%x: tensor<1x3x5x4xf32>) {
  // expected-error @+1 {{'mode' must be "nearest" or "linear", got "cubic"}}
  %0 = cnn.resize %x {size = array<i64: 10, 8>, mode = "cubic"} : (tensor<1x3x5x4xf32>) -> tensor<1x3x10x8xf32>
  return
}

// -----

func.func @resize_coord(%x: tensor<1x3x5x4xf32>) {
  // expected-error @+1 {{'coordinate_transformation_mode' must be "half_pixel", "pytorch_half_pixel", "align_corners" or "asymmetric", got "tf_crop_and_resize"}}
  %0 = cnn.resize %x {size = array<i64: 10, 8>, coordinate_transformation_mode = "tf_crop_and_resize"} : (tensor<1x3x5x4xf32>) -> tensor<1x3x10x8xf32>
  return
}

// -----

func.func @resize_nearest_mode(%x: tensor<1x3x5x4xf32>) {
  // expected-error @+1 {{'nearest_mode' must be "round_prefer_floor", "round_prefer_ceil", "floor" or "ceil", got "round"}}
  %0 = cnn.resize %x {size = array<i64: 10, 8>, nearest_mode = "round"} : (tensor<1x3x5x4xf32>) -> tensor<1x3x10x8xf32>
  return
}

// -----

func.func @resize_scales_count(%x: tensor<1x3x5x4xf32>) {
  // expected-error @+1 {{'scales' must have 2 finite entries > 0, got [1.000000, 1.000000, 2.000000, 2.000000]}}
  %0 = cnn.resize %x {size = array<i64: 10, 8>, scales = array<f64: 1.0, 1.0, 2.0, 2.0>} : (tensor<1x3x5x4xf32>) -> tensor<1x3x10x8xf32>
  return
}

// -----

func.func @resize_scales_negative(%x: tensor<1x3x5x4xf32>) {
  // expected-error @+1 {{'scales' must have 2 finite entries > 0, got [2.000000, -2.000000]}}
  %0 = cnn.resize %x {size = array<i64: 10, 8>, scales = array<f64: 2.0, -2.0>} : (tensor<1x3x5x4xf32>) -> tensor<1x3x10x8xf32>
  return
}

// -----

func.func @resize_result(%x: tensor<1x3x5x4xf32>) {
  // expected-error @+1 {{'cnn.resize' op result #0 has type 'tensor<1x3x8x10xf32>' but the operands give 'tensor<1x3x10x8xf32>'}}
  %0 = cnn.resize %x {size = array<i64: 10, 8>} : (tensor<1x3x5x4xf32>) -> tensor<1x3x8x10xf32>
  return
}

// -----

func.func @resize_grad_size(%dy: tensor<1x3x10x8xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<1x3x10x8xf32>' must have the type 'tensor<1x3x10x10xf32>' that resizing the result 'tensor<1x3x5x4xf32>' to 'size' [10, 10] gives}}
  %0 = cnn.resize_grad %dy {size = array<i64: 10, 10>} : (tensor<1x3x10x8xf32>) -> tensor<1x3x5x4xf32>
  return
}

// -----

func.func @resize_grad_channels(%dy: tensor<1x3x10x8xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<1x3x10x8xf32>' must have the type 'tensor<1x4x10x8xf32>' that resizing the result 'tensor<1x4x5x4xf32>' to 'size' [10, 8] gives}}
  %0 = cnn.resize_grad %dy {size = array<i64: 10, 8>} : (tensor<1x3x10x8xf32>) -> tensor<1x4x5x4xf32>
  return
}

// -----

func.func @resize_grad_rank(%dy: tensor<3x10x8xf32>) {
  // expected-error @+1 {{'result' must be 4-D (NHWC), got tensor<3x5x4xf32>}}
  %0 = cnn.resize_grad %dy {size = array<i64: 10, 8>, layout = #cnn.layout<NHWC>} : (tensor<3x10x8xf32>) -> tensor<3x5x4xf32>
  return
}

// -----

func.func @resize_grad_mode(%dy: tensor<1x3x10x8xf32>) {
  // expected-error @+1 {{'mode' must be "nearest" or "linear", got "bilinear"}}
  %0 = cnn.resize_grad %dy {size = array<i64: 10, 8>, mode = "bilinear"} : (tensor<1x3x10x8xf32>) -> tensor<1x3x5x4xf32>
  return
}
