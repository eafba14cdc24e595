//===- Pooling.cuh - max and average pooling, NCHW ------------------------===//
//
// PoolParams, the max/avg pooling kernels and their gradients, and
// fused_max_pool2d's recorded window index with the gather gradient that
// routes by it, each for NCHW or NHWC through a template flag (one body per
// kernel: the layouts differ only in how an index maps to (n, c, h, w) and
// in the stride between pixels).
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_POOLING_CUH
#define CNNC_KERNELS_POOLING_CUH

#include "Common.cuh"

namespace {
// cnnc-prelude-begin
struct PoolParams {
  int N, C, H, W, P, Q, KH, KW, SH, SW, PT, PL, PB, PR;
  bool countIncludePad;
};

// A pooling kernel's element i of an N x C x Y x X (NCHW) or N x Y x X x C
// (NHWC) tensor: its pixel (y, x) and its plane, n * C + c in NCHW (one
// division fewer) or n and c in NHWC. poolPlane is the plane's first
// element in a tensor of Y x X pixels, poolPix the offset of pixel (y, x)
// from it: the index arithmetic of the kernels' separate NCHW and NHWC
// versions, which these replace.
struct PoolPixel {
  int64_t n;
  int c, y, x;
};
template <bool NHWC>
__device__ __forceinline__ PoolPixel poolPixel(const PoolParams &p, int64_t i,
                                               int Y, int X) {
  PoolPixel e;
  if (NHWC) {
    e.c = i % p.C;
    e.x = (i / p.C) % X;
    e.y = (i / ((int64_t)p.C * X)) % Y;
    e.n = i / ((int64_t)p.C * X * Y);
  } else {
    e.x = i % X;
    e.y = (i / X) % Y;
    e.n = i / ((int64_t)Y * X);
    e.c = 0;
  }
  return e;
}
template <bool NHWC, typename T>
__device__ __forceinline__ T *poolPlane(T *t, const PoolParams &p,
                                        const PoolPixel &e, int Y, int X) {
  return NHWC ? t + e.n * Y * X * p.C + e.c : t + e.n * Y * X;
}
template <bool NHWC>
__device__ __forceinline__ int64_t poolPix(const PoolParams &p, int y, int x,
                                           int X) {
  return NHWC ? ((int64_t)y * X + x) * p.C : (int64_t)(y * X + x);
}

// The taps of output window (pp, q) that lie inside the input, in row
// order: f(kh, kw, h, w) with (h, w) the input pixel of tap (kh, kw). The
// forward kernels and the gather gradient's search for a window's maximum
// walk a window so. f by const reference: taken by value, the kernels
// compiled to more instructions (maxPoolNHWC8: up to 144 more at sm_90a).
template <typename F>
__device__ __forceinline__ void poolTaps(const PoolParams &p, int pp, int q,
                                         const F &f) {
  for (int kh = 0; kh < p.KH; ++kh) {
    int h = pp * p.SH - p.PT + kh;
    if (h < 0 || h >= p.H)
      continue;
    for (int kw = 0; kw < p.KW; ++kw) {
      int w = q * p.SW - p.PL + kw;
      if (w < 0 || w >= p.W)
        continue;
      f(kh, kw, h, w);
    }
  }
}
// The output windows [p0, p1] x [q0, q1] that may read input pixel (h, w):
// the range the gradients gather over (a window in it still has to be
// checked where the kernel is smaller than the stride or for padding).
struct PoolWindows {
  int p0, p1, q0, q1;
};
__device__ __forceinline__ PoolWindows poolWindows(const PoolParams &p, int h,
                                                   int w) {
  PoolWindows r;
  r.p0 = max(0, (h + p.PT - p.KH + p.SH) / p.SH);
  r.p1 = min(p.P - 1, (h + p.PT) / p.SH);
  r.q0 = max(0, (w + p.PL - p.KW + p.SW) / p.SW);
  r.q1 = min(p.Q - 1, (w + p.PL) / p.SW);
  return r;
}

// Max and average pooling and their gradients, one thread per output
// element, in either layout (NHWC: c innermost, so a warp reads adjacent
// channels of one pixel).
template <typename T, bool NHWC>
__global__ void maxPoolFwd(const T *x, T *y, PoolParams p) {
  int64_t total = (int64_t)p.N * p.C * p.P * p.Q;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    PoolPixel e = poolPixel<NHWC>(p, i, p.P, p.Q);
    const T *xc = poolPlane<NHWC>(x, p, e, p.H, p.W);
    float m = -INFINITY;
    poolTaps(p, e.y, e.x, [&](int, int, int h, int w) {
      float v = ld(xc + poolPix<NHWC>(p, h, w, p.W));
      if (v > m || isnan(v))
        m = v;
    });
    st(y + i, m);
  }
}

// Gather form of the max-pool gradient (deterministic): each input element
// sums the gradients of the windows whose first maximum it is.
template <typename T, bool NHWC>
__global__ void maxPoolBwd(const T *dy, const T *x, T *dx, PoolParams p) {
  int64_t total = (int64_t)p.N * p.C * p.H * p.W;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    PoolPixel e = poolPixel<NHWC>(p, i, p.H, p.W);
    int h = e.y, w = e.x;
    const T *xc = poolPlane<NHWC>(x, p, e, p.H, p.W);
    const T *dyc = poolPlane<NHWC>(dy, p, e, p.P, p.Q);
    const PoolWindows r = poolWindows(p, h, w);
    float g = 0;
    for (int pp = r.p0; pp <= r.p1; ++pp)
      for (int q = r.q0; q <= r.q1; ++q) {
        // Find the first maximum of window (pp, q).
        float m = -INFINITY;
        int arg = -1;
        poolTaps(p, pp, q, [&](int, int, int hh, int ww) {
          float v = ld(xc + poolPix<NHWC>(p, hh, ww, p.W));
          if (v > m || (isnan(v) && !isnan(m))) {
            m = v;
            arg = hh * p.W + ww;
          }
        });
        if (arg == h * p.W + w)
          g += ld(dyc + poolPix<NHWC>(p, pp, q, p.Q));
      }
    st(dx + i, g);
  }
}

// fused_max_pool2d records each window's first maximum as its position
// kh * KW + kw (255: none), one byte per output element, and
// max_pool2d_index_grad routes by it: each input element sums the gradients
// of the (at most 4) windows whose recorded maximum it is, in the gather
// form's order (the gather form above finds the first maximum of each window
// again for every input element of it: 4 windows x 9 loads per element for a
// 3x3/2 pool).
// PRO: the prologue relu(x * scale + shift) per channel, rounded to T as
// the unfused normalization stored it.
template <typename T, bool NHWC, bool PRO>
__global__ void maxPoolIndex(const T *x, const float *scale, const float *shift,
                             T *y, uint8_t *arg, PoolParams p) {
  int64_t total = (int64_t)p.N * p.C * p.P * p.Q;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t n;
    int c, pp, q;
    layoutIndex(p.C, NHWC, i, n, c, pp, q, p.P, p.Q);
    float m = -INFINITY;
    int a = 255;
    poolTaps(p, pp, q, [&](int kh, int kw, int hh, int ww) {
      float v = ld(x + layoutAt(p.C, NHWC, n, c, hh, ww, p.H, p.W));
      if (PRO)
        v = roundAs(x, fmaxf(v * scale[c] + shift[c], 0.f));
      if (v > m || (isnan(v) && !isnan(m))) {
        m = v;
        a = kh * p.KW + kw;
      }
    });
    st(y + i, m);
    arg[i] = (uint8_t)a;
  }
}
template <typename T, bool NHWC>
__global__ void maxPoolBwdGather(const T *dy, const uint8_t *arg, T *dx,
                                 PoolParams p) {
  int64_t total = (int64_t)p.N * p.C * p.H * p.W;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t n;
    int c, h, w;
    layoutIndex(p.C, NHWC, i, n, c, h, w, p.H, p.W);
    const PoolWindows r = poolWindows(p, h, w);
    float g = 0;
    for (int pp = r.p0; pp <= r.p1; ++pp)
      for (int q = r.q0; q <= r.q1; ++q) {
        int64_t o = layoutAt(p.C, NHWC, n, c, pp, q, p.P, p.Q);
        int a = arg[o];
        if (a != 255 && pp * p.SH - p.PT + a / p.KW == h &&
            q * p.SW - p.PL + a % p.KW == w)
          g += ld(dy + o);
      }
    st(dx + i, g);
  }
}

__device__ __forceinline__ int avgDivisor(const PoolParams &p, int pp, int q) {
  int h0 = pp * p.SH - p.PT, w0 = q * p.SW - p.PL;
  int h1 = min(h0 + p.KH, p.H + p.PB), w1 = min(w0 + p.KW, p.W + p.PR);
  if (p.countIncludePad)
    return (h1 - h0) * (w1 - w0);
  h0 = max(h0, 0);
  w0 = max(w0, 0);
  h1 = min(h1, p.H);
  w1 = min(w1, p.W);
  return (h1 - h0) * (w1 - w0);
}

template <typename T, bool NHWC>
__global__ void avgPoolFwd(const T *x, T *y, PoolParams p) {
  int64_t total = (int64_t)p.N * p.C * p.P * p.Q;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    PoolPixel e = poolPixel<NHWC>(p, i, p.P, p.Q);
    const T *xc = poolPlane<NHWC>(x, p, e, p.H, p.W);
    float s = 0;
    poolTaps(p, e.y, e.x, [&](int, int, int h, int w) {
      s += ld(xc + poolPix<NHWC>(p, h, w, p.W));
    });
    st(y + i, s / (float)avgDivisor(p, e.y, e.x));
  }
}

template <typename T, bool NHWC>
__global__ void avgPoolBwd(const T *dy, T *dx, PoolParams p) {
  int64_t total = (int64_t)p.N * p.C * p.H * p.W;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    PoolPixel e = poolPixel<NHWC>(p, i, p.H, p.W);
    int h = e.y, w = e.x;
    const T *dyc = poolPlane<NHWC>(dy, p, e, p.P, p.Q);
    const PoolWindows r = poolWindows(p, h, w);
    float g = 0;
    for (int pp = r.p0; pp <= r.p1; ++pp)
      for (int q = r.q0; q <= r.q1; ++q) {
        int h0 = pp * p.SH - p.PT, w0 = q * p.SW - p.PL;
        if (h < h0 || h >= h0 + p.KH || w < w0 || w >= w0 + p.KW)
          continue;
        g += ld(dyc + poolPix<NHWC>(p, pp, q, p.Q)) /
             (float)avgDivisor(p, pp, q);
      }
    st(dx + i, g);
  }
}
// cnnc-prelude-end
} // namespace

#endif // CNNC_KERNELS_POOLING_CUH
