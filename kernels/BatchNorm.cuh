//===- BatchNorm.cuh - per-channel sums and batch norm, NCHW --------------===//
//
// One block per channel: bias_grad's channel sum, the batch statistics
// (bnStatsStore is shared with the NHWC finishing kernel), batch_norm_sums
// and batch_norm_grad's sums, with and without the fused ReLU mask.
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_BATCH_NORM_CUH
#define CNNC_KERNELS_BATCH_NORM_CUH

#include "Common.cuh"

namespace {
// cnnc-prelude-begin
// Per-channel sum over N and HW (bias_grad): one block per channel.
template <typename T, typename R>
__global__ void channelSum(const T *dy, R *out, int N, int C, int64_t HW) {
  int c = blockIdx.x;
  double s = 0;
  for (int64_t k = threadIdx.x; k < (int64_t)N * HW; k += blockDim.x) {
    int64_t n = k / HW, j = k % HW;
    s += ld(dy + (n * C + c) * HW + j);
  }
  s = blockSum(s);
  if (threadIdx.x == 0)
    st(out + c, (float)s);
}

// Batch statistics: saved mean / invstd, running stats updated in place
// with the unbiased variance (PyTorch). One block per channel.
// Stores channel c's statistics: saved mean/invstd, running statistics
// and, for batch_norm_stats (alpha non-null), the normalization's affine map
// alpha = invstd * scale, beta = bias - mean * alpha from the f64 values.
template <typename S>
__device__ void bnStatsStore(int c, double m, double var, float *mean,
                             float *invstd, S *runMean, S *runVar,
                             const S *oldMean, const S *oldVar, const S *scale,
                             const S *bias, float *alpha, float *beta,
                             int64_t M, float eps, float momentum) {
  double is = 1.0 / sqrt(var + (double)eps);
  mean[c] = (float)m;
  invstd[c] = (float)is;
  double unbiased = M > 1 ? var * (double)M / (double)(M - 1) : var;
  float om = ld(oldMean + c), ov = ld(oldVar + c);
  st(runMean + c, (float)((1.0 - momentum) * om + momentum * m));
  st(runVar + c, (float)((1.0 - momentum) * ov + momentum * unbiased));
  if (alpha) {
    double a = is * (double)ld(scale + c);
    alpha[c] = (float)a;
    beta[c] = (float)((double)ld(bias + c) - m * a);
  }
}
template <typename T, typename S>
__global__ void bnStats(const T *x, float *mean, float *invstd, S *runMean,
                        S *runVar, const S *oldMean, const S *oldVar,
                        const S *scale, const S *bias, float *alpha,
                        float *beta, int N, int C, int64_t HW, float eps,
                        float momentum) {
  int c = blockIdx.x;
  int64_t M = (int64_t)N * HW;
  double s = 0, ss = 0;
  for (int64_t k = threadIdx.x; k < M; k += blockDim.x) {
    int64_t n = k / HW, j = k % HW;
    s += ld(x + (n * C + c) * HW + j);
  }
  double m = blockSum(s) / (double)M;
  for (int64_t k = threadIdx.x; k < M; k += blockDim.x) {
    int64_t n = k / HW, j = k % HW;
    double d = ld(x + (n * C + c) * HW + j) - m;
    ss += d * d;
  }
  double var = blockSum(ss) / (double)M;
  if (threadIdx.x == 0)
    bnStatsStore(c, m, var, mean, invstd, runMean, runVar, oldMean, oldVar,
                 scale, bias, alpha, beta, M, eps, momentum);
}

// batch_norm_sums (NCHW or 2-D/3-D): per-channel sum(x) and sum(x^2), f32,
// accumulated in f64 around the shift k = the channel's first element (as
// nhwcSumsFinish does) so that a large mean does not swamp the squares.
// One block per channel.
template <typename T>
__global__ void bnSums(const T *x, float *sum, float *sumSq, int N, int C,
                       int64_t HW) {
  int c = blockIdx.x;
  int64_t M = (int64_t)N * HW;
  double k = (double)ld(x + (int64_t)c * HW), s = 0, ss = 0;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    int64_t n = i / HW, j = i % HW;
    double d = (double)ld(x + (n * C + c) * HW + j) - k;
    s += d;
    ss += d * d;
  }
  s = blockSum(s);
  ss = blockSum(ss);
  if (threadIdx.x != 0)
    return;
  double total = s + (double)M * k;
  sum[c] = (float)total;
  sumSq[c] = (float)(ss + 2.0 * k * total - (double)M * k * k);
}

// Sums for batch_norm_grad of channel blockIdx.x (one block per channel):
// grad_bias = sum(g), grad_scale = sum(g * xhat), with g = grad(i, x[i]) at
// element i: dy, or dy under the fused ReLU mask.
template <typename T, typename S, typename G>
__device__ __forceinline__ void
bnGradSums(const T *x, const float *mean, const float *invstd, S *gradScale,
           S *gradBias, int N, int C, int64_t HW, G grad) {
  int c = blockIdx.x;
  int64_t M = (int64_t)N * HW;
  double s = 0, sx = 0;
  float mu = mean[c], is = invstd[c];
  for (int64_t k = threadIdx.x; k < M; k += blockDim.x) {
    int64_t n = k / HW, j = k % HW, idx = (n * C + c) * HW + j;
    float xv = ld(x + idx);
    float g = grad(idx, xv);
    s += g;
    sx += (double)g * ((xv - mu) * is);
  }
  s = blockSum(s);
  sx = blockSum(sx);
  if (threadIdx.x == 0) {
    st(gradBias + c, (float)s);
    st(gradScale + c, (float)sx);
  }
}
template <typename T, typename S>
__global__ void bnGradReduce(const T *dy, const T *x, const float *mean,
                             const float *invstd, S *gradScale, S *gradBias,
                             int N, int C, int64_t HW) {
  bnGradSums(x, mean, invstd, gradScale, gradBias, N, C, HW,
             [&](int64_t i, float) { return ld(dy + i); });
}

// bnGradReduce with the ReLU mask of relu_output applied to dy on the fly.
template <typename T, typename S>
__global__ void
bnReluGradReduce(const T *dy, const T *y, const T *x, const float *mean,
                 const float *invstd, const float *alpha, const float *beta,
                 S *gradScale, S *gradBias, int N, int C, int64_t HW) {
  const int c = blockIdx.x;
  bnGradSums(x, mean, invstd, gradScale, gradBias, N, C, HW,
             [&](int64_t i, float xv) {
               return reluMask(y, xv, alpha, beta, i, c) ? ld(dy + i) : 0.f;
             });
}
// cnnc-prelude-end
} // namespace

#endif // CNNC_KERNELS_BATCH_NORM_CUH
