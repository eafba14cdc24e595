// RUN: cnnc-opt %s -split-input-file -verify-diagnostics
// The shape rule of every cnn op result (CNN_BoundedResults) and the checked
// size arithmetic of the ops that grow a tensor (issue 34, N1 and N7).

// N7: an offset near INT64_MAX must not wrap `offset + size` into range.
func.func @slice_offset_int64max(%a: tensor<2x6x16x18xf32>) {
  // expected-error @+1 {{slice offsets [0, 0, 0, 9223372036854775807] sizes [2, 6, 16, 16] exceed 'input' tensor<2x6x16x18xf32>}}
  %0 = cnn.slice %a {offsets = array<i64: 0, 0, 0, 9223372036854775807>, sizes = array<i64: 2, 6, 16, 16>} : (tensor<2x6x16x18xf32>) -> tensor<2x6x16x16xf32>
  return
}

// -----

// N1: a declared result whose element count overflows int64 (the pad of
// pad_wrap_max.onnx: 2^32 - 8 on each side of 8).
func.func @pad_result_overflows(%a: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{'cnn.pad' op result #0 'tensor<2x3x8589934584x8589934584xf32>' is too large: its element count must be at most 1099511627776 and its size in bytes must fit in int64}}
  %0 = cnn.pad %a {pads = array<i64: 0, 0, 4294967288, 4294967288, 0, 0, 4294967288, 4294967288>} : (tensor<2x3x8x8xf32>) -> tensor<2x3x8589934584x8589934584xf32>
  return
}

// -----

// N1: within int64 but above the ceiling (2^40 elements).
func.func @pad_result_absurd(%a: tensor<1x1x8x8xf32>) {
  // expected-error @+1 {{'cnn.pad' op result #0 'tensor<1x1x2097160x2097160xf32>' is too large}}
  %0 = cnn.pad %a {pads = array<i64: 0, 0, 1048576, 1048576, 0, 0, 1048576, 1048576>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x2097160x2097160xf32>
  return
}

// -----

// The padded size itself would overflow int64.
func.func @pad_dim_overflows(%a: tensor<1x1x8x8xf32>) {
  // expected-error @+1 {{'pads' [0, 0, 0, 9223372036854775807, 0, 0, 0, 1] on 'input' tensor<1x1x8x8xf32> give a dimension int64 cannot hold}}
  %0 = cnn.pad %a {pads = array<i64: 0, 0, 0, 9223372036854775807, 0, 0, 0, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  return
}

// -----

// Conv padding near INT64_MAX: `in + pads` is checked before the window.
func.func @conv_padding_overflows(%x: tensor<1x1x8x8xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error @+1 {{a dimension of 8 padded by 9223372036854775807 and 9223372036854775807 with a kernel of 3 (dilation 1, stride 1) gives sizes int64 cannot hold}}
  %0 = cnn.conv2d %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 9223372036854775807, 0, 9223372036854775807, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x6x6xf32>
  return
}

// -----

// Conv padding 2^31 (conv_pads_2p31_sigfpe.onnx): a legal window whose
// result is far above the ceiling.
func.func @conv_result_absurd(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'cnn.conv2d' op result #0 'tensor<2x4x4294967302x4294967302xf32>' is too large}}
  %0 = cnn.conv2d %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 2147483648, 2147483648, 2147483648, 2147483648>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4294967302x4294967302xf32>
  return
}

// -----

// Dilation times kernel near INT64_MAX.
func.func @conv_dilation_overflows(%x: tensor<1x1x8x8xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error @+1 {{gives sizes int64 cannot hold}}
  %0 = cnn.conv2d %x, %w {dilations = array<i64: 9223372036854775807, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x6x6xf32>
  return
}

// -----

// Pooling with padding near INT64_MAX (and a kernel above it).
func.func @pool_padding_overflows(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+1 {{gives sizes int64 cannot hold}}
  %0 = cnn.max_pool2d %x {ceil_mode = false, kernel = array<i64: 9223372036854775807, 2>, padding = array<i64: 9223372036854775806, 0, 9223372036854775806, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x4x7xf32>
  return
}

// -----

// Concatenation whose axis extent overflows int64.
func.func @concat_overflows(%a: tensor<1x4611686018427387904xf32>) {
  // expected-error @+1 {{concatenating along axis 1 gives a dimension int64 cannot hold}}
  %0 = cnn.concat %a, %a {axis = 1 : i64} : (tensor<1x4611686018427387904xf32>, tensor<1x4611686018427387904xf32>) -> tensor<1x8xf32>
  return
}

// -----

// Broadcasting elementwise ops: the broadcast result is bounded too.
func.func @broadcast_absurd(%a: tensor<1048576x1xf32>, %b: tensor<1x1048577xf32>) {
  // expected-error @+1 {{'cnn.add' op result #0 'tensor<1048576x1048577xf32>' is too large}}
  %0 = cnn.add %a, %b : (tensor<1048576x1xf32>, tensor<1x1048577xf32>) -> tensor<1048576x1048577xf32>
  return
}

// -----

// Resize to an absurd size.
func.func @resize_absurd(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+1 {{'cnn.resize' op result #0 'tensor<1x1x2097152x1048576xf32>' is too large}}
  %0 = cnn.resize %x {size = array<i64: 2097152, 1048576>} : (tensor<1x1x8x8xf32>) -> tensor<1x1x2097152x1048576xf32>
  return
}
