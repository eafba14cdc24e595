//===- Resize.cuh - cnn.resize and cnn.resize_grad ------------------------===//
//
// Nearest and bilinear resize from host-computed tap tables, and the
// gradient as a gather (no atomics).
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_RESIZE_CUH
#define CNNC_KERNELS_RESIZE_CUH

#include "Common.cuh"

namespace {
// cnnc-prelude-begin
// ---- cnn.resize / cnn.resize_grad / cnn.fused_resize_concat ----
// The taps of each output row and column (lo, hi, l1: cnnc/Support/Resize.h)
// are computed on the host and printed as tables, which the generated kernel
// passes in: the device reads the reference interpreter's indices and
// weights. For the gradient, `rh`/`rw` hold for each input row/column the
// outputs [first, last] that may read it (a gather: no atomics, no scratch).
struct ResizeTap {
  int lo, hi;
  float l1;
};
struct ResizeParams {
  int N, C, H, W, P, Q;
}; // input H x W, output P x Q

// Output element y[i] (batch n, channel c of x) from the taps a (row) and b
// (column). Nearest copies x[lo_h, lo_w] (no arithmetic: an inf stays an
// inf); linear is PyTorch's bilinear in f32.
template <typename T, bool NHWC, bool LINEAR>
__device__ __forceinline__ void resizeStore(const T *__restrict__ x, T *y,
                                            const ResizeParams &p, int64_t n,
                                            int c, ResizeTap a, ResizeTap b) {
  if (!LINEAR) {
    *y = x[layoutAt(p.C, NHWC, n, c, a.lo, b.lo, p.H, p.W)];
    return;
  }
  float h1 = a.l1, h0 = 1.f - h1, w1 = b.l1, w0 = 1.f - w1;
  float top = ld(x + layoutAt(p.C, NHWC, n, c, a.lo, b.lo, p.H, p.W)) * w0 +
              ld(x + layoutAt(p.C, NHWC, n, c, a.lo, b.hi, p.H, p.W)) * w1;
  float bottom = ld(x + layoutAt(p.C, NHWC, n, c, a.hi, b.lo, p.H, p.W)) * w0 +
                 ld(x + layoutAt(p.C, NHWC, n, c, a.hi, b.hi, p.H, p.W)) * w1;
  st(y, top * h0 + bottom * h1);
}

template <typename T, bool NHWC, bool LINEAR>
__device__ __forceinline__ void
resizeFwd(const T *__restrict__ x, T *__restrict__ y, ResizeParams p,
          const ResizeTap *th, const ResizeTap *tw) {
  int64_t total = (int64_t)p.N * p.C * p.P * p.Q;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t n;
    int c, oh, ow;
    layoutIndex(p.C, NHWC, i, n, c, oh, ow, p.P, p.Q);
    resizeStore<T, NHWC, LINEAR>(x, y + i, p, n, c, th[oh], tw[ow]);
  }
}

// cnn.fused_resize_concat (upsample + concat): y, of p.C + otherC channels
// (P x Q), holds resize(x) in channels [c0, c0 + p.C) and `other` in the
// rest, in order; the resized tensor is never stored.
template <typename T, bool NHWC, bool LINEAR>
__device__ __forceinline__ void
resizeConcatFwd(const T *__restrict__ x, const T *__restrict__ other,
                T *__restrict__ y, ResizeParams p, int otherC, int c0,
                const ResizeTap *th, const ResizeTap *tw) {
  int cy = p.C + otherC;
  int64_t total = (int64_t)p.N * cy * p.P * p.Q;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t n;
    int c, oh, ow;
    layoutIndex(cy, NHWC, i, n, c, oh, ow, p.P, p.Q);
    if (c >= c0 && c < c0 + p.C) {
      resizeStore<T, NHWC, LINEAR>(x, y + i, p, n, c - c0, th[oh], tw[ow]);
      continue;
    }
    int co = c < c0 ? c : c - p.C;
    y[i] = other[layoutAt(otherC, NHWC, n, co, oh, ow, p.P, p.Q)];
  }
}

// cnn-select-lowering's "vec8" form of resizeConcatFwd (NHWC; p.C, otherC
// and c0 multiples of 8): eight channels of one pixel a thread, 16-byte
// loads and stores, the taps read once for the eight. The same f32
// arithmetic per channel as resizeStore.
template <typename T, bool LINEAR>
__device__ __forceinline__ void
resizeConcatFwdNHWC8(const T *__restrict__ x, const T *__restrict__ other,
                     T *__restrict__ y, ResizeParams p, int otherC, int c0,
                     const ResizeTap *th, const ResizeTap *tw) {
  const int cy8 = (p.C + otherC) / 8;
  int64_t total = (int64_t)p.N * p.P * p.Q * cy8;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int c = (int)(i % cy8) * 8;
    int64_t pixel = i / cy8;
    int ow = (int)(pixel % p.Q);
    int oh = (int)(pixel / p.Q % p.P);
    int64_t n = pixel / ((int64_t)p.P * p.Q);
    float v[8];
    if (c < c0 || c >= c0 + p.C) {
      ldv8(other + pixel * otherC + (c < c0 ? c : c - p.C), v);
      stv8(y + i * 8, v);
      continue;
    }
    const ResizeTap a = th[oh], b = tw[ow];
    const T *xn = x + n * p.H * p.W * p.C + (c - c0);
    ldv8(xn + ((int64_t)a.lo * p.W + b.lo) * p.C, v);
    if (LINEAR) {
      float v01[8], v10[8], v11[8];
      ldv8(xn + ((int64_t)a.lo * p.W + b.hi) * p.C, v01);
      ldv8(xn + ((int64_t)a.hi * p.W + b.lo) * p.C, v10);
      ldv8(xn + ((int64_t)a.hi * p.W + b.hi) * p.C, v11);
      float h1 = a.l1, h0 = 1.f - h1, w1 = b.l1, w0 = 1.f - w1;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        float top = v[e] * w0 + v01[e] * w1;
        float bottom = v10[e] * w0 + v11[e] * w1;
        v[e] = top * h0 + bottom * h1;
      }
    }
    stv8(y + i * 8, v);
  }
}

// The weight with which tap `t` reads input index `k`.
__device__ __forceinline__ float resizeWeight(const ResizeTap &t, int k,
                                              bool linear) {
  if (!linear)
    return t.lo == k ? 1.f : 0.f;
  return (t.lo == k ? 1.f - t.l1 : 0.f) + (t.hi == k ? t.l1 : 0.f);
}

// dx[h, w] = sum over the outputs (oh, ow) reading it of wh * ww * dy, in f32,
// with dy the channels [c0, c0 + p.C) of a gradient of p.C + otherC channels
// (cnn.resize_grad's channel_offset: the slice of a concatenation's
// gradient, read in place).
template <typename T, bool NHWC, bool LINEAR>
__device__ __forceinline__ void
resizeSliceBwd(const T *__restrict__ dy, T *__restrict__ dx, ResizeParams p,
               int otherC, int c0, const ResizeTap *th, const ResizeTap *tw,
               const int2 *rh, const int2 *rw) {
  int cy = p.C + otherC;
  int64_t total = (int64_t)p.N * p.C * p.H * p.W;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t n;
    int c, h, w;
    layoutIndex(p.C, NHWC, i, n, c, h, w, p.H, p.W);
    const int2 R = rh[h], S = rw[w];
    float g = 0.f;
    for (int oh = R.x; oh <= R.y; ++oh) {
      float wh = resizeWeight(th[oh], h, LINEAR);
      if (wh == 0.f)
        continue;
      for (int ow = S.x; ow <= S.y; ++ow) {
        float ww = resizeWeight(tw[ow], w, LINEAR);
        if (ww == 0.f)
          continue;
        g += wh * ww * ld(dy + layoutAt(cy, NHWC, n, c0 + c, oh, ow, p.P, p.Q));
      }
    }
    st(dx + i, g);
  }
}

// The "vec8" form of resizeSliceBwd (NHWC; p.C, otherC and c0 multiples
// of 8): eight channels of one input pixel a thread, the weights computed
// once for the eight, 16-byte gradient loads; the sums in resizeSliceBwd's
// order.
template <typename T, bool LINEAR>
__device__ __forceinline__ void
resizeSliceBwdNHWC8(const T *__restrict__ dy, T *__restrict__ dx,
                    ResizeParams p, int otherC, int c0, const ResizeTap *th,
                    const ResizeTap *tw, const int2 *rh, const int2 *rw) {
  const int c8 = p.C / 8, cy = p.C + otherC;
  int64_t total = (int64_t)p.N * p.H * p.W * c8;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int c = (int)(i % c8) * 8;
    int64_t pixel = i / c8;
    int w = (int)(pixel % p.W);
    int h = (int)(pixel / p.W % p.H);
    int64_t n = pixel / ((int64_t)p.H * p.W);
    const T *dyn = dy + n * p.P * p.Q * cy + c0 + c;
    const int2 R = rh[h], S = rw[w];
    float g[8], d[8];
#pragma unroll
    for (int e = 0; e < 8; ++e)
      g[e] = 0.f;
    for (int oh = R.x; oh <= R.y; ++oh) {
      float wh = resizeWeight(th[oh], h, LINEAR);
      if (wh == 0.f)
        continue;
      for (int ow = S.x; ow <= S.y; ++ow) {
        float ww = resizeWeight(tw[ow], w, LINEAR);
        if (ww == 0.f)
          continue;
        ldv8(dyn + ((int64_t)oh * p.Q + ow) * cy, d);
#pragma unroll
        for (int e = 0; e < 8; ++e)
          g[e] += wh * ww * d[e];
      }
    }
    stv8(dx + i * 8, g);
  }
}

// The whole gradient (cnn.resize_grad without a channel offset).
template <typename T, bool NHWC, bool LINEAR>
__device__ __forceinline__ void
resizeBwd(const T *__restrict__ dy, T *__restrict__ dx, ResizeParams p,
          const ResizeTap *th, const ResizeTap *tw, const int2 *rh,
          const int2 *rw) {
  resizeSliceBwd<T, NHWC, LINEAR>(dy, dx, p, 0, 0, th, tw, rh, rw);
}
// cnnc-prelude-end
} // namespace

#endif // CNNC_KERNELS_RESIZE_CUH
