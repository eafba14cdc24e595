// RUN: cnnc-opt %s -cnn-select-lowering | FileCheck %s
// RUN: cnnc-opt %s -cnn-select-lowering -cnn-prepare-for-emission | FileCheck %s --check-prefix=LAUNCH

// cnn-select-lowering's "spatial_sum": a reduce_sum / reduce_mean over one
// run of consecutive dimensions of f16 / f32 values, at least 32 elements a
// result (spatialSumShape), runs in global_avg_pool's blocks. Here: an NHWC
// tensor's pixels ([1, 2], squeeze-excitation's gradient), the trailing
// H x W of a 5-D split attention ([3, 4]) and the same axes written out of
// order. A run of fewer than 32 elements, an innermost run of fewer than
// 256 (one lane a block: most threads idle), axes that are not one run and
// a maximum keep the generic kernels, and the sum over all but the
// innermost dimension stays "channel_sum".
// CHECK-LABEL: func.func @spatial_sums
// CHECK: cnn.reduce_sum {{.*}}cnn.lowering = "spatial_sum"{{.*}} -> tensor<4x1x1x64xf32>
// CHECK: cnn.reduce_mean {{.*}}cnn.lowering = "spatial_sum"{{.*}} -> tensor<4x2x32x1x1xf16>
// CHECK: cnn.reduce_sum {{.*}}cnn.lowering = "spatial_sum"{{.*}} -> tensor<4x1x1x64xf32>
// CHECK: cnn.reduce_sum
// CHECK-NOT: cnn.lowering
// CHECK-SAME: -> tensor<4x16x1x64xf32>
// CHECK: cnn.reduce_sum
// CHECK-NOT: cnn.lowering
// CHECK-SAME: -> tensor<1x16x1x64xf32>
// CHECK: cnn.reduce_mean
// CHECK-NOT: cnn.lowering
// CHECK-SAME: -> tensor<4x2x32x1x1xf32>
// CHECK: cnn.reduce_max
// CHECK-NOT: cnn.lowering
// CHECK-SAME: -> tensor<4x1x1x64xf32>
// CHECK: cnn.reduce_sum {{.*}}cnn.lowering = "channel_sum_vec8"
// The spatial sums take no reduction strategy; the generic ones keep one.
// LAUNCH: cnn.reduce_sum {{.*}}cnn.launch = #cnn.launch<grid_limit = {{[0-9]+}}, block = 256, vector = 8>, cnn.lowering = "spatial_sum"
// LAUNCH: cnn.reduce_sum {{.*}}reduction = "thread_per_result"
func.func @spatial_sums(%x: tensor<4x16x16x64xf32>, %a: tensor<4x2x32x16x16xf16>, %b: tensor<4x2x32x7x7xf32>)
    -> (tensor<4x1x1x64xf32>, tensor<4x2x32x1x1xf16>, tensor<4x1x1x64xf32>, tensor<4x16x1x64xf32>, tensor<1x16x1x64xf32>, tensor<4x2x32x1x1xf32>, tensor<4x1x1x64xf32>, tensor<1x1x1x64xf32>) {
  %se = cnn.reduce_sum %x {axes = array<i64: 1, 2>} : (tensor<4x16x16x64xf32>) -> tensor<4x1x1x64xf32>
  %sa = cnn.reduce_mean %a {axes = array<i64: 3, 4>} : (tensor<4x2x32x16x16xf16>) -> tensor<4x2x32x1x1xf16>
  %so = cnn.reduce_sum %x {axes = array<i64: 2, 1>} : (tensor<4x16x16x64xf32>) -> tensor<4x1x1x64xf32>
  %w = cnn.reduce_sum %x {axes = array<i64: 2>} : (tensor<4x16x16x64xf32>) -> tensor<4x16x1x64xf32>
  %nr = cnn.reduce_sum %x {axes = array<i64: 0, 2>} : (tensor<4x16x16x64xf32>) -> tensor<1x16x1x64xf32>
  %sb = cnn.reduce_mean %b {axes = array<i64: 3, 4>} : (tensor<4x2x32x7x7xf32>) -> tensor<4x2x32x1x1xf32>
  %m = cnn.reduce_max %x {axes = array<i64: 1, 2>} : (tensor<4x16x16x64xf32>) -> tensor<4x1x1x64xf32>
  %c = cnn.reduce_sum %x {axes = array<i64: 0, 1, 2>} : (tensor<4x16x16x64xf32>) -> tensor<1x1x1x64xf32>
  return %se, %sa, %so, %w, %nr, %sb, %m, %c : tensor<4x1x1x64xf32>, tensor<4x2x32x1x1xf16>, tensor<4x1x1x64xf32>, tensor<4x16x1x64xf32>, tensor<1x16x1x64xf32>, tensor<4x2x32x1x1xf32>, tensor<4x1x1x64xf32>, tensor<1x1x1x64xf32>
}
