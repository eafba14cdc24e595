// RUN: cnnc-opt %s | FileCheck %s
// RUN: cnnc-opt %s | cnnc-opt | FileCheck %s
// RUN: cnnc-opt %s --mlir-print-op-generic | cnnc-opt | FileCheck %s
// cnn.resize / cnn.resize_grad round trip (the cnn.pad precedent: the op's
// own file next to ops.mlir).

// CHECK-LABEL: func @resize_ops
func.func @resize_ops(%x: tensor<2x3x5x4xf32>, %h: tensor<2x5x4x3xf16>) -> tensor<2x3x5x4xf32> {
  // Nearest with the defaults (half_pixel, round_prefer_floor) omitted.
  // CHECK: cnn.resize %{{.*}} {size = array<i64: 10, 8>} : (tensor<2x3x5x4xf32>) -> tensor<2x3x10x8xf32>
  %n = cnn.resize %x {size = array<i64: 10, 8>} : (tensor<2x3x5x4xf32>) -> tensor<2x3x10x8xf32>
  // PyTorch's bilinear with a scale factor; downsampling works too.
  // CHECK: cnn.resize %{{.*}} {mode = "linear", scales = array<f64: 1.500000e+00, 5.000000e-01>, size = array<i64: 7, 2>} : (tensor<2x3x5x4xf32>) -> tensor<2x3x7x2xf32>
  %l = cnn.resize %x {size = array<i64: 7, 2>, mode = "linear", scales = array<f64: 1.5, 0.5>} : (tensor<2x3x5x4xf32>) -> tensor<2x3x7x2xf32>
  // PyTorch's nearest; NHWC and f16.
  // CHECK: cnn.resize %{{.*}} {coordinate_transformation_mode = "asymmetric", layout = #cnn.layout<NHWC>, nearest_mode = "floor", size = array<i64: 10, 8>} : (tensor<2x5x4x3xf16>) -> tensor<2x10x8x3xf16>
  %t = cnn.resize %h {size = array<i64: 10, 8>, coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", layout = #cnn.layout<NHWC>} : (tensor<2x5x4x3xf16>) -> tensor<2x10x8x3xf16>
  // CHECK: cnn.resize_grad %{{.*}} {coordinate_transformation_mode = "align_corners", mode = "linear", size = array<i64: 7, 2>} : (tensor<2x3x7x2xf32>) -> tensor<2x3x5x4xf32>
  %g = cnn.resize_grad %l {size = array<i64: 7, 2>, mode = "linear", coordinate_transformation_mode = "align_corners"} : (tensor<2x3x7x2xf32>) -> tensor<2x3x5x4xf32>
  // CHECK: cnn.resize_grad %{{.*}} {layout = #cnn.layout<NHWC>, size = array<i64: 10, 8>} : (tensor<2x10x8x3xf16>) -> tensor<2x5x4x3xf16>
  %gt = cnn.resize_grad %t {size = array<i64: 10, 8>, layout = #cnn.layout<NHWC>} : (tensor<2x10x8x3xf16>) -> tensor<2x5x4x3xf16>
  return %g : tensor<2x3x5x4xf32>
}

// cnn-fuse's upsample + concat: resize_grad reading a channel range of a
// wider gradient, and the fused forward (resized channels first or last;
// resized_first = true, the default, is not printed).
// CHECK-LABEL: func @resize_concat_ops
func.func @resize_concat_ops(%x: tensor<2x5x4x3xf16>, %skip: tensor<2x10x8x2xf16>, %dy: tensor<2x10x8x5xf16>, %xc: tensor<2x3x5x4xf32>, %sc: tensor<2x6x10x8xf32>) -> tensor<2x5x4x3xf16> {
  // CHECK: cnn.resize_grad %{{.*}} {channel_offset = 2 : i64, layout = #cnn.layout<NHWC>, size = array<i64: 10, 8>} : (tensor<2x10x8x5xf16>) -> tensor<2x5x4x3xf16>
  %g = cnn.resize_grad %dy {size = array<i64: 10, 8>, channel_offset = 2, layout = #cnn.layout<NHWC>} : (tensor<2x10x8x5xf16>) -> tensor<2x5x4x3xf16>
  // CHECK: cnn.fused_resize_concat %{{.*}}, %{{.*}} {layout = #cnn.layout<NHWC>, mode = "linear", size = array<i64: 10, 8>} : (tensor<2x5x4x3xf16>, tensor<2x10x8x2xf16>) -> tensor<2x10x8x5xf16>
  %y = cnn.fused_resize_concat %x, %skip {size = array<i64: 10, 8>, mode = "linear", layout = #cnn.layout<NHWC>} : (tensor<2x5x4x3xf16>, tensor<2x10x8x2xf16>) -> tensor<2x10x8x5xf16>
  // CHECK: cnn.fused_resize_concat %{{.*}}, %{{.*}} {resized_first = false, scales = array<f64: 2.000000e+00, 2.000000e+00>, size = array<i64: 10, 8>} : (tensor<2x3x5x4xf32>, tensor<2x6x10x8xf32>) -> tensor<2x9x10x8xf32>
  %z = cnn.fused_resize_concat %xc, %sc {size = array<i64: 10, 8>, resized_first = false, scales = array<f64: 2.0, 2.0>} : (tensor<2x3x5x4xf32>, tensor<2x6x10x8xf32>) -> tensor<2x9x10x8xf32>
  return %g : tensor<2x5x4x3xf16>
}
