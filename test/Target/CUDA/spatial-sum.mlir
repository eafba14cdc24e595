// The "spatial_sum" reductions (cnn-select-lowering) print
// describeSpatialReduction's launches: global_avg_pool's spatialSumTiles
// over outer x run x inner, the mean divided by the run, the sum by 1.
// RUN: cnnc %s --train --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}

// CHECK-LABEL: static void trainStep(cnnrt::Context &ctx) {
// The 5-D split-attention mean over its trailing 16 x 16 (NCHW order: no
// layout-sensitive op reads it): 4 x 2 x 32 = 256 results of 256 contiguous
// values, one value a lane, a block each; f16 values, the f32 result
// cnn-precision gives the reduction.
// CHECK: spatialSumTiles<__half, float, false><<<256, 256, 0, s>>>(ctx.reductionScratch(1), P<__half>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), 256, 256, 1, 1, 1, 256.0f);
// CHECK-NEXT: "cnn.reduce_mean spatialSumTiles<__half, float, false>"
// The squeeze-excitation gate's gradient, a sum over the NHWC pixels of
// 4 x 16 x 16 x 64 (f32 products): four lanes of eight channels, 64 rows,
// 2 chunks x 4 images; 256 pixels leave no split (at least 4 a thread).
// CHECK: spatialSumTiles<float, float, true><<<8, 256, 0, s>>>(ctx.reductionScratch(1), P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), 4, 256, 64, 4, 1, 1.0f);
// CHECK-NEXT: "cnn.reduce_sum spatialSumTiles<float, float, true>"
// CHECK-NOT: cnn.reduce_sum k
// CHECK-LABEL: static void evalStep(cnnrt::Context &ctx) {

func.func @forward(%x: tensor<4x64x16x16xf32> {cnn.input},
                   %w: tensor<64x64x1x1xf32> {cnn.param = "conv.weight"},
                   %wse: tensor<64x64x1x1xf32> {cnn.param = "se.weight"},
                   %fc: tensor<10x64xf32> {cnn.param = "fc.weight"}) -> tensor<4x10xf32> {
  %x5 = cnn.reshape %x : (tensor<4x64x16x16xf32>) -> tensor<4x2x32x16x16xf32>
  %a = cnn.reduce_mean %x5 {axes = array<i64: 3, 4>} : (tensor<4x2x32x16x16xf32>) -> tensor<4x2x32x1x1xf32>
  %a4 = cnn.reshape %a : (tensor<4x2x32x1x1xf32>) -> tensor<4x64x1x1xf32>
  %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x64x16x16xf32>, tensor<64x64x1x1xf32>) -> tensor<4x64x16x16xf32>
  %g = cnn.global_avg_pool %c : (tensor<4x64x16x16xf32>) -> tensor<4x64x1x1xf32>
  %s = cnn.conv2d %g, %wse {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<4x64x1x1xf32>, tensor<64x64x1x1xf32>) -> tensor<4x64x1x1xf32>
  %gate = cnn.sigmoid %s : (tensor<4x64x1x1xf32>) -> tensor<4x64x1x1xf32>
  %xs = cnn.mul %c, %gate : (tensor<4x64x16x16xf32>, tensor<4x64x1x1xf32>) -> tensor<4x64x16x16xf32>
  %m = cnn.global_avg_pool %xs : (tensor<4x64x16x16xf32>) -> tensor<4x64x1x1xf32>
  %t = cnn.add %m, %a4 : (tensor<4x64x1x1xf32>, tensor<4x64x1x1xf32>) -> tensor<4x64x1x1xf32>
  %f = cnn.reshape %t : (tensor<4x64x1x1xf32>) -> tensor<4x64xf32>
  %y = cnn.matmul %f, %fc {transpose_rhs = true} : (tensor<4x64xf32>, tensor<10x64xf32>) -> tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}
