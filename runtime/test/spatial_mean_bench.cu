//===- spatial_mean_bench.cu - spatial means and sums, old and new -------===//
//
// Issue 37 / 32: global_avg_pool (NHWC) and the reductions over one run of
// dimensions (squeeze-excitation's gradient, a split attention's H x W sum)
// ran as a thread per result: 0.61 ms for resnest14d's 32 x 56 x 56 x 256
// f16 mean, 0.43 ms for its 32 x 2 x 128 x 56 x 56 f32 sum over H x W (H100,
// session 30). This binary times, on the same data, the old kernels (the
// prelude's spatialMeanNHWC; for the row sums and the f32 pixel sums, the
// generic thread-per-result loop EmitCUDA.cpp prints, as kernels below) and
// the new ones as the description launches them (spatialSumTiles and, where
// the pixels split, spatialSumFinish; describeSpatialSum's lanes and splits
// at grid_limit 4224, block 256). Each shape: the new result against the old
// (largest difference relative to max(1, |old|)), then the median of 9
// single runs, each after an L2 flush, ms and GB/s of the bytes read.
//
// Built by hand (no ctest; the checks are kernels_check's):
//   nvcc -O3 -std=c++17 -arch=sm_90a -Ikernels -Iruntime/include \
//     -Iruntime/test runtime/test/spatial_mean_bench.cu \
//     -o /tmp/spatial_mean_bench
//   /tmp/spatial_mean_bench
// Exit 0, 1 when a new result differs beyond 1e-2 (f16) / 1e-4 (f32),
// 2 on a CUDA error, 3 without a GPU.
//
//===----------------------------------------------------------------------===//

#include "PoolingNHWC.cuh"
#include "SpatialSumLayout.h"

#include "GpuCheck.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <vector>

namespace {

/// The generic reduction cnnc printed for a sum over the middle of
/// outer x middle x inner with a thread per result (EmitCUDA.cpp's
/// "thread_per_result" loop, its index arithmetic simplified).
template <typename T, typename R>
__global__ void __launch_bounds__(256)
    threadPerResultSum(const T *x, R *y, int64_t outer, int64_t middle,
                       int64_t inner) {
  for (int64_t o = blockIdx.x * 256ll + threadIdx.x; o < outer * inner;
       o += (int64_t)gridDim.x * 256) {
    const T *b = x + (o / inner) * middle * inner + o % inner;
    float acc = 0.f;
    for (int64_t r = 0; r < middle; ++r)
      acc += ld(b + r * inner);
    st(y + o, acc * 1.0f);
  }
}

struct Launch {
  int lanes, splits;
  long long blocks;
};
/// describeSpatialSum's launch (kernels/SpatialSumLayout.h) at grid_limit
/// 4224 (132 SMs), block 256.
Launch describe(long long N, long long HW, long long C) {
  cnnc_kernels::SpatialSumLayout l =
      cnnc_kernels::spatialSumLayout(N, HW, C, C % 8 == 0, 4224, 256);
  return {(int)l.lanes, (int)l.splits, l.blocks()};
}

int failures = 0;

/// One shape: N x HW x C of T summed over HW into R (mean: divided by HW).
/// `old`: spatialMeanNHWC (the old global_avg_pool) or the generic loop.
template <typename T, typename R>
void run(const char *what, int N, int HW, int C, bool mean, bool oldIsPool,
         char *flush, size_t flushBytes) {
  size_t n = (size_t)N * HW * C, nc = (size_t)N * C;
  T *x;
  R *yOld, *yNew;
  double *scratch;
  CUDA_OK(cudaMalloc(&x, n * sizeof(T)));
  CUDA_OK(cudaMalloc(&yOld, nc * sizeof(R)));
  CUDA_OK(cudaMalloc(&yNew, nc * sizeof(R)));
  Launch d = describe(N, HW, C);
  CUDA_OK(cudaMalloc(&scratch, sizeof(double) * nc * d.splits));
  std::vector<T> h(n);
  for (size_t i = 0; i < n; ++i) {
    float v = (float)((i * 2654435761u) % 2001) / 1000.f - 1.f;
    if constexpr (std::is_same_v<T, __half>)
      h[i] = __float2half_rn(v);
    else
      h[i] = v;
  }
  CUDA_OK(cudaMemcpy(x, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  float divisor = mean ? (float)HW : 1.f;
  auto oldKernel = [&] {
    if constexpr (std::is_same_v<T, R>) {
      if (oldIsPool) {
        unsigned g = (unsigned)std::min<size_t>((nc + 255) / 256, 4224);
        spatialMeanNHWC<T><<<g, 256>>>(x, yOld, N, HW, C);
        return;
      }
    }
    unsigned g = (unsigned)std::min<size_t>((nc + 255) / 256, 4224);
    threadPerResultSum<T, R><<<g, 256>>>(x, yOld, N, HW, C);
  };
  auto newKernel = [&] {
    if (C % 8 == 0)
      spatialSumTiles<T, R, true><<<(unsigned)d.blocks, 256>>>(
          scratch, x, yNew, N, HW, C, d.lanes, d.splits, divisor);
    else
      spatialSumTiles<T, R, false><<<(unsigned)d.blocks, 256>>>(
          scratch, x, yNew, N, HW, C, d.lanes, d.splits, divisor);
    if (d.splits > 1)
      spatialSumFinish<R><<<(unsigned)std::min<size_t>((nc + 255) / 256,
                                                       4224),
                            256>>>(scratch, yNew, (int64_t)nc, d.splits,
                                   divisor);
  };
  oldKernel();
  newKernel();
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  bool half = std::is_same_v<R, __half>;
  std::vector<float> a = gpucheck::toHost(yOld, nc, half),
                     b = gpucheck::toHost(yNew, nc, half);
  double worst = 0;
  for (size_t i = 0; i < nc; ++i) {
    // The generic sums are not divided: compare means.
    double o = mean && !oldIsPool ? a[i] / HW : a[i];
    worst = std::max(worst, std::fabs(b[i] - o) / std::max(1.0, std::fabs(o)));
  }
  double tol = half ? 1e-2 : 1e-4;
  if (!(worst <= tol))
    ++failures;
  // One launch (or launch pair) after each L2 flush: the profile's case,
  // the tensor just written by another kernel, mostly not in L2.
  float tOld = gpucheck::medianAfterFlushMs(flush, flushBytes, oldKernel),
        tNew = gpucheck::medianAfterFlushMs(flush, flushBytes, newKernel);
  double mb = n * sizeof(T) / 1e6;
  std::printf("%-28s %5d %5d %5d %8.1f | old %8.4f ms %7.0f GB/s | new %8.4f "
              "ms %7.0f GB/s (lanes %d, splits %d, %lld blocks) | %6.1fx | "
              "diff %.2g%s\n",
              what, N, HW, C, mb, tOld, mb / tOld, tNew, mb / tNew, d.lanes,
              d.splits, d.blocks, tOld / tNew, worst,
              worst <= tol ? "" : " FAIL");
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(yOld));
  CUDA_OK(cudaFree(yNew));
  CUDA_OK(cudaFree(scratch));
}

} // namespace

int main() {
  if (gpucheck::skippedWithoutGpu("spatial_mean_bench"))
    return 3;
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const size_t flushBytes = size_t(256) << 20;
  char *flush;
  CUDA_OK(cudaMalloc(&flush, flushBytes));
  std::printf("%-28s %5s %5s %5s %8s\n", "shape (N x HW x C)", "N", "HW", "C",
              "MB read");
  // global_avg_pool, f16 NHWC: resnest14d's split attentions and its head,
  // an SE-ResNeXt stage, EfficientNet-B0's first SE (C = 32 at 112 x 112).
  run<__half, __half>("gap f16 (resnest layer1)", 32, 3136, 64, true, true,
                      flush, flushBytes);
  run<__half, __half>("gap f16 (resnest layer2)", 32, 3136, 128, true, true,
                      flush, flushBytes);
  run<__half, __half>("gap f16 (issue: 56x56x256)", 32, 3136, 256, true, true,
                      flush, flushBytes);
  run<__half, __half>("gap f16 (28x28x256)", 32, 784, 256, true, true, flush,
                      flushBytes);
  run<__half, __half>("gap f16 (14x14x512)", 32, 196, 512, true, true, flush,
                      flushBytes);
  run<__half, __half>("gap f16 (head 7x7x2048)", 32, 49, 2048, true, true,
                      flush, flushBytes);
  run<__half, __half>("gap f16 (effnet 112x112x32)", 32, 12544, 32, true,
                      true, flush, flushBytes);
  run<__half, __half>("gap f16 (C=100, scalar)", 32, 3136, 100, true, true,
                      flush, flushBytes);
  // "spatial_sum": squeeze-excitation's gate gradient (an f32 sum over the
  // NHWC pixels), resnest14d's split-attention gradient (f32 rows of
  // 56 x 56: 32 x 2 x 128 rows), GroupNorm(32)'s grouped f16 -> f32 means.
  run<float, float>("se grad f32 sum [1,2]", 32, 3136, 256, false, false,
                    flush, flushBytes);
  run<float, float>("rows f32 sum (resnest k87)", 8192, 3136, 1, false, false,
                    flush, flushBytes);
  run<__half, float>("rows f16->f32 mean (GN 32)", 1024, 25088, 1, true,
                     false, flush, flushBytes);
  CUDA_OK(cudaFree(flush));
  if (failures) {
    std::printf("spatial_mean_bench: %d shape(s) FAILED\n", failures);
    return 1;
  }
  std::printf("spatial_mean_bench: all results agree\n");
  return 0;
}
