// One case per cnn-fuse rewrite pattern (lib/Transforms/Fuse.cpp), with the
// case where it must not apply. test/Transforms/fuse.mlir has the combined
// cases (ResNet blocks, BN + residual + ReLU).
// RUN: cnnc-opt %s -split-input-file -cnn-fuse | FileCheck %s

// RepointClipGradAtClip + FuseConvEpilogue: clip_grad reads the clip output
// (same mask), so the clip joins the convolution.
// CHECK-LABEL: func @clip_grad_repointed
// CHECK: %[[F:.*]] = cnn.fused_conv2d %arg0, %arg1 {activation = "clip"
// CHECK-SAME: operandSegmentSizes = array<i32: 1, 1, 0, 0>
// CHECK: cnn.fused_elementwise %arg2, %[[F]]
// CHECK-NOT: cnn.clip
func.func @clip_grad_repointed(%x: tensor<2x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %dy: tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.clip %c {min = 0.0 : f32, max = 6.0 : f32} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.clip_grad %dy, %c {min = 0.0 : f32, max = 6.0 : f32} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %r, %g : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// Not re-pointed: other bounds, another mask. The convolution output keeps
// two users and nothing joins it.
// CHECK-LABEL: func @clip_grad_other_bounds
// CHECK: %[[C:.*]] = cnn.conv2d
// CHECK-NOT: cnn.fused_conv2d
// CHECK: cnn.fused_elementwise %[[C]]
// CHECK: cnn.fused_elementwise %arg2, %[[C]]
func.func @clip_grad_other_bounds(%x: tensor<2x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %dy: tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.clip %c {min = 0.0 : f32, max = 6.0 : f32} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.clip_grad %dy, %c {min = 0.0 : f32, max = 1.0 : f32} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %r, %g : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// FuseConvEpilogue with a bias only: no activation (the default "none" is
// not printed).
// CHECK-LABEL: func @conv_bias_only
// CHECK: cnn.fused_conv2d %arg0, %arg1, %arg2 {dilations
// CHECK-NOT: activation
// CHECK-SAME: operandSegmentSizes = array<i32: 1, 1, 1, 0>
// CHECK-NOT: cnn.bias_add
func.func @conv_bias_only(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<2x4x8x8xf32> {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  return %cb : tensor<2x4x8x8xf32>
}

// -----

// FuseConvEpilogue: a "residual" computed after the convolution is not one
// (the fused op could not read it); the ReLU still cannot join, as the add
// stands between.
// CHECK-LABEL: func @conv_late_residual
// CHECK: cnn.conv2d
// CHECK-NOT: cnn.fused_conv2d
// CHECK: return
func.func @conv_late_residual(%x: tensor<2x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %y: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %late = cnn.conv2d %y, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %a = cnn.add %c, %late : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %k = cnn.relu %a : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s = cnn.add %k, %late : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %s : tensor<2x4x8x8xf32>
}

// -----

// SplitBatchNormTrain on its own: statistics + the normalization, every
// result of batch_norm_train replaced.
// CHECK-LABEL: func @bn_split
// CHECK: %[[M:.*]], %[[I:.*]], %[[NM:.*]], %[[NV:.*]], %[[A:.*]], %[[B:.*]] = cnn.batch_norm_stats %arg0, %arg1, %arg2, %arg3, %arg4 {epsilon = 9.99999974E-6 : f32, momentum = 1.000000e-01 : f32}
// CHECK: %[[Y:.*]] = cnn.fused_elementwise %arg0, %[[A]], %[[B]] {broadcast = array<i64: 0, 1, 1>}
// CHECK: return %[[Y]], %[[M]], %[[I]], %[[NM]], %[[NV]]
// CHECK-NOT: cnn.batch_norm_train
func.func @bn_split(%x: tensor<4x8x4x4xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>, %rm: tensor<8xf32>, %rv: tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %y, %m, %i, %nm, %nv = cnn.batch_norm_train %x, %s, %b, %rm, %rv {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %y, %m, %i, %nm, %nv : tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// FuseReluGradIntoBatchNormGrad must not apply when the masked gradient has
// another user: it would have to be stored anyway.
// CHECK-LABEL: func @bn_relu_grad_two_users
// CHECK: %[[G:.*]] = cnn.fused_elementwise %arg4, %arg5
// CHECK: cnn.batch_norm_grad %[[G]]
// CHECK-NOT: cnn.fused_batch_norm_relu_grad
func.func @bn_relu_grad_two_users(%x: tensor<4x8x4x4xf32>, %s: tensor<8xf32>, %m: tensor<8xf32>, %i: tensor<8xf32>, %dy: tensor<4x8x4x4xf32>, %r: tensor<4x8x4x4xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<4x8x4x4xf32>) {
  %g = cnn.relu_grad %dy, %r : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %gx, %gs, %gb = cnn.batch_norm_grad %g, %x, %s, %m, %i : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return %gx, %gs, %g : tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<4x8x4x4xf32>
}

// -----

// RecomputeReluMask: the ReLU output is relu(x * alpha + beta) of the same
// x's statistics, so the fused BN-ReLU gradient takes alpha and beta and no
// longer reads the ReLU output (which the forward still computes for its
// other user).
// CHECK-LABEL: func @bn_relu_mask_recomputed
// CHECK: %{{.*}}, %[[I:.*]], %{{.*}}, %{{.*}}, %[[A:.*]], %[[B:.*]] = cnn.batch_norm_stats %arg0
// CHECK: %[[Y:.*]] = cnn.fused_elementwise %arg0, %[[A]], %[[B]]
// CHECK: cnn.fused_batch_norm_affine_relu_grad %arg5, %arg0, %arg1, %{{.*}}, %[[I]], %[[A]], %[[B]]
// CHECK-NOT: cnn.fused_batch_norm_relu_grad
func.func @bn_relu_mask_recomputed(%x: tensor<4x8x4x4xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>, %rm: tensor<8xf32>, %rv: tensor<8xf32>, %dy: tensor<4x8x4x4xf32>) -> (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>) {
  %n, %m, %i, %nm, %nv = cnn.batch_norm_train %x, %s, %b, %rm, %rv {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %y = cnn.relu %n : (tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %g = cnn.relu_grad %dy, %y : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %gx, %gs, %gb = cnn.batch_norm_grad %g, %x, %s, %m, %i : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return %y, %gx, %gs : tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>
}

// -----

// RecomputeReluMask must not apply when a residual add sits between the
// normalization and the ReLU: the mask depends on the residual too.
// CHECK-LABEL: func @bn_add_relu_mask_kept
// CHECK: cnn.fused_batch_norm_relu_grad
// CHECK-NOT: cnn.fused_batch_norm_affine_relu_grad
func.func @bn_add_relu_mask_kept(%x: tensor<4x8x4x4xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>, %rm: tensor<8xf32>, %rv: tensor<8xf32>, %dy: tensor<4x8x4x4xf32>, %res: tensor<4x8x4x4xf32>) -> (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>) {
  %n, %m, %i, %nm, %nv = cnn.batch_norm_train %x, %s, %b, %rm, %rv {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %a = cnn.add %n, %res : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %y = cnn.relu %a : (tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %g = cnn.relu_grad %dy, %y : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %gx, %gs, %gb = cnn.batch_norm_grad %g, %x, %s, %m, %i : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return %y, %gx, %gs : tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>
}

// -----

// ElementwiseToFused / BiasAddToFused: a lone elementwise op and a lone
// bias_add (per-channel operand: broadcast kind 1) get the fused form.
// CHECK-LABEL: func @lone_ops
// CHECK: cnn.fused_elementwise %arg0, %arg1 {broadcast = array<i64: 0, 1>}
// CHECK: arith.addf
// CHECK-NOT: cnn.bias_add
func.func @lone_ops(%x: tensor<2x4x3x3xf32>, %b: tensor<4xf32>) -> tensor<2x4x3x3xf32> {
  %y = cnn.bias_add %x, %b : (tensor<2x4x3x3xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf32>
  return %y : tensor<2x4x3x3xf32>
}

// -----

// MergeElementwiseProducer: a chain of the same shape becomes one op whose
// body computes each step in order.
// CHECK-LABEL: func @chain_merged
// CHECK: cnn.fused_elementwise %arg0, %arg1
// CHECK: math.exp
// CHECK: arith.mulf
// CHECK: arith.maximumf
// CHECK: cnn.yield
// CHECK-NOT: cnn.fused_elementwise
func.func @chain_merged(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = cnn.sigmoid %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %m = cnn.mul %s, %y : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = cnn.relu %m : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

// MergeElementwiseProducer, broadcast gate: the squeeze-excitation
// sigmoid(N x C x 1 x 1) * x is one op that recomputes the gate per element
// (the gate input is broadcast, kind 3).
// CHECK-LABEL: func @se_gate_inlined
// CHECK: cnn.fused_elementwise %arg0, %arg1 {broadcast = array<i64: 3, 0>
// CHECK: math.exp
// CHECK: arith.mulf
// CHECK-NOT: cnn.fused_elementwise
func.func @se_gate_inlined(%g: tensor<2x4x1x1xf32>, %x: tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32> {
  %s = cnn.sigmoid %g : (tensor<2x4x1x1xf32>) -> tensor<2x4x1x1xf32>
  %y = cnn.mul %s, %x : (tensor<2x4x1x1xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  return %y : tensor<2x4x3x3xf32>
}

// -----

// MergeElementwiseProducer, order: merges go in block order, first consumer
// first, each at its producer's place. %a joins %r (its other operand %y
// exists before %r); %b then cannot join the merged op, whose place (%r's)
// comes before %q, which %b also reads.
// CHECK-LABEL: func @merge_order
// CHECK: %[[RA:.*]]:2 = cnn.fused_elementwise %arg0, %arg1
// CHECK: cnn.global_avg_pool %[[RA]]#0
// CHECK: cnn.fused_elementwise %[[RA]]#1, %{{.*}}
// CHECK-NOT: cnn.fused_elementwise
func.func @merge_order(%x: tensor<2x4x2x2xf32>, %y: tensor<2x4x2x2xf32>) -> (tensor<2x4x2x2xf32>, tensor<2x4x2x2xf32>) {
  %r = cnn.relu %x : (tensor<2x4x2x2xf32>) -> tensor<2x4x2x2xf32>
  %p = cnn.global_avg_pool %r : (tensor<2x4x2x2xf32>) -> tensor<2x4x1x1xf32>
  %q = cnn.global_avg_pool_grad %p : (tensor<2x4x1x1xf32>) -> tensor<2x4x2x2xf32>
  %a = cnn.add %r, %y : (tensor<2x4x2x2xf32>, tensor<2x4x2x2xf32>) -> tensor<2x4x2x2xf32>
  %b = cnn.add %a, %q : (tensor<2x4x2x2xf32>, tensor<2x4x2x2xf32>) -> tensor<2x4x2x2xf32>
  return %a, %b : tensor<2x4x2x2xf32>, tensor<2x4x2x2xf32>
}

// -----

// FuseBatchNormGradPair: two batch_norm_grad of one gradient (a shortcut
// with its own BatchNorm) become one fused_dual_batch_norm_grad at the
// first, in argument order; a third one of another gradient stays.
// CHECK-LABEL: func @bn_grad_pair
// CHECK: %[[DA:.*]], %[[SA:.*]], %{{.*}}, %[[DB:.*]], %{{.*}}, %[[BB:.*]] = cnn.fused_dual_batch_norm_grad %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8
// CHECK: cnn.batch_norm_grad %arg9, %arg1
// CHECK: return %[[DA]], %[[SA]], %[[DB]], %[[BB]]
func.func @bn_grad_pair(%dy: tensor<4x8x4x4xf32>, %a: tensor<4x8x4x4xf32>, %sa: tensor<8xf32>, %ma: tensor<8xf32>, %ia: tensor<8xf32>, %b: tensor<4x8x4x4xf32>, %sb: tensor<8xf32>, %mb: tensor<8xf32>, %ib: tensor<8xf32>, %dz: tensor<4x8x4x4xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<4x8x4x4xf32>) {
  %ga, %gsa, %gba = cnn.batch_norm_grad %dy, %a, %sa, %ma, %ia : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  %gz, %gsz, %gbz = cnn.batch_norm_grad %dz, %a, %sa, %ma, %ia : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  %gb, %gsb, %gbb = cnn.batch_norm_grad %dy, %b, %sb, %mb, %ib : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return %ga, %gsa, %gb, %gbb, %gz : tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<4x8x4x4xf32>
}

// -----

// FuseBatchNormGradPair must not apply when the second's input is computed
// after the first (moving it up would use a value before its definition).
// CHECK-LABEL: func @bn_grad_pair_late_operand
// CHECK-NOT: cnn.fused_dual_batch_norm_grad
// CHECK: cnn.batch_norm_grad %arg0, %arg1
// CHECK: cnn.batch_norm_grad %arg0, %[[L:.*]],
func.func @bn_grad_pair_late_operand(%dy: tensor<4x8x4x4xf32>, %a: tensor<4x8x4x4xf32>, %s: tensor<8xf32>, %m: tensor<8xf32>, %i: tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>) {
  %ga, %gsa, %gba = cnn.batch_norm_grad %dy, %a, %s, %m, %i : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  %late = cnn.scale %ga {factor = 2.0 : f32} : (tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %gb, %gsb, %gbb = cnn.batch_norm_grad %dy, %late, %s, %m, %i : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return %ga, %gb : tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>
}
