//===- LossScale.cuh - dynamic loss scaling (cnn-precision) ---------------===//
//
// cnn.all_finite's flag kernels and cnn.loss_scale_update.
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_LOSS_SCALE_CUH
#define CNNC_KERNELS_LOSS_SCALE_CUH

#include "Common.cuh"

namespace {
// cnnc-prelude-begin
// Loss scaling (cnn-precision): cnn.all_finite is setFlag then one
// clearIfNonFinite per input; cnn.loss_scale_update is torch's
// _amp_update_scale_ in one thread.
__global__ void setFlag(float *flag) { *flag = 1.0f; }
template <typename T>
__global__ void clearIfNonFinite(const T *x, int64_t n, float *flag) {
  bool bad = false;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    bad |= !isfinite(ld(x + i));
  if (__syncthreads_or(bad) && threadIdx.x == 0)
    *flag = 0.0f;
}
__global__ void lossScaleUpdate(const float *scale, const float *tracker,
                                const float *finite, float *newScale,
                                float *newTracker, int64_t interval,
                                float growth, float backoff) {
  float s = *scale, t = *tracker;
  if (*finite == 0.0f) {
    s *= backoff;
    t = 0.0f;
  } else {
    t += 1.0f;
    if (t == (float)interval) {
      float g = s * growth;
      if (isfinite(g))
        s = g;
      t = 0.0f;
    }
  }
  *newScale = s;
  *newTracker = t;
}
// cnnc-prelude-end
} // namespace

#endif // CNNC_KERNELS_LOSS_SCALE_CUH
