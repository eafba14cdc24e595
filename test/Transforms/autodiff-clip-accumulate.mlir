// RUN: cnnc-opt %s -cnn-autodiff="clip-grad-norm=0.5" | FileCheck %s --check-prefix=CLIP
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=3" | FileCheck %s --check-prefix=ACC
// RUN: cnnc-opt %s -cnn-autodiff="optimizer=adam clip-grad-norm=2.0 accumulate=2" | FileCheck %s --check-prefix=BOTH
// RUN: cnnc-opt %s -cnn-autodiff="clip-grad-norm=0.5" -cnn-precision | FileCheck %s --check-prefix=F16
// RUN: cnnc-opt %s -cnn-autodiff="accumulate=2" -cnn-precision | FileCheck %s --check-prefix=SCALEDSUMS
// RUN: not cnnc-opt %s -cnn-autodiff="optimizer=none clip-grad-norm=1.0" 2>&1 | FileCheck %s --check-prefix=NONE

func.func @forward(%x: tensor<2x3x8x8xf32> {cnn.input},
                   %w1: tensor<4x3x3x3xf32> {cnn.param = "conv.weight"},
                   %w2: tensor<10x4xf32> {cnn.param = "fc.weight"}) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.relu %c : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.global_avg_pool %r : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %y = cnn.matmul %f, %w2 {transpose_rhs = true} : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// Clipping: one clip_divisor of both gradients (scale 1 in f32) is the
// grad_scale of both updates; their finite flag is the constant 1.
// CLIP-LABEL: func.func @train_step(
// CLIP: %[[DW1:.*]] = cnn.conv2d_bwd_filter
// CLIP-NEXT: %[[ONE:.*]] = cnn.constant dense<1.000000e+00> : tensor<f32>
// CLIP-NEXT: %[[D:.*]] = cnn.clip_divisor %[[ONE]], %[[DW1]], %[[DW2:[0-9]+]] {max_norm = 5.000000e-01 : f32}
// CLIP: cnn.sgd_update %{{.*}}, %[[DW1]], %{{.*}}, %{{.*}}, %{{.*}}, %[[D]], %[[ONE]]
// CLIP: cnn.sgd_update %{{.*}}, %[[DW2]], %{{.*}}, %{{.*}}, %{{.*}}, %[[D]], %[[ONE]]

// Accumulation: a "<param>.grad_accum" state per parameter after its
// momentum buffer; the updates read the sums, the optimizer step number and
// apply only on every third micro-step; the new sums are returned.
// ACC-LABEL: func.func @train_step(
// ACC-SAME: %[[STEP:[a-z0-9]+]]: tensor<f32> {cnn.step}
// ACC-SAME: {cnn.state = "conv.weight.momentum_buffer"}
// ACC-SAME: %[[A1:[a-z0-9]+]]: tensor<4x3x3x3xf32> {cnn.state = "conv.weight.grad_accum"}
// ACC-SAME: {cnn.state = "fc.weight.momentum_buffer"}
// ACC-SAME: {cnn.state = "fc.weight.grad_accum"}
// ACC-SAME: -> ({{.*}}{cnn.state = "conv.weight.grad_accum"}{{.*}}{cnn.state = "fc.weight.grad_accum"})
// ACC: %[[APPLY:.*]], %[[OPTSTEP:.*]] = cnn.accumulation_step %[[STEP]] {every = 3 : i64}
// ACC: %[[SUM1:.*]], %{{.*}} = cnn.accumulate_grad %[[A1]], %{{.*}}, %[[STEP]] {every = 3 : i64}
// ACC: %[[ONE:.*]] = cnn.constant dense<1.000000e+00> : tensor<f32>
// ACC: cnn.sgd_update %{{.*}}, %[[SUM1]], %{{.*}}, %{{.*}}, %[[OPTSTEP]], %[[ONE]], %[[APPLY]]

// BOTH-LABEL: func.func @train_step(
// BOTH: cnn.accumulation_step
// BOTH: %[[S1:.*]], %{{.*}} = cnn.accumulate_grad
// BOTH: %[[S2:.*]], %{{.*}} = cnn.accumulate_grad
// BOTH: %[[D:.*]] = cnn.clip_divisor %{{.*}}, %[[S1]], %[[S2]] {max_norm = 2.000000e+00 : f32}
// BOTH: cnn.adam_update %{{.*}}, %[[S1]], {{.*}}, %[[D]], %{{.*}} {beta1

// Under loss scaling the divisor measures the gradients scaled by S (its
// scale operand becomes S) and the updates' finite flag is all_finite's.
// F16-LABEL: func.func @train_step(
// F16: %[[D:.*]] = cnn.clip_divisor %[[S:[a-z0-9]+]], %{{.*}}, %{{.*}} {max_norm = 5.000000e-01 : f32} : (tensor<f32>, tensor<4x3x3x3xf16>, tensor<10x4xf16>) -> tensor<f32>
// F16: %[[OK:.*]] = cnn.all_finite
// F16: cnn.sgd_update {{.*}}, %[[D]], %[[OK]]
// F16: cnn.sgd_update {{.*}}, %[[D]], %[[OK]]

// Accumulation under loss scaling: the sums stay f32 and read the f16
// gradients (scaled by S, which the micro-steps of one optimizer step
// share); all_finite reads the sums; the updates divide by S and apply when
// the micro-step is the last and the sums are finite; the scale and its
// tracker change on that micro-step only.
// SCALEDSUMS-LABEL: func.func @train_step(
// SCALEDSUMS: %[[APPLY:[a-z_0-9]+]], %{{[a-z_0-9]+}} = cnn.accumulation_step
// SCALEDSUMS: %[[SUM:[a-z_0-9]+]], %{{[a-z_0-9]+}} = cnn.accumulate_grad %{{.*}}, %{{.*}}, %{{.*}} {every = 2 : i64} : (tensor<4x3x3x3xf32>, tensor<4x3x3x3xf16>, tensor<f32>) -> (tensor<4x3x3x3xf32>, tensor<4x3x3x3xf32>)
// SCALEDSUMS: %[[OK:[0-9]+]] = cnn.all_finite %[[SUM]], %{{.*}} : (tensor<4x3x3x3xf32>, tensor<10x4xf32>) -> tensor<f32>
// SCALEDSUMS: %[[APPLIES:[0-9]+]] = cnn.mul %[[APPLY]], %[[OK]]
// SCALEDSUMS: %[[NEW:[a-z_0-9]+]], %[[TRACK:[a-z_0-9]+]] = cnn.loss_scale_update %[[S:arg[0-9]+]], %[[T:arg[0-9]+]], %[[OK]]
// SCALEDSUMS: %[[KEEP:[0-9]+]]:2 = cnn.fused_elementwise %[[APPLY]], %[[NEW]], %[[S]], %[[TRACK]], %[[T]]
// SCALEDSUMS: arith.select
// SCALEDSUMS: cnn.sgd_update %{{.*}}, %[[SUM]], {{.*}}, %[[S]], %[[APPLIES]]
// SCALEDSUMS: return {{.*}}%[[KEEP]]#0, %[[KEEP]]#1
// NONE: error: cnn-autodiff: clip-grad-norm and accumulate act on the optimizer update; optimizer 'none' has none
