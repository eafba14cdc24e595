// RUN: cnnc-opt %s -split-input-file -verify-diagnostics
// Each constraint of cnn.resize / cnn.resize_grad / cnn.fused_resize_concat
// (CNNOps.td) rejected with one message.

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

// -----

// resize_grad's channel_offset (cnn-fuse's upsample + concat): the range
// must lie inside grad_output's channels.
func.func @resize_grad_channel_range(%dy: tensor<1x5x10x8xf32>) {
  // expected-error @+1 {{'channel_offset' 3 + the result's 3 channels exceed the 5 channels of 'grad_output'}}
  %0 = cnn.resize_grad %dy {size = array<i64: 10, 8>, channel_offset = 3} : (tensor<1x5x10x8xf32>) -> tensor<1x3x5x4xf32>
  return
}

// -----

func.func @resize_grad_channel_offset_negative(%dy: tensor<1x5x10x8xf32>) {
  // expected-error @+1 {{attribute 'channel_offset' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = cnn.resize_grad %dy {size = array<i64: 10, 8>, channel_offset = -1} : (tensor<1x5x10x8xf32>) -> tensor<1x3x5x4xf32>
  return
}

// -----

// With a channel offset, every dimension but the channels still as resized.
func.func @resize_grad_channel_offset_size(%dy: tensor<1x5x10x10xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<1x5x10x10xf32>' must have the type 'tensor<1x3x10x8xf32>' that resizing the result 'tensor<1x3x5x4xf32>' to 'size' [10, 8] gives, but for its channel count}}
  %0 = cnn.resize_grad %dy {size = array<i64: 10, 8>, channel_offset = 0} : (tensor<1x5x10x10xf32>) -> tensor<1x3x5x4xf32>
  return
}

// -----

// fused_resize_concat: the resize's constraints on `input` and the
// attributes ...
func.func @resize_concat_mode(%x: tensor<1x3x5x4xf32>, %s: tensor<1x2x10x8xf32>) {
  // expected-error @+1 {{'mode' must be "nearest" or "linear", got "cubic"}}
  %0 = cnn.fused_resize_concat %x, %s {size = array<i64: 10, 8>, mode = "cubic"} : (tensor<1x3x5x4xf32>, tensor<1x2x10x8xf32>) -> tensor<1x5x10x8xf32>
  return
}

// -----

func.func @resize_concat_input_rank(%x: tensor<3x5x4xf32>, %s: tensor<1x2x10x8xf32>) {
  // expected-error @+1 {{'input' must be 4-D (NCHW), got tensor<3x5x4xf32>}}
  %0 = cnn.fused_resize_concat %x, %s {size = array<i64: 10, 8>} : (tensor<3x5x4xf32>, tensor<1x2x10x8xf32>) -> tensor<1x5x10x8xf32>
  return
}

// -----

// ... `other` has the resized tensor's batch, spatial size and element
// type ...
func.func @resize_concat_other_size(%x: tensor<1x3x5x4xf32>, %s: tensor<1x2x10x10xf32>) {
  // expected-error @+1 {{'other' 'tensor<1x2x10x10xf32>' must have the batch, spatial size and element type of the resized input 'tensor<1x3x10x8xf32>'}}
  %0 = cnn.fused_resize_concat %x, %s {size = array<i64: 10, 8>} : (tensor<1x3x5x4xf32>, tensor<1x2x10x10xf32>) -> tensor<1x5x10x10xf32>
  return
}

// -----

func.func @resize_concat_other_type(%x: tensor<1x5x4x3xf16>, %s: tensor<1x10x8x2xf32>) {
  // expected-error @+1 {{'other' 'tensor<1x10x8x2xf32>' must have the batch, spatial size and element type of the resized input 'tensor<1x10x8x3xf16>'}}
  %0 = cnn.fused_resize_concat %x, %s {size = array<i64: 10, 8>, layout = #cnn.layout<NHWC>} : (tensor<1x5x4x3xf16>, tensor<1x10x8x2xf32>) -> tensor<1x10x8x5xf16>
  return
}

// -----

// ... and the result is their concatenation along the layout's channels.
func.func @resize_concat_result(%x: tensor<1x5x4x3xf16>, %s: tensor<1x10x8x2xf16>) {
  // expected-error @+1 {{result 'tensor<1x10x8x6xf16>' must be the channel concatenation 'tensor<1x10x8x5xf16>' of the resized input 'tensor<1x10x8x3xf16>' and 'other' 'tensor<1x10x8x2xf16>'}}
  %0 = cnn.fused_resize_concat %x, %s {size = array<i64: 10, 8>, layout = #cnn.layout<NHWC>} : (tensor<1x5x4x3xf16>, tensor<1x10x8x2xf16>) -> tensor<1x10x8x6xf16>
  return
}

// -----

// cnn-select-lowering's "vec8" on the fused forms: NHWC, and channel counts
// and offsets that are multiples of 8 ...
func.func @resize_concat_vec8_channels(%x: tensor<1x5x4x8xf16>, %s: tensor<1x10x8x4xf16>) {
  // expected-error @+1 {{'cnn.lowering' "vec8" needs NHWC and channel counts and offsets that are multiples of 8, got [8, 4]}}
  %0 = cnn.fused_resize_concat %x, %s {size = array<i64: 10, 8>, layout = #cnn.layout<NHWC>, cnn.lowering = "vec8"} : (tensor<1x5x4x8xf16>, tensor<1x10x8x4xf16>) -> tensor<1x10x8x12xf16>
  return
}

// -----

func.func @resize_concat_vec8_nchw(%x: tensor<1x8x5x4xf32>, %s: tensor<1x8x10x8xf32>) {
  // expected-error @+1 {{'cnn.lowering' "vec8" needs NHWC and channel counts and offsets that are multiples of 8, got [8, 8]}}
  %0 = cnn.fused_resize_concat %x, %s {size = array<i64: 10, 8>, cnn.lowering = "vec8"} : (tensor<1x8x5x4xf32>, tensor<1x8x10x8xf32>) -> tensor<1x16x10x8xf32>
  return
}

// -----

func.func @resize_grad_vec8_offset(%dy: tensor<1x10x8x24xf16>) {
  // expected-error @+1 {{'cnn.lowering' "vec8" needs NHWC and channel counts and offsets that are multiples of 8, got [8, 24, 4]}}
  %0 = cnn.resize_grad %dy {size = array<i64: 10, 8>, channel_offset = 4, layout = #cnn.layout<NHWC>, cnn.lowering = "vec8"} : (tensor<1x10x8x24xf16>) -> tensor<1x5x4x8xf16>
  return
}

// -----

// ... and a resize_grad with a channel offset only.
func.func @resize_grad_vec8_plain(%dy: tensor<1x10x8x8xf16>) {
  // expected-error @+1 {{'cnn.lowering' "vec8" is for a resize_grad with a 'channel_offset' only}}
  %0 = cnn.resize_grad %dy {size = array<i64: 10, 8>, layout = #cnn.layout<NHWC>, cnn.lowering = "vec8"} : (tensor<1x10x8x8xf16>) -> tensor<1x5x4x8xf16>
  return
}
