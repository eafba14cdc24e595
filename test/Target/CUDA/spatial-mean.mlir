// global_avg_pool in NHWC (GlobalAvgPoolOp::describeKernelCalls, through
// describeSpatialSum): a block per (image, chunk of channels, split of the
// pixels) of kernels/PoolingNHWC.cuh's spatialSumTiles<T, R, VEC8>, and
// where the pixels are split, spatialSumFinish adding the splits in order
// on the runtime's reduction scratch. One pixel keeps the thread per (n, c)
// of spatialMeanNHWC (a copy). The default #cnn.target (132 SMs, grid_limit
// 4224) aims at 4224 / 8 = 528 blocks.
// RUN: cnnc %s --train --emit cuda -o %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: cnnc %s --train --precision fp32 --emit cuda | FileCheck %s --check-prefix=F32
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}

// CHECK-LABEL: static void trainStep(cnnrt::Context &ctx) {
// 3 x 56 x 56 x 16, f16, C % 8 == 0: two lanes of eight channels (one
// chunk), 128 rows of pixels; 3 images x 1 chunk = 3 blocks, so the 3,136
// pixels split 6 ways (at most 3136 / (128 rows x 4) = 6; 176 wanted):
// 18 blocks, then the finish over the 3 x 16 results (one block).
// CHECK: spatialSumTiles<__half, __half, true><<<18, 256, 0, s>>>(ctx.reductionScratch(288), P<__half>(A, {{[0-9]+}}), P<__half>(A, [[SE:[0-9]+]]), 3, 3136, 16, 2, 6, 3136.0f);
// CHECK-NEXT: "cnn.global_avg_pool spatialSumTiles<__half, __half, true>"
// CHECK-NEXT: spatialSumFinish<__half><<<1, 256, 0, s>>>(ctx.reductionScratch(288), P<__half>(A, [[SE]]), 48ll, 6, 3136.0f);
// 3 x 7 x 7 x 12: C % 8 != 0, one channel a lane: 12 lanes, 16 rows (the
// largest power of two of at most 256 / 12), 49 pixels (no split): 3
// blocks writing the means.
// CHECK: spatialSumTiles<__half, __half, false><<<3, 256, 0, s>>>(ctx.reductionScratch(1), P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), 3, 49, 12, 12, 1, 49.0f);
// CHECK-NOT: spatialSumFinish
// One pixel: the mean of 3 x 1 x 1 x 12 is a copy, a thread per result.
// CHECK: spatialMeanNHWC<__half><<<1, 256, 0, s>>>(P<__half>(A, {{[0-9]+}}), P<__half>(A, {{[0-9]+}}), 3ll, 1ll, 12ll);
// CHECK-LABEL: static void evalStep(cnnrt::Context &ctx) {
// CHECK: spatialSumTiles<__half, __half, true><<<18, 256, 0, s>>>

// f32: the same blocks; the 16-byte form loads two float4 per lane.
// F32: spatialSumTiles<float, float, true><<<18, 256, 0, s>>>({{.*}}, 3, 3136, 16, 2, 6, 3136.0f);
// F32-NEXT: "cnn.global_avg_pool spatialSumTiles<float, float, true>"
// F32-NEXT: spatialSumFinish<float><<<1, 256, 0, s>>>({{.*}}, 48ll, 6, 3136.0f);
// F32: spatialSumTiles<float, float, false><<<3, 256, 0, s>>>({{.*}}, 3, 49, 12, 12, 1, 49.0f);
// F32: spatialMeanNHWC<float><<<1, 256, 0, s>>>({{.*}}, 3ll, 1ll, 12ll);

// A squeeze-excitation gate on a 56 x 56 map (the mean of each channel,
// a 1x1 convolution, sigmoid, a per-channel scale), a strided 1x1
// convolution to 12 channels on 7 x 7, its mean, and the mean of that mean.
func.func @forward(%x: tensor<3x16x56x56xf32> {cnn.input},
                   %wse: tensor<16x16x1x1xf32> {cnn.param = "se.weight"},
                   %w: tensor<12x16x1x1xf32> {cnn.param = "conv.weight"},
                   %fc: tensor<10x12xf32> {cnn.param = "fc.weight"}) -> tensor<3x10xf32> {
  %g = cnn.global_avg_pool %x : (tensor<3x16x56x56xf32>) -> tensor<3x16x1x1xf32>
  %s = cnn.conv2d %g, %wse {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<3x16x1x1xf32>, tensor<16x16x1x1xf32>) -> tensor<3x16x1x1xf32>
  %gate = cnn.sigmoid %s : (tensor<3x16x1x1xf32>) -> tensor<3x16x1x1xf32>
  %xs = cnn.mul %x, %gate : (tensor<3x16x56x56xf32>, tensor<3x16x1x1xf32>) -> tensor<3x16x56x56xf32>
  %c = cnn.conv2d %xs, %w {strides = array<i64: 8, 8>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<3x16x56x56xf32>, tensor<12x16x1x1xf32>) -> tensor<3x12x7x7xf32>
  %m = cnn.global_avg_pool %c : (tensor<3x12x7x7xf32>) -> tensor<3x12x1x1xf32>
  %m1 = cnn.global_avg_pool %m : (tensor<3x12x1x1xf32>) -> tensor<3x12x1x1xf32>
  %f = cnn.reshape %m1 : (tensor<3x12x1x1xf32>) -> tensor<3x12xf32>
  %y = cnn.matmul %f, %fc {transpose_rhs = true} : (tensor<3x12xf32>, tensor<10x12xf32>) -> tensor<3x10xf32>
  return %y : tensor<3x10xf32>
}
