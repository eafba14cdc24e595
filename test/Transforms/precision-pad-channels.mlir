// RUN: cnnc-opt %s -cnn-precision | FileCheck %s
// The channel padding of cnn-precision: an f16 convolution input whose
// channel count is not a multiple of 8 is zero-padded to the next multiple
// of 8, except a large strided stem (kernel area >= 25, stride >= 2) of at
// most 4 channels, which reads 4 (cuDNN's fastest RGB-stem kernels). A
// multiple of 8 is left alone.

// CHECK-LABEL: func.func @forward
func.func @forward(%x1: tensor<2x1x8x8xf32> {cnn.input}, %w1: tensor<4x1x3x3xf32> {cnn.param = "w1"},
                   %x7: tensor<2x3x16x16xf32>, %w7: tensor<4x3x7x7xf32> {cnn.param = "w7"},
                   %x71: tensor<2x3x16x16xf32>, %w71: tensor<4x3x7x7xf32> {cnn.param = "w71"},
                   %x8: tensor<2x8x8x8xf32>, %w8: tensor<4x8x3x3xf32> {cnn.param = "w8"},
                   %x12: tensor<2x12x8x8xf32>, %w12: tensor<4x12x3x3xf32> {cnn.param = "w12"})
    -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x10x10xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %a = cnn.conv2d %x1, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x1x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x8x8xf32>
  %b = cnn.conv2d %x7, %w7 {strides = array<i64: 2, 2>, padding = array<i64: 3, 3, 3, 3>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x16x16xf32>, tensor<4x3x7x7xf32>) -> tensor<2x4x8x8xf32>
  %c = cnn.conv2d %x71, %w71 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x16x16xf32>, tensor<4x3x7x7xf32>) -> tensor<2x4x10x10xf32>
  %d = cnn.conv2d %x8, %w8 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x8x8x8xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x8x8xf32>
  %e = cnn.conv2d %x12, %w12 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x12x8x8xf32>, tensor<4x12x3x3xf32>) -> tensor<2x4x8x8xf32>
  return %a, %b, %c, %d, %e : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x10x10xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}
// The pads of the filter copies (1 -> 8 for a 3x3; 3 -> 4 for the 7x7
// stride-2 stem; 3 -> 8 for a 7x7 of stride 1; 12 -> 16; none for 8):
// CHECK-DAG: cnn.pad {{.*}} {pads = array<i64: 0, 0, 0, 0, 0, 7, 0, 0>} : (tensor<4x1x3x3xf16>) -> tensor<4x8x3x3xf16>
// CHECK-DAG: cnn.pad {{.*}} {pads = array<i64: 0, 0, 0, 0, 0, 1, 0, 0>} : (tensor<4x3x7x7xf16>) -> tensor<4x4x7x7xf16>
// CHECK-DAG: cnn.pad {{.*}} {pads = array<i64: 0, 0, 0, 0, 0, 5, 0, 0>} : (tensor<4x3x7x7xf16>) -> tensor<4x8x7x7xf16>
// CHECK-DAG: cnn.pad {{.*}} {pads = array<i64: 0, 0, 0, 0, 0, 4, 0, 0>} : (tensor<4x12x3x3xf16>) -> tensor<4x16x3x3xf16>
// CHECK-NOT: cnn.pad {{.*}} : (tensor<4x8x3x3xf16>)
// CHECK: cnn.conv2d {{.*}} : (tensor<2x8x8x8xf16>, tensor<4x8x3x3xf16>) -> tensor<2x4x8x8xf16>
// CHECK: cnn.conv2d {{.*}} : (tensor<2x4x16x16xf16>, tensor<4x4x7x7xf16>) -> tensor<2x4x8x8xf16>
// CHECK: cnn.conv2d {{.*}} : (tensor<2x8x16x16xf16>, tensor<4x8x7x7xf16>) -> tensor<2x4x10x10xf16>
// CHECK: cnn.conv2d {{.*}} : (tensor<2x8x8x8xf16>, tensor<4x8x3x3xf16>) -> tensor<2x4x8x8xf16>
// CHECK: cnn.conv2d {{.*}} : (tensor<2x16x8x8xf16>, tensor<4x16x3x3xf16>) -> tensor<2x4x8x8xf16>
