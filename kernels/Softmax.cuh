//===- Softmax.cuh - softmax over one dimension ---------------------------===//
//
// One block per row, or one thread per (outer, inner) pair.
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_SOFTMAX_CUH
#define CNNC_KERNELS_SOFTMAX_CUH

#include "Common.cuh"

namespace {
// cnnc-prelude-begin
// Softmax over the last dimension: one block per row.
template <typename T> __global__ void softmaxRows(const T *x, T *y, int cols) {
  const T *xr = x + (int64_t)blockIdx.x * cols;
  T *yr = y + (int64_t)blockIdx.x * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    m = fmaxf(m, ld(xr + c));
  m = blockMax(m);
  double s = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    s += expf(ld(xr + c) - m);
  s = blockSum(s);
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    st(yr + c, expf(ld(xr + c) - m) / (float)s);
}

// Softmax over a dimension that is not the innermost (outer x n x inner,
// inner > 1: split attention's radix, a channel softmax): one thread per
// (outer, inner) pair walks the n elements `inner` apart, so a warp reads
// 32 adjacent addresses. f32 math, the storage type T for x and y.
template <typename T>
__global__ void softmaxStrided(const T *x, T *y, int64_t outer, int n,
                               int64_t inner) {
  for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
       r < outer * inner; r += (int64_t)gridDim.x * blockDim.x) {
    int64_t base = (r / inner) * n * inner + r % inner;
    const T *xr = x + base;
    T *yr = y + base;
    float m = -INFINITY;
    for (int k = 0; k < n; ++k)
      m = fmaxf(m, ld(xr + k * inner));
    float s = 0;
    for (int k = 0; k < n; ++k)
      s += expf(ld(xr + k * inner) - m);
    for (int k = 0; k < n; ++k)
      st(yr + k * inner, expf(ld(xr + k * inner) - m) / s);
  }
}
// cnnc-prelude-end
} // namespace

#endif // CNNC_KERNELS_SOFTMAX_CUH
