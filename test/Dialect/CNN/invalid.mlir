// RUN: cnnc-opt %s -split-input-file -verify-diagnostics

func.func @conv_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'filter' tensor<8x3x3x3xf32> expects 3 input channels but 'input' tensor<1x4x8x8xf32> has 4 (groups = 1)}}
  %0 = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x4x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  return
}

// -----

func.func @conv_rank(%x: tensor<4x8x8xf32>, %w: tensor<8x4x3x3xf32>) {
  // expected-error @+1 {{'input' must be 4-D (NCHW), got tensor<4x8x8xf32>}}
  %0 = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  return
}

// -----

func.func @conv_groups(%x: tensor<1x6x8x8xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{input channels (6) and filters (8) must be divisible by groups = 4}}
  %0 = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 4} : (tensor<1x6x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  return
}

// -----

func.func @conv_strides(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'strides' entries must be >= 1, got [0, 1]}}
  %0 = cnn.conv2d %x, %w {strides = array<i64: 0, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  return
}

// -----

func.func @conv_padding(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'padding' must have 4 entries, got [1, 1]}}
  %0 = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x8x8xf32>
  return
}

// -----

func.func @conv_window(%x: tensor<1x3x2x2xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{the 3x3 window of 'filter' tensor<8x3x3x3xf32> does not fit the padded 'input' tensor<1x3x2x2xf32>}}
  %0 = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x3x2x2xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x1x1xf32>
  return
}

// -----

func.func @conv_result(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<1x8x8x8xf32>' but the operands give 'tensor<1x8x6x6xf32>'}}
  %0 = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x8x8xf32>
  return
}

// -----

func.func @bias_add(%x: tensor<1x4x8x8xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'bias' tensor<3xf32> must be 1-D of size 4 (dim 1 of 'input' tensor<1x4x8x8xf32>)}}
  %0 = cnn.bias_add %x, %b : (tensor<1x4x8x8xf32>, tensor<3xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @relu(%x: tensor<1x4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = cnn.relu %x : (tensor<1x4xf32>) -> tensor<1x5xf32>
  return
}

// -----

func.func @relu_int(%x: tensor<1x4xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or 16-bit float values}}
  %0 = cnn.relu %x : (tensor<1x4xi32>) -> tensor<1x4xi32>
  return
}

// -----

func.func @clip(%x: tensor<1x4xf32>) {
  // expected-error @+1 {{'min' (6.000000e+00) must not exceed 'max' (0.000000e+00)}}
  %0 = cnn.clip %x {min = 6.0 : f32, max = 0.0 : f32} : (tensor<1x4xf32>) -> tensor<1x4xf32>
  return
}

// -----

func.func @add(%a: tensor<1x4x8x8xf32>, %b: tensor<1x4x4x4xf32>) {
  // expected-error @+1 {{'lhs' tensor<1x4x8x8xf32> and 'rhs' tensor<1x4x4x4xf32> do not broadcast}}
  %0 = cnn.add %a, %b : (tensor<1x4x8x8xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @mul(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'lhs' tensor<4xf32> and 'rhs' tensor<4xf16> have different element types}}
  %0 = cnn.mul %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @sub_rank(%a: tensor<2x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'lhs' tensor<2x4xf32> and 'rhs' tensor<4xf32> must have the same rank}}
  %0 = cnn.sub %a, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @div_result(%a: tensor<2x4xf32>, %b: tensor<2x1xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x1xf32>' but the operands give 'tensor<2x4xf32>'}}
  %0 = cnn.div %a, %b : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @gelu(%a: tensor<2x4xf32>) {
  // expected-error @+1 {{'approximate' must be "none" or "tanh", got "fast"}}
  %0 = cnn.gelu %a {approximate = "fast"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @celu_alpha(%a: tensor<2x4xf32>) {
  // expected-error @+1 {{'alpha' must not be 0}}
  %0 = cnn.celu %a {alpha = 0.0 : f32} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @prelu_slope(%a: tensor<2x1xf32>, %s: tensor<2x4xf32>) {
  // expected-error @+1 {{the slope 'tensor<2x4xf32>' must broadcast to the input 'tensor<2x1xf32>'}}
  %0 = cnn.prelu %a, %s : (tensor<2x1xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @maximum_broadcast(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+1 {{'lhs' tensor<2x4xf32> and 'rhs' tensor<3x4xf32> do not broadcast}}
  %0 = cnn.maximum %a, %b : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @reduce_axes(%a: tensor<2x4xf32>) {
  // expected-error @+1 {{'axes' [2] must lie in [0, 2) for 'input' tensor<2x4xf32>}}
  %0 = cnn.reduce_sum %a {axes = array<i64: 2>} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @reduce_distinct(%a: tensor<2x4xf32>) {
  // expected-error @+1 {{'axes' [1, 1] must be distinct}}
  %0 = cnn.reduce_mean %a {axes = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @scale(%a: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = cnn.scale %a {factor = 2.0 : f32} : (tensor<4xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @batch_norm(%x: tensor<1x4x8x8xf32>, %s: tensor<4xf32>, %v: tensor<5xf32>) {
  // expected-error @+1 {{'var' tensor<5xf32> must be 1-D of size 4 (dim 1 of 'input' tensor<1x4x8x8xf32>)}}
  %0 = cnn.batch_norm %x, %s, %s, %s, %v {epsilon = 1.0e-5 : f32} : (tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<5xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @batch_norm_train(%x: tensor<1x4x8x8xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'momentum' must be in [0, 1], got 2.000000}}
  %y, %a, %b, %c, %d = cnn.batch_norm_train %x, %s, %s, %s, %s {epsilon = 1.0e-5 : f32, momentum = 2.0 : f32} : (tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @max_pool(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'padding' [2, 2, 2, 2] must be smaller than 'kernel' [2, 2]}}
  %0 = cnn.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 2, 2, 2, 2>, ceil_mode = false} : (tensor<1x4x8x8xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @avg_pool(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'kernel' must have 2 entries, got [2]}}
  %0 = cnn.avg_pool2d %x {kernel = array<i64: 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = false} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  return
}

// -----

func.func @global_avg_pool(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'input' must be 4-D (NCHW), got tensor<4x8xf32>}}
  %0 = cnn.global_avg_pool %x : (tensor<4x8xf32>) -> tensor<4x8x1x1xf32>
  return
}

// -----

func.func @matmul(%a: tensor<2x16xf32>, %b: tensor<10x15xf32>) {
  // expected-error @+1 {{contracting sizes differ: 'lhs' tensor<2x16xf32> gives 16, 'rhs' tensor<10x15xf32> (transposed) gives 15}}
  %0 = cnn.matmul %a, %b {transpose_rhs = true} : (tensor<2x16xf32>, tensor<10x15xf32>) -> tensor<2x10xf32>
  return
}

// -----

func.func @flatten(%a: tensor<2x4x4xf32>) {
  // expected-error @+1 {{'axis' 4 out of range for 'input' tensor<2x4x4xf32>}}
  %0 = cnn.flatten %a {axis = 4} : (tensor<2x4x4xf32>) -> tensor<2x16xf32>
  return
}

// -----

// The element count must fit in int64 (found by fuzzing the importer: a
// declared dim of 2^62 times 12 overflowed).
func.func @flatten_overflow(%a: tensor<12x4611686018427387904xf32>) {
  // expected-error @+1 {{'input' tensor<12x4611686018427387904xf32> has too many elements}}
  %0 = cnn.flatten %a {axis = 0} : (tensor<12x4611686018427387904xf32>) -> tensor<1x4xf32>
  return
}

// -----

func.func @reshape(%a: tensor<2x4x4xf32>) {
  // expected-error @+1 {{cannot reshape 'input' 'tensor<2x4x4xf32>' (32 elements) to 'tensor<2x15xf32>' (30 elements)}}
  %0 = cnn.reshape %a : (tensor<2x4x4xf32>) -> tensor<2x15xf32>
  return
}

// -----

func.func @concat(%a: tensor<2x4x4x4xf32>, %b: tensor<2x4x3x4xf32>) {
  // expected-error @+1 {{input #1 tensor<2x4x3x4xf32> does not match input #0 tensor<2x4x4x4xf32> outside axis 1}}
  %0 = cnn.concat %a, %b {axis = 1} : (tensor<2x4x4x4xf32>, tensor<2x4x3x4xf32>) -> tensor<2x8x4x4xf32>
  return
}

// -----

func.func @slice(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{slice offsets [0, 6] sizes [2, 4] exceed 'input' tensor<2x8xf32>}}
  %0 = cnn.slice %a {offsets = array<i64: 0, 6>, sizes = array<i64: 2, 4>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @transpose(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'permutation' [0, 0] is not a permutation of the dimensions of 'input' tensor<2x8xf32>}}
  %0 = cnn.transpose %a {permutation = array<i64: 0, 0>} : (tensor<2x8xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @cast(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'input' 'tensor<2x8xf32>' and result 'tensor<2x4xf16>' must have the same shape}}
  %0 = cnn.cast %a : (tensor<2x8xf32>) -> tensor<2x4xf16>
  return
}

// -----

func.func @dropout(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'ratio' must be in [0, 1), got 1.000000e+00}}
  %0 = cnn.dropout %a {ratio = 1.0 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @dropout_mask(%s: tensor<f32>) {
  // expected-error @+1 {{'ratio' must be in [0, 1), got -1.000000e+00}}
  %0 = cnn.dropout_mask %s {ratio = -1.0 : f32, seed = 0} : (tensor<f32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @softmax(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'axis' 2 out of range for 'tensor<2x8xf32>'}}
  %0 = cnn.softmax %a {axis = 2} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @softmax_cross_entropy(%a: tensor<4x10xf32>, %l: tensor<3xi32>) {
  // expected-error @+1 {{'labels' tensor<3xi32> must hold 4 labels, one per row of 'logits' tensor<4x10xf32>}}
  %0 = cnn.softmax_cross_entropy %a, %l : (tensor<4x10xf32>, tensor<3xi32>) -> tensor<f32>
  return
}

// -----

// Per-pixel labels must hold one label per row of the flattened logits.
func.func @softmax_cross_entropy_pixels(%a: tensor<32x5xf32>, %l: tensor<2x4x3xi32>) {
  // expected-error @+1 {{'labels' tensor<2x4x3xi32> must hold 32 labels, one per row of 'logits' tensor<32x5xf32>}}
  %0 = cnn.softmax_cross_entropy %a, %l {ignore_index = 255} : (tensor<32x5xf32>, tensor<2x4x3xi32>) -> tensor<f32>
  return
}

// -----

func.func @softmax_cross_entropy_grad_pixels(%a: tensor<32x5xf32>, %l: tensor<2x4x3xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{'labels' tensor<2x4x3xi32> must hold 32 labels, one per row of 'logits' tensor<32x5xf32>}}
  %0 = cnn.softmax_cross_entropy_grad %a, %l, %g : (tensor<32x5xf32>, tensor<2x4x3xi32>, tensor<f32>) -> tensor<32x5xf32>
  return
}

// -----

func.func @softmax_cross_entropy_scalar_labels(%a: tensor<1x5xf32>, %l: tensor<i32>) {
  // expected-error @+1 {{'labels' tensor<i32> must hold 1 labels, one per row of 'logits' tensor<1x5xf32>}}
  %0 = cnn.softmax_cross_entropy %a, %l : (tensor<1x5xf32>, tensor<i32>) -> tensor<f32>
  return
}

// -----

func.func @softmax_cross_entropy_labels(%a: tensor<4x10xf32>, %l: tensor<4xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = cnn.softmax_cross_entropy %a, %l : (tensor<4x10xf32>, tensor<4xf32>) -> tensor<f32>
  return
}

// -----

func.func @conv2d_bwd_data(%dy: tensor<1x8x5x5xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<1x8x5x5xf32>' does not match the conv2d output 'tensor<1x8x6x6xf32>' of result 'tensor<1x3x8x8xf32>'}}
  %0 = cnn.conv2d_bwd_data %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x8x5x5xf32>, tensor<8x3x3x3xf32>) -> tensor<1x3x8x8xf32>
  return
}

// -----

func.func @conv2d_bwd_filter(%x: tensor<1x3x8x8xf32>, %dy: tensor<1x8x6x6xf32>) {
  // expected-error @+1 {{'filter' tensor<8x4x3x3xf32> expects 4 input channels but 'input' tensor<1x3x8x8xf32> has 3 (groups = 1)}}
  %0 = cnn.conv2d_bwd_filter %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x3x8x8xf32>, tensor<1x8x6x6xf32>) -> tensor<8x4x3x3xf32>
  return
}

// -----

func.func @bias_grad(%dy: tensor<8xf32>) {
  // expected-error @+1 {{'grad_output' must have rank >= 2, got tensor<8xf32>}}
  %0 = cnn.bias_grad %dy : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @relu_grad(%dy: tensor<8x2xf32>, %y: tensor<8x3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = cnn.relu_grad %dy, %y : (tensor<8x2xf32>, tensor<8x3xf32>) -> tensor<8x2xf32>
  return
}

// -----

func.func @clip_grad(%dy: tensor<8x2xf32>, %y: tensor<8x2xf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = cnn.clip_grad %dy, %y {min = 0.0 : f32, max = 6.0 : f32} : (tensor<8x2xf32>, tensor<8x2xf16>) -> tensor<8x2xf32>
  return
}

// -----

func.func @max_pool2d_grad(%dy: tensor<1x4x3x3xf32>, %x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<1x4x3x3xf32>' does not match the pooled output 'tensor<1x4x4x4xf32>' of 'input' 'tensor<1x4x8x8xf32>'}}
  %0 = cnn.max_pool2d_grad %dy, %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false} : (tensor<1x4x3x3xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @avg_pool2d_grad(%dy: tensor<1x4x3x3xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<1x4x3x3xf32>' does not match the pooled output 'tensor<1x4x4x4xf32>' of result 'tensor<1x4x8x8xf32>'}}
  %0 = cnn.avg_pool2d_grad %dy {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = true} : (tensor<1x4x3x3xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @global_avg_pool_grad(%dy: tensor<1x4x2x1xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<1x4x2x1xf32>' must be N x C x 1 x 1 of result 'tensor<1x4x8x8xf32>'}}
  %0 = cnn.global_avg_pool_grad %dy : (tensor<1x4x2x1xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @batch_norm_grad(%dy: tensor<1x4x8x8xf32>, %x: tensor<1x4x4x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'grad_output' tensor<1x4x8x8xf32> and 'input' tensor<1x4x4x4xf32> must have the same type}}
  %a, %b, %c = cnn.batch_norm_grad %dy, %x, %s, %s, %s : (tensor<1x4x8x8xf32>, tensor<1x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @softmax_cross_entropy_grad(%a: tensor<4x10xf32>, %l: tensor<4xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{'label_smoothing' must be in [0, 1], got 2.000000}}
  %0 = cnn.softmax_cross_entropy_grad %a, %l, %g {label_smoothing = 2.0 : f32} : (tensor<4x10xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x10xf32>
  return
}

// -----

func.func @sgd_update(%p: tensor<4xf32>, %g: tensor<5xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'param' tensor<4xf32> and 'grad' tensor<5xf32> must have the same type}}
  %a, %b = cnn.sgd_update %p, %g, %p, %s, %s {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<4xf32>, tensor<5xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// An f16 gradient is allowed for an f32 parameter of the same shape only.
func.func @sgd_update_f16_grad_shape(%p: tensor<4xf32>, %g: tensor<5xf16>, %s: tensor<f32>) {
  // expected-error @+1 {{'param' tensor<4xf32> and 'grad' tensor<5xf16> must have the same type}}
  %a, %b = cnn.sgd_update %p, %g, %p, %s, %s {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<4xf32>, tensor<5xf16>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// ... and not an f32 gradient for an f16 parameter.
func.func @adam_update_f32_grad_f16_param(%p: tensor<4xf16>, %g: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'param' tensor<4xf16> and 'grad' tensor<4xf32> must have the same type}}
  %a, %m, %v = cnn.adam_update %p, %g, %p, %p, %s, %s {beta1 = 0.9 : f32, beta2 = 0.999 : f32, epsilon = 1.0e-8 : f32, weight_decay = 0.0 : f32, decoupled = false} : (tensor<4xf16>, tensor<4xf32>, tensor<4xf16>, tensor<4xf16>, tensor<f32>, tensor<f32>) -> (tensor<4xf16>, tensor<4xf16>, tensor<4xf16>)
  return
}

// -----

func.func @adam_update(%p: tensor<4xf32>, %m: tensor<4x1xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'param' tensor<4xf32> and 'exp_avg' tensor<4x1xf32> must have the same type}}
  %a, %b, %c = cnn.adam_update %p, %p, %m, %p, %s, %s {beta1 = 0.9 : f32, beta2 = 0.999 : f32, epsilon = 1.0e-8 : f32, weight_decay = 0.0 : f32, decoupled = false} : (tensor<4xf32>, tensor<4xf32>, tensor<4x1xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sgd_lr(%p: tensor<4xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{operand #3 must be 0D tensor of 32-bit float values}}
  %a, %b = cnn.sgd_update %p, %p, %p, %s, %s {momentum = 0.9 : f32, dampening = 0.0 : f32, weight_decay = 0.0 : f32, nesterov = false} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @constant() {
  // expected-error @+1 {{custom op 'cnn.constant' invalid kind of attribute specified}}
  %0 = cnn.constant 1.0
  return
}

// -----

func.func @layout_value(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{attribute 'layout' failed to satisfy constraint: Activation layout: NCHW (channel dimension 1) or NHWC (last)}}
  %0 = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = "CHWN"} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  return
}

// -----

func.func @conv2d_nhwc_channels(%x: tensor<1x8x8x4xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'filter' tensor<8x3x3x3xf32> expects 3 input channels but 'input' tensor<1x8x8x4xf32> has 4 (groups = 1)}}
  %0 = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<1x8x8x4xf32>, tensor<8x3x3x3xf32>) -> tensor<1x6x6x8xf32>
  return
}

// -----

func.func @conv2d_nhwc_result(%x: tensor<1x8x8x3xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<1x8x6x6xf32>' but the operands give 'tensor<1x6x6x8xf32>'}}
  %0 = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<1x8x8x3xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  return
}

// -----

func.func @conv2d_bwd_filter_nhwc(%x: tensor<1x8x8x3xf32>, %dy: tensor<1x8x6x6xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<1x8x6x6xf32>' does not match the conv2d output 'tensor<1x6x6x8xf32>' of 'input' 'tensor<1x8x8x3xf32>'}}
  %0 = cnn.conv2d_bwd_filter %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<1x8x8x3xf32>, tensor<1x8x6x6xf32>) -> tensor<8x3x3x3xf32>
  return
}

// -----

func.func @bias_add_nhwc(%x: tensor<2x8x8x4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'bias' tensor<8xf32> must be 1-D of size 4 (dim 3 of 'input' tensor<2x8x8x4xf32>)}}
  %0 = cnn.bias_add %x, %b {layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>, tensor<8xf32>) -> tensor<2x8x8x4xf32>
  return
}

// -----

func.func @batch_norm_train_nhwc(%x: tensor<2x8x8x4xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'scale' tensor<8xf32> must be 1-D of size 4 (dim 3 of 'input' tensor<2x8x8x4xf32>)}}
  %t:5 = cnn.batch_norm_train %x, %s, %s, %s, %s {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @max_pool2d_nhwc(%x: tensor<2x8x8x6xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x8x4x3xf32>' but the operands give 'tensor<2x4x4x6xf32>'}}
  %0 = cnn.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x6xf32>) -> tensor<2x8x4x3xf32>
  return
}

// -----

func.func @global_avg_pool_nhwc(%x: tensor<2x8x8x4xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x4x1x1xf32>' but the operands give 'tensor<2x1x1x4xf32>'}}
  %0 = cnn.global_avg_pool %x {layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>) -> tensor<2x4x1x1xf32>
  return
}

// -----

func.func @global_avg_pool_grad_nhwc(%dy: tensor<2x4x1x1xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<2x4x1x1xf32>' must be N x 1 x 1 x C of result 'tensor<2x8x8x4xf32>' (NHWC)}}
  %0 = cnn.global_avg_pool_grad %dy {layout = #cnn.layout<NHWC>} : (tensor<2x4x1x1xf32>) -> tensor<2x8x8x4xf32>
  return
}

// -----

func.func @bias_grad_nhwc(%dy: tensor<2x8x8x4xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<8xf32>' but the operands give 'tensor<4xf32>'}}
  %0 = cnn.bias_grad %dy {layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) {
  // expected-error @+1 {{'lhs' tensor<2x3x4xf32> and 'rhs' tensor<3x4x5xf32> must both be 2-D, or of one rank >= 3 with the same leading (batch) dimensions}}
  %0 = cnn.matmul %a, %b : (tensor<2x3x4xf32>, tensor<3x4x5xf32>) -> tensor<2x3x5xf32>
  return
}
