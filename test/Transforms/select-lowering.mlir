// RUN: cnnc-opt %s -split-input-file -cnn-select-lowering | FileCheck %s
// RUN: cnnc-opt %S/../Target/CUDA/Inputs/small_cnn.mlir -cnn-autodiff -cnn-gpu-pipeline="memory-plan=false" | FileCheck %s --check-prefix=STEP

// NHWC 1x1, stride 1, unpadded, one group: a cuBLASLt product; a 3x3 stays
// a convolution; NHWC max pooling with C % 8 == 0 takes eight channels per
// thread, NCHW pooling does not.
// CHECK-LABEL: func.func @choices
// CHECK-SAME: attributes {cnn.lowering_selected}
// CHECK: cnn.conv2d {{.*}}cnn.lowering = "gemm"
// CHECK: cnn.conv2d
// CHECK-NOT: cnn.lowering
// CHECK-SAME: tensor<2x6x6x32xf16>
// CHECK: cnn.max_pool2d {{.*}}cnn.lowering = "vec8"
// CHECK: cnn.max_pool2d
// CHECK-NOT: cnn.lowering
// CHECK-SAME: tensor<2x16x4x4xf32>
func.func @choices(%x: tensor<2x8x8x16xf16>, %w1: tensor<32x1x1x16xf16>, %w3: tensor<32x3x3x16xf16>, %y: tensor<2x16x8x8xf32>) -> (tensor<2x8x8x32xf16>, tensor<2x6x6x32xf16>, tensor<2x4x4x16xf16>, tensor<2x16x4x4xf32>) {
  %a = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<32x1x1x16xf16>) -> tensor<2x8x8x32xf16>
  %b = cnn.conv2d %x, %w3 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>, tensor<32x3x3x16xf16>) -> tensor<2x6x6x32xf16>
  %p = cnn.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x16xf16>) -> tensor<2x4x4x16xf16>
  %q = cnn.max_pool2d %y {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false} : (tensor<2x16x8x8xf32>) -> tensor<2x16x4x4xf32>
  return %a, %b, %p, %q : tensor<2x8x8x32xf16>, tensor<2x6x6x32xf16>, tensor<2x4x4x16xf16>, tensor<2x16x4x4xf32>
}

// -----

// A stale choice is withdrawn when the op no longer qualifies (here: a
// stride of 2).
// CHECK-LABEL: func.func @stale
// CHECK: cnn.conv2d
// CHECK-NOT: cnn.lowering
// CHECK-SAME: -> tensor<2x4x4x32xf16>
func.func @stale(%x: tensor<2x8x8x16xf16>, %w1: tensor<32x1x1x16xf16>) -> tensor<2x4x4x32xf16> {
  %a = cnn.conv2d %x, %w1 {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1, layout = #cnn.layout<NHWC>, cnn.lowering = "gemm"} : (tensor<2x8x8x16xf16>, tensor<32x1x1x16xf16>) -> tensor<2x4x4x32xf16>
  return %a : tensor<2x4x4x32xf16>
}

// The GPU pipeline chooses after fusion: the conv + bias + ReLU epilogue is
// offered to cuDNN's bias-activation form, and the SGD updates of one kind
// (f32 parameters, f16 gradients, the same lr/step/scale/flag) share group
// 0; every update is in a group.
// STEP-LABEL: func.func @train_step
// STEP-SAME: cnn.lowering_selected
// STEP: cnn.fused_conv2d {{.*}}cnn.lowering = "cudnn_bias_act"
// STEP: cnn.sgd_update {{.*}}cnn.update_group = 0 : i64
// STEP-NOT: cnn.update_group = 1
// STEP: return
