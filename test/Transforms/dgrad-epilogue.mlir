// cnn-dgrad-epilogue (lib/Transforms/DgradEpilogue.cpp): the residual
// gradient's add and relu_grad after an NHWC f16 conv2d_bwd_data become its
// epilogue (fused_conv2d_bwd_data); every case where it must not apply
// leaves the IR alone.
// RUN: cnnc-opt %s -split-input-file -cnn-dgrad-epilogue | FileCheck %s
// RUN: cnnc-opt %s -split-input-file -cnn-dgrad-epilogue=any-precision=true | FileCheck %s --check-prefix=ANY

// The convolution's gradient as the add's right operand (ResNet's
// shortcut-gradient + dgrad order).
// CHECK-LABEL: func @rewritten
// CHECK-NEXT: %[[G:.*]] = cnn.fused_conv2d_bwd_data %arg0, %arg1, %arg2, %arg3 {dilations = array<i64: 1, 1>, groups = 1 : i64, layout = #cnn.layout<NHWC>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x4x4x8xf16>, tensor<8x1x1x16xf16>, tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>) -> tensor<2x4x4x16xf16>
// CHECK-NEXT: return %[[G]]
func.func @rewritten(%dy: tensor<2x4x4x8xf16>, %w: tensor<8x1x1x16xf16>, %res: tensor<2x4x4x16xf16>, %y: tensor<2x4x4x16xf16>) -> tensor<2x4x4x16xf16> {
  %d = cnn.conv2d_bwd_data %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf16>, tensor<8x1x1x16xf16>) -> tensor<2x4x4x16xf16>
  %s = cnn.add %res, %d : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>) -> tensor<2x4x4x16xf16>
  %g = cnn.relu_grad %s, %y : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>) -> tensor<2x4x4x16xf16>
  return %g : tensor<2x4x4x16xf16>
}

// -----

// Two convolution gradients summed (a downsampling block's input): the
// first one that qualifies fuses, the other is the addend.
// CHECK-LABEL: func @two_dgrads
// CHECK: %[[D2:.*]] = cnn.conv2d_bwd_data %arg2, %arg3 {{.*}}strides = array<i64: 2, 2>
// CHECK-NEXT: %[[G:.*]] = cnn.fused_conv2d_bwd_data %arg0, %arg1, %[[D2]], %arg4 {{.*}}padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
// CHECK-NOT: cnn.add
// CHECK-NOT: cnn.relu_grad
func.func @two_dgrads(%dy: tensor<2x8x8x8xf16>, %w: tensor<8x3x3x16xf16>, %dy2: tensor<2x4x4x32xf16>, %w2: tensor<32x1x1x16xf16>, %y: tensor<2x8x8x16xf16>) -> tensor<2x8x8x16xf16> {
  %d = cnn.conv2d_bwd_data %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x8xf16>, tensor<8x3x3x16xf16>) -> tensor<2x8x8x16xf16>
  %d2 = cnn.conv2d_bwd_data %dy2, %w2 {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x32xf16>, tensor<32x1x1x16xf16>) -> tensor<2x8x8x16xf16>
  %s = cnn.add %d, %d2 : (tensor<2x8x8x16xf16>, tensor<2x8x8x16xf16>) -> tensor<2x8x8x16xf16>
  %g = cnn.relu_grad %s, %y : (tensor<2x8x8x16xf16>, tensor<2x8x8x16xf16>) -> tensor<2x8x8x16xf16>
  return %g : tensor<2x8x8x16xf16>
}

// -----

// The convolution's gradient has another use: it must still be written, so
// nothing is saved; left alone.
// CHECK-LABEL: func @dgrad_used_twice
// CHECK: cnn.conv2d_bwd_data
// CHECK: cnn.add
// CHECK: cnn.relu_grad
// CHECK-NOT: fused_conv2d_bwd_data
func.func @dgrad_used_twice(%dy: tensor<2x4x4x8xf16>, %w: tensor<8x1x1x16xf16>, %res: tensor<2x4x4x16xf16>, %y: tensor<2x4x4x16xf16>) -> (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>) {
  %d = cnn.conv2d_bwd_data %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf16>, tensor<8x1x1x16xf16>) -> tensor<2x4x4x16xf16>
  %s = cnn.add %res, %d : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>) -> tensor<2x4x4x16xf16>
  %g = cnn.relu_grad %s, %y : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>) -> tensor<2x4x4x16xf16>
  return %g, %d : tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>
}

// -----

// The sum has another use (it is not only the ReLU gradient's input).
// CHECK-LABEL: func @sum_used_twice
// CHECK: cnn.relu_grad
// CHECK-NOT: fused_conv2d_bwd_data
func.func @sum_used_twice(%dy: tensor<2x4x4x8xf16>, %w: tensor<8x1x1x16xf16>, %res: tensor<2x4x4x16xf16>, %y: tensor<2x4x4x16xf16>) -> (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>) {
  %d = cnn.conv2d_bwd_data %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf16>, tensor<8x1x1x16xf16>) -> tensor<2x4x4x16xf16>
  %s = cnn.add %res, %d : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>) -> tensor<2x4x4x16xf16>
  %g = cnn.relu_grad %s, %y : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>) -> tensor<2x4x4x16xf16>
  return %g, %s : tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>
}

// -----

// f32: only with any-precision (the reference interpreter's form).
// CHECK-LABEL: func @f32_kept
// CHECK-NOT: fused_conv2d_bwd_data
// ANY-LABEL: func @f32_kept
// ANY: cnn.fused_conv2d_bwd_data
func.func @f32_kept(%dy: tensor<2x4x4x8xf32>, %w: tensor<8x1x1x16xf32>, %res: tensor<2x4x4x16xf32>, %y: tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32> {
  %d = cnn.conv2d_bwd_data %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf32>, tensor<8x1x1x16xf32>) -> tensor<2x4x4x16xf32>
  %s = cnn.add %res, %d : (tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %g = cnn.relu_grad %s, %y : (tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %g : tensor<2x4x4x16xf32>
}

// -----

// Channel counts that break cuDNN's 16-byte rows (12), NCHW, and a
// broadcast addend are left alone.
// CHECK-LABEL: func @unaligned_kept
// CHECK-NOT: fused_conv2d_bwd_data
func.func @unaligned_kept(%dy: tensor<2x4x4x8xf16>, %w: tensor<8x1x1x12xf16>, %res: tensor<2x4x4x12xf16>, %y: tensor<2x4x4x12xf16>) -> tensor<2x4x4x12xf16> {
  %d = cnn.conv2d_bwd_data %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf16>, tensor<8x1x1x12xf16>) -> tensor<2x4x4x12xf16>
  %s = cnn.add %res, %d : (tensor<2x4x4x12xf16>, tensor<2x4x4x12xf16>) -> tensor<2x4x4x12xf16>
  %g = cnn.relu_grad %s, %y : (tensor<2x4x4x12xf16>, tensor<2x4x4x12xf16>) -> tensor<2x4x4x12xf16>
  return %g : tensor<2x4x4x12xf16>
}
// CHECK-LABEL: func @nchw_kept
// CHECK-NOT: fused_conv2d_bwd_data
func.func @nchw_kept(%dy: tensor<2x8x4x4xf16>, %w: tensor<8x16x1x1xf16>, %res: tensor<2x16x4x4xf16>, %y: tensor<2x16x4x4xf16>) -> tensor<2x16x4x4xf16> {
  %d = cnn.conv2d_bwd_data %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NCHW>} : (tensor<2x8x4x4xf16>, tensor<8x16x1x1xf16>) -> tensor<2x16x4x4xf16>
  %s = cnn.add %res, %d : (tensor<2x16x4x4xf16>, tensor<2x16x4x4xf16>) -> tensor<2x16x4x4xf16>
  %g = cnn.relu_grad %s, %y : (tensor<2x16x4x4xf16>, tensor<2x16x4x4xf16>) -> tensor<2x16x4x4xf16>
  return %g : tensor<2x16x4x4xf16>
}
// CHECK-LABEL: func @broadcast_addend_kept
// CHECK-NOT: fused_conv2d_bwd_data
func.func @broadcast_addend_kept(%dy: tensor<2x4x4x8xf16>, %w: tensor<8x1x1x16xf16>, %res: tensor<1x4x4x16xf16>, %y: tensor<2x4x4x16xf16>) -> tensor<2x4x4x16xf16> {
  %d = cnn.conv2d_bwd_data %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf16>, tensor<8x1x1x16xf16>) -> tensor<2x4x4x16xf16>
  %s = cnn.add %d, %res : (tensor<2x4x4x16xf16>, tensor<1x4x4x16xf16>) -> tensor<2x4x4x16xf16>
  %g = cnn.relu_grad %s, %y : (tensor<2x4x4x16xf16>, tensor<2x4x4x16xf16>) -> tensor<2x4x4x16xf16>
  return %g : tensor<2x4x4x16xf16>
}
