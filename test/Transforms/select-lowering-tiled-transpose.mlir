// RUN: cnnc-opt %s -cnn-select-lowering=tiled-transpose=true | FileCheck %s
// RUN: cnnc-opt %s -cnn-select-lowering | FileCheck %s
// RUN: cnnc-opt %s -cnn-select-lowering=tiled-transpose=false | FileCheck %s --check-prefix=OFF
// RUN: cnnc-opt %s -cnn-select-lowering=tiled-transpose=true -cnn-prepare-for-emission | FileCheck %s --check-prefix=LAUNCH

// cnn-select-lowering's "tiled" (tiledTransposeShape), under
// tiled-transpose (the default): a cnn.transpose that keeps its leading dimensions and
// swaps the next two groups of dimensions, f16 / f32, both groups at least
// 16 elements, runs as batchedTranspose2D's shared-memory tiles. Here:
// NCHW -> NHWC (0, 2, 3, 1) and NHWC -> NCHW (0, 3, 1, 2) in f16 and f32,
// a 3-D (0, 2, 1) and a 2-D (1, 0) (the same form: batch 1 or a kept
// prefix). A permutation that keeps the innermost dimension ((0, 2, 1, 3):
// its rows stay contiguous, the gather reads them coalesced), one that is no
// swap of two groups ((0, 3, 2, 1)) and a side of fewer than 16 elements
// (the C = 3 of an image) keep the generic gather.
// CHECK-LABEL: func.func @transposes
// CHECK: cnn.transpose {{.*}}cnn.lowering = "tiled"{{.*}} -> tensor<2x56x56x64xf16>
// CHECK: cnn.transpose {{.*}}cnn.lowering = "tiled"{{.*}} -> tensor<2x64x56x56xf16>
// CHECK: cnn.transpose {{.*}}cnn.lowering = "tiled"{{.*}} -> tensor<3x7x7x40xf32>
// CHECK: cnn.transpose {{.*}}cnn.lowering = "tiled"{{.*}} -> tensor<4x48x20xf32>
// CHECK: cnn.transpose {{.*}}cnn.lowering = "tiled"{{.*}} -> tensor<33x17xf32>
// CHECK: cnn.transpose
// CHECK-NOT: cnn.lowering
// CHECK-SAME: -> tensor<2x56x64x56xf16>
// CHECK: cnn.transpose
// CHECK-NOT: cnn.lowering
// CHECK-SAME: -> tensor<2x56x56x64xf16>
// CHECK: cnn.transpose
// CHECK-NOT: cnn.lowering
// CHECK-SAME: -> tensor<2x32x32x3xf32>
// Without the option no transpose gets it.
// OFF-LABEL: func.func @transposes
// OFF-NOT: "tiled"
// The launch decision is #cnn.launch's (the grid ceiling), as for every
// generated kernel.
// LAUNCH: cnn.transpose {{.*}}cnn.launch = #cnn.launch<grid_limit = {{[0-9]+}}, block = 256{{.*}}cnn.lowering = "tiled"
func.func @transposes(%nchw: tensor<2x64x56x56xf16>, %nhwc: tensor<2x56x56x64xf16>,
                      %f: tensor<3x40x7x7xf32>, %t3: tensor<4x20x48xf32>,
                      %m: tensor<17x33xf32>, %img: tensor<2x3x32x32xf32>)
    -> (tensor<2x56x56x64xf16>, tensor<2x64x56x56xf16>, tensor<3x7x7x40xf32>,
        tensor<4x48x20xf32>, tensor<33x17xf32>, tensor<2x56x64x56xf16>,
        tensor<2x56x56x64xf16>, tensor<2x32x32x3xf32>) {
  %a = cnn.transpose %nchw {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x64x56x56xf16>) -> tensor<2x56x56x64xf16>
  %b = cnn.transpose %nhwc {permutation = array<i64: 0, 3, 1, 2>} : (tensor<2x56x56x64xf16>) -> tensor<2x64x56x56xf16>
  %c = cnn.transpose %f {permutation = array<i64: 0, 2, 3, 1>} : (tensor<3x40x7x7xf32>) -> tensor<3x7x7x40xf32>
  %d = cnn.transpose %t3 {permutation = array<i64: 0, 2, 1>} : (tensor<4x20x48xf32>) -> tensor<4x48x20xf32>
  %e = cnn.transpose %m {permutation = array<i64: 1, 0>} : (tensor<17x33xf32>) -> tensor<33x17xf32>
  %g = cnn.transpose %nchw {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x64x56x56xf16>) -> tensor<2x56x64x56xf16>
  %h = cnn.transpose %nchw {permutation = array<i64: 0, 3, 2, 1>} : (tensor<2x64x56x56xf16>) -> tensor<2x56x56x64xf16>
  %i = cnn.transpose %img {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x3x32x32xf32>) -> tensor<2x32x32x3xf32>
  return %a, %b, %c, %d, %e, %g, %h, %i : tensor<2x56x56x64xf16>, tensor<2x64x56x56xf16>, tensor<3x7x7x40xf32>, tensor<4x48x20xf32>, tensor<33x17xf32>, tensor<2x56x64x56xf16>, tensor<2x56x56x64xf16>, tensor<2x32x32x3xf32>
}
