//===- Loss.cuh - softmax cross-entropy and its gradient ------------------===//
//
// Deterministic two-pass loss through a scratch buffer the caller passes,
// label smoothing and an ignored label as F.cross_entropy's.
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_LOSS_CUH
#define CNNC_KERNELS_LOSS_CUH

#include "Common.cuh"

namespace {
// cnnc-prelude-begin
// Softmax cross-entropy of `rows` rows of `cols` logits, one warp per row
// (rows are images, or pixels of dense prediction: cnn-autodiff flattens
// N x C x H x W logits to (N*H*W) x C), label smoothing as
// F.cross_entropy's. Rows whose label is `ignoreIndex` contribute nothing
// and are not counted: the loss is the mean over the other rows (NaN when
// there are none, as PyTorch's), so the count is taken on the device. A
// label outside [0, cols) that is not `ignoreIndex` gives NaN (the reference
// interpreter names it; here it must not read out of bounds). f32 math on
// the storage type T (f16 logits under cnn-precision).
//
// The loss in two passes: softmaxXentLossPartial's B blocks each write the
// sum and the count of their rows into scratch[b] and scratch[B + b] (2 x B
// doubles), softmaxXentLossFinish adds them in block order (deterministic)
// and divides. The gradient: xentCountValid writes the count into
// scratch[0], which softmaxXentGrad reads. Each pair runs in stream order on
// one buffer the caller owns (the generated step passes the Context's
// reductionScratch, as to Reductions.cuh's kernels), not on namespace-scope
// __device__ arrays: those are one per translation unit, and the two
// launches of a pair may sit in different host units of a split build.

// Row maximum, sum of exp(x - max) and sum of x over one row, for the whole
// warp (every lane gets them).
template <typename T>
__device__ __forceinline__ void xentRow(const T *xr, int cols, int lane,
                                        float &m, double &s, double &sumx) {
  m = -INFINITY;
  for (int c = lane; c < cols; c += 32)
    m = fmaxf(m, ld(xr + c));
  for (int o = 16; o > 0; o >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  s = 0;
  sumx = 0;
  for (int c = lane; c < cols; c += 32) {
    float v = ld(xr + c);
    s += exp((double)(v - m));
    sumx += v;
  }
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_xor_sync(0xffffffffu, s, o);
    sumx += __shfl_xor_sync(0xffffffffu, sumx, o);
  }
}

template <typename T, typename L>
__global__ void softmaxXentLossPartial(double *scratch, const T *logits,
                                       const L *labels, int64_t rows, int cols,
                                       float smoothing, long long ignoreIndex) {
  double total = 0, valid = 0;
  const int lane = threadIdx.x & 31;
  const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
       r < rows; r += warps) {
    const long long y = (long long)labels[r];
    if (y == ignoreIndex)
      continue; // the same for the whole warp
    const T *xr = logits + r * cols;
    float m;
    double s, sumx;
    xentRow(xr, cols, lane, m, s, sumx);
    double lse = m + log(s);
    double nll = y >= 0 && y < cols ? lse - ld(xr + y) : (double)NAN;
    double smooth = lse - sumx / cols;
    if (lane == 0) {
      total += (1.0 - smoothing) * nll + smoothing * smooth;
      valid += 1;
    }
  }
  total = blockSum(total);
  valid = blockSum(valid);
  if (threadIdx.x == 0) {
    scratch[blockIdx.x] = total;
    scratch[gridDim.x + blockIdx.x] = valid;
  }
}

__global__ void softmaxXentLossFinish(const double *scratch, float *loss,
                                      int blocks) {
  double t = 0, v = 0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
    t += scratch[b];
    v += scratch[blocks + b];
  }
  t = blockSum(t);
  v = blockSum(v);
  if (threadIdx.x == 0)
    *loss = (float)(t / v);
}

template <typename L>
__global__ void xentCountValid(double *scratch, const L *labels, int64_t rows,
                               long long ignoreIndex) {
  double v = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    v += (long long)labels[r] != ignoreIndex;
  v = blockSum(v);
  if (threadIdx.x == 0)
    scratch[0] = v;
}

// d loss / d logits * grad_loss, one warp per row; 0 on the ignored rows.
template <typename T, typename L>
__global__ void softmaxXentGrad(const double *scratch, const T *logits,
                                const L *labels, const float *gradLoss, T *dx,
                                int64_t rows, int cols, float smoothing,
                                long long ignoreIndex) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  const float scale = *gradLoss / (float)scratch[0];
  for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
       r < rows; r += warps) {
    const long long y = (long long)labels[r];
    T *dr = dx + r * cols;
    if (y == ignoreIndex) {
      for (int c = lane; c < cols; c += 32)
        st(dr + c, 0.0f);
      continue;
    }
    const T *xr = logits + r * cols;
    float m;
    double s, sumx;
    xentRow(xr, cols, lane, m, s, sumx);
    const bool bad = y < 0 || y >= cols;
    for (int c = lane; c < cols; c += 32) {
      float p = (float)(exp((double)(ld(xr + c) - m)) / s);
      float target = (c == y ? 1.0f - smoothing : 0.0f) + smoothing / cols;
      st(dr + c, bad ? NAN : (p - target) * scale);
    }
  }
}
// cnnc-prelude-end
} // namespace

#endif // CNNC_KERNELS_LOSS_CUH
