// RUN: cnnc-opt %s -split-input-file -verify-diagnostics
// Each constraint of the ops cnn-fuse makes (CNNFusedOps.td) has a case.

func.func @conv_result(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{result 'tensor<2x4x6x6xf32>' differs from the convolution's 'tensor<2x4x8x8xf32>'}}
  %y = cnn.fused_conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_bias(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'bias' 'tensor<3xf32>' must be 1-D of size 4 (the channel count)}}
  %y = cnn.fused_conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @conv_residual(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %r: tensor<2x4x8x8xf16>) {
  // expected-error @+1 {{'residual' 'tensor<2x4x8x8xf16>' must have the result type 'tensor<2x4x8x8xf32>'}}
  %y = cnn.fused_conv2d %x, %w, %r {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, operandSegmentSizes = array<i32: 1, 1, 0, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<2x4x8x8xf16>) -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @conv_activation(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'activation' must be none, relu or clip, got 'gelu'}}
  %y = cnn.fused_conv2d %x, %w {activation = "gelu", strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @conv_clip(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'clip_min' must not exceed 'clip_max'}}
  %y = cnn.fused_conv2d %x, %w {activation = "clip", clip_min = 6.0 : f32, clip_max = 0.0 : f32, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @stats_layout(%x: tensor<2x8x4x4xf32>, %s: tensor<8xf32>) {
  // #cnn.layout has two values; the parser names them.
  // expected-error @+2 {{expected ::cnnc::cnn::Layout to be one of: NCHW, NHWC}}
  // expected-error @+1 {{failed to parse CNN_LayoutAttr parameter 'value'}}
  %m, %i, %nm, %nv, %a, %b = cnn.batch_norm_stats %x, %s, %s, %s, %s {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<CHWN>} : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @stats_rank(%x: tensor<8x4x4xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'input' must be 2-D or 4-D, got 'tensor<8x4x4xf32>'}}
  %m, %i, %nm, %nv, %a, %b = cnn.batch_norm_stats %x, %s, %s, %s, %s {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// NHWC: the channel count is the last dimension (4), not dimension 1 (8).
func.func @stats_scale(%x: tensor<2x8x8x4xf32>, %s: tensor<8xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'scale' 'tensor<8xf32>' must be 1-D of size 4 (the channel count)}}
  %m, %i, %nm, %nv, %a, %b = cnn.batch_norm_stats %x, %s, %c, %c, %c {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @stats_result(%x: tensor<2x8x4x4xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'result' 'tensor<4xf32>' must be 1-D of size 8 (the channel count)}}
  %m, %i, %nm, %nv, %a, %b = cnn.batch_norm_stats %x, %s, %s, %s, %s {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4xf32>)
  return
}

// -----

func.func @bn_relu_grad_types(%dy: tensor<2x8x4x4xf16>, %x: tensor<2x8x4x4xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<2x8x4x4xf16>' and 'relu_output' 'tensor<2x8x4x4xf32>' must have the type of 'input' 'tensor<2x8x4x4xf32>'}}
  %gx, %gs, %gb = cnn.fused_batch_norm_relu_grad %dy, %x, %x, %s, %s, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @bn_relu_grad_channels(%x: tensor<2x8x4x4xf32>, %s: tensor<8xf32>, %m: tensor<4xf32>) {
  // expected-error @+1 {{'saved_mean' 'tensor<4xf32>' must be 1-D of size 8 (the channel count)}}
  %gx, %gs, %gb = cnn.fused_batch_norm_relu_grad %x, %x, %x, %s, %m, %s : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @ew_broadcast_count(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'broadcast' has 2 entries for 1 inputs}}
  %y = cnn.fused_elementwise %x {broadcast = array<i64: 0, 0>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%v: f32):
    cnn.yield %v : f32
  }
  return
}

// -----

func.func @ew_channel_input(%x: tensor<2x8x4x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{per-channel input #1 'tensor<4xf32>' must be 1-D of size 8}}
  %y = cnn.fused_elementwise %x, %c {broadcast = array<i64: 0, 1>} : (tensor<2x8x4x4xf32>, tensor<4xf32>) -> tensor<2x8x4x4xf32> {
  ^bb0(%v: f32, %w: f32):
    cnn.yield %v : f32
  }
  return
}

// -----

func.func @ew_elements(%x: tensor<2x8xf32>, %z: tensor<3xf32>) {
  // expected-error @+1 {{input #1 'tensor<3xf32>' must have as many elements as 'tensor<2x8xf32>'}}
  %y = cnn.fused_elementwise %x, %z {broadcast = array<i64: 0, 0>} : (tensor<2x8xf32>, tensor<3xf32>) -> tensor<2x8xf32> {
  ^bb0(%v: f32, %w: f32):
    cnn.yield %v : f32
  }
  return
}

// -----

func.func @ew_yield(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{the body yields 2 values for 1 results}}
  %y = cnn.fused_elementwise %x {broadcast = array<i64: 0>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%v: f32):
    cnn.yield %v, %v : f32, f32
  }
  return
}

// -----

func.func @ew_body_args(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{the body must take one f32 argument per input}}
  %y = cnn.fused_elementwise %x {broadcast = array<i64: 0>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%v: f16):
    cnn.yield %v : f16
  }
  return
}

// -----

// fused_batch_norm_affine_relu_grad: alpha and beta are per channel.
func.func @bn_affine_relu_grad_alpha(%x: tensor<2x8x4x4xf32>, %s: tensor<8xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'alpha' 'tensor<4xf32>' must be 1-D of size 8 (the channel count)}}
  %gx, %gs, %gb = cnn.fused_batch_norm_affine_relu_grad %x, %x, %s, %s, %s, %a, %s : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// fused_batch_norm_affine_relu_grad: grad_output has the type of input.
func.func @bn_affine_relu_grad_types(%dy: tensor<2x8x4x4xf16>, %x: tensor<2x8x4x4xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<2x8x4x4xf16>' must have the type of 'input' 'tensor<2x8x4x4xf32>'}}
  %gx, %gs, %gb = cnn.fused_batch_norm_affine_relu_grad %dy, %x, %s, %s, %s, %s, %s : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// fused_conv2d_stats: the result is conv2d's result type.
func.func @conv_stats_result(%x: tensor<2x4x4x8xf16>, %w: tensor<16x3x3x8xf16>) {
  // expected-error @+1 {{result 'tensor<2x2x2x16xf16>' differs from the convolution's 'tensor<2x4x4x16xf16>'}}
  %y, %s, %ss = cnn.fused_conv2d_stats %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 0, 0>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<16x3x3x8xf16>) -> (tensor<2x2x2x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

// fused_conv2d_stats: the sums are f32, one per output channel.
func.func @conv_stats_sum_size(%x: tensor<2x4x4x8xf16>, %w: tensor<16x3x3x8xf16>) {
  // expected-error @+1 {{'sum' 'tensor<8xf32>' must be 1-D of size 16 (the channel count)}}
  %y, %s, %ss = cnn.fused_conv2d_stats %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 0, 0>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<16x3x3x8xf16>) -> (tensor<2x4x4x16xf16>, tensor<8xf32>, tensor<16xf32>)
  return
}

// -----

func.func @conv_stats_sum_type(%x: tensor<2x4x4x8xf16>, %w: tensor<16x3x3x8xf16>) {
  // expected-error @+1 {{'sum_sq' 'tensor<16xf16>' must be f32}}
  %y, %s, %ss = cnn.fused_conv2d_stats %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 0, 0>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<16x3x3x8xf16>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf16>)
  return
}

// -----

func.func @finalize_count(%s: tensor<16xf32>) {
  // expected-error @+1 {{'count' must be at least 1, got 0}}
  %m, %i, %nm, %nv, %a, %be = cnn.batch_norm_finalize %s, %s, %s, %s, %s, %s {count = 0 : i64, epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @finalize_channels(%s: tensor<16xf32>, %c: tensor<8xf32>) {
  // expected-error @+1 {{'running_var' 'tensor<8xf32>' must be 1-D of size 16 (the channel count)}}
  %m, %i, %nm, %nv, %a, %be = cnn.batch_norm_finalize %s, %s, %s, %s, %s, %c {count = 32 : i64, epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<8xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @finalize_alpha_type(%s: tensor<16xf32>, %h: tensor<16xf16>) {
  // expected-error @+1 {{'alpha' 'tensor<16xf16>' must be f32}}
  %m, %i, %nm, %nv, %a, %be = cnn.batch_norm_finalize %s, %s, %s, %s, %s, %s {count = 32 : i64, epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf16>, tensor<16xf32>)
  return
}

// -----

// fused_conv2d_stats' prologue: scale and shift come together.
func.func @conv_stats_half_prologue(%x: tensor<2x4x4x8xf16>, %w: tensor<16x3x3x8xf16>, %a: tensor<8xf32>) {
  // expected-error @+1 {{'scale' and 'shift' (the prologue) come together}}
  %y, %s, %ss = cnn.fused_conv2d_stats %x, %w, %a {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 1, 0>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<16x3x3x8xf16>, tensor<8xf32>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

// The prologue is per input channel (8), not per output channel (16).
func.func @conv_stats_prologue_size(%x: tensor<2x4x4x8xf16>, %w: tensor<16x3x3x8xf16>, %a: tensor<16xf32>) {
  // expected-error @+1 {{'scale' 'tensor<16xf32>' must be 1-D of size 8 (the channel count)}}
  %y, %s, %ss = cnn.fused_conv2d_stats %x, %w, %a, %a {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<16x3x3x8xf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

// fused_conv2d_bwd_data: conv2d(result, filter) has grad_output's type.
func.func @dgrad_grad_output(%dy: tensor<2x4x4x16xf16>, %w: tensor<16x1x1x8xf16>, %a: tensor<2x4x4x8xf16>) {
  // expected-error @+1 {{'grad_output' 'tensor<2x4x4x16xf16>' does not match the conv2d output 'tensor<2x2x2x16xf16>' of result 'tensor<2x4x4x8xf16>'}}
  %g = cnn.fused_conv2d_bwd_data %dy, %w, %a, %a {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<16x1x1x8xf16>, tensor<2x4x4x8xf16>, tensor<2x4x4x8xf16>) -> tensor<2x4x4x8xf16>
  return
}

// -----

// fused_conv2d_bwd_data: the addend has the result's type (no broadcast).
func.func @dgrad_addend(%dy: tensor<2x2x2x16xf16>, %w: tensor<16x1x1x8xf16>, %a: tensor<1x4x4x8xf16>, %y: tensor<2x4x4x8xf16>) {
  // expected-error @+1 {{'addend' 'tensor<1x4x4x8xf16>' must have the result type 'tensor<2x4x4x8xf16>'}}
  %g = cnn.fused_conv2d_bwd_data %dy, %w, %a, %y {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x2x2x16xf16>, tensor<16x1x1x8xf16>, tensor<1x4x4x8xf16>, tensor<2x4x4x8xf16>) -> tensor<2x4x4x8xf16>
  return
}

// -----

// fused_conv2d_bwd_data: so does the ReLU output.
func.func @dgrad_relu_output(%dy: tensor<2x2x2x16xf16>, %w: tensor<16x1x1x8xf16>, %a: tensor<2x4x4x8xf16>, %y: tensor<2x4x4x8xf32>) {
  // expected-error @+1 {{'relu_output' 'tensor<2x4x4x8xf32>' must have the result type 'tensor<2x4x4x8xf16>'}}
  %g = cnn.fused_conv2d_bwd_data %dy, %w, %a, %y {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x2x2x16xf16>, tensor<16x1x1x8xf16>, tensor<2x4x4x8xf16>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf16>
  return
}

// -----

// fused_conv2d_bwd_filter: conv2d(input, result) has grad_output's type.
func.func @wgrad_grad_output(%x: tensor<2x4x4x8xf16>, %dy: tensor<2x2x2x16xf16>, %a: tensor<8xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<2x2x2x16xf16>' does not match the conv2d output 'tensor<2x4x4x16xf16>' of 'input' 'tensor<2x4x4x8xf16>'}}
  %dw = cnn.fused_conv2d_bwd_filter %x, %dy, %a, %a {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<2x2x2x16xf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<16x3x3x8xf16>
  return
}

// -----

// fused_conv2d_bwd_filter: the prologue's scale is f32, one per input channel.
func.func @wgrad_scale(%x: tensor<2x4x4x8xf16>, %dy: tensor<2x4x4x16xf16>, %a: tensor<16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'scale' 'tensor<16xf32>' must be 1-D of size 8 (the channel count)}}
  %dw = cnn.fused_conv2d_bwd_filter %x, %dy, %a, %b {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<8xf32>) -> tensor<16x3x3x8xf16>
  return
}

// -----

func.func @wgrad_shift_type(%x: tensor<2x4x4x8xf16>, %dy: tensor<2x4x4x16xf16>, %a: tensor<8xf32>, %b: tensor<8xf16>) {
  // expected-error @+1 {{'shift' 'tensor<8xf16>' must be f32}}
  %dw = cnn.fused_conv2d_bwd_filter %x, %dy, %a, %b {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<2x4x4x16xf16>, tensor<8xf32>, tensor<8xf16>) -> tensor<16x3x3x8xf16>
  return
}

// -----

// fused_max_pool2d: the result is max_pool2d's result type.
func.func @pool_result(%x: tensor<2x8x8x16xf16>) {
  // expected-error @+1 {{result 'tensor<2x3x3x16xf16>' differs from max_pool2d's 'tensor<2x4x4x16xf16>'}}
  %y, %i = cnn.fused_max_pool2d %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 0, 0>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x16xf16>) -> (tensor<2x3x3x16xf16>, tensor<2x3x3x16xui8>)
  return
}

// -----

// fused_max_pool2d: the window index has the result's shape.
func.func @pool_index_shape(%x: tensor<2x8x8x16xf16>) {
  // expected-error @+1 {{'window_index' 'tensor<2x4x4x8xui8>' must have the shape of the pooled output 'tensor<2x4x4x16xf16>'}}
  %y, %i = cnn.fused_max_pool2d %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 0, 0>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x16xf16>) -> (tensor<2x4x4x16xf16>, tensor<2x4x4x8xui8>)
  return
}

// -----

// fused_max_pool2d: the window index is one unsigned byte per window.
func.func @pool_index_type(%x: tensor<2x8x8x16xf16>) {
  // expected-error @+1 {{result #1 must be ranked tensor of 8-bit unsigned integer values}}
  %y, %i = cnn.fused_max_pool2d %x {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 0, 0>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x16xf16>) -> (tensor<2x4x4x16xf16>, tensor<2x4x4x16xi32>)
  return
}

// -----

// fused_max_pool2d: a byte indexes at most 255 window positions.
func.func @pool_large_window(%x: tensor<1x16x16x8xf32>) {
  // expected-error @+1 {{the 16x16 kernel has more than 255 positions: 'window_index' is one byte per window}}
  %y, %i = cnn.fused_max_pool2d %x {ceil_mode = false, kernel = array<i64: 16, 16>, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 0, 0>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x16x16x8xf32>) -> (tensor<1x1x1x8xf32>, tensor<1x1x1x8xui8>)
  return
}

// -----

// fused_max_pool2d: the prologue's scale and shift come together.
func.func @pool_scale_alone(%x: tensor<2x8x8x16xf16>, %a: tensor<16xf32>) {
  // expected-error @+1 {{'scale' and 'shift' come together (the prologue)}}
  %y, %i = cnn.fused_max_pool2d %x, %a {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 0>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x16xf16>, tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>)
  return
}

// -----

// fused_max_pool2d: ... and are f32, one per input channel.
func.func @pool_shift_channels(%x: tensor<2x8x8x16xf16>, %a: tensor<16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'shift' 'tensor<8xf32>' must be 1-D of size 16 (the channel count)}}
  %y, %i = cnn.fused_max_pool2d %x, %a, %b {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<8xf32>) -> (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>)
  return
}

// -----

// max_pool2d_index_grad: max_pool2d of the result type has grad_output's type.
func.func @index_grad_output(%dy: tensor<2x4x4x16xf16>, %i: tensor<2x4x4x16xui8>) {
  // expected-error @+1 {{'grad_output' 'tensor<2x4x4x16xf16>' does not match the pooled output 'tensor<2x5x5x16xf16>' of result 'tensor<2x10x10x16xf16>'}}
  %g = cnn.max_pool2d_index_grad %dy, %i {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>) -> tensor<2x10x10x16xf16>
  return
}

// -----

// max_pool2d_index_grad: the window index has grad_output's shape.
func.func @index_grad_index(%dy: tensor<2x4x4x16xf16>, %i: tensor<2x4x4x8xui8>) {
  // expected-error @+1 {{'window_index' 'tensor<2x4x4x8xui8>' must have the shape of the pooled output 'tensor<2x4x4x16xf16>'}}
  %g = cnn.max_pool2d_index_grad %dy, %i {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x8xui8>) -> tensor<2x8x8x16xf16>
  return
}

// -----

// fused_max_pool2d_batch_norm_relu_grad: max_pool2d of the input's type has grad_output's type.
func.func @pool_bn_grad_output(%dy: tensor<2x4x4x16xf16>, %i: tensor<2x4x4x16xui8>, %x: tensor<2x10x10x16xf16>, %s: tensor<16xf32>, %m: tensor<16xf32>, %v: tensor<16xf32>, %a: tensor<16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<2x4x4x16xf16>' does not match the pooled output 'tensor<2x5x5x16xf16>' of result 'tensor<2x10x10x16xf16>'}}
  %dx, %ds, %db = cnn.fused_max_pool2d_batch_norm_relu_grad %dy, %i, %x, %s, %m, %v, %a, %b {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>, tensor<2x10x10x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x10x10x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

// fused_max_pool2d_batch_norm_relu_grad: the window index has grad_output's shape.
func.func @pool_bn_grad_index(%dy: tensor<2x4x4x16xf16>, %i: tensor<2x4x4x8xui8>, %x: tensor<2x8x8x16xf16>, %s: tensor<16xf32>, %m: tensor<16xf32>, %v: tensor<16xf32>, %a: tensor<16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'window_index' 'tensor<2x4x4x8xui8>' must have the shape of the pooled output 'tensor<2x4x4x16xf16>'}}
  %dx, %ds, %db = cnn.fused_max_pool2d_batch_norm_relu_grad %dy, %i, %x, %s, %m, %v, %a, %b {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x8xui8>, tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

// fused_max_pool2d_batch_norm_relu_grad: the per-channel operands have the input's channel count.
func.func @pool_bn_grad_channels(%dy: tensor<2x4x4x16xf16>, %i: tensor<2x4x4x16xui8>, %x: tensor<2x8x8x16xf16>, %s: tensor<16xf32>, %m: tensor<16xf32>, %v: tensor<16xf32>, %a: tensor<8xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'alpha' 'tensor<8xf32>' must be 1-D of size 16 (the channel count)}}
  %dx, %ds, %db = cnn.fused_max_pool2d_batch_norm_relu_grad %dy, %i, %x, %s, %m, %v, %a, %b {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>, tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<8xf32>, tensor<16xf32>) -> (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

// fused_max_pool2d_batch_norm_relu_grad: grad_input has the input's type.
func.func @pool_bn_grad_input(%dy: tensor<2x4x4x16xf16>, %i: tensor<2x4x4x16xui8>, %x: tensor<2x8x8x16xf16>, %s: tensor<16xf32>, %m: tensor<16xf32>, %v: tensor<16xf32>, %a: tensor<16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'grad_input' 'tensor<2x8x8x16xf32>' must have the type of 'input' 'tensor<2x8x8x16xf16>'}}
  %dx, %ds, %db = cnn.fused_max_pool2d_batch_norm_relu_grad %dy, %i, %x, %s, %m, %v, %a, %b {ceil_mode = false, kernel = array<i64: 3, 3>, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xui8>, tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

// fused_dual_batch_norm_grad: both inputs have grad_output's type.
func.func @dual_bn_grad_input_b(%dy: tensor<2x4x4x16xf16>, %a: tensor<2x4x4x16xf16>, %sa: tensor<16xf32>, %ma: tensor<16xf32>, %ia: tensor<16xf32>, %b: tensor<2x4x4x16xf32>, %sb: tensor<16xf32>, %mb: tensor<16xf32>, %ib: tensor<16xf32>) {
  // expected-error @+1 {{'input_b' 'tensor<2x4x4x16xf32>' must have the type of 'grad_output' 'tensor<2x4x4x16xf16>'}}
  %da, %dsa, %dba, %db, %dsb, %dbb = cnn.fused_dual_batch_norm_grad %dy, %a, %sa, %ma, %ia, %b, %sb, %mb, %ib {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2x4x4x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

// fused_dual_batch_norm_grad: the per-channel operands have grad_output's channel count (per layout).
func.func @dual_bn_grad_channels(%dy: tensor<2x4x4x16xf16>, %a: tensor<2x4x4x16xf16>, %sa: tensor<16xf32>, %ma: tensor<16xf32>, %ia: tensor<16xf32>, %b: tensor<2x4x4x16xf16>, %sb: tensor<4xf32>, %mb: tensor<4xf32>, %ib: tensor<4xf32>) {
  // expected-error @+1 {{'scale_b' 'tensor<4xf32>' must be 1-D of size 16 (the channel count)}}
  %da, %dsa, %dba, %db, %dsb, %dbb = cnn.fused_dual_batch_norm_grad %dy, %a, %sa, %ma, %ia, %b, %sb, %mb, %ib {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2x4x4x16xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

// fused_dual_batch_norm_grad: the gradients have grad_output's type.
func.func @dual_bn_grad_result(%dy: tensor<2x4x4x16xf16>, %a: tensor<2x4x4x16xf16>, %sa: tensor<16xf32>, %ma: tensor<16xf32>, %ia: tensor<16xf32>, %b: tensor<2x4x4x16xf16>, %sb: tensor<16xf32>, %mb: tensor<16xf32>, %ib: tensor<16xf32>) {
  // expected-error @+1 {{'grad_input_a' 'tensor<2x4x4x8xf16>' must have the type of 'grad_output' 'tensor<2x4x4x16xf16>'}}
  %da, %dsa, %dba, %db, %dsb, %dbb = cnn.fused_dual_batch_norm_grad %dy, %a, %sa, %ma, %ia, %b, %sb, %mb, %ib {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x4x4x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

// batch_norm_sums: the sums are 1-D f32 of the input's channel count (per
// layout: NHWC's last dimension here).
func.func @bn_sums_channels(%x: tensor<2x4x4x16xf16>) {
  // expected-error @+1 {{'sum' 'tensor<4xf32>' must be 1-D of size 16 (the channel count)}}
  %s, %ss = cnn.batch_norm_sums %x {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// batch_norm_sums: the input is 2-D, 3-D or 4-D.
func.func @bn_sums_rank(%x: tensor<16xf32>) {
  // expected-error @+1 {{'input' must be 2-D, 3-D or 4-D, got 'tensor<16xf32>'}}
  %s, %ss = cnn.batch_norm_sums %x : (tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

// batch_norm_grad_sums: grad_output has the input's type.
func.func @bn_grad_sums_dy(%dy: tensor<2x8x4x4xf32>, %x: tensor<2x8x4x4xf16>, %m: tensor<8xf32>, %i: tensor<8xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<2x8x4x4xf32>' must have the type of 'input' 'tensor<2x8x4x4xf16>'}}
  %a, %b = cnn.batch_norm_grad_sums %dy, %x, %m, %i : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// batch_norm_grad_sums: the statistics and the sums are f32.
func.func @bn_grad_sums_f32(%dy: tensor<2x8x4x4xf16>, %x: tensor<2x8x4x4xf16>, %m: tensor<8xf32>, %i: tensor<8xf32>) {
  // expected-error @+1 {{'sum_dy_xhat'}}
  %a, %b = cnn.batch_norm_grad_sums %dy, %x, %m, %i : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf16>)
  return
}

// -----

// fused_batch_norm_affine_relu_grad_sums: alpha and beta are f32 of the
// channel count.
func.func @bn_affine_relu_grad_sums_alpha(%dy: tensor<2x8x4x4xf16>, %x: tensor<2x8x4x4xf16>, %m: tensor<8xf32>, %i: tensor<8xf32>, %al: tensor<4xf32>, %be: tensor<8xf32>) {
  // expected-error @+1 {{'alpha'}}
  %a, %b = cnn.fused_batch_norm_affine_relu_grad_sums %dy, %x, %m, %i, %al, %be : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// fused_batch_norm_affine_relu_grad_sums: grad_output has the input's type.
func.func @bn_affine_relu_grad_sums_dy(%dy: tensor<2x8x4x4xf32>, %x: tensor<2x8x4x4xf16>, %m: tensor<8xf32>, %i: tensor<8xf32>, %al: tensor<8xf32>, %be: tensor<8xf32>) {
  // expected-error @+1 {{'grad_output' 'tensor<2x8x4x4xf32>' must have the type of 'input' 'tensor<2x8x4x4xf16>'}}
  %a, %b = cnn.fused_batch_norm_affine_relu_grad_sums %dy, %x, %m, %i, %al, %be : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}
