// RUN: cnnc-opt %s -cnn-precision | FileCheck %s
// The channel padding of cnn-precision: an f16 convolution input of at most
// 4 channels is padded to 4 (cuDNN's fastest RGB-stem kernels read 4), a
// larger count that is not a multiple of 8 to the next multiple of 8, and 4
// or a multiple of 8 is left alone.

func.func @forward(%x1: tensor<2x1x8x8xf32> {cnn.input}, %w1: tensor<4x1x3x3xf32> {cnn.param = "w1"},
                   %x5: tensor<2x5x8x8xf32>, %w5: tensor<4x5x3x3xf32> {cnn.param = "w5"},
                   %x4: tensor<2x4x8x8xf32>, %w4: tensor<4x4x3x3xf32> {cnn.param = "w4"},
                   %x12: tensor<2x12x8x8xf32>, %w12: tensor<4x12x3x3xf32> {cnn.param = "w12"})
    -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %a = cnn.conv2d %x1, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x1x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x8x8xf32>
  %b = cnn.conv2d %x5, %w5 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x5x8x8xf32>, tensor<4x5x3x3xf32>) -> tensor<2x4x8x8xf32>
  %c = cnn.conv2d %x4, %w4 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %d = cnn.conv2d %x12, %w12 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x12x8x8xf32>, tensor<4x12x3x3xf32>) -> tensor<2x4x8x8xf32>
  return %a, %b, %c, %d : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}
// The pads of the filter copies and inputs (4 - 1, 8 - 5, 16 - 12; none for 4):
// CHECK-DAG: cnn.pad {{.*}} {pads = array<i64: 0, 0, 0, 0, 0, 3, 0, 0>} : (tensor<4x1x3x3xf16>) -> tensor<4x4x3x3xf16>
// CHECK-DAG: cnn.pad {{.*}} {pads = array<i64: 0, 0, 0, 0, 0, 3, 0, 0>} : (tensor<2x1x8x8xf16>) -> tensor<2x4x8x8xf16>
// CHECK-DAG: cnn.pad {{.*}} {pads = array<i64: 0, 0, 0, 0, 0, 3, 0, 0>} : (tensor<4x5x3x3xf16>) -> tensor<4x8x3x3xf16>
// CHECK-DAG: cnn.pad {{.*}} {pads = array<i64: 0, 0, 0, 0, 0, 4, 0, 0>} : (tensor<4x12x3x3xf16>) -> tensor<4x16x3x3xf16>
// CHECK-NOT: cnn.pad {{.*}} : (tensor<{{.*}}x4x{{.*}}xf16>)
// CHECK: cnn.conv2d {{.*}} : (tensor<2x4x8x8xf16>, tensor<4x4x3x3xf16>) -> tensor<2x4x8x8xf16>
// CHECK: cnn.conv2d {{.*}} : (tensor<2x8x8x8xf16>, tensor<4x8x3x3xf16>) -> tensor<2x4x8x8xf16>
// CHECK: cnn.conv2d {{.*}} : (tensor<2x4x8x8xf16>, tensor<4x4x3x3xf16>) -> tensor<2x4x8x8xf16>
// CHECK: cnn.conv2d {{.*}} : (tensor<2x16x8x8xf16>, tensor<4x16x3x3xf16>) -> tensor<2x4x8x8xf16>
