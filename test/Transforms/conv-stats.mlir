// cnn-conv-stats (lib/Transforms/ConvStats.cpp): batch_norm_stats of an NHWC
// f16 conv2d's result becomes batch_norm_finalize of the sums that
// fused_conv2d_stats computes in the convolution's epilogue; every case
// where it must not apply leaves the IR alone.
// RUN: cnnc-opt %s -split-input-file -cnn-conv-stats | FileCheck %s
// RUN: cnnc-opt %s -split-input-file -cnn-conv-stats=prologue=false | FileCheck %s --check-prefix=NOPRO
// RUN: cnnc-opt %s -split-input-file -cnn-conv-stats=wgrad-prologue=false | FileCheck %s --check-prefix=NOWG

// CHECK-LABEL: func @rewritten
// CHECK: %[[Y:.*]], %[[S:.*]], %[[SS:.*]] = cnn.fused_conv2d_stats %arg0, %arg1 {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, operandSegmentSizes = array<i32: 1, 1, 0, 0>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
// CHECK-SAME: -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>)
// The count is N * P * Q = 2 * 4 * 4.
// CHECK: cnn.batch_norm_finalize %[[S]], %[[SS]], %arg2, %arg3, %arg4, %arg5 {count = 32 : i64, epsilon = 1.000000e-03 : f32, momentum = 2.000000e-01 : f32}
// CHECK-NOT: cnn.batch_norm_stats
// CHECK: return %[[Y]]
func.func @rewritten(%x: tensor<2x8x8x8xf16>, %w: tensor<16x3x3x8xf16>, %g: tensor<16xf32>, %b: tensor<16xf32>, %rm: tensor<16xf32>, %rv: tensor<16xf32>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>) {
  %y = cnn.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x8xf16>, tensor<16x3x3x8xf16>) -> tensor<2x4x4x16xf16>
  %m, %i, %nm, %nv, %a, %be = cnn.batch_norm_stats %y, %g, %b, %rm, %rv {epsilon = 1.0e-3 : f32, momentum = 0.2 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %y, %a, %be : tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>
}

// -----

// --sync-bn's rank-local sums (cnn-data-parallel) come from the same
// epilogue: batch_norm_sums of the convolution goes away.
// CHECK-LABEL: func @sync_bn_sums
// CHECK: %[[Y:.*]], %[[S:.*]], %[[SS:.*]] = cnn.fused_conv2d_stats %arg0, %arg1
// CHECK-NOT: cnn.batch_norm_sums
// CHECK: return %[[Y]], %[[S]], %[[SS]]
func.func @sync_bn_sums(%x: tensor<2x8x8x8xf16>, %w: tensor<16x3x3x8xf16>) -> (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>) {
  %y = cnn.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x8xf16>, tensor<16x3x3x8xf16>) -> tensor<2x4x4x16xf16>
  %s, %ss = cnn.batch_norm_sums %y {layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>) -> (tensor<16xf32>, tensor<16xf32>)
  return %y, %s, %ss : tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>
}

// -----

// f32 convolutions keep the two-pass statistics (cuDNN's GenStats graphs
// are f16 here).
// CHECK-LABEL: func @f32_kept
// CHECK: cnn.conv2d
// CHECK: cnn.batch_norm_stats
// CHECK-NOT: fused_conv2d_stats
func.func @f32_kept(%x: tensor<2x8x8x8xf32>, %w: tensor<16x3x3x8xf32>, %g: tensor<16xf32>) -> tensor<16xf32> {
  %y = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x8xf32>, tensor<16x3x3x8xf32>) -> tensor<2x8x8x16xf32>
  %m, %i, %nm, %nv, %a, %be = cnn.batch_norm_stats %y, %g, %g, %g, %g {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %a : tensor<16xf32>
}

// -----

// Grouped (here depthwise) convolutions are not GenStats' form.
// CHECK-LABEL: func @grouped_kept
// CHECK: cnn.batch_norm_stats
// CHECK-NOT: fused_conv2d_stats
func.func @grouped_kept(%x: tensor<2x8x8x16xf16>, %w: tensor<16x3x3x1xf16>, %g: tensor<16xf32>) -> tensor<16xf32> {
  %y = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 16, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16x3x3x1xf16>) -> tensor<2x8x8x16xf16>
  %m, %i, %nm, %nv, %a, %be = cnn.batch_norm_stats %y, %g, %g, %g, %g {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %a : tensor<16xf32>
}

// -----

// 12 output channels: an NHWC row is not 16-byte aligned.
// CHECK-LABEL: func @unaligned_kept
// CHECK: cnn.batch_norm_stats
// CHECK-NOT: fused_conv2d_stats
func.func @unaligned_kept(%x: tensor<2x8x8x8xf16>, %w: tensor<12x3x3x8xf16>, %g: tensor<12xf32>) -> tensor<12xf32> {
  %y = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x8xf16>, tensor<12x3x3x8xf16>) -> tensor<2x8x8x12xf16>
  %m, %i, %nm, %nv, %a, %be = cnn.batch_norm_stats %y, %g, %g, %g, %g {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x12xf16>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>) -> (tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>, tensor<12xf32>)
  return %a : tensor<12xf32>
}

// -----

// Statistics of something other than a plain convolution (here a block
// argument) stay batch_norm_stats.
// CHECK-LABEL: func @not_a_conv
// CHECK: cnn.batch_norm_stats %arg0
func.func @not_a_conv(%y: tensor<2x4x4x16xf16>, %g: tensor<16xf32>) -> tensor<16xf32> {
  %m, %i, %nm, %nv, %a, %be = cnn.batch_norm_stats %y, %g, %g, %g, %g {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %a : tensor<16xf32>
}

// -----

// The prologue: the second convolution reads the first one's output %y and
// applies relu(y * alpha + beta) itself; the filter gradient, the other
// reader of the normalized tensor %n, takes it as its prologue too
// (fused_conv2d_bwd_filter), so %n is never made. With
// wgrad-prologue=false %n is made right before the filter gradient instead
// of in the forward pass.
// CHECK-LABEL: func @prologue
// CHECK: %[[Y:.*]], %[[S:.*]], %[[SS:.*]] = cnn.fused_conv2d_stats %arg0, %arg1 {
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[A:.*]], %[[B:.*]] = cnn.batch_norm_finalize %[[S]], %[[SS]]
// CHECK-NEXT: %[[Z:.*]], %{{.*}}, %{{.*}} = cnn.fused_conv2d_stats %[[Y]], %arg2, %[[A]], %[[B]] {{{.*}}operandSegmentSizes = array<i32: 1, 1, 1, 1>
// CHECK: cnn.batch_norm_finalize
// CHECK-NEXT: %[[E:.*]] = cnn.exp %[[Z]]
// CHECK-NEXT: %[[DW:.*]] = cnn.fused_conv2d_bwd_filter %[[Y]], %[[E]], %[[A]], %[[B]] {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x8x8x16xf16>, tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<16x3x3x16xf16>
// CHECK-NOT: cnn.fused_elementwise
// CHECK: return %{{.*}}, %[[DW]]
// NOWG-LABEL: func @prologue
// NOWG: %[[Y:.*]], %{{.*}}, %{{.*}} = cnn.fused_conv2d_stats %arg0, %arg1 {
// NOWG: %[[E:.*]] = cnn.exp
// NOWG-NEXT: %[[N:.*]] = cnn.fused_elementwise %[[Y]]
// NOWG: cnn.conv2d_bwd_filter %[[N]], %[[E]]
// NOPRO-LABEL: func @prologue
// NOPRO: cnn.fused_elementwise
// NOPRO: cnn.fused_conv2d_stats %{{.*}}, %arg2 {{{.*}}operandSegmentSizes = array<i32: 1, 1, 0, 0>
func.func @prologue(%x: tensor<2x8x8x8xf16>, %w1: tensor<16x3x3x8xf16>, %w2: tensor<16x3x3x16xf16>, %g: tensor<16xf32>) -> (tensor<16xf32>, tensor<16x3x3x16xf16>) {
  %y = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x8xf16>, tensor<16x3x3x8xf16>) -> tensor<2x8x8x16xf16>
  %m, %i, %nm, %nv, %a, %be = cnn.batch_norm_stats %y, %g, %g, %g, %g {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  %n = cnn.fused_elementwise %y, %a, %be {broadcast = array<i64: 0, 1, 1>, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x8x16xf16> {
  ^bb0(%p: f32, %q: f32, %r: f32):
    %c0 = arith.constant 0.0 : f32
    %t0 = arith.mulf %p, %q : f32
    %t1 = arith.addf %t0, %r : f32
    %t2 = arith.maximumf %t1, %c0 : f32
    %t3 = arith.truncf %t2 : f32 to f16
    %t4 = arith.extf %t3 : f16 to f32
    cnn.yield %t4 : f32
  }
  %z = cnn.conv2d %n, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16x3x3x16xf16>) -> tensor<2x8x8x16xf16>
  %m2, %i2, %nm2, %nv2, %a2, %be2 = cnn.batch_norm_stats %z, %g, %g, %g, %g {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  %e = cnn.exp %z : (tensor<2x8x8x16xf16>) -> tensor<2x8x8x16xf16>
  %dw = cnn.conv2d_bwd_filter %n, %e {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<2x8x8x16xf16>) -> tensor<16x3x3x16xf16>
  return %a2, %dw : tensor<16xf32>, tensor<16x3x3x16xf16>
}

// -----

// A normalization with a residual add before the ReLU (a ResNet block's
// output) is not the prologue's form: the convolution keeps its input.
// CHECK-LABEL: func @residual_not_prologue
// CHECK: %[[N:.*]] = cnn.fused_elementwise
// CHECK: cnn.fused_conv2d_stats %[[N]], %arg2 {{{.*}}operandSegmentSizes = array<i32: 1, 1, 0, 0>
func.func @residual_not_prologue(%x: tensor<2x8x8x16xf16>, %w1: tensor<16x3x3x16xf16>, %w2: tensor<16x3x3x16xf16>, %g: tensor<16xf32>) -> tensor<16xf32> {
  %y = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16x3x3x16xf16>) -> tensor<2x8x8x16xf16>
  %m, %i, %nm, %nv, %a, %be = cnn.batch_norm_stats %y, %g, %g, %g, %g {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  %n = cnn.fused_elementwise %y, %a, %be, %x {broadcast = array<i64: 0, 1, 1, 0>, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<2x8x8x16xf16>) -> tensor<2x8x8x16xf16> {
  ^bb0(%p: f32, %q: f32, %r: f32, %s: f32):
    %c0 = arith.constant 0.0 : f32
    %t0 = arith.mulf %p, %q : f32
    %t1 = arith.addf %t0, %r : f32
    %t2 = arith.addf %t1, %s : f32
    %t3 = arith.maximumf %t2, %c0 : f32
    cnn.yield %t3 : f32
  }
  %z = cnn.conv2d %n, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16x3x3x16xf16>) -> tensor<2x8x8x16xf16>
  %m2, %i2, %nm2, %nv2, %a2, %be2 = cnn.batch_norm_stats %z, %g, %g, %g, %g {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %a2 : tensor<16xf32>
}
