//===- GpuCheck.cuh - helpers shared by the cuDNN probes/checks -----------===//
//
// What cudnn_fusion_check.cu and dgrad_stats_check.cu both need: a CUDA
// error check that exits, deterministic f16 fills, copies back to the host,
// one relative error per tensor and event timing loops (the benches'
// median after an L2 flush too).
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_TEST_GPUCHECK_CUH
#define CNNRT_TEST_GPUCHECK_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA_OK(x)                                                             \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,          \
                   cudaGetErrorString(e_));                                    \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

namespace gpucheck {

/// p[i] = (hash(i, seed) in [-0.5, 0.5]) * scale + offset, as f16.
__global__ void fillHalf(__half *p, size_t n, unsigned seed, float scale,
                         float offset) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned v = (unsigned)(i * 2654435761u) ^ seed;
    v ^= v >> 13;
    v *= 0x5bd1e995;
    v ^= v >> 15;
    p[i] = __float2half(((v & 0xffff) / 65535.0f - 0.5f) * scale + offset);
  }
}

/// n elements of a device tensor (f16 when `half`, else f32) as floats.
inline std::vector<float> toHost(const void *p, size_t n, bool half) {
  std::vector<float> out(n);
  if (half) {
    std::vector<__half> h(n);
    CUDA_OK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i)
      out[i] = __half2float(h[i]);
  } else {
    CUDA_OK(cudaMemcpy(out.data(), p, n * 4, cudaMemcpyDeviceToHost));
  }
  return out;
}

/// max |a - b| / (max |b| + eps): one relative number per tensor.
inline double relErr(const std::vector<float> &a, const std::vector<float> &b) {
  double m = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, (double)std::fabs(a[i] - b[i]));
    ref = std::max(ref, (double)std::fabs(b[i]));
  }
  return m / (ref + 1e-6);
}

/// The mean time of `fn` over 20 runs after one warm-up, in ms.
template <typename F> float timeMs(F fn) {
  fn();
  CUDA_OK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  const int iters = 20;
  for (int i = 0; i < iters; ++i)
    fn();
  cudaEventRecord(e1);
  CUDA_OK(cudaEventSynchronize(e1));
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms / iters;
}

/// The median time of `fn` over `runs` single runs in ms, each after
/// writing `flushBytes` at `flush` (more than the L2), so that its inputs
/// come from HBM as a tensor just written by another kernel mostly does.
template <typename F>
float medianAfterFlushMs(void *flush, size_t flushBytes, F fn, int runs = 9) {
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  std::vector<float> t;
  for (int k = 0; k < runs; ++k) {
    CUDA_OK(cudaMemsetAsync(flush, k, flushBytes));
    CUDA_OK(cudaEventRecord(e0));
    fn();
    CUDA_OK(cudaEventRecord(e1));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// True (after printing "<program>: no GPU: SKIPPED") where no CUDA device
/// is visible: the GPU tests and benches then exit 3, ctest's
/// SKIP_RETURN_CODE, so a machine without a GPU reports them skipped.
inline bool skippedWithoutGpu(const char *program) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0)
    return false;
  std::printf("%s: no GPU: SKIPPED\n", program);
  std::fflush(stdout);
  return true;
}

/// Prints the current device (name, SMs, L2) and its HBM peak, and returns
/// the peak in bytes/s: memory clock x bus width x 2 (DDR). The benches'
/// GB/s and % of peak are against it.
inline double printDeviceHbmPeak() {
  int dev = 0, clockKHz = 0, busBits = 0;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaDeviceGetAttribute(&clockKHz, cudaDevAttrMemoryClockRate, dev));
  CUDA_OK(
      cudaDeviceGetAttribute(&busBits, cudaDevAttrGlobalMemoryBusWidth, dev));
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  double peak = 2.0 * clockKHz * 1e3 * busBits / 8; // bytes/s, DDR
  std::printf("%s, %d SMs, L2 %d MiB, HBM peak %.0f GB/s (memory clock %d "
              "MHz x %d bits x 2)\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
              peak / 1e9, clockKHz / 1000, busBits);
  return peak;
}

} // namespace gpucheck

#endif // CNNRT_TEST_GPUCHECK_CUH
