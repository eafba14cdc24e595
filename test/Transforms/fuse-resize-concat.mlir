// RUN: cnnc-opt %s --cnn-fuse | FileCheck %s
// RUN: cnnc-opt %s --cnn-fuse=resize-concat=false | FileCheck %s --check-prefix=OFF
// RUN: cnnc-opt %s --cnn-fuse --cnn-select-lowering | FileCheck %s --check-prefix=LOWER

// cnn-fuse's upsample + concat (a U-Net decoder level): the forward
// concat(resize(x), skip) along the channels becomes one
// fused_resize_concat, and the backward resize_grad reads its channel range
// of the concat's gradient in place of a slice copy. The skip's slice stays.

// cnn-select-lowering: the NHWC fused forms whose channel counts (8 resized,
// 4 others) are not all multiples of 8 keep the one-channel kernels; the
// multiple-of-8 level of @vec8_level gets "vec8" (eight channels a thread).
// LOWER-LABEL: func.func @unet_level_nhwc
// LOWER-NOT:   "vec8"
// LOWER-LABEL: func.func @vec8_level
// LOWER:       cnn.fused_resize_concat {{.*}}cnn.lowering = "vec8"
// LOWER:       cnn.resize_grad {{.*}}channel_offset = 8 : i64, cnn.lowering = "vec8"

// With resize-concat=false (cnnc --fuse-resize-concat=false, the A/B of
// test/gpu/bench_fusions.py) resize, concat and both slices stay.
// OFF-LABEL: func.func @unet_level_nhwc
// OFF:       cnn.resize
// OFF:       cnn.concat
// OFF:       cnn.slice
// OFF:       cnn.slice
// OFF:       cnn.resize_grad %{{.*}} {layout
// OFF-NOT:   fused_resize_concat
// OFF-NOT:   channel_offset

// CHECK-LABEL: func.func @unet_level_nhwc
// CHECK-SAME:  (%[[X:.*]]: tensor<2x4x4x8xf16>, %[[SKIP:.*]]: tensor<2x8x8x4xf16>, %[[DY:.*]]: tensor<2x8x8x12xf16>)
// CHECK-NOT:   cnn.resize %
// CHECK-NOT:   cnn.concat
// CHECK:       %[[Y:.*]] = cnn.fused_resize_concat %[[X]], %[[SKIP]] {layout = #cnn.layout<NHWC>, mode = "linear", scales = array<f64: 2.000000e+00, 2.000000e+00>, size = array<i64: 8, 8>} : (tensor<2x4x4x8xf16>, tensor<2x8x8x4xf16>) -> tensor<2x8x8x12xf16>
// CHECK:       %[[DSKIP:.*]] = cnn.slice %[[DY]] {offsets = array<i64: 0, 0, 0, 8>, sizes = array<i64: 2, 8, 8, 4>}
// CHECK:       %[[DX:.*]] = cnn.resize_grad %[[DY]] {channel_offset = 0 : i64, layout = #cnn.layout<NHWC>, mode = "linear", scales = array<f64: 2.000000e+00, 2.000000e+00>, size = array<i64: 8, 8>} : (tensor<2x8x8x12xf16>) -> tensor<2x4x4x8xf16>
// CHECK-NOT:   cnn.slice
// CHECK:       return %[[Y]], %[[DSKIP]], %[[DX]]
func.func @unet_level_nhwc(%x: tensor<2x4x4x8xf16>, %skip: tensor<2x8x8x4xf16>, %dy: tensor<2x8x8x12xf16>) -> (tensor<2x8x8x12xf16>, tensor<2x8x8x4xf16>, tensor<2x4x4x8xf16>) {
  %r = cnn.resize %x {size = array<i64: 8, 8>, mode = "linear", scales = array<f64: 2.0, 2.0>, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf16>) -> tensor<2x8x8x8xf16>
  %y = cnn.concat %r, %skip {axis = 3 : i64} : (tensor<2x8x8x8xf16>, tensor<2x8x8x4xf16>) -> tensor<2x8x8x12xf16>
  %dr = cnn.slice %dy {offsets = array<i64: 0, 0, 0, 0>, sizes = array<i64: 2, 8, 8, 8>} : (tensor<2x8x8x12xf16>) -> tensor<2x8x8x8xf16>
  %dskip = cnn.slice %dy {offsets = array<i64: 0, 0, 0, 8>, sizes = array<i64: 2, 8, 8, 4>} : (tensor<2x8x8x12xf16>) -> tensor<2x8x8x4xf16>
  %dx = cnn.resize_grad %dr {size = array<i64: 8, 8>, mode = "linear", scales = array<f64: 2.0, 2.0>, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x8xf16>) -> tensor<2x4x4x8xf16>
  return %y, %dskip, %dx : tensor<2x8x8x12xf16>, tensor<2x8x8x4xf16>, tensor<2x4x4x8xf16>
}

// NCHW f32, the resized operand second: resized_first = false, and the
// gradient's range starts after the skip's 4 channels.
// CHECK-LABEL: func.func @resized_second_nchw
// CHECK:       cnn.fused_resize_concat %{{.*}}, %{{.*}} {coordinate_transformation_mode = "asymmetric", {{.*}}nearest_mode = "floor", resized_first = false, size = array<i64: 8, 8>} : (tensor<2x8x4x4xf32>, tensor<2x4x8x8xf32>) -> tensor<2x12x8x8xf32>
// CHECK:       cnn.resize_grad %{{.*}} {channel_offset = 4 : i64, {{.*}}} : (tensor<2x12x8x8xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NOT:   cnn.slice
func.func @resized_second_nchw(%x: tensor<2x8x4x4xf32>, %skip: tensor<2x4x8x8xf32>, %dy: tensor<2x12x8x8xf32>) -> (tensor<2x12x8x8xf32>, tensor<2x8x4x4xf32>) {
  %r = cnn.resize %x {size = array<i64: 8, 8>, coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"} : (tensor<2x8x4x4xf32>) -> tensor<2x8x8x8xf32>
  %y = cnn.concat %skip, %r {axis = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<2x8x8x8xf32>) -> tensor<2x12x8x8xf32>
  %dr = cnn.slice %dy {offsets = array<i64: 0, 4, 0, 0>, sizes = array<i64: 2, 8, 8, 8>} : (tensor<2x12x8x8xf32>) -> tensor<2x8x8x8xf32>
  %dx = cnn.resize_grad %dr {size = array<i64: 8, 8>, coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"} : (tensor<2x8x8x8xf32>) -> tensor<2x8x4x4xf32>
  return %y, %dx : tensor<2x12x8x8xf32>, tensor<2x8x4x4xf32>
}

// Not fused: the resize has another user (its result would be stored
// anyway); the concat joins along H, not the channels; the concat has three
// operands.
// CHECK-LABEL: func.func @forward_not_fused
// CHECK-NOT:   fused_resize_concat
// CHECK-COUNT-3: cnn.concat
// CHECK-NOT:   fused_resize_concat
// CHECK:       return
func.func @forward_not_fused(%x: tensor<2x4x4x8xf16>, %skip: tensor<2x8x8x4xf16>, %xh: tensor<2x8x4x4xf32>, %sh: tensor<2x8x2x8xf32>) -> (tensor<2x8x8x12xf16>, tensor<2x8x8x8xf16>, tensor<2x8x10x8xf32>, tensor<2x8x8x16xf16>) {
  %r = cnn.resize %x {size = array<i64: 8, 8>, mode = "linear", layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf16>) -> tensor<2x8x8x8xf16>
  %y = cnn.concat %r, %skip {axis = 3 : i64} : (tensor<2x8x8x8xf16>, tensor<2x8x8x4xf16>) -> tensor<2x8x8x12xf16>
  %rh = cnn.resize %xh {size = array<i64: 8, 8>} : (tensor<2x8x4x4xf32>) -> tensor<2x8x8x8xf32>
  %yh = cnn.concat %rh, %sh {axis = 2 : i64} : (tensor<2x8x8x8xf32>, tensor<2x8x2x8xf32>) -> tensor<2x8x10x8xf32>
  %r3 = cnn.resize %x {size = array<i64: 8, 8>, layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf16>) -> tensor<2x8x8x8xf16>
  %y3 = cnn.concat %r3, %skip, %skip {axis = 3 : i64} : (tensor<2x8x8x8xf16>, tensor<2x8x8x4xf16>, tensor<2x8x8x4xf16>) -> tensor<2x8x8x16xf16>
  return %y, %r, %yh, %y3 : tensor<2x8x8x12xf16>, tensor<2x8x8x8xf16>, tensor<2x8x10x8xf32>, tensor<2x8x8x16xf16>
}

// Not rewritten: the slice has another user; the slice cuts H as well as
// the channels.
// CHECK-LABEL: func.func @backward_not_fused
// CHECK-NOT:   channel_offset
// CHECK-COUNT-2: cnn.slice
// CHECK-NOT:   channel_offset
// CHECK:       return
func.func @backward_not_fused(%dy: tensor<2x8x8x12xf16>, %dz: tensor<2x10x8x12xf16>) -> (tensor<2x4x4x8xf16>, tensor<2x8x8x8xf16>, tensor<2x4x4x8xf16>) {
  %dr = cnn.slice %dy {offsets = array<i64: 0, 0, 0, 0>, sizes = array<i64: 2, 8, 8, 8>} : (tensor<2x8x8x12xf16>) -> tensor<2x8x8x8xf16>
  %dx = cnn.resize_grad %dr {size = array<i64: 8, 8>, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x8xf16>) -> tensor<2x4x4x8xf16>
  %dh = cnn.slice %dz {offsets = array<i64: 0, 2, 0, 4>, sizes = array<i64: 2, 8, 8, 8>} : (tensor<2x10x8x12xf16>) -> tensor<2x8x8x8xf16>
  %dxh = cnn.resize_grad %dh {size = array<i64: 8, 8>, layout = #cnn.layout<NHWC>} : (tensor<2x8x8x8xf16>) -> tensor<2x4x4x8xf16>
  return %dx, %dr, %dxh : tensor<2x4x4x8xf16>, tensor<2x8x8x8xf16>, tensor<2x4x4x8xf16>
}

// Channels 8 (resized, second) and 8 (skip): the "vec8" forms.
// CHECK-LABEL: func.func @vec8_level
// CHECK:       cnn.fused_resize_concat {{.*}}resized_first = false
// CHECK:       cnn.resize_grad {{.*}}channel_offset = 8 : i64
func.func @vec8_level(%x: tensor<2x4x4x8xf16>, %skip: tensor<2x8x8x8xf16>, %dy: tensor<2x8x8x16xf16>) -> (tensor<2x8x8x16xf16>, tensor<2x4x4x8xf16>) {
  %r = cnn.resize %x {size = array<i64: 8, 8>, mode = "linear", layout = #cnn.layout<NHWC>} : (tensor<2x4x4x8xf16>) -> tensor<2x8x8x8xf16>
  %y = cnn.concat %skip, %r {axis = 3 : i64} : (tensor<2x8x8x8xf16>, tensor<2x8x8x8xf16>) -> tensor<2x8x8x16xf16>
  %dr = cnn.slice %dy {offsets = array<i64: 0, 0, 0, 8>, sizes = array<i64: 2, 8, 8, 8>} : (tensor<2x8x8x16xf16>) -> tensor<2x8x8x8xf16>
  %dx = cnn.resize_grad %dr {size = array<i64: 8, 8>, mode = "linear", layout = #cnn.layout<NHWC>} : (tensor<2x8x8x8xf16>) -> tensor<2x4x4x8xf16>
  return %y, %dx : tensor<2x8x8x16xf16>, tensor<2x4x4x8xf16>
}
