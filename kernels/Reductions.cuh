//===- Reductions.cuh - row means, NHWC per-channel reductions ------------===//
//
// rowMean, and the two-pass deterministic per-channel reductions of the NHWC
// layout: partial sums per tile into a scratch buffer, then one block per
// channel finishes bias_grad, reduce_mean, the BN statistics, the split
// fused_conv2d_stats, batch_norm_grad and the dual BN gradient.
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_REDUCTIONS_CUH
#define CNNC_KERNELS_REDUCTIONS_CUH

#include "BatchNorm.cuh"
#include "Common.cuh"

namespace {
// cnnc-prelude-begin
// Mean over the HW trailing elements of each of `rows` rows.
template <typename T>
__global__ void rowMean(const T *x, T *y, int64_t rows, int64_t HW) {
  for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows;
       r += (int64_t)gridDim.x * blockDim.x) {
    float s = 0;
    for (int64_t j = 0; j < HW; ++j)
      s += ld(x + r * HW + j);
    st(y + r, s / (float)HW);
  }
}

// ---- NHWC (cnn-layout): the channel is the innermost dimension ----
// Per-channel reductions view the tensor as M = N*H*W rows of C channels.
// Pass 1 (nhwcPartial): block (32, 8), grid (ceil(C/32), R); each block sums
// a tile of rows for 32 adjacent channels (coalesced loads across channels)
// and writes one double per channel and tile. Pass 2 (nhwc*Finish): one
// block per channel adds the R tiles in a fixed order. Deterministic, no
// atomics.
// MODE 0: s0 = sum(a).  MODE 1: s0, s1 = sum(a - k), sum((a - k)^2) with the
// shift k = a[row 0] (BN statistics).  MODE 2: s0, s1 = sum(a), sum(a * xhat)
// with xhat = (b - mean) * invstd (batch_norm_grad; a = dy, b = x).  MODE 3:
// MODE 2 with a masked by the ReLU output (fused_batch_norm_relu_grad).  MODE
// 4: MODE 2 with the mask recomputed from b (fused_batch_norm_affine_relu_grad:
// round(b * alpha + beta) > 0).
// The partial sums go to `scratch`, a device buffer the caller owns (the
// generated step passes the Context's reductionScratch): sum k of tile t,
// channel c at scratch[(k * tiles + t) * C + c], nsums x tiles x C doubles
// (nsums: 1 for MODE 0, 2 otherwise, 3 for dualBnGradPartial8). Not a
// namespace-scope __device__ array: that is one array per translation unit,
// and a partial-sum launch and its finish in two host units of a split
// build read different arrays (dm-NFNet trained wrong so in session 24).
template <int MODE, typename T>
__global__ void __launch_bounds__(256)
    nhwcPartial(double *scratch, const T *a, const T *b, const T *mask,
                const float *mean, const float *invstd, const float *alpha,
                const float *beta, int64_t M, int C, int64_t rowsPerTile) {
  __shared__ double sh[2][8][33];
  int c = blockIdx.x * 32 + threadIdx.x;
  int64_t r0 = blockIdx.y * rowsPerTile, r1 = min(M, r0 + rowsPerTile);
  double s0 = 0, s1 = 0;
  if (c < C) {
    float k = MODE == 1 ? ld(a + c) : 0.f;
    float mu = MODE >= 2 ? mean[c] : 0.f, is = MODE >= 2 ? invstd[c] : 0.f;
    float al = MODE == 4 ? alpha[c] : 0.f, be = MODE == 4 ? beta[c] : 0.f;
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
      float v = ld(a + r * C + c);
      float u = MODE >= 2 ? ld(b + r * C + c) : 0.f;
      if (MODE == 3 && !(ld(mask + r * C + c) > 0.f))
        v = 0.f;
      if (MODE == 4 && !(roundAs(a, u * al + be) > 0.f))
        v = 0.f;
      if (MODE == 0) {
        s0 += v;
      } else if (MODE == 1) {
        double d = (double)v - k;
        s0 += d;
        s1 += d * d;
      } else {
        s0 += v;
        s1 += (double)v * ((u - mu) * is);
      }
    }
  }
  sh[0][threadIdx.y][threadIdx.x] = s0;
  sh[1][threadIdx.y][threadIdx.x] = s1;
  __syncthreads();
  if (threadIdx.y < 2 && c < C && (MODE != 0 || threadIdx.y == 0)) {
    double t = 0;
    for (int y = 0; y < 8; ++y)
      t += sh[threadIdx.y][y][threadIdx.x];
    scratch[((int64_t)threadIdx.y * gridDim.y + blockIdx.y) * C + c] = t;
  }
}
// The last step of the vec8 partial-sum kernels (nhwcPartial8 and the fused
// kernels that share its tiling): thread t = y * CV + x holds NS sums of its
// eight channels over its rows; the block adds them over its RY rows in row
// order (deterministic) and writes sum k (k < nsums) of tile blockIdx.y to
// scratch[(k * gridDim.y + blockIdx.y) * C + ch]. R sums at a time go
// through the shared buffer `sh` (R x 256 x 8 doubles).
template <int NS, int R>
__device__ __forceinline__ void
nhwcTileSums8(double *scratch, const double (&s)[NS][8],
              double (&sh)[R][256][8], int C, int nsums) {
  const int CV = blockDim.x, RY = blockDim.y,
            t = threadIdx.y * CV + threadIdx.x;
#pragma unroll
  for (int k0 = 0; k0 < NS; k0 += R) {
    if (k0 > 0)
      __syncthreads(); // the previous round has read `sh`
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (k0 + r < NS)
          sh[r][t][e] = s[k0 + r][e];
    __syncthreads();
    // Task (r, x, e): sum k0 + r of channel (column x, lane e).
    for (int task = t; task < R * CV * 8; task += CV * RY) {
      int r = task / (CV * 8), x = (task / 8) % CV, e = task % 8;
      int k = k0 + r, ch = (blockIdx.x * CV + x) * 8 + e;
      if (k >= nsums || ch >= C)
        continue;
      double tot = 0;
      for (int y = 0; y < RY; ++y)
        tot += sh[r][y * CV + x][e];
      scratch[((int64_t)k * gridDim.y + blockIdx.y) * C + ch] = tot;
    }
  }
}
// The per-channel f32 parameters (mean, invstd, alpha, ...) of channels
// c..c+7 for a vec8 partial-sum thread (scalar loads: read once per
// thread, they need no 16-byte form or its alignment).
__device__ __forceinline__ void channels8(const float *p, int c,
                                          float (&v)[8]) {
#pragma unroll
  for (int e = 0; e < 8; ++e)
    v[e] = p[c + e];
}
// nhwcPartial with C % 8 == 0: each thread sums eight adjacent channels
// with 16-byte loads; block (CV, 256 / CV) with CV = min(C / 8, 32) threads
// across channels, grid (ceil(C / (8 CV)), R). Same sums (in double, same
// scratch layout) as nhwcPartial, so the finishing kernels are shared.
template <int MODE, typename T>
__global__ void __launch_bounds__(256)
    nhwcPartial8(double *scratch, const T *a, const T *b, const T *mask,
                 const float *mean, const float *invstd, const float *alpha,
                 const float *beta, int64_t M, int C, int64_t rowsPerTile) {
  __shared__ double sh[2][256][8];
  const int CV = blockDim.x, RY = blockDim.y;
  int c = (blockIdx.x * CV + threadIdx.x) * 8;
  int64_t r0 = blockIdx.y * rowsPerTile, r1 = min(M, r0 + rowsPerTile);
  double s[2][8];
  double *s0 = s[0], *s1 = s[1];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    s0[e] = s1[e] = 0;
  if (c < C) {
    float k[8], mu[8], is[8], al[8], be[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      k[e] = MODE == 1 ? ld(a + c + e) : 0.f;
      mu[e] = MODE >= 2 ? mean[c + e] : 0.f;
      is[e] = MODE >= 2 ? invstd[c + e] : 0.f;
      al[e] = MODE == 4 ? alpha[c + e] : 0.f;
      be[e] = MODE == 4 ? beta[c + e] : 0.f;
    }
    // U rows of loads in flight per thread before they are summed (memory-
    // level parallelism: one 16-byte load per row is too few to reach HBM
    // bandwidth); the sums still add the rows in row order. The two-tensor
    // modes already have two loads per row and ran slower with U = 2 on the
    // H100 (register pressure: 0.165 -> 0.186 ms on a 205 MB tensor).
    constexpr int U = MODE <= 1 ? 4 : 1;
    for (int64_t r = r0 + threadIdx.y; r < r1; r += U * RY) {
      float v[U][8], u[U][8], w[U][8];
#pragma unroll
      for (int q = 0; q < U; ++q) {
        int64_t rq = r + q * RY;
        if (rq < r1) {
          ldv8(a + rq * C + c, v[q]);
          if (MODE >= 2)
            ldv8(b + rq * C + c, u[q]);
          if (MODE == 3)
            ldv8(mask + rq * C + c, w[q]);
        }
      }
#pragma unroll
      for (int q = 0; q < U; ++q) {
        if (r + q * RY >= r1)
          break;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          float x = v[q][e];
          if (MODE == 3 && !(w[q][e] > 0.f))
            x = 0.f;
          if (MODE == 4 && !(roundAs(a, u[q][e] * al[e] + be[e]) > 0.f))
            x = 0.f;
          if (MODE == 0) {
            s0[e] += x;
          } else if (MODE == 1) {
            double d = (double)x - k[e];
            s0[e] += d;
            s1[e] += d * d;
          } else {
            s0[e] += x;
            s1[e] += (double)x * ((u[q][e] - mu[e]) * is[e]);
          }
        }
      }
    }
  }
  nhwcTileSums8(scratch, s, sh, C, MODE == 0 ? 1 : 2);
}

// fused_conv2d_stats' split form (C % 8 == 0): nhwcPartial8<1>'s shifted
// sums s0 = sum(x - k), s1 = sum((x - k)^2), k = x[row 0], with the same
// tiling, launch and scratch layout (nhwcSumsFinish finishes both), but the
// per-element arithmetic in f32: each thread adds a chunk of 4 U of its rows
// in f32 and then adds that chunk's two sums to its f64 sums.
// nhwcPartial8<1> converts every element to f64 and does three f64 operations
// on it; an f32-to-f64 conversion runs at a quarter of the FP64 rate on
// sm_90: by that rate, ResNet-50's ~1.4 G output elements a step cost
// about as long to convert as to read. The rows are still added in a fixed
// order (within a chunk, then chunk by chunk, then over the block's threads in
// row order): bitwise the same every run. The chunk's error is that of 4 U f32
// additions of shifted f16 values, below the f32 rounding the sums are stored
// with. U rows of 16-byte loads are in flight per thread. SHARED_ACC keeps the
// thread's f64 sums in shared memory ([sum][lane][thread]: consecutive
// threads, consecutive banks) instead of 32 registers, at a shared-memory
// update per chunk; ptxas (CUDA 13, sm_90a) still gives it 128 registers
// (126 without), so the default keeps them in registers. runtime/test/
// bn_stats_bench.cu times the variants against nhwcPartial8<1>.
template <typename T, int U = 4, bool SHARED_ACC = false>
__global__ void __launch_bounds__(256)
    nhwcShiftedSums8(double *scratch, const T *a, int64_t M, int C,
                     int64_t rowsPerTile) {
  constexpr int CHUNK = 4 * U;
  const int CV = blockDim.x, RY = blockDim.y,
            t = threadIdx.y * CV + threadIdx.x;
  int c = (blockIdx.x * CV + threadIdx.x) * 8;
  int64_t r0 = blockIdx.y * rowsPerTile, r1 = min(M, r0 + rowsPerTile);
  // The f64 sums: registers s, or this thread's column of `acc`; without
  // SHARED_ACC, `acc` is nhwcTileSums8's buffer (the same 16 KiB).
  __shared__ double acc[2][8][SHARED_ACC ? 256 : 128];
  double s[2][8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if constexpr (SHARED_ACC)
      acc[0][e][t] = acc[1][e][t] = 0;
    else
      s[0][e] = s[1][e] = 0;
  }
  if (c < C) {
    float k[8];
    ldv8(a + c, k);
    for (int64_t r = r0 + threadIdx.y; r < r1; r += CHUNK * RY) {
      float f0[8], f1[8];
#pragma unroll
      for (int e = 0; e < 8; ++e)
        f0[e] = f1[e] = 0.f;
#pragma unroll
      for (int j = 0; j < CHUNK / U; ++j) {
        int64_t rj = r + (int64_t)j * U * RY;
        if (rj >= r1)
          break;
        float v[U][8];
#pragma unroll
        for (int q = 0; q < U; ++q)
          if (rj + q * RY < r1)
            ldv8(a + (rj + q * RY) * C + c, v[q]);
#pragma unroll
        for (int q = 0; q < U; ++q) {
          if (rj + q * RY >= r1)
            break;
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            float d = v[q][e] - k[e];
            f0[e] += d;
            f1[e] = fmaf(d, d, f1[e]);
          }
        }
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if constexpr (SHARED_ACC) {
          acc[0][e][t] += f0[e];
          acc[1][e][t] += f1[e];
        } else {
          s[0][e] += f0[e];
          s[1][e] += f1[e];
        }
      }
    }
  }
  if constexpr (!SHARED_ACC) {
    nhwcTileSums8(scratch, s, *reinterpret_cast<double(*)[1][256][8]>(&acc), C,
                  2);
  } else {
    __syncthreads();
    // Sum k of channel (column x, lane e) over the block's RY rows of
    // threads, in row order (nhwcTileSums8's order).
    for (int task = t; task < 2 * CV * 8; task += CV * RY) {
      int k = task / (CV * 8), x = (task / 8) % CV, e = task % 8;
      int ch = (blockIdx.x * CV + x) * 8 + e;
      if (ch >= C)
        continue;
      double tot = 0;
      for (int y = 0; y < RY; ++y)
        tot += acc[k][e][y * CV + x];
      scratch[((int64_t)k * gridDim.y + blockIdx.y) * C + ch] = tot;
    }
  }
}

// The finishing kernels run one block per channel: thread k adds tiles k,
// k + blockDim.x, ... and a block sum (fixed order: deterministic) adds
// those; one thread per channel adding up to 2048 tiles in sequence took
// ~0.2 ms per BN layer. nhwcChannelSum is that sum of scratch sum k of
// channel blockIdx.x, for the whole block.
__device__ __forceinline__ double nhwcChannelSum(const double *scratch, int C,
                                                 int tiles, int k) {
  double s = 0;
  for (int t = threadIdx.x; t < tiles; t += blockDim.x)
    s += scratch[((int64_t)k * tiles + t) * C + blockIdx.x];
  return blockSum(s);
}
// bias_grad: out[c] = sum of the R tiles.
template <typename R>
__global__ void nhwcSumFinish(const double *scratch, R *out, int C, int tiles) {
  double s = nhwcChannelSum(scratch, C, tiles, 0);
  if (threadIdx.x == 0)
    st(out + blockIdx.x, (float)s);
}
// nhwcSumFinish times `scale` (reduce_mean: 1 / rows; cnn.lowering =
// "channel_sum").
template <typename R>
__global__ void nhwcScaledSumFinish(const double *scratch, R *out, int C,
                                    int tiles, double scale) {
  double s = nhwcChannelSum(scratch, C, tiles, 0);
  if (threadIdx.x == 0)
    st(out + blockIdx.x, (float)(s * scale));
}
// BN statistics from the shifted sums, as bnStats computes them.
template <typename T, typename S>
__global__ void
nhwcStatsFinish(const double *scratch, const T *x, float *mean, float *invstd,
                S *runMean, S *runVar, const S *oldMean, const S *oldVar,
                const S *scale, const S *bias, float *alpha, float *beta,
                int64_t M, int C, int tiles, float eps, float momentum) {
  int c = blockIdx.x;
  double s = nhwcChannelSum(scratch, C, tiles, 0),
         ss = nhwcChannelSum(scratch, C, tiles, 1);
  if (threadIdx.x != 0)
    return;
  double d = s / (double)M, m = (double)ld(x + c) + d;
  double var = fmax(ss / (double)M - d * d, 0.0);
  bnStatsStore(c, m, var, mean, invstd, runMean, runVar, oldMean, oldVar, scale,
               bias, alpha, beta, M, eps, momentum);
}
// fused_conv2d_stats' split form: the plain per-channel sums sum(x) and
// sum(x^2) (f32) from nhwcPartial's MODE 1 sums, shifted by k = x[c].
template <typename T>
__global__ void nhwcSumsFinish(const double *scratch, const T *x, float *sum,
                               float *sumSq, int64_t M, int C, int tiles) {
  int c = blockIdx.x;
  double s = nhwcChannelSum(scratch, C, tiles, 0),
         ss = nhwcChannelSum(scratch, C, tiles, 1);
  if (threadIdx.x != 0)
    return;
  // sum (x - k) = s, sum (x - k)^2 = ss.
  double k = (double)ld(x + c), total = s + (double)M * k;
  sum[c] = (float)total;
  sumSq[c] = (float)(ss + 2.0 * k * total - (double)M * k * k);
}
// fused_conv2d_stats' prologue in its split form: out = relu(x * scale +
// shift) per channel (NHWC, channel innermost), rounded to T.
template <typename T>
__global__ void nhwcScaleShiftRelu(const T *x, const float *scale,
                                   const float *shift, T *out, int64_t n,
                                   int C) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int c = (int)(i % C);
    float v = ld(x + i) * scale[c] + shift[c];
    st(out + i, v > 0.f ? v : 0.f);
  }
}
// nhwcScaleShiftRelu with C % 8 == 0 (16-byte aligned x and out): eight
// channels per thread with 16-byte loads and stores, and the channel of each
// vector advanced by the grid stride instead of a 64-bit remainder per
// element (the scalar kernel's i % C is a software division). Same values:
// the same expression of x, scale[c] and shift[c] per element.
template <typename T>
__global__ void nhwcScaleShiftRelu8(const T *x, const float *scale,
                                    const float *shift, T *out, int64_t n,
                                    int C) {
  const int cv = C / 8;
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x,
          stride = (int64_t)gridDim.x * blockDim.x, nv = n / 8;
  int g = (int)(i % cv), step = (int)(stride % cv);
  for (; i < nv; i += stride) {
    float v[8];
    ldv8(x + i * 8, v);
    int c = g * 8;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float t = v[e] * scale[c + e] + shift[c + e];
      v[e] = t > 0.f ? t : 0.f;
    }
    stv8(out + i * 8, v);
    g += step;
    if (g >= cv)
      g -= cv;
  }
}
// batch_norm_finalize: batch_norm_stats' results from per-channel sums
// (fused_conv2d_stats); one thread per channel.
template <typename S>
__global__ void bnFinalize(const float *sum, const float *sumSq, float *mean,
                           float *invstd, S *runMean, S *runVar,
                           const S *oldMean, const S *oldVar, const S *scale,
                           const S *bias, float *alpha, float *beta, int64_t M,
                           int C, float eps, float momentum) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C)
    return;
  double m = (double)sum[c] / (double)M;
  double var = fmax((double)sumSq[c] / (double)M - m * m, 0.0);
  bnStatsStore(c, m, var, mean, invstd, runMean, runVar, oldMean, oldVar, scale,
               bias, alpha, beta, M, eps, momentum);
}
// batch_norm_grad sums: grad_bias = sum(dy), grad_scale = sum(dy * xhat).
template <typename S>
__global__ void nhwcBnGradFinish(const double *scratch, S *gradScale,
                                 S *gradBias, int C, int tiles) {
  int c = blockIdx.x;
  double s = nhwcChannelSum(scratch, C, tiles, 0),
         sx = nhwcChannelSum(scratch, C, tiles, 1);
  if (threadIdx.x != 0)
    return;
  st(gradBias + c, (float)s);
  st(gradScale + c, (float)sx);
}

// fused_dual_batch_norm_grad, pass 1 (C % 8 == 0; nhwcPartial8's layout):
// nhwcPartial8's MODE 2 sums of (dy, xa) and of (dy, xb) with dy read once:
// sum(dy), sum(dy * xhat_a), sum(dy * xhat_b) as scratch sums 0, 1, 2. The
// block's rows are added one sum at a time through one 16 KiB buffer (three
// at once would take the whole 48 KiB and halve the blocks per SM).
template <typename T>
__global__ void __launch_bounds__(256)
    dualBnGradPartial8(double *scratch, const T *dy, const T *xa, const T *xb,
                       const float *meanA, const float *invA,
                       const float *meanB, const float *invB, int64_t M, int C,
                       int64_t rowsPerTile) {
  __shared__ double sh[1][256][8];
  const int CV = blockDim.x, RY = blockDim.y;
  int c = (blockIdx.x * CV + threadIdx.x) * 8;
  int64_t r0 = blockIdx.y * rowsPerTile, r1 = min(M, r0 + rowsPerTile);
  double s[3][8];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    s[0][e] = s[1][e] = s[2][e] = 0;
  if (c < C) {
    float ma[8], ia[8], mb[8], ib[8];
    channels8(meanA, c, ma);
    channels8(invA, c, ia);
    channels8(meanB, c, mb);
    channels8(invB, c, ib);
    for (int64_t r = r0 + threadIdx.y; r < r1; r += RY) {
      float v[8], a[8], b[8];
      ldv8(dy + r * C + c, v);
      ldv8(xa + r * C + c, a);
      ldv8(xb + r * C + c, b);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        s[0][e] += v[e];
        s[1][e] += (double)v[e] * ((a[e] - ma[e]) * ia[e]);
        s[2][e] += (double)v[e] * ((b[e] - mb[e]) * ib[e]);
      }
    }
  }
  nhwcTileSums8(scratch, s, sh, C, 3);
}
// fused_dual_batch_norm_grad, pass 2: both halves' grad_bias (sum(dy), the
// same for both) and grad_scale, as nhwcBnGradFinish.
template <typename S>
__global__ void dualBnGradFinish(const double *scratch, S *gradScaleA,
                                 S *gradBiasA, S *gradScaleB, S *gradBiasB,
                                 int C, int tiles) {
  int c = blockIdx.x;
  double s = nhwcChannelSum(scratch, C, tiles, 0),
         sa = nhwcChannelSum(scratch, C, tiles, 1),
         sb = nhwcChannelSum(scratch, C, tiles, 2);
  if (threadIdx.x != 0)
    return;
  st(gradBiasA + c, (float)s);
  st(gradBiasB + c, (float)s);
  st(gradScaleA + c, (float)sa);
  st(gradScaleB + c, (float)sb);
}
// cnnc-prelude-end

// ---- Not in the prelude: batch_norm_grad's NHWC passes with f32 chunks
// (issue 37), which runtime/test/bn_grad_bench.cu times against the kernels
// cnnc prints (nhwcPartial8<2|3|4> + the generic elementwise apply,
// dualBnGradPartial8 + its elementwise apply). Session 32's one H100 run
// printed them by default and the ResNet-50 f16 b128 step got 2.7 % slower
// (5,612 -> 5,458 img/s), so cnnc prints the old kernels again until the
// bench shows a variant that wins in both passes back to back. They take
// the shapes cnn-select-lowering's "vec8" gives (C % 8 == 0) on
// nhwcTileLayout's tiling (kernels/NhwcTileLayout.h). ----
//
// Pass 1, nhwcBnGradSums8<MODE> (MODE 2, 3, 4 as nhwcPartial8's):
// s0 = sum(g), s1 = sum(g * xhat) per channel into nhwcPartial8's scratch
// layout (nhwcBnGradFinish finishes them), with the per-element arithmetic
// in f32: each thread adds a chunk of 4 U of its rows in f32 (g and
// g * (x - mean)) and then adds the chunk to its f64 sums; invstd multiplies
// the thread's f64 sum once at the end. nhwcPartial8<2..4> keeps one row of
// loads in flight and converts every element to f64 (the H100's FP64 rate is
// half its FP32 rate, so that was a guess, never measured to be the limit):
// ResNet-50's BN gradients took 6.74 ms a step against a two-pass floor of
// ~3.9 ms (H100, session 24). The rows
// are still added in a fixed order (within a chunk, chunk by chunk, then over
// the block's threads in row order): bitwise the same every run; a chunk's
// error is that of 4 U f32 additions, below the f32 the sums are stored in.
// U rows of 16-byte loads (two or three tensors) are in flight per thread.
// runtime/test/bn_grad_bench.cu times U against nhwcPartial8.
template <int MODE, typename T, int U = 2>
__global__ void __launch_bounds__(256)
    nhwcBnGradSums8(double *scratch, const T *dy, const T *x, const T *mask,
                    const float *mean, const float *invstd, const float *alpha,
                    const float *beta, int64_t M, int C, int64_t rowsPerTile) {
  static_assert(MODE >= 2 && MODE <= 4, "batch_norm_grad's modes");
  constexpr int CHUNK = 4 * U;
  __shared__ double sh[1][256][8];
  const int CV = blockDim.x, RY = blockDim.y;
  int c = (blockIdx.x * CV + threadIdx.x) * 8;
  int64_t r0 = blockIdx.y * rowsPerTile, r1 = min(M, r0 + rowsPerTile);
  double s[2][8];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    s[0][e] = s[1][e] = 0;
  if (c < C) {
    float mu[8], al[8], be[8];
    channels8(mean, c, mu);
    if (MODE == 4) {
      channels8(alpha, c, al);
      channels8(beta, c, be);
    }
    for (int64_t r = r0 + threadIdx.y; r < r1; r += CHUNK * RY) {
      float f0[8], f1[8];
#pragma unroll
      for (int e = 0; e < 8; ++e)
        f0[e] = f1[e] = 0.f;
#pragma unroll
      for (int j = 0; j < CHUNK / U; ++j) {
        int64_t rj = r + (int64_t)j * U * RY;
        if (rj >= r1)
          break;
        float v[U][8], u[U][8], w[U][8];
#pragma unroll
        for (int q = 0; q < U; ++q) {
          int64_t rq = rj + q * RY;
          if (rq < r1) {
            ldv8(dy + rq * C + c, v[q]);
            ldv8(x + rq * C + c, u[q]);
            if (MODE == 3)
              ldv8(mask + rq * C + c, w[q]);
          }
        }
#pragma unroll
        for (int q = 0; q < U; ++q) {
          if (rj + q * RY >= r1)
            break;
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            float g = v[q][e];
            if (MODE == 3 && !(w[q][e] > 0.f))
              g = 0.f;
            if (MODE == 4 && !(roundAs(x, u[q][e] * al[e] + be[e]) > 0.f))
              g = 0.f;
            f0[e] += g;
            f1[e] = fmaf(g, u[q][e] - mu[e], f1[e]);
          }
        }
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        s[0][e] += f0[e];
        s[1][e] += f1[e];
      }
    }
    float is[8];
    channels8(invstd, c, is);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      s[1][e] *= is[e];
  }
  nhwcTileSums8(scratch, s, sh, C, 2);
}
// batch_norm_grad's apply pass for channels c..c+7 as per-channel
// coefficients: dx = scale * invstd * (g - sum(g) / m - xhat * sum(g xhat) /
// m) = a g - b (x - mean) - k with a = scale * invstd, b = a * invstd *
// sum(g xhat) / m, k = a * sum(g) / m (grad_scale = sum(g xhat), grad_bias =
// sum(g): nhwcBnGradFinish's outputs).
template <typename S>
__device__ __forceinline__ void
bnGradApplyCoefficients8(int c, int64_t M, const float *invstd, const S *scale,
                         const S *gradScale, const S *gradBias, float (&a)[8],
                         float (&b)[8], float (&k)[8]) {
  const float m = (float)M;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    float is = invstd[c + e];
    a[e] = ld(scale + c + e) * is;
    b[e] = a[e] * is * (ld(gradScale + c + e) / m);
    k[e] = a[e] * (ld(gradBias + c + e) / m);
  }
}
// The row tile of an apply block (nhwcBnGradApply8, dualBnGradApply8). The
// sums pass launched just before read its tiles in block order, so the last
// rows it read are the likeliest still in L2 (50 MB on the H100, against
// ResNet-50's 100-400 MB of dy and x at batch 128): with FROM_END the apply
// starts from them. The order of the blocks changes no result.
template <bool FROM_END> __device__ __forceinline__ int64_t applyTile() {
  return FROM_END ? (int64_t)gridDim.y - 1 - blockIdx.y : (int64_t)blockIdx.y;
}
// Pass 2, nhwcBnGradApply8<MODE>: dx for M rows of C channels, g = dy masked
// as in nhwcBnGradSums8<MODE>, on nhwcTileLayout's grid (no scratch bound):
// each thread keeps its eight channels' coefficients in registers for all of
// its rows (the generic elementwise kernel read five to seven per-channel
// arrays and did two f32 divisions per element) and has U rows of loads in
// flight.
template <int MODE, typename T, typename S, int U = 2, bool FROM_END = true>
__global__ void __launch_bounds__(256)
    nhwcBnGradApply8(const T *dy, const T *x, const T *mask, const float *mean,
                     const float *invstd, const S *scale, const S *gradScale,
                     const S *gradBias, const float *alpha, const float *beta,
                     T *dx, int64_t M, int C, int64_t rowsPerTile) {
  static_assert(MODE >= 2 && MODE <= 4, "batch_norm_grad's modes");
  const int CV = blockDim.x, RY = blockDim.y;
  int c = (blockIdx.x * CV + threadIdx.x) * 8;
  if (c >= C)
    return;
  int64_t r0 = applyTile<FROM_END>() * rowsPerTile,
          r1 = min(M, r0 + rowsPerTile);
  float a[8], b[8], k[8], mu[8], al[8], be[8];
  bnGradApplyCoefficients8(c, M, invstd, scale, gradScale, gradBias, a, b, k);
  channels8(mean, c, mu);
  if (MODE == 4) {
    channels8(alpha, c, al);
    channels8(beta, c, be);
  }
  for (int64_t r = r0 + threadIdx.y; r < r1; r += U * RY) {
    float v[U][8], u[U][8], w[U][8];
#pragma unroll
    for (int q = 0; q < U; ++q) {
      int64_t rq = r + q * RY;
      if (rq < r1) {
        ldv8(dy + rq * C + c, v[q]);
        ldv8(x + rq * C + c, u[q]);
        if (MODE == 3)
          ldv8(mask + rq * C + c, w[q]);
      }
    }
#pragma unroll
    for (int q = 0; q < U; ++q) {
      int64_t rq = r + q * RY;
      if (rq >= r1)
        break;
      float o[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        float g = v[q][e];
        if (MODE == 3 && !(w[q][e] > 0.f))
          g = 0.f;
        if (MODE == 4 && !(roundAs(x, u[q][e] * al[e] + be[e]) > 0.f))
          g = 0.f;
        o[e] = fmaf(a[e], g, -fmaf(b[e], u[q][e] - mu[e], k[e]));
      }
      stv8(dx + rq * C + c, o);
    }
  }
}
// fused_dual_batch_norm_grad's passes (nhwcBnGradSums8's and
// nhwcBnGradApply8's form, dy read once for both halves). Pass 1: sum(dy),
// sum(dy * xhat_a), sum(dy * xhat_b) as scratch sums 0, 1, 2 (dualBnGradFinish
// finishes them), f32 chunks of 4 U rows added to f64 sums, U rows of loads
// in flight; the block's rows go through one 16 KiB buffer one sum at a time.
template <typename T, int U = 2>
__global__ void __launch_bounds__(256)
    dualBnGradSums8(double *scratch, const T *dy, const T *xa, const T *xb,
                    const float *meanA, const float *invA, const float *meanB,
                    const float *invB, int64_t M, int C, int64_t rowsPerTile) {
  constexpr int CHUNK = 4 * U;
  __shared__ double sh[1][256][8];
  const int CV = blockDim.x, RY = blockDim.y;
  int c = (blockIdx.x * CV + threadIdx.x) * 8;
  int64_t r0 = blockIdx.y * rowsPerTile, r1 = min(M, r0 + rowsPerTile);
  double s[3][8];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    s[0][e] = s[1][e] = s[2][e] = 0;
  if (c < C) {
    float ma[8], mb[8];
    channels8(meanA, c, ma);
    channels8(meanB, c, mb);
    for (int64_t r = r0 + threadIdx.y; r < r1; r += CHUNK * RY) {
      float f0[8], fa[8], fb[8];
#pragma unroll
      for (int e = 0; e < 8; ++e)
        f0[e] = fa[e] = fb[e] = 0.f;
#pragma unroll
      for (int j = 0; j < CHUNK / U; ++j) {
        int64_t rj = r + (int64_t)j * U * RY;
        if (rj >= r1)
          break;
        float v[U][8], a[U][8], b[U][8];
#pragma unroll
        for (int q = 0; q < U; ++q) {
          int64_t rq = rj + q * RY;
          if (rq < r1) {
            ldv8(dy + rq * C + c, v[q]);
            ldv8(xa + rq * C + c, a[q]);
            ldv8(xb + rq * C + c, b[q]);
          }
        }
#pragma unroll
        for (int q = 0; q < U; ++q) {
          if (rj + q * RY >= r1)
            break;
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            f0[e] += v[q][e];
            fa[e] = fmaf(v[q][e], a[q][e] - ma[e], fa[e]);
            fb[e] = fmaf(v[q][e], b[q][e] - mb[e], fb[e]);
          }
        }
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        s[0][e] += f0[e];
        s[1][e] += fa[e];
        s[2][e] += fb[e];
      }
    }
    float ia[8], ib[8];
    channels8(invA, c, ia);
    channels8(invB, c, ib);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      s[1][e] *= ia[e];
      s[2][e] *= ib[e];
    }
  }
  nhwcTileSums8(scratch, s, sh, C, 3);
}
// fused_dual_batch_norm_grad, the apply pass: both input gradients
// (nhwcBnGradApply8<2>'s expression for each half) with dy read once.
template <typename T, typename S, int U = 2, bool FROM_END = true>
__global__ void __launch_bounds__(256)
    dualBnGradApply8(const T *dy, const T *xa, const float *meanA,
                     const float *invA, const S *scaleA, const S *gradScaleA,
                     const S *gradBiasA, const T *xb, const float *meanB,
                     const float *invB, const S *scaleB, const S *gradScaleB,
                     const S *gradBiasB, T *dxa, T *dxb, int64_t M, int C,
                     int64_t rowsPerTile) {
  const int CV = blockDim.x, RY = blockDim.y;
  int c = (blockIdx.x * CV + threadIdx.x) * 8;
  if (c >= C)
    return;
  int64_t r0 = applyTile<FROM_END>() * rowsPerTile,
          r1 = min(M, r0 + rowsPerTile);
  float aa[8], ba[8], ka[8], ma[8], ab[8], bb[8], kb[8], mb[8];
  bnGradApplyCoefficients8(c, M, invA, scaleA, gradScaleA, gradBiasA, aa, ba,
                           ka);
  bnGradApplyCoefficients8(c, M, invB, scaleB, gradScaleB, gradBiasB, ab, bb,
                           kb);
  channels8(meanA, c, ma);
  channels8(meanB, c, mb);
  for (int64_t r = r0 + threadIdx.y; r < r1; r += U * RY) {
    float v[U][8], a[U][8], b[U][8];
#pragma unroll
    for (int q = 0; q < U; ++q) {
      int64_t rq = r + q * RY;
      if (rq < r1) {
        ldv8(dy + rq * C + c, v[q]);
        ldv8(xa + rq * C + c, a[q]);
        ldv8(xb + rq * C + c, b[q]);
      }
    }
#pragma unroll
    for (int q = 0; q < U; ++q) {
      int64_t rq = r + q * RY;
      if (rq >= r1)
        break;
      float oa[8], ob[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        oa[e] = fmaf(aa[e], v[q][e], -fmaf(ba[e], a[q][e] - ma[e], ka[e]));
        ob[e] = fmaf(ab[e], v[q][e], -fmaf(bb[e], b[q][e] - mb[e], kb[e]));
      }
      stv8(dxa + rq * C + c, oa);
      stv8(dxb + rq * C + c, ob);
    }
  }
}
} // namespace

#endif // CNNC_KERNELS_REDUCTIONS_CUH
