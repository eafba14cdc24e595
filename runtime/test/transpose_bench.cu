//===- transpose_bench.cu - NHWC <-> NCHW transposes, old and new ---------===//
//
// Issue 37 / 32: resnetv2_50x1_bit's slowest launches (H200, session 31) are
// the cnn.transpose kernels around every GroupNorm's grouped statistics:
// 0.18 ms each on 32 x 56 x 56 x 256 f16 (51 MB read + 51 MB written,
// ~570 GB/s). This binary times, on the same data, the old kernel (the
// generic gather EmitCUDA.cpp's printGather prints: a thread per output
// element, its index arithmetic by constants, reads at a stride of C or
// H x W) and the new one (kernels/Transpose.cuh's batchedTranspose2D as
// describeTiledTranspose launches it: min(tiles, 32 x SMs) blocks of 256),
// both directions on BiT's GroupNorm shapes at batch 32. Each shape: the new
// result against the old (bitwise: a copy), then the median of 9 single
// runs, each after an L2 flush, ms and GB/s of the bytes read and written.
//
// Built by hand (no ctest; the checks are kernels_check's):
//   nvcc -O3 -std=c++17 -arch=sm_90a -Ikernels -Iruntime/include \
//     -Iruntime/test runtime/test/transpose_bench.cu -o /tmp/transpose_bench
//   /tmp/transpose_bench
// Exit 0, 1 when a new result differs from the old, 2 on a CUDA error, 3
// without a GPU.
//
//===----------------------------------------------------------------------===//

#include "Transpose.cuh"

#include "GpuCheck.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

/// The gather cnnc prints for out[b][c][r] = in[b][r][c] (printGather over
/// the result's dimensions, innermost first, the sizes and strides printed
/// as constants).
template <typename T, int64_t B, int64_t R, int64_t C>
__global__ void __launch_bounds__(256)
    genericTranspose(const T *__restrict__ in, T *__restrict__ out) {
  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < B * R * C;
       i += (int64_t)gridDim.x * 256) {
    int64_t rem = i, src = 0;
    src += (rem % R) * C;
    rem /= R;
    src += (rem % C) * 1;
    rem /= C;
    src += (rem % B) * (R * C);
    out[i] = in[src];
  }
}

int failures = 0;

/// One shape: batch x rows x cols of T, transposed to batch x cols x rows.
template <typename T, int64_t B, int64_t R, int64_t C>
void run(const char *what, int sms, char *flush, size_t flushBytes) {
  const size_t n = (size_t)(B * R * C);
  T *x, *yOld, *yNew;
  CUDA_OK(cudaMalloc(&x, n * sizeof(T)));
  CUDA_OK(cudaMalloc(&yOld, n * sizeof(T)));
  CUDA_OK(cudaMalloc(&yNew, n * sizeof(T)));
  std::vector<T> h(n);
  for (size_t i = 0; i < n; ++i) {
    float v = (float)((i * 2654435761u) % 2001) / 1000.f - 1.f;
    if constexpr (std::is_same_v<T, __half>)
      h[i] = __float2half_rn(v);
    else
      h[i] = v;
  }
  CUDA_OK(cudaMemcpy(x, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  const int64_t gridLimit = 32ll * sms;
  const int64_t tiles = B * ((R + 31) / 32) * ((C + 31) / 32);
  const unsigned gOld =
      (unsigned)std::min<int64_t>(((int64_t)n + 255) / 256, gridLimit);
  const unsigned gNew = (unsigned)std::min<int64_t>(tiles, gridLimit);
  auto oldKernel = [&] {
    genericTranspose<T, B, R, C><<<gOld, 256>>>(x, yOld);
  };
  auto newKernel = [&] {
    batchedTranspose2D<T><<<gNew, 256>>>(x, yNew, B, R, C);
  };
  oldKernel();
  newKernel();
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<T> a(n), b(n);
  CUDA_OK(cudaMemcpy(a.data(), yOld, n * sizeof(T), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(b.data(), yNew, n * sizeof(T), cudaMemcpyDeviceToHost));
  bool same = std::memcmp(a.data(), b.data(), n * sizeof(T)) == 0;
  if (!same)
    ++failures;
  float tOld = gpucheck::medianAfterFlushMs(flush, flushBytes, oldKernel),
        tNew = gpucheck::medianAfterFlushMs(flush, flushBytes, newKernel);
  double mb = 2.0 * n * sizeof(T) / 1e6; // read + written
  std::printf("%-30s %3lld %5lld %5lld %7.1f | old %7.4f ms %5.0f GB/s | new "
              "%7.4f ms %5.0f GB/s (%u blocks) | %5.2fx%s\n",
              what, (long long)B, (long long)R, (long long)C, mb, tOld,
              mb / tOld, tNew, mb / tNew, gNew, tOld / tNew,
              same ? "" : " FAIL (results differ)");
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(yOld));
  CUDA_OK(cudaFree(yNew));
}

} // namespace

int main() {
  if (gpucheck::skippedWithoutGpu("transpose_bench"))
    return 3;
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const int sms = prop.multiProcessorCount;
  const size_t flushBytes = size_t(256) << 20;
  char *flush;
  CUDA_OK(cudaMalloc(&flush, flushBytes));
  std::printf("%-30s %3s %5s %5s %7s\n", "shape (batch x rows x cols)", "N",
              "rows", "cols", "MB r+w");
  // NHWC -> NCHW (rows H x W, columns C) and back, f16, batch 32: BiT's
  // GroupNorm tensors (the issue's 56 x 56 x 256 and 28 x 28 x 512, the
  // bottlenecks' narrower ones, the last stage's 7 x 7).
  run<__half, 32, 3136, 256>("f16 nhwc->nchw 56x56x256", sms, flush,
                             flushBytes);
  run<__half, 32, 256, 3136>("f16 nchw->nhwc 56x56x256", sms, flush,
                             flushBytes);
  run<__half, 32, 3136, 64>("f16 nhwc->nchw 56x56x64", sms, flush,
                            flushBytes);
  run<__half, 32, 64, 3136>("f16 nchw->nhwc 56x56x64", sms, flush,
                            flushBytes);
  run<__half, 32, 784, 512>("f16 nhwc->nchw 28x28x512", sms, flush,
                            flushBytes);
  run<__half, 32, 512, 784>("f16 nchw->nhwc 28x28x512", sms, flush,
                            flushBytes);
  run<__half, 32, 784, 128>("f16 nhwc->nchw 28x28x128", sms, flush,
                            flushBytes);
  run<__half, 32, 196, 1024>("f16 nhwc->nchw 14x14x1024", sms, flush,
                             flushBytes);
  run<__half, 32, 1024, 196>("f16 nchw->nhwc 14x14x1024", sms, flush,
                             flushBytes);
  run<__half, 32, 49, 2048>("f16 nhwc->nchw 7x7x2048", sms, flush,
                            flushBytes);
  run<__half, 32, 2048, 49>("f16 nchw->nhwc 7x7x2048", sms, flush,
                            flushBytes);
  // f32 (an f32 step's GroupNorm).
  run<float, 32, 3136, 256>("f32 nhwc->nchw 56x56x256", sms, flush,
                            flushBytes);
  run<float, 32, 256, 3136>("f32 nchw->nhwc 56x56x256", sms, flush,
                            flushBytes);
  CUDA_OK(cudaFree(flush));
  if (failures) {
    std::printf("transpose_bench: %d shape(s) FAILED\n", failures);
    return 1;
  }
  std::printf("transpose_bench: all results equal\n");
  return 0;
}
