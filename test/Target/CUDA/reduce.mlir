// Reductions on the CUDA target pick their parallelization by shape:
// - few results of many elements (a layer scale's gradient: [8,32,16,16]
//   summed to [1,32,1,1], 2048 elements per result, not one run of
//   dimensions): one block per result, 256 threads striding, a fixed-order
//   warp/block reduction;
// - a sum or mean over one run of dimensions of at least 32 elements (the
//   squeeze-excitation-like pool below: [8,32,16,16] to [8,32,1,1], 256 per
//   result): cnn-select-lowering's "spatial_sum", global_avg_pool's blocks
//   (spatialSumTiles, outer 256 x run 256 x inner 1: one channel a lane, a
//   block per result here);
// - many results of few elements (the mean over W, 16 per result, then over
//   H): one thread per result.
// RUN: cnnc %s --train -O0 --precision fp32 --layout nchw --emit cuda | FileCheck %s
// RUN: cnnc %s --train --emit cuda -o %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}

// CHECK-LABEL: __global__ void __launch_bounds__(256) k{{[0-9]+}}(const float *__restrict__ in0, float *__restrict__ out0) {
// CHECK-NEXT: for (int64_t o = blockIdx.x * 256ll + threadIdx.x; o < 4096ll;
// CHECK: for (int64_t r = 0; r < 16ll; ++r) {
// CHECK-LABEL: __global__ void __launch_bounds__(256) k{{[0-9]+}}(const float *__restrict__ in0, float *__restrict__ out0) {
// CHECK-NEXT: for (int64_t o = blockIdx.x * 256ll + threadIdx.x; o < 256ll;
// CHECK: for (int64_t r = 0; r < 16ll; ++r) {

// CHECK-LABEL: __global__ void __launch_bounds__(256) k{{[0-9]+}}(const float *__restrict__ in0, float *__restrict__ out0) {
// CHECK-NEXT: const int64_t o = blockIdx.x;
// CHECK: for (int64_t r = threadIdx.x; r < 2048ll; r += 256) {
// CHECK: __shfl_down_sync(0xffffffffu, acc, off);
// CHECK: if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
// CHECK: if (threadIdx.x == 0) st(out0 + o, acc * 1.0f);
// CHECK-LABEL: static void trainStep(cnnrt::Context &ctx) {
// CHECK: spatialSumTiles<float, float, false><<<256, 256, 0, s>>>(ctx.reductionScratch(1), P<float>(A, {{[0-9]+}}), P<float>(A, {{[0-9]+}}), 256, 256, 1, 1, 1, 256.0f);
// CHECK-NEXT: "cnn.reduce_mean spatialSumTiles<float, float, false>"
// The layer scale's gradient: one block per channel.
// CHECK: <<<32, 256, 0, s>>>

func.func @forward(%x: tensor<8x32x16x16xf32> {cnn.input},
                   %ls: tensor<1x32x1x1xf32> {cnn.param = "layer_scale"},
                   %fc: tensor<10x32xf32> {cnn.param = "fc.weight"}) -> tensor<8x10xf32> {
  %s = cnn.mul %x, %ls : (tensor<8x32x16x16xf32>, tensor<1x32x1x1xf32>) -> tensor<8x32x16x16xf32>
  %p = cnn.reduce_mean %s {axes = array<i64: 2, 3>} : (tensor<8x32x16x16xf32>) -> tensor<8x32x1x1xf32>
  %w = cnn.reduce_mean %s {axes = array<i64: 3>} : (tensor<8x32x16x16xf32>) -> tensor<8x32x16x1xf32>
  %h = cnn.reduce_mean %w {axes = array<i64: 2>} : (tensor<8x32x16x1xf32>) -> tensor<8x32x1x1xf32>
  %t = cnn.add %p, %h : (tensor<8x32x1x1xf32>, tensor<8x32x1x1xf32>) -> tensor<8x32x1x1xf32>
  %f = cnn.reshape %t : (tensor<8x32x1x1xf32>) -> tensor<8x32xf32>
  %y = cnn.matmul %f, %fc {transpose_rhs = true} : (tensor<8x32xf32>, tensor<10x32xf32>) -> tensor<8x10xf32>
  return %y : tensor<8x10xf32>
}
