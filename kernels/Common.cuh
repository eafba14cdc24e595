//===- Common.cuh - device helpers shared by every family -----------------===//
//
// Loads and stores through f32 (ld/st, eight at a time: ldv8/stv8), the
// rounding a stored tensor sees (roundAs), the fused BN-ReLU gradient's mask
// and the block-wide sum and maximum. Its prelude part also opens the
// anonymous namespace that the whole prelude lives in (EmbedPrelude.cmake
// closes it after the last family).
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_COMMON_CUH
#define CNNC_KERNELS_COMMON_CUH

// cnnc-prelude-begin
// ---- cnnc kernel prelude: device helpers and shape-generic kernels ----
// (emitted verbatim at the top of every model.cu by lib/Target/CUDA)
#include "cnnrt/cnnrt.h"
#pragma nv_diag_suppress 177 // prelude helpers a model does not use
#include <cstdint>
#include <cuda_fp16.h>

namespace {
template <typename T> inline T *P(char *a, size_t o) {
  return reinterpret_cast<T *>(a + o);
}
__device__ __forceinline__ float ld(const float *p) { return *p; }
__device__ __forceinline__ float ld(const __half *p) {
  return __half2float(*p);
}
__device__ __forceinline__ float ld(const int32_t *p) { return (float)*p; }
__device__ __forceinline__ float ld(const int64_t *p) { return (float)*p; }
__device__ __forceinline__ void st(float *p, float v) { *p = v; }
__device__ __forceinline__ void st(__half *p, float v) {
  *p = __float2half_rn(v);
}
// v rounded to T and back: what a T tensor holds after st(v).
__device__ __forceinline__ float roundAs(const float *, float v) { return v; }
__device__ __forceinline__ float roundAs(const __half *, float v) {
  return __half2float(__float2half_rn(v));
}
// The ReLU mask of fused_batch_norm(_affine)_relu_grad at element i of
// channel c: the stored output y > 0, or (y null) the forward's
// normalization x * alpha + beta, rounded to T as y was, > 0.
template <typename T>
__device__ __forceinline__ bool reluMask(const T *y, float x,
                                         const float *alpha, const float *beta,
                                         int64_t i, int c) {
  return y ? ld(y + i) > 0.f : roundAs(y, x * alpha[c] + beta[c]) > 0.f;
}

// Eight consecutive elements as f32 (16-byte aligned pointers).
__device__ __forceinline__ void ldv8(const float *p, float *v) {
  float4 a = *reinterpret_cast<const float4 *>(p),
         b = *reinterpret_cast<const float4 *>(p + 4);
  v[0] = a.x;
  v[1] = a.y;
  v[2] = a.z;
  v[3] = a.w;
  v[4] = b.x;
  v[5] = b.y;
  v[6] = b.z;
  v[7] = b.w;
}
__device__ __forceinline__ void ldv8(const __half *p, float *v) {
  uint4 u = *reinterpret_cast<const uint4 *>(p);
  const __half2 *h = reinterpret_cast<const __half2 *>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float2 f = __half22float2(h[k]);
    v[2 * k] = f.x;
    v[2 * k + 1] = f.y;
  }
}
__device__ __forceinline__ void stv8(float *p, const float *v) {
  *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
  *reinterpret_cast<float4 *>(p + 4) = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ void stv8(__half *p, const float *v) {
  uint4 u;
  __half2 *h = reinterpret_cast<__half2 *>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k)
    h[k] = __floats2half2_rn(v[2 * k], v[2 * k + 1]);
  *reinterpret_cast<uint4 *>(p) = u;
}

// Block-wide sum in double (blockDim.x a multiple of 32, at most 1024).
__device__ double blockSum(double v) {
  __shared__ double warpSums[32];
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    warpSums[warp] = v;
  __syncthreads();
  double s = 0;
  if (warp == 0) {
    s = lane < (int)(blockDim.x >> 5) ? warpSums[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1)
      s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0)
      warpSums[0] = s;
  }
  __syncthreads();
  return warpSums[0];
}
__device__ float blockMax(float v) {
  __shared__ float warpMax[32];
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    warpMax[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float m = lane < (int)(blockDim.x >> 5) ? warpMax[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1)
      m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, o));
    if (lane == 0)
      warpMax[0] = m;
  }
  __syncthreads();
  return warpMax[0];
}
// The flat index i of an element of an N x C x Y x X (NCHW) or N x Y x X x C
// (NHWC) tensor as (n, c, y, x), and the offset of (n, c, y, x): pooling's
// and resizing's index arithmetic.
__device__ __forceinline__ void layoutIndex(int C, bool nhwc, int64_t i,
                                            int64_t &n, int &c, int &y, int &x,
                                            int Y, int X) {
  if (nhwc) {
    c = i % C;
    x = (i / C) % X;
    y = (i / ((int64_t)C * X)) % Y;
    n = i / ((int64_t)C * X * Y);
  } else {
    x = i % X;
    y = (i / X) % Y;
    c = (i / ((int64_t)X * Y)) % C;
    n = i / ((int64_t)X * Y * C);
  }
}
__device__ __forceinline__ int64_t layoutAt(int C, bool nhwc, int64_t n, int c,
                                            int y, int x, int Y, int X) {
  return nhwc ? ((n * Y + y) * X + x) * C + c
              : ((n * C + c) * Y + y) * (int64_t)X + x;
}
// cnnc-prelude-end
} // namespace

#endif // CNNC_KERNELS_COMMON_CUH
