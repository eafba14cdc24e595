//===- PoolingNHWC.cuh - pooling in the NHWC layout -----------------------===//
//
// The eight-channel (16-byte) forms of max pooling on N x H x W x C
// (Pooling.cuh's kernels take either layout), the recorded-index gradient
// and its fusion with the BN gradient (sums through a scratch
// buffer the caller passes), and the
// NHWC global average pool (spatialMeanNHWC, and spatialSumTiles: a block
// per image, channel chunk and pixel split).
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_POOLING_NHWC_CUH
#define CNNC_KERNELS_POOLING_NHWC_CUH

#include "Common.cuh"
#include "Pooling.cuh"
#include "Reductions.cuh"

namespace {
// cnnc-prelude-begin
// NHWC max pooling with C % 8 == 0: eight channels per thread with 16-byte
// loads and stores, the same comparisons per channel as the kernels above.
// ARG = false: max_pool2d (y). ARG = true: fused_max_pool2d (y and the
// window index arg; PRO: with its prologue relu(x * scale + shift) per
// channel, rounded to T). I: the index type. The pixel coordinates come from
// divisions of the flat index, and 64-bit divisions made these kernels
// instruction-bound (the stem's gather took 0.351 ms for 282 MB of traffic
// on the H100): the kernels below divide in 32 bits whenever the tensor
// allows.
// Element i of an N x Y x X x C/8 grid of eight-channel groups as (n, y, x,
// c8), with I-bit divisions (each quotient's remainder by multiplication).
template <typename I>
__device__ __forceinline__ void nhwc8Index(I i, I C8, I X, I Y, I &n, int &y,
                                           int &x, int &c8) {
  I rest = i / C8;
  c8 = (int)(i - rest * C8);
  I rest2 = rest / X;
  x = (int)(rest - rest2 * X);
  n = rest2 / Y;
  y = (int)(rest2 - n * Y);
}
template <typename T, bool ARG, bool PRO, typename I>
__device__ __forceinline__ void
maxPoolNHWC8Body(const T *x, const float *scale, const float *shift, T *y,
                 uint8_t *arg, const PoolParams &p, I total) {
  const I C8 = p.C / 8, P = p.P, Q = p.Q;
  for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
       i += (I)gridDim.x * blockDim.x) {
    I n;
    int pp, q, c8;
    nhwc8Index(i, C8, Q, P, n, pp, q, c8);
    const T *xn = x + (int64_t)n * p.H * p.W * p.C + c8 * 8;
    float m[8], v[8], sc[8], sh[8];
    int a[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      m[e] = -INFINITY;
      a[e] = 255;
      if (PRO) {
        sc[e] = scale[c8 * 8 + e];
        sh[e] = shift[c8 * 8 + e];
      }
    }
    poolTaps(p, pp, q, [&](int kh, int kw, int h, int w) {
      ldv8(xn + ((int64_t)h * p.W + w) * p.C, v);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (PRO)
          v[e] = roundAs(x, fmaxf(v[e] * sc[e] + sh[e], 0.f));
        if (ARG) {
          if (v[e] > m[e] || (isnan(v[e]) && !isnan(m[e]))) {
            m[e] = v[e];
            a[e] = kh * p.KW + kw;
          }
        } else if (v[e] > m[e] || isnan(v[e])) {
          m[e] = v[e];
        }
      }
    });
    stv8(y + (int64_t)i * 8, m);
    if (ARG) {
      uint2 u;
      uint8_t *b = reinterpret_cast<uint8_t *>(&u);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        b[e] = (uint8_t)a[e];
      *reinterpret_cast<uint2 *>(arg + (int64_t)i * 8) = u;
    }
  }
}
template <typename T, bool ARG>
__global__ void maxPoolNHWC8(const T *x, T *y, uint8_t *arg, PoolParams p) {
  int64_t total = (int64_t)p.N * p.P * p.Q * (p.C / 8);
  if (total + (int64_t)gridDim.x * blockDim.x <= INT32_MAX)
    maxPoolNHWC8Body<T, ARG, false, int32_t>(x, nullptr, nullptr, y, arg, p,
                                             (int32_t)total);
  else
    maxPoolNHWC8Body<T, ARG, false, int64_t>(x, nullptr, nullptr, y, arg, p,
                                             total);
}
template <typename T, bool PRO>
__global__ void maxPoolIndexNHWC8(const T *x, const float *scale,
                                  const float *shift, T *y, uint8_t *arg,
                                  PoolParams p) {
  int64_t total = (int64_t)p.N * p.P * p.Q * (p.C / 8);
  if (total + (int64_t)gridDim.x * blockDim.x <= INT32_MAX)
    maxPoolNHWC8Body<T, true, PRO, int32_t>(x, scale, shift, y, arg, p,
                                            (int32_t)total);
  else
    maxPoolNHWC8Body<T, true, PRO, int64_t>(x, scale, shift, y, arg, p, total);
}
// max_pool2d_index_grad's sums at input pixel (n, h, w), channels c..c+7
// (NHWC, C % 8 == 0), unrounded: each window's gradient where the window's
// recorded first maximum is this pixel, windows in row order. A pixel lies
// in at most 2 x 2 windows when the kernel is at most twice the stride
// (ResNet's 3x3/2): then all the index and gradient loads are issued before
// any is used (one dependent load after another left the gather latency-
// bound at ~3x its bandwidth time).
template <typename T>
__device__ __forceinline__ void
poolIndexGradAt8(const T *dy, const uint8_t *arg, const PoolParams &p,
                 int64_t n, int h, int w, int c, float *g) {
  const PoolWindows r = poolWindows(p, h, w);
  const int p0 = r.p0, p1 = r.p1, q0 = r.q0, q1 = r.q1;
  float d[8];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    g[e] = 0.f;
  if (p1 - p0 <= 1 && q1 - q0 <= 1) {
    uint2 u[2][2];
    float v[2][2][8];
#pragma unroll
    for (int a = 0; a < 2; ++a)
#pragma unroll
      for (int b = 0; b < 2; ++b)
        if (p0 + a <= p1 && q0 + b <= q1) {
          int64_t o = ((n * p.P + p0 + a) * p.Q + q0 + b) * p.C + c;
          u[a][b] = *reinterpret_cast<const uint2 *>(arg + o);
          ldv8(dy + o, v[a][b]); // 16 (f16) or 32 (f32) bytes
        }
#pragma unroll
    for (int a = 0; a < 2; ++a)
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        if (p0 + a > p1 || q0 + b > q1)
          continue;
        const uint8_t *idx = reinterpret_cast<const uint8_t *>(&u[a][b]);
        int mine = (h - ((p0 + a) * p.SH - p.PT)) * p.KW +
                   (w - ((q0 + b) * p.SW - p.PL));
#pragma unroll
        for (int e = 0; e < 8; ++e)
          if (idx[e] == mine)
            g[e] += v[a][b][e];
      }
    return;
  }
  for (int pp = p0; pp <= p1; ++pp)
    for (int q = q0; q <= q1; ++q) {
      int64_t o = ((n * p.P + pp) * p.Q + q) * p.C + c;
      uint2 u = *reinterpret_cast<const uint2 *>(arg + o);
      const uint8_t *b = reinterpret_cast<const uint8_t *>(&u);
      int kh = h - (pp * p.SH - p.PT), kw = w - (q * p.SW - p.PL);
      int mine = kh * p.KW + kw;
      bool any = false;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        any |= b[e] == mine;
      if (!any)
        continue;
      ldv8(dy + o, d);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (b[e] == mine)
          g[e] += d[e];
    }
}
// max_pool2d_index_grad, NHWC with C % 8 == 0, eight channels per thread.
template <typename T, typename I>
__device__ __forceinline__ void
maxPoolBwdGatherNHWC8Body(const T *dy, const uint8_t *arg, T *dx,
                          const PoolParams &p, I total) {
  const I C8 = p.C / 8, W = p.W, H = p.H;
  for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
       i += (I)gridDim.x * blockDim.x) {
    I n;
    int h, w, c8;
    nhwc8Index(i, C8, W, H, n, h, w, c8);
    float g[8];
    poolIndexGradAt8(dy, arg, p, (int64_t)n, h, w, c8 * 8, g);
    stv8(dx + (int64_t)i * 8, g);
  }
}
template <typename T>
__global__ void maxPoolBwdGatherNHWC8(const T *dy, const uint8_t *arg, T *dx,
                                      PoolParams p) {
  int64_t total = (int64_t)p.N * p.H * p.W * (p.C / 8);
  if (total + (int64_t)gridDim.x * blockDim.x <= INT32_MAX)
    maxPoolBwdGatherNHWC8Body<T, int32_t>(dy, arg, dx, p, (int32_t)total);
  else
    maxPoolBwdGatherNHWC8Body<T, int64_t>(dy, arg, dx, p, total);
}

// fused_max_pool2d_batch_norm_relu_grad (NHWC, C % 8 == 0): dy is the
// pooling gradient poolIndexGradAt8 gathers at each pixel, rounded to T as
// max_pool2d_index_grad stored it; the ReLU mask is round(x * alpha + beta)
// > 0 as in fused_batch_norm_affine_relu_grad. Pass 1: that op's sums
// (nhwcPartial8's MODE 4, one row = one pixel) into `scratch` for
// nhwcBnGradFinish, in f32 chunks as Reductions.cuh's nhwcBnGradSums8: each
// thread adds CHUNK of its rows (g, g * (x - mean)) in f32, then the chunk
// to its f64 sums (instead of a conversion to f64 per element; not yet
// measured on a GPU); invstd multiplies the f64 sum once at the end. Same
// fixed order every run.
template <typename T>
__global__ void __launch_bounds__(256)
    poolBnGradPartial8(double *scratch, const T *dy, const uint8_t *arg,
                       const T *x, const float *mean, const float *invstd,
                       const float *alpha, const float *beta, PoolParams p,
                       int64_t rowsPerTile) {
  constexpr int CHUNK = 8;
  __shared__ double sh[2][256][8];
  const int CV = blockDim.x, RY = blockDim.y, C = p.C;
  const int64_t M = (int64_t)p.N * p.H * p.W;
  int c = (blockIdx.x * CV + threadIdx.x) * 8;
  int64_t r0 = blockIdx.y * rowsPerTile, r1 = min(M, r0 + rowsPerTile);
  double s[2][8];
  double *s0 = s[0], *s1 = s[1];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    s0[e] = s1[e] = 0;
  if (c < C) {
    float mu[8], al[8], be[8];
    channels8(mean, c, mu);
    channels8(alpha, c, al);
    channels8(beta, c, be);
    for (int64_t r = r0 + threadIdx.y; r < r1; r += CHUNK * RY) {
      float f0[8], f1[8];
#pragma unroll
      for (int e = 0; e < 8; ++e)
        f0[e] = f1[e] = 0.f;
      for (int j = 0; j < CHUNK; ++j) {
        int64_t rj = r + (int64_t)j * RY;
        if (rj >= r1)
          break;
        // Rows (pixels) of one step fit 32 bits (cheaper divisions).
        int nh = (int)rj / p.W, n = nh / p.H;
        int w = (int)rj - nh * p.W, h = nh - n * p.H;
        float g[8], u[8];
        poolIndexGradAt8(dy, arg, p, n, h, w, c, g);
        ldv8(x + rj * C + c, u);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          float v = roundAs(dy, g[e]);
          if (!(roundAs(x, u[e] * al[e] + be[e]) > 0.f))
            v = 0.f;
          f0[e] += v;
          f1[e] = fmaf(v, u[e] - mu[e], f1[e]);
        }
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        s0[e] += f0[e];
        s1[e] += f1[e];
      }
    }
    float is[8];
    channels8(invstd, c, is);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      s1[e] *= is[e];
  }
  nhwcTileSums8(scratch, s, sh, C, 2);
}
// Pass 2: dx = scale * invstd * (g - sum(g) / m - xhat * sum(g xhat) / m)
// (batch_norm_grad's expression) with g as in pass 1, m = N * H * W.
template <typename T, typename S>
__global__ void
poolBnGradApply8(const T *dy, const uint8_t *arg, const T *x, const float *mean,
                 const float *invstd, const S *scale, const S *gradScale,
                 const S *gradBias, const float *alpha, const float *beta,
                 T *dx, PoolParams p, float m) {
  // One thread per eight channels of a pixel; 32-bit index math (the
  // emitter launches this kernel only where N * H * W * C / 8 fits). 1 / m
  // once: two f32 divisions an element are a slow path of a dozen
  // instructions each.
  const int C8 = p.C / 8, total = p.N * p.H * p.W * C8;
  const float rm = 1.f / m;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += gridDim.x * blockDim.x) {
    int r = i / C8, nh = r / p.W, n = nh / p.H;
    int c = (i - r * C8) * 8, w = r - nh * p.W, h = nh - n * p.H;
    float g[8], u[8], o[8];
    poolIndexGradAt8(dy, arg, p, n, h, w, c, g);
    ldv8(x + (int64_t)r * p.C + c, u);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      int k = c + e;
      float v = roundAs(dy, g[e]);
      if (!(roundAs(x, u[e] * alpha[k] + beta[k]) > 0.f))
        v = 0.f;
      float xhat = (u[e] - mean[k]) * invstd[k];
      o[e] = ld(scale + k) * invstd[k] *
             (v - ld(gradBias + k) * rm - xhat * ld(gradScale + k) * rm);
    }
    stv8(dx + (int64_t)i * 8, o);
  }
}

// global_avg_pool on N x HW x C: one thread per (n, c); a warp reads 32
// adjacent channels of one pixel.
template <typename T>
__global__ void spatialMeanNHWC(const T *x, T *y, int64_t N, int64_t HW,
                                int64_t C) {
  for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < N * C;
       r += (int64_t)gridDim.x * blockDim.x) {
    int64_t n = r / C, c = r % C;
    const T *xn = x + n * HW * C + c;
    float s = 0;
    for (int64_t j = 0; j < HW; ++j)
      s += ld(xn + j * C);
    st(y + r, s / (float)HW);
  }
}
// global_avg_pool on N x HW x C with a block per (image, chunk of channels,
// split of the pixels): spatialMeanNHWC's N x C threads each add HW pixels in
// sequence, too few threads in flight to read HBM at speed (32 x 56 x 56 x 256
// f16 took 0.61 ms on the H100, ~84 GB/s). The block's threads are `lanes`
// across channels (V of them each: 8 with 16-byte loads where C % 8 == 0,
// else 1; consecutive lanes, consecutive channels) times `rows` across pixels
// (the largest power of two of at most blockDim.x / lanes):
// blockIdx.x = (n * chunks + chunk) * splits + s, chunk = lanes * V channels,
// split s the pixels [s * tile, (s + 1) * tile) of tile = ceil(HW / splits).
// Each thread adds its pixels row, row + rows, ... in f32, in pixel order,
// U of them in flight; the block adds its rows in a fixed shared-memory tree.
// splits == 1: the block writes sum / divisor (HW for the mean) as R; else
// the split's f32 sum goes to scratch[(s * N + n) * C + c], and
// spatialSumFinish adds the splits in order. Deterministic, no atomics.
template <typename T, typename R, bool VEC8>
__global__ void __launch_bounds__(256)
    spatialSumTiles(double *scratch, const T *x, R *y, int N, int HW, int C,
                    int lanes, int splits, float divisor) {
  // U pixels of loads in flight a thread: one 16-byte load each, or one
  // element each in the scalar form (twice as many of those).
  constexpr int V = VEC8 ? 8 : 1, U = VEC8 ? 4 : 8;
  __shared__ float sh[256 * V];
  // rows: the largest power of two of at most blockDim.x / lanes (the
  // tree below halves it); threads past rows x lanes only join the barriers.
  int rows = 1;
  while (rows * 2 * lanes <= (int)blockDim.x)
    rows *= 2;
  const int lane = threadIdx.x % lanes, row = threadIdx.x / lanes;
  const int chunks = (C + lanes * V - 1) / (lanes * V);
  const int s = blockIdx.x % splits, nc = blockIdx.x / splits;
  const int n = nc / chunks, c = (nc % chunks * lanes + lane) * V;
  const int tile = (HW + splits - 1) / splits;
  const int p1 = min(HW, (s + 1) * tile);
  float acc[V];
#pragma unroll
  for (int e = 0; e < V; ++e)
    acc[e] = 0.f;
  if (row < rows && c < C) {
    const T *xc = x + (int64_t)n * HW * C + c;
    // Every round issues its U loads before adding (the last round's
    // pixels past the split add 0: the sum and its order are unchanged).
    for (int p = s * tile + row; p < p1; p += U * rows) {
      float v[U][V];
#pragma unroll
      for (int q = 0; q < U; ++q) {
        const int pq = p + q * rows;
        if (pq >= p1) {
#pragma unroll
          for (int e = 0; e < V; ++e)
            v[q][e] = 0.f;
        } else if (VEC8) {
          ldv8(xc + (int64_t)pq * C, v[q]);
        } else {
          v[q][0] = ld(xc + (int64_t)pq * C);
        }
      }
#pragma unroll
      for (int q = 0; q < U; ++q)
#pragma unroll
        for (int e = 0; e < V; ++e)
          acc[e] += v[q][e];
    }
  }
  // Row r < half adds row r + half (not written in this round).
#pragma unroll
  for (int e = 0; e < V; ++e)
    sh[threadIdx.x * V + e] = acc[e];
  __syncthreads();
  for (int half = rows / 2; half > 0; half /= 2) {
    if (row < half) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        acc[e] += sh[(threadIdx.x + half * lanes) * V + e];
        sh[threadIdx.x * V + e] = acc[e];
      }
    }
    __syncthreads();
  }
  if (row != 0 || c >= C)
    return;
#pragma unroll
  for (int e = 0; e < V; ++e) {
    if (splits == 1)
      st(y + (int64_t)n * C + c + e, acc[e] / divisor);
    else
      scratch[((int64_t)s * N + n) * C + c + e] = acc[e];
  }
}
// spatialSumTiles' second pass where splits > 1: result i = (n, c) adds its
// splits' sums in split order (f32), then divides by `divisor`.
template <typename R>
__global__ void spatialSumFinish(const double *scratch, R *y, int64_t NC,
                                 int splits, float divisor) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < NC;
       i += (int64_t)gridDim.x * blockDim.x) {
    float s = 0.f;
    for (int k = 0; k < splits; ++k)
      s += (float)scratch[k * NC + i];
    st(y + i, s / divisor);
  }
}
// ---- end of NHWC ----
// cnnc-prelude-end
} // namespace

#endif // CNNC_KERNELS_POOLING_NHWC_CUH
