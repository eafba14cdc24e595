// RUN: cnnc-opt %s -split-input-file -cnn-input-format | FileCheck %s
// cnn-input-format folds the image argument's cast -> NHWC transpose ->
// channel pad into the argument (the runtime converts each batch into it).

// The whole chain, in both functions: the argument is the padded f16 NHWC
// tensor and remembers the images' N, C, H, W.
// CHECK-LABEL: func @forward
// CHECK-SAME: %arg0: tensor<2x4x4x8xf16> {cnn.image_layout = #cnn.layout<NHWC>, cnn.image_shape = array<i64: 2, 3, 4, 4>, cnn.input}
// CHECK-NOT: cnn.cast
// CHECK-NOT: cnn.transpose
// CHECK-NOT: cnn.pad
// CHECK: return %arg0
// CHECK-LABEL: func @train_step
// CHECK-SAME: %arg0: tensor<2x4x4x8xf16> {cnn.image_layout = #cnn.layout<NHWC>, cnn.image_shape = array<i64: 2, 3, 4, 4>, cnn.input}
func.func @forward(%x: tensor<2x3x4x4xf32> {cnn.input}) -> tensor<2x4x4x8xf16> {
  %0 = cnn.cast %x : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf16>
  %1 = cnn.transpose %0 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x3x4x4xf16>) -> tensor<2x4x4x3xf16>
  %2 = cnn.pad %1 {pads = array<i64: 0, 0, 0, 0, 0, 0, 0, 5>} : (tensor<2x4x4x3xf16>) -> tensor<2x4x4x8xf16>
  return %2 : tensor<2x4x4x8xf16>
}
func.func @train_step(%x: tensor<2x3x4x4xf32> {cnn.input}) -> tensor<2x4x4x8xf16> {
  %0 = cnn.cast %x : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf16>
  %1 = cnn.transpose %0 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x3x4x4xf16>) -> tensor<2x4x4x3xf16>
  %2 = cnn.pad %1 {pads = array<i64: 0, 0, 0, 0, 0, 0, 0, 5>} : (tensor<2x4x4x3xf16>) -> tensor<2x4x4x8xf16>
  return %2 : tensor<2x4x4x8xf16>
}

// -----

// @forward's chain stops at the transpose (its padded tensor has a second
// user): both functions fold only the cast and the transpose, so they keep
// one input tensor.
// CHECK-LABEL: func @forward
// CHECK-SAME: %arg0: tensor<2x4x4x3xf16> {cnn.image_layout = #cnn.layout<NHWC>, cnn.image_shape = array<i64: 2, 3, 4, 4>, cnn.input}
// CHECK: cnn.pad %arg0
// CHECK-LABEL: func @train_step
// CHECK-SAME: %arg0: tensor<2x4x4x3xf16>
// CHECK: cnn.pad %arg0
func.func @forward(%x: tensor<2x3x4x4xf32> {cnn.input}) -> (tensor<2x4x4x8xf16>, tensor<2x4x4x3xf16>) {
  %0 = cnn.cast %x : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf16>
  %1 = cnn.transpose %0 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x3x4x4xf16>) -> tensor<2x4x4x3xf16>
  %2 = cnn.pad %1 {pads = array<i64: 0, 0, 0, 0, 0, 0, 0, 5>} : (tensor<2x4x4x3xf16>) -> tensor<2x4x4x8xf16>
  return %2, %1 : tensor<2x4x4x8xf16>, tensor<2x4x4x3xf16>
}
func.func @train_step(%x: tensor<2x3x4x4xf32> {cnn.input}) -> tensor<2x4x4x8xf16> {
  %0 = cnn.cast %x : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf16>
  %1 = cnn.transpose %0 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x3x4x4xf16>) -> tensor<2x4x4x3xf16>
  %2 = cnn.pad %1 {pads = array<i64: 0, 0, 0, 0, 0, 0, 0, 5>} : (tensor<2x4x4x3xf16>) -> tensor<2x4x4x8xf16>
  return %2 : tensor<2x4x4x8xf16>
}

// -----

// A pad of the spatial dimensions is not the channel padding: only the cast
// and the transpose fold.
// CHECK-LABEL: func @train_step
// CHECK-SAME: %arg0: tensor<2x4x4x3xf16>
// CHECK: cnn.pad %arg0 {pads = array<i64: 0, 1, 1, 0, 0, 1, 1, 0>}
func.func @train_step(%x: tensor<2x3x4x4xf32> {cnn.input}) -> tensor<2x6x6x3xf16> {
  %0 = cnn.cast %x : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf16>
  %1 = cnn.transpose %0 {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x3x4x4xf16>) -> tensor<2x4x4x3xf16>
  %2 = cnn.pad %1 {pads = array<i64: 0, 1, 1, 0, 0, 1, 1, 0>} : (tensor<2x4x4x3xf16>) -> tensor<2x6x6x3xf16>
  return %2 : tensor<2x6x6x3xf16>
}

// -----

// An NCHW f32 step (no cast, no transpose first) is left alone.
// CHECK-LABEL: func @train_step
// CHECK-SAME: %arg0: tensor<2x3x4x4xf32> {cnn.input}
func.func @train_step(%x: tensor<2x3x4x4xf32> {cnn.input}) -> tensor<2x3x4x4xf32> {
  %0 = cnn.relu %x : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %0 : tensor<2x3x4x4xf32>
}

// -----

// f32 NHWC (no cnn-precision): the transpose alone folds, and the argument
// is NHWC (the runtime must write it channels-last).
// CHECK-LABEL: func @train_step
// CHECK-SAME: %arg0: tensor<2x4x4x3xf32> {cnn.image_layout = #cnn.layout<NHWC>, cnn.image_shape = array<i64: 2, 3, 4, 4>, cnn.input}
func.func @train_step(%x: tensor<2x3x4x4xf32> {cnn.input}) -> tensor<2x4x4x3xf32> {
  %0 = cnn.transpose %x {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x3x4x4xf32>) -> tensor<2x4x4x3xf32>
  %1 = cnn.relu %0 : (tensor<2x4x4x3xf32>) -> tensor<2x4x4x3xf32>
  return %1 : tensor<2x4x4x3xf32>
}

// -----

// f16 NCHW (no cnn-layout): the cast alone folds; the argument stays NCHW.
// CHECK-LABEL: func @train_step
// CHECK-SAME: %arg0: tensor<2x3x4x4xf16> {cnn.image_layout = #cnn.layout<NCHW>, cnn.image_shape = array<i64: 2, 3, 4, 4>, cnn.input}
func.func @train_step(%x: tensor<2x3x4x4xf32> {cnn.input}) -> tensor<2x3x4x4xf16> {
  %0 = cnn.cast %x : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf16>
  %1 = cnn.relu %0 : (tensor<2x3x4x4xf16>) -> tensor<2x3x4x4xf16>
  return %1 : tensor<2x3x4x4xf16>
}
