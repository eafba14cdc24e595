// RUN: cnnc-opt %s -split-input-file -verify-diagnostics

// The dialect verifies its discardable cnn.* attributes (CNNDialect.cpp):
// argument/result roles, the memory plan's annotations, the module summary.

// expected-error @+1 {{'cnn.param' on argument 0 must be a non-empty string, got 3 : i64}}
func.func @param_not_string(%w: tensor<4xf32> {cnn.param = 3}) {
  return
}

// -----

// expected-error @+1 {{'cnn.param' on argument 0 must be a non-empty string, got ""}}
func.func @param_empty(%w: tensor<4xf32> {cnn.param = ""}) {
  return
}

// -----

// expected-error @+1 {{'cnn.input' on argument 0 must be a unit attribute, got true}}
func.func @input_not_unit(%x: tensor<4xf32> {cnn.input = true}) {
  return
}

// -----

// expected-error @+1 {{'cnn.init' on argument 0 must be a float, got "65536"}}
func.func @init_not_float(%s: tensor<f32> {cnn.init = "65536"}) {
  return
}

// -----

// expected-error @+1 {{'cnn.offset' on argument 0 must be a non-negative i64, got -256 : i64}}
func.func @negative_arg_offset(%x: tensor<4xf32> {cnn.offset = -256 : i64}) {
  return
}

// -----

// expected-error @+1 {{'cnn.loss' on result 0 must be a unit attribute, got "loss"}}
func.func @loss_not_unit(%x: tensor<f32>) -> (tensor<f32> {cnn.loss = "loss"}) {
  return %x : tensor<f32>
}

// -----

// A typo is caught rather than silently ignored.
// expected-error @+1 {{unknown cnn dialect attribute 'cnn.parm' on argument 0}}
func.func @unknown_arg_attr(%w: tensor<4xf32> {cnn.parm = "w"}) {
  return
}

// -----

func.func @offset_per_result(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'cnn.offset' on an operation must be an array<i64> with one entry per result (1), got array<i64: 0, 256>}}
  %y = cnn.relu %x {cnn.offset = array<i64: 0, 256>} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @in_place_operand(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'cnn.in_place' on an operation must be operand indices or -1, got array<i64: 1>}}
  %y = cnn.relu %x {cnn.in_place = array<i64: 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @unknown_op_attr(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{unknown cnn dialect attribute 'cnn.param' on an operation}}
  %y = cnn.relu %x {cnn.param = "x"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+1 {{'cnn.arena_bytes' on a module must be a non-negative i64, got 1.000000e+00 : f32}}
module attributes {cnn.arena_bytes = 1.0 : f32} {
}

// -----

// expected-error @+1 {{'cnn.weights' on a module must be a string, got 7 : i64}}
module attributes {cnn.weights = 7} {
}

// -----

// The layout of a layout-sensitive op is a #cnn.layout: a string is refused.
func.func @bad_layout(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32> {
  // expected-error @+1 {{attribute 'layout' failed to satisfy constraint: Activation layout: NCHW (channel dimension 1) or NHWC (last)}}
  %y = cnn.global_avg_pool %x {layout = "NWHC"} : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  return %y : tensor<2x4x1x1xf32>
}

// -----

// expected-error @+1 {{'cnn.data_parallel' on a function must be {buckets = <non-negative i64>, bucket_mb = <non-negative float>, collectives = <i64 above buckets>, sync_bn = <bool>}, got {bucket_mb = 2.500000e+01 : f64, buckets = -1 : i64, collectives = 1 : i64, sync_bn = false}}}
func.func @dp_negative_buckets() attributes {cnn.data_parallel = {buckets = -1 : i64, bucket_mb = 25.0 : f64, collectives = 1 : i64, sync_bn = false}} {
  return
}

// -----

// Every gradient bucket is a collective, and the loss's is one more.
// expected-error @+1 {{'cnn.data_parallel' on a function must be {buckets = <non-negative i64>, bucket_mb = <non-negative float>, collectives = <i64 above buckets>, sync_bn = <bool>}, got {bucket_mb = 2.500000e+01 : f64, buckets = 3 : i64, collectives = 3 : i64, sync_bn = false}}}
func.func @dp_too_few_collectives() attributes {cnn.data_parallel = {buckets = 3 : i64, bucket_mb = 25.0 : f64, collectives = 3 : i64, sync_bn = false}} {
  return
}

// -----

// expected-error @+1 {{unknown cnn dialect attribute 'cnn.data_paralel' on an operation}}
func.func @dp_typo() attributes {cnn.data_paralel = {buckets = 1 : i64, bucket_mb = 25.0 : f64}} {
  return
}

// -----

// cnn-select-lowering's choices are a closed set.
func.func @bad_lowering(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  // expected-error @+1 {{'cnn.lowering' on an operation must be "gemm", "vec8", "cudnn_bias_act", "channel_sum", "channel_sum_vec8", "spatial_sum" or "tiled", got "fast"}}
  %y = cnn.relu %x {cnn.lowering = "fast"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}

// -----

func.func @bad_update_group(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  // expected-error @+1 {{'cnn.update_group' on an operation must be a non-negative i64, got -1 : i64}}
  %y = cnn.relu %x {cnn.update_group = -1 : i64} : (tensor<1x4xf32>) -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}

// -----

func.func @bad_cast_group(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  // expected-error @+1 {{'cnn.cast_group' on an operation must be a non-negative i64, got "a"}}
  %y = cnn.relu %x {cnn.cast_group = "a"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}

// -----

// cnn-input-format's record of the images: four positive sizes, a layout.
// expected-error @+1 {{'cnn.image_shape' on argument 0 must be an array<i64> of four positive sizes (N, C, H, W), got array<i64: 2, 3, 4>}}
func.func @bad_image_shape(%x: tensor<2x4x4x8xf16> {cnn.input, cnn.image_shape = array<i64: 2, 3, 4>}) {
  return
}

// -----

// expected-error @+1 {{'cnn.image_layout' on argument 0 must be a #cnn.layout, got "NHWC"}}
func.func @bad_image_layout(%x: tensor<2x4x4x8xf16> {cnn.input, cnn.image_layout = "NHWC"}) {
  return
}

// -----

// cnn-param-format's record of a filter's public shape: K, C, R, S of a
// tensor stored as K x R x S x C' with C' >= C.
// expected-error @+1 {{'cnn.public_shape' on argument 0 [8, 4, 3, 3] (K, C, R, S) needs a tensor of shape K x R x S x C' with C' >= C, got 'tensor<8x3x3x3xf32>'}}
func.func @wrong_stored_shape(%w: tensor<8x3x3x3xf32> {cnn.param = "w", cnn.public_shape = array<i64: 8, 4, 3, 3>}) {
  return
}

// -----

// expected-error @+1 {{'cnn.public_shape' on argument 0 must be an array<i64> of four positive sizes (K, C, R, S), got array<i64: 8, 3>}}
func.func @bad_public_shape(%w: tensor<8x3x3x8xf32> {cnn.param = "w", cnn.public_shape = array<i64: 8, 3>}) {
  return
}

// -----

// expected-error @+1 {{'cnn.public_shape' on result 0 [8, 16, 3, 3] (K, C, R, S) needs a tensor of shape K x R x S x C' with C' >= C, got 'tensor<8x3x3x8xf32>'}}
func.func @short_result(%w: tensor<8x3x3x8xf32>) -> (tensor<8x3x3x8xf32> {cnn.public_shape = array<i64: 8, 16, 3, 3>}) {
  return %w : tensor<8x3x3x8xf32>
}

// -----

// cnn-pipeline-stage's decision that the runtime must not capture the step
// (ModelSpec::uncapturedWhy): the reason, a string.
// expected-error @+1 {{'cnn.step_uncaptured' on a function must be a string, got true}}
func.func @uncaptured_not_a_string() attributes {cnn.step_uncaptured = true} {
  return
}
