// RUN: cnnc-opt %s -split-input-file -cnn-fuse | FileCheck %s

// conv + bias + relu -> one fused_conv2d; the ReLU output stays (relu_grad
// needs it) and becomes the fused op's result.
// CHECK-LABEL: func @conv_bias_relu
// CHECK: %[[F:.*]] = cnn.fused_conv2d %arg0, %arg1, %arg2 {activation = "relu"
// CHECK-NOT: cnn.bias_add
// CHECK-NOT: cnn.relu
// CHECK: cnn.fused_elementwise %{{.*}}, %[[F]]
// CHECK: arith.cmpf ogt
// CHECK: return
func.func @conv_bias_relu(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %dy: tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.relu %cb : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.relu_grad %dy, %r : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %r, %g : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// Must not fuse: the convolution's output has a second user.
// CHECK-LABEL: func @conv_two_users
// CHECK: %[[C:.*]] = cnn.conv2d
// CHECK-NOT: cnn.fused_conv2d
// CHECK: return %[[C]]
func.func @conv_two_users(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  return %c, %cb : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// ResNet's residual: conv + add(residual) + relu, and clip (ReLU6) with
// clip_grad re-pointed at the clip output.
// CHECK-LABEL: func @conv_residual_clip
// CHECK: %[[F:.*]] = cnn.fused_conv2d %arg0, %arg1, %arg2 {activation = "clip"
// CHECK-SAME: operandSegmentSizes = array<i32: 1, 1, 0, 1>
// CHECK: cnn.fused_elementwise %arg3, %[[F]]
func.func @conv_residual_clip(%x: tensor<2x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %res: tensor<2x4x8x8xf32>, %dy: tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %a = cnn.add %c, %res : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.clip %a {min = 0.0 : f32, max = 6.0 : f32} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %g = cnn.clip_grad %dy, %a {min = 0.0 : f32, max = 6.0 : f32} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %r, %g : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// Training BN: statistics, then normalize + residual add + ReLU in one
// elementwise op; the backward ReLU mask goes into the BN gradient.
// CHECK-LABEL: func @bn_add_relu
// The statistics op also yields the affine map (alpha, beta) that
// batch_norm_train's kernel applies, so y = x * alpha + beta is its result
// bit for bit.
// CHECK: %[[M:.*]], %[[I:.*]], %{{.*}}, %{{.*}}, %[[A:.*]], %[[B:.*]] = cnn.batch_norm_stats %arg0, %arg1, %arg2, %arg3, %arg4
// CHECK: %[[Y:.*]] = cnn.fused_elementwise %arg0, %[[A]], %[[B]], %arg5 {broadcast = array<i64: 0, 1, 1, 0>
// CHECK-NEXT: ^bb0(%[[X:.*]]: f32, %[[AL:.*]]: f32, %[[BE:.*]]: f32, %[[R:.*]]: f32):
// CHECK-NEXT: %[[S:.*]] = arith.mulf %[[X]], %[[AL]]
// CHECK-NEXT: %[[N:.*]] = arith.addf %[[S]], %[[BE]]
// CHECK-NEXT: arith.addf %[[N]], %[[R]]
// CHECK: arith.maximumf
// CHECK: cnn.fused_batch_norm_relu_grad %arg6, %[[Y]], %arg0
// CHECK-NOT: cnn.relu_grad
func.func @bn_add_relu(%x: tensor<4x8x4x4xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>, %rm: tensor<8xf32>, %rv: tensor<8xf32>, %res: tensor<4x8x4x4xf32>, %dy: tensor<4x8x4x4xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>) {
  %y, %m, %i, %nm, %nv = cnn.batch_norm_train %x, %s, %b, %rm, %rv {epsilon = 1.0e-5 : f32, momentum = 0.1 : f32} : (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %a = cnn.add %y, %res : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %r = cnn.relu %a : (tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %g = cnn.relu_grad %dy, %r : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %gx, %gs, %gb = cnn.batch_norm_grad %g, %x, %s, %m, %i : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  return %r, %nm, %gx, %gs : tensor<4x8x4x4xf32>, tensor<8xf32>, tensor<4x8x4x4xf32>, tensor<8xf32>
}

// -----

// NHWC: the same relu_grad + batch_norm_grad fusion, keeping the layout (the
// CUDA target reduces the masked gradient with its tiled NHWC reductions).
// CHECK-LABEL: func @bn_relu_grad_nhwc
// CHECK: cnn.fused_batch_norm_relu_grad %arg4, %arg5, %arg0, %arg1, %arg2, %arg3 {layout = #cnn.layout<NHWC>}
// CHECK-NOT: cnn.relu_grad
// CHECK-NOT: cnn.batch_norm_grad
func.func @bn_relu_grad_nhwc(%x: tensor<4x4x4x8xf32>, %s: tensor<8xf32>, %m: tensor<8xf32>, %i: tensor<8xf32>, %dy: tensor<4x4x4x8xf32>, %r: tensor<4x4x4x8xf32>) -> (tensor<4x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %g = cnn.relu_grad %dy, %r : (tensor<4x4x4x8xf32>, tensor<4x4x4x8xf32>) -> tensor<4x4x4x8xf32>
  %gx, %gs, %gb = cnn.batch_norm_grad %g, %x, %s, %m, %i {layout = #cnn.layout<NHWC>} : (tensor<4x4x4x8xf32>, tensor<4x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %gx, %gs, %gb : tensor<4x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Must not merge: the consumer needs a value computed after the producer
// (by a reduction), so the chain stops there.
// CHECK-LABEL: func @chain_blocked
// CHECK-COUNT-2: cnn.fused_elementwise
func.func @chain_blocked(%x: tensor<2x4x2x2xf32>) -> tensor<2x4x2x2xf32> {
  %r = cnn.relu %x : (tensor<2x4x2x2xf32>) -> tensor<2x4x2x2xf32>
  %p = cnn.global_avg_pool %r : (tensor<2x4x2x2xf32>) -> tensor<2x4x1x1xf32>
  %q = cnn.global_avg_pool_grad %p : (tensor<2x4x1x1xf32>) -> tensor<2x4x2x2xf32>
  %a = cnn.add %r, %q : (tensor<2x4x2x2xf32>, tensor<2x4x2x2xf32>) -> tensor<2x4x2x2xf32>
  return %a : tensor<2x4x2x2xf32>
}

// -----

// An effective-SE gate written as timm writes it, relu6(fc(x) + 3) / 6: the
// constant 3 is a broadcast addend (numpy rules), not a residual of the
// convolution's type, so it stays out of the epilogue (fused_conv2d requires
// a residual of the result type: the verifier rejected the step before);
// the add, ReLU and clip become elementwise ops after conv + bias.
// CHECK-LABEL: func @conv_bias_broadcast_add
// CHECK: %[[F:.*]] = cnn.fused_conv2d %arg0, %arg1, %arg2 {
// CHECK-NOT: activation
// CHECK-SAME: operandSegmentSizes = array<i32: 1, 1, 1, 0>
// CHECK: cnn.fused_elementwise %[[F]], %{{.*}} {broadcast = array<i64: 0, 3>
// CHECK: return
func.func @conv_bias_broadcast_add(%x: tensor<2x4x1x1xf32>, %w: tensor<4x4x1x1xf32>, %b: tensor<4xf32>) -> tensor<2x4x1x1xf32> {
  %three = cnn.constant dense<3.000000e+00> : tensor<1x1x1x1xf32>
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x1x1xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x1x1xf32>
  %cb = cnn.bias_add %c, %b : (tensor<2x4x1x1xf32>, tensor<4xf32>) -> tensor<2x4x1x1xf32>
  %a = cnn.add %cb, %three : (tensor<2x4x1x1xf32>, tensor<1x1x1x1xf32>) -> tensor<2x4x1x1xf32>
  %r = cnn.relu %a : (tensor<2x4x1x1xf32>) -> tensor<2x4x1x1xf32>
  %h = cnn.clip %r {min = 0.000000e+00 : f32, max = 6.000000e+00 : f32} : (tensor<2x4x1x1xf32>) -> tensor<2x4x1x1xf32>
  return %h : tensor<2x4x1x1xf32>
}
