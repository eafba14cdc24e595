// Reductions on the CUDA target pick their parallelization by shape:
// - few results of many elements (a layer scale's gradient: [8,32,16,16]
//   summed to [1,32,1,1], 2048 elements per result): one block per result,
//   256 threads striding, a fixed-order warp/block reduction;
// - many results of few elements (the squeeze-excitation-like pool below:
//   [8,32,16,16] to [8,32,1,1], 256 per result): one thread per result.
// RUN: cnnc %s --train -O0 --precision fp32 --layout nchw --emit cuda | FileCheck %s
// RUN: cnnc %s --train --emit cuda -o %t.cu
// RUN: %if nvcc %{ %nvcc -std=c++17 -arch=sm_90a -I%cnnc_src/runtime/include -c %t.cu -o %t.o %}

// CHECK-LABEL: __global__ void __launch_bounds__(256) k{{[0-9]+}}(const float *__restrict__ in0, float *__restrict__ out0) {
// CHECK-NEXT: for (int64_t o = blockIdx.x * 256ll + threadIdx.x; o < 256ll;
// CHECK: for (int64_t r = 0; r < 256ll; ++r) {

// CHECK-LABEL: __global__ void __launch_bounds__(256) k{{[0-9]+}}(const float *__restrict__ in0, float *__restrict__ out0) {
// CHECK-NEXT: const int64_t o = blockIdx.x;
// CHECK: for (int64_t r = threadIdx.x; r < 2048ll; r += 256) {
// CHECK: __shfl_down_sync(0xffffffffu, acc, off);
// CHECK: if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
// CHECK: if (threadIdx.x == 0) st(out0 + o, acc * 1.0f);
// The launch: one block per channel.
// CHECK: <<<32, 256, 0, s>>>

func.func @forward(%x: tensor<8x32x16x16xf32> {cnn.input},
                   %ls: tensor<1x32x1x1xf32> {cnn.param = "layer_scale"},
                   %fc: tensor<10x32xf32> {cnn.param = "fc.weight"}) -> tensor<8x10xf32> {
  %s = cnn.mul %x, %ls : (tensor<8x32x16x16xf32>, tensor<1x32x1x1xf32>) -> tensor<8x32x16x16xf32>
  %p = cnn.reduce_mean %s {axes = array<i64: 2, 3>} : (tensor<8x32x16x16xf32>) -> tensor<8x32x1x1xf32>
  %f = cnn.reshape %p : (tensor<8x32x1x1xf32>) -> tensor<8x32xf32>
  %y = cnn.matmul %f, %fc {transpose_rhs = true} : (tensor<8x32xf32>, tensor<10x32xf32>) -> tensor<8x10xf32>
  return %y : tensor<8x10xf32>
}
