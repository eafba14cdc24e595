// GPU check of Context's library calls against CPU references: convolutions
// (asymmetric padding emulation, stride, dilation, groups, NHWC, f16; forward,
// backward data, backward filter, accumulate) and matmuls (all transpose
// combinations, f16, accumulate) and fused convolutions with a bias/residual/
// activation epilogue in each of their forms (cuDNN's fused call, conv +
// epilogue, and the timed choice), and convolutions with BatchNorm
// statistics (cuDNN's conv + GenStats graph, the split form, the timed
// choice), and backward-data convolutions with the residual-gradient
// epilogue (cuDNN's dgrad + add + ReLU-backward graph, the split form, the
// timed choice), and backward-filter convolutions with the scale-shift-ReLU
// prologue (cuDNN's prologue + wgrad graph, the split form, the timed
// choice). Exit 3 without a GPU (ctest SKIP).
#include "cnnrt/cnnrt.h"

#include <cmath>
#include <cstdio>
#include <vector>

using namespace cnnrt;

namespace {

uint64_t gState = 88172645463325252ull;
float rnd() {
  gState ^= gState << 13;
  gState ^= gState >> 7;
  gState ^= gState << 17;
  return static_cast<float>(gState >> 40) / 16777216.0f * 2.f - 1.f;
}

struct Buf {
  std::vector<float> h;
  void *d = nullptr;
  DType dt;
  Buf(size_t n, DType t, bool random) : h(n), dt(t) {
    for (float &v : h) {
      v = random ? rnd() : 0.f;
      if (dt == DType::F16)
        v = __half2float(__float2half(v));
    }
    cudaMalloc(&d, n * dtypeSize(t));
    upload();
  }
  void upload() {
    if (dt == DType::F16) {
      std::vector<__half> t(h.size());
      for (size_t i = 0; i < h.size(); ++i)
        t[i] = __float2half(h[i]);
      cudaMemcpy(d, t.data(), t.size() * 2, cudaMemcpyHostToDevice);
    } else {
      cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    }
    // A copy from pageable memory may return before its DMA has landed,
    // and the Context's streams are non-blocking (no implicit order with
    // the legacy stream): without this, a check can read the buffer's
    // previous contents (conv-stats 1x1 +prologue failed that way on an
    // H200 shared with other GPU processes, session 31).
    cudaDeviceSynchronize();
  }
  std::vector<float> download() const {
    std::vector<float> out(h.size());
    if (dt == DType::F16) {
      std::vector<__half> t(h.size());
      cudaMemcpy(t.data(), d, t.size() * 2, cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < h.size(); ++i)
        out[i] = __half2float(t[i]);
    } else {
      cudaMemcpy(out.data(), d, out.size() * 4, cudaMemcpyDeviceToHost);
    }
    return out;
  }
};

int failures = 0;
void compare(const char *what, const std::vector<float> &got,
             const std::vector<double> &want, double tol) {
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double e = std::fabs(got[i] - want[i]) / (1.0 + std::fabs(want[i]));
    if (!(e <= worst)) {
      worst = e;
      at = i;
    }
  }
  bool ok = worst <= tol;
  std::printf("%-46s max rel err %.2e %s\n", what, worst, ok ? "ok" : "FAIL");
  if (!ok) {
    std::printf("  at %zu: got %g want %g\n", at, got[at], want[at]);
    ++failures;
  }
}

// Index helpers for NCHW / NHWC activations and KCRS / KRSC filters.
size_t ai(const ConvDesc &d, bool nhwc, int n, int c, int y, int x, int C,
          int H, int W) {
  (void)d;
  return nhwc ? ((size_t(n) * H + y) * W + x) * C + c
              : ((size_t(n) * C + c) * H + y) * W + x;
}
size_t wi(const ConvDesc &d, bool nhwc, int k, int c, int r, int s) {
  int Cg = d.C / d.groups;
  return nhwc ? ((size_t(k) * d.R + r) * d.S + s) * Cg + c
              : ((size_t(k) * Cg + c) * d.R + r) * d.S + s;
}

/// The double-precision backward-data convolution dx = conv_bwd_data(dy, w)
/// (checkConv's reference, and checkDgradAddRelu's).
std::vector<double> refBwdData(const ConvDesc &d, const std::vector<float> &dy,
                               const std::vector<float> &w) {
  bool nhwc = d.layout == Layout::NHWC;
  int Cg = d.C / d.groups, Kg = d.K / d.groups;
  std::vector<double> rdx(size_t(d.N) * d.C * d.H * d.W, 0);
  for (int n = 0; n < d.N; ++n)
    for (int k = 0; k < d.K; ++k)
      for (int p = 0; p < d.P; ++p)
        for (int q = 0; q < d.Q; ++q) {
          int g = k / Kg;
          double v = dy[ai(d, nhwc, n, k, p, q, d.K, d.P, d.Q)];
          for (int c = 0; c < Cg; ++c)
            for (int r = 0; r < d.R; ++r)
              for (int s = 0; s < d.S; ++s) {
                int iy = p * d.strideH - d.padT + r * d.dilH;
                int ix = q * d.strideW - d.padL + s * d.dilW;
                if (iy < 0 || iy >= d.H || ix < 0 || ix >= d.W)
                  continue;
                rdx[ai(d, nhwc, n, g * Cg + c, iy, ix, d.C, d.H, d.W)] +=
                    v * w[wi(d, nhwc, k, c, r, s)];
              }
        }
  return rdx;
}

void checkConv(Context &ctx, int id, const ConvDesc &d, const char *name) {
  bool nhwc = d.layout == Layout::NHWC;
  int Cg = d.C / d.groups, Kg = d.K / d.groups;
  size_t nx = size_t(d.N) * d.C * d.H * d.W, nw = size_t(d.K) * Cg * d.R * d.S,
         ny = size_t(d.N) * d.K * d.P * d.Q;
  // y and dw start as garbage: a plan that adds to its output instead of
  // overwriting it (beta != 0, split-K partials) must fail here, since
  // training reuses the buffers step after step.
  Buf x(nx, d.dtype, true), w(nw, d.dtype, true), y(ny, d.dtype, true),
      dy(ny, d.dtype, true), dx(nx, d.dtype, true), dw(nw, d.dtype, true);
  std::vector<double> ry(ny, 0), rdw(nw, 0);
  std::vector<double> rdx = refBwdData(d, dy.h, w.h);
  for (int n = 0; n < d.N; ++n)
    for (int k = 0; k < d.K; ++k)
      for (int p = 0; p < d.P; ++p)
        for (int q = 0; q < d.Q; ++q) {
          int g = k / Kg;
          size_t yi = ai(d, nhwc, n, k, p, q, d.K, d.P, d.Q);
          for (int c = 0; c < Cg; ++c)
            for (int r = 0; r < d.R; ++r)
              for (int s = 0; s < d.S; ++s) {
                int iy = p * d.strideH - d.padT + r * d.dilH;
                int ix = q * d.strideW - d.padL + s * d.dilW;
                if (iy < 0 || iy >= d.H || ix < 0 || ix >= d.W)
                  continue;
                size_t xi = ai(d, nhwc, n, g * Cg + c, iy, ix, d.C, d.H, d.W);
                size_t wI = wi(d, nhwc, k, c, r, s);
                ry[yi] += double(x.h[xi]) * w.h[wI];
                rdw[wI] += double(dy.h[yi]) * x.h[xi];
              }
        }
  double tol = d.dtype == DType::F16 ? 2e-2 : 1e-5;
  ctx.convFwd(id, x.d, w.d, y.d);
  std::vector<double> rdxAcc(nx);
  for (size_t i = 0; i < nx; ++i)
    rdxAcc[i] = rdx[i] + dx.h[i];
  ctx.convBwdData(id, dy.d, w.d, dx.d, /*accumulate=*/true);
  ctx.convBwdFilter(id, x.d, dy.d, dw.d);
  cudaStreamSynchronize(ctx.stream());
  std::string n = name;
  compare((n + " fwd").c_str(), y.download(), ry, tol);
  compare((n + " bwd_data (accumulate)").c_str(), dx.download(), rdxAcc, tol);
  compare((n + " bwd_filter").c_str(), dw.download(), rdw, tol);
  ctx.convBwdData(id, dy.d, w.d, dx.d);
  cudaStreamSynchronize(ctx.stream());
  compare((n + " bwd_data").c_str(), dx.download(), rdx, tol);
  // Twice more into the same buffers (a training step's second and third
  // calls): the results must not change.
  for (int again = 0; again < 2; ++again) {
    ctx.convFwd(id, x.d, w.d, y.d);
    ctx.convBwdData(id, dy.d, w.d, dx.d);
    ctx.convBwdFilter(id, x.d, dy.d, dw.d);
  }
  cudaStreamSynchronize(ctx.stream());
  compare((n + " fwd, third call").c_str(), y.download(), ry, tol);
  compare((n + " bwd_data, third call").c_str(), dx.download(), rdx, tol);
  compare((n + " bwd_filter, third call").c_str(), dw.download(), rdw, tol);
}

void checkMatmul(Context &ctx, int id, const MatmulDesc &m, bool acc) {
  Buf A(m.M * m.K, m.dtype, true), B(m.K * m.N, m.dtype, true),
      C(m.M * m.N, m.dtype, true);
  std::vector<double> want(m.M * m.N);
  for (int64_t i = 0; i < m.M; ++i)
    for (int64_t j = 0; j < m.N; ++j) {
      double s = acc ? C.h[i * m.N + j] : 0.0;
      for (int64_t k = 0; k < m.K; ++k) {
        float a = m.transA ? A.h[k * m.M + i] : A.h[i * m.K + k];
        float b = m.transB ? B.h[j * m.K + k] : B.h[k * m.N + j];
        s += double(a) * b;
      }
      want[i * m.N + j] = s;
    }
  ctx.matmul(id, A.d, B.d, C.d, acc);
  cudaStreamSynchronize(ctx.stream());
  char name[96];
  std::snprintf(name, sizeof(name), "matmul %s M%lld N%lld K%lld tA%d tB%d%s",
                dtypeName(m.dtype), (long long)m.M, (long long)m.N,
                (long long)m.K, m.transA, m.transB, acc ? " acc" : "");
  compare(name, C.download(), want, m.dtype == DType::F16 ? 2e-2 : 1e-5);
}

// The split form of a fused convolution's epilogue, as generated code has it:
// y = act(y + bias [+ residual]) in place.
template <typename T>
__global__ void epilogueKernel(T *y, const T *bias, const T *res, int64_t n,
                               int K, int64_t hw, bool nhwc, bool relu) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t k = nhwc ? i % K : (i / hw) % K;
    float v = float(y[i]) + float(bias[k]);
    if (res)
      v += float(res[i]);
    if (relu)
      v = v > 0.f ? v : 0.f;
    y[i] = T(v);
  }
}

/// One fused-conv configuration; its epilogue function reads it from here
/// (ConvEpilogueFn is a plain function pointer).
struct FusedCase {
  ConvDesc d;
  Activation act;
  bool residual;
  const char *name;
};
const FusedCase kFused[] = {
    {{128, 4, 32, 32, 16, 3, 3, 32, 32,          1,
      1, 1,   1, 1, 1,  1, 1, 1, DType::F16, Layout::NHWC},
     Activation::Relu,
     false,
     "fused conv+bias+relu C=4 nhwc f16 (SimpleCNN conv1)"},
    {{4, 16, 8, 8, 32, 3, 3, 8, 8,          1,
      1, 1,  1, 1, 1,  1, 1, 1, DType::F16, Layout::NHWC},
     Activation::Relu,
     false,
     "fused conv+bias+relu nhwc f16"},
    {{4, 16, 8, 8, 32, 3, 3, 8, 8,          1,
      1, 1,  1, 1, 1,  1, 1, 1, DType::F16, Layout::NHWC},
     Activation::Relu,
     true,
     "fused conv+bias+add+relu nhwc f16"},
    {{2, 8, 6, 6, 8, 1, 1, 6, 6,          0,
      0, 0, 0, 1, 1, 1, 1, 1, DType::F32, Layout::NCHW},
     Activation::Identity,
     true,
     "fused conv+bias+add nchw f32"},
    {{2, 3, 7, 6, 4, 3, 2, 3, 6,          0,
      1, 1, 0, 2, 1, 1, 1, 1, DType::F32, Layout::NCHW},
     Activation::Relu,
     false,
     "fused conv+bias+relu asym-pad nchw f32"},
};

template <int I>
void epilogue(Context &ctx, void *y, const void *bias, const void *res) {
  const FusedCase &f = kFused[I];
  const ConvDesc &d = f.d;
  int64_t n = int64_t(d.N) * d.K * d.P * d.Q;
  bool nhwc = d.layout == Layout::NHWC, relu = f.act == Activation::Relu;
  if (d.dtype == DType::F16)
    epilogueKernel<__half><<<gridFor(n), 256, 0, ctx.stream()>>>(
        (__half *)y, (const __half *)bias, (const __half *)res, n, d.K,
        int64_t(d.P) * d.Q, nhwc, relu);
  else
    epilogueKernel<float><<<gridFor(n), 256, 0, ctx.stream()>>>(
        (float *)y, (const float *)bias, (const float *)res, n, d.K,
        int64_t(d.P) * d.Q, nhwc, relu);
  ctx.checkLaunch(f.name);
}
const ConvEpilogueFn kEpilogues[] = {epilogue<0>, epilogue<1>, epilogue<2>,
                                     epilogue<3>, epilogue<4>};

/// Runs every fused case under `mode` against a double-precision reference.
void checkFusedConvs(ConvFusion mode, const char *modeName) {
  ModelSpec spec{"ops_check_fused", 256,     nullptr, 0, 1, 1, 1, 1, 1,
                 nullptr,           nullptr, nullptr};
  ContextOptions opts = ContextOptions::fromEnv();
  opts.convFusion = mode;
  Context ctx(spec, opts);
  const int n = int(sizeof(kFused) / sizeof(kFused[0]));
  for (int i = 0; i < n; ++i) {
    ctx.registerConv(i, kFused[i].d, kFused[i].name);
    ctx.registerConvBiasAct(i, i, kFused[i].act, kFused[i].residual,
                            kEpilogues[i], kFused[i].name);
  }
  ctx.finishPrepare();
  for (int i = 0; i < n; ++i) {
    const FusedCase &f = kFused[i];
    const ConvDesc &d = f.d;
    bool nhwc = d.layout == Layout::NHWC;
    int Cg = d.C / d.groups, Kg = d.K / d.groups;
    size_t nx = size_t(d.N) * d.C * d.H * d.W,
           nw = size_t(d.K) * Cg * d.R * d.S,
           ny = size_t(d.N) * d.K * d.P * d.Q;
    Buf x(nx, d.dtype, true), w(nw, d.dtype, true), y(ny, d.dtype, true),
        b(d.K, d.dtype, true), r(ny, d.dtype, true);
    std::vector<double> want(ny);
    for (int nn = 0; nn < d.N; ++nn)
      for (int k = 0; k < d.K; ++k)
        for (int p = 0; p < d.P; ++p)
          for (int q = 0; q < d.Q; ++q) {
            int g = k / Kg;
            size_t yi = ai(d, nhwc, nn, k, p, q, d.K, d.P, d.Q);
            double acc = b.h[k] + (f.residual ? r.h[yi] : 0.0);
            for (int c = 0; c < Cg; ++c)
              for (int rr = 0; rr < d.R; ++rr)
                for (int ss = 0; ss < d.S; ++ss) {
                  int iy = p * d.strideH - d.padT + rr * d.dilH;
                  int ix = q * d.strideW - d.padL + ss * d.dilW;
                  if (iy < 0 || iy >= d.H || ix < 0 || ix >= d.W)
                    continue;
                  acc += double(x.h[ai(d, nhwc, nn, g * Cg + c, iy, ix, d.C,
                                       d.H, d.W)]) *
                         w.h[wi(d, nhwc, k, c, rr, ss)];
                }
            want[yi] = f.act == Activation::Relu && acc < 0 ? 0.0 : acc;
          }
    ctx.convBiasActFwd(i, x.d, w.d, b.d, f.residual ? r.d : nullptr, y.d);
    cudaStreamSynchronize(ctx.stream());
    bool cudnn = ctx.convBiasActUsesCudnn(i);
    std::string what = std::string(f.name) + " [" + modeName + ": " +
                       (cudnn ? "cuDNN call" : "conv+epilogue") + "]";
    compare(what.c_str(), y.download(), want,
            d.dtype == DType::F16 ? 2e-2 : 1e-5);
    // Forced modes must take their form (cuDNN supports relu with any
    // algorithm it picked; identity only through IMPLICIT_PRECOMP_GEMM,
    // which it may refuse: then the split form is the documented fallback).
    if ((mode == ConvFusion::Split && cudnn) ||
        (mode == ConvFusion::CuDNN && f.act == Activation::Relu && !cudnn)) {
      std::printf("  %s: wrong form for mode %s\n", f.name, modeName);
      ++failures;
    }
  }
  ctx.checkLaunch("ops_check fused");
}
// fused_conv2d_stats' split form as the generated code has it: the
// convolution, then the per-channel sums of y (one thread per channel here).
__global__ void channelSums(const __half *y, float *sum, float *sumSq,
                            int64_t rows, int K) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= K)
    return;
  double s = 0, q = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double v = __half2float(y[r * K + k]);
    s += v;
    q += v * v;
  }
  sum[k] = (float)s;
  sumSq[k] = (float)q;
}

// The second and fourth take the scale-shift-ReLU prologue; the fifth is a
// ResNet stem in small: 7x7 stride 2 on an input padded to 4 channels
// (cnn-precision), which cuDNN's GenStats graph may refuse (then split).
const ConvDesc kStatsConvs[] = {
    {4, 16, 8, 8, 32, 3, 3, 8, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, DType::F16,
     Layout::NHWC},
    {4, 16, 8, 8, 32, 3, 3, 8, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, DType::F16,
     Layout::NHWC},
    {4, 32, 6, 6, 64, 1, 1, 6, 6, 0, 0, 0, 0, 1, 1, 1, 1, 1, DType::F16,
     Layout::NHWC},
    {4, 32, 6, 6, 64, 1, 1, 6, 6, 0, 0, 0, 0, 1, 1, 1, 1, 1, DType::F16,
     Layout::NHWC},
    {4, 4, 16, 16, 16, 7, 7, 8, 8, 3, 3, 3, 3, 2, 2, 1, 1, 1, DType::F16,
     Layout::NHWC},
};
bool hasPrologue(int i) { return i % 2 == 1 && i < 4; }

__global__ void scaleShiftRelu(const __half *x, const float *scale,
                               const float *shift, __half *out, int64_t n,
                               int C) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = __half2float(x[i]) * scale[i % C] + shift[i % C];
    out[i] = __float2half(v > 0.f ? v : 0.f);
  }
}

template <int I>
void statsSplit(Context &ctx, const void *x, const void *w, void *y,
                float *sum, float *sumSq, const float *scale,
                const float *shift, void *scratch) {
  const ConvDesc &d = kStatsConvs[I];
  if (scale) {
    int64_t n = int64_t(d.N) * d.H * d.W * d.C;
    scaleShiftRelu<<<gridFor(n), 256, 0, ctx.stream()>>>(
        (const __half *)x, scale, shift, (__half *)scratch, n, d.C);
    x = scratch;
  }
  ctx.convFwd(I, x, w, y);
  channelSums<<<1, 64, 0, ctx.stream()>>>((const __half *)y, sum, sumSq,
                                          int64_t(d.N) * d.P * d.Q, d.K);
  ctx.checkLaunch("conv-stats split");
}
const ConvStatsFn kStatsSplits[] = {statsSplit<0>, statsSplit<1>,
                                    statsSplit<2>, statsSplit<3>,
                                    statsSplit<4>};

/// registerConvStats / convStatsFwd under `mode` (split, cudnn = the conv +
/// GenStats graph whenever cuDNN has a plan, auto = timed) against a
/// double-precision reference of y and of its per-channel sums.
void checkConvStats(ConvFusion mode, const char *modeName) {
  ModelSpec spec{"ops_check_conv_stats", 256, nullptr, 0, 1, 1, 1, 1, 1,
                 nullptr, nullptr, nullptr};
  ContextOptions opts = ContextOptions::fromEnv();
  opts.convFusion = mode;
  Context ctx(spec, opts);
  const int n = int(sizeof(kStatsConvs) / sizeof(kStatsConvs[0]));
  for (int i = 0; i < n; ++i) {
    ctx.registerConv(i, kStatsConvs[i], "conv-stats");
    ctx.registerConvStats(i, i, kStatsSplits[i], hasPrologue(i), "conv-stats");
  }
  ctx.finishPrepare();
  for (int i = 0; i < n; ++i) {
    const ConvDesc &d = kStatsConvs[i];
    size_t nx = size_t(d.N) * d.C * d.H * d.W, nw = size_t(d.K) * d.C * d.R * d.S,
           ny = size_t(d.N) * d.K * d.P * d.Q;
    Buf x(nx, d.dtype, true), w(nw, d.dtype, true), y(ny, d.dtype, false),
        sum(d.K, DType::F32, false), sq(d.K, DType::F32, false),
        scale(d.C, DType::F32, true), shift(d.C, DType::F32, true);
    bool pro = hasPrologue(i);
    ctx.convStatsFwd(i, x.d, w.d, y.d, static_cast<float *>(sum.d),
                     static_cast<float *>(sq.d),
                     pro ? static_cast<float *>(scale.d) : nullptr,
                     pro ? static_cast<float *>(shift.d) : nullptr);
    cudaStreamSynchronize(ctx.stream());
    bool graph = ctx.convStatsUsesGraph(i);
    // What the convolution reads: x, or relu(x * scale + shift) rounded to
    // f16 (the prologue; the graph form takes scale and shift in f16).
    auto param = [&](float v) {
      return graph ? __half2float(__float2half(v)) : v;
    };
    std::vector<float> xin = x.h;
    if (pro)
      for (size_t j = 0; j < nx; ++j) {
        float v = x.h[j] * param(scale.h[j % d.C]) + param(shift.h[j % d.C]);
        xin[j] = __half2float(__float2half(v > 0.f ? v : 0.f));
      }
    std::vector<double> want(ny, 0), wantSum(d.K, 0), wantSq(d.K, 0);
    for (int nn = 0; nn < d.N; ++nn)
      for (int p = 0; p < d.P; ++p)
        for (int q = 0; q < d.Q; ++q)
          for (int k = 0; k < d.K; ++k) {
            double acc = 0;
            for (int c = 0; c < d.C; ++c)
              for (int r = 0; r < d.R; ++r)
                for (int t = 0; t < d.S; ++t) {
                  int iy = p * d.strideH - d.padT + r * d.dilH;
                  int ix = q * d.strideW - d.padL + t * d.dilW;
                  if (iy < 0 || iy >= d.H || ix < 0 || ix >= d.W)
                    continue;
                  acc += double(xin[ai(d, true, nn, c, iy, ix, d.C, d.H, d.W)]) *
                         w.h[wi(d, true, k, c, r, t)];
                }
            want[ai(d, true, nn, k, p, q, d.K, d.P, d.Q)] = acc;
            // The split form sums y as stored (rounded to f16); the graph
            // sums its f32 accumulators. A sum with cancellation is
            // sensitive to that difference (2e-2 relative seen).
            double v = graph ? acc : double(__half2float(__float2half(float(acc))));
            wantSum[k] += v;
            wantSq[k] += v * v;
          }
    std::string what = std::string("conv-stats ") + std::to_string(d.R) + "x" +
                       std::to_string(d.S) + " C=" + std::to_string(d.C) +
                       (pro ? " +prologue" : "") +
                       " nhwc f16 [" + modeName + ": " +
                       (graph ? "conv+GenStats graph" : "split") + "]";
    compare((what + " y").c_str(), y.download(), want, 2e-2);
    // Sums of ~300 values of magnitude ~3: relative to the sum's scale.
    compare((what + " sum").c_str(), sum.download(), wantSum, 2e-2);
    compare((what + " sum_sq").c_str(), sq.download(), wantSq, 2e-2);
    if (mode == ConvFusion::Split && graph) {
      std::printf("  conv-stats %d: the graph form under mode split\n", i);
      ++failures;
    }
    // cuDNN 9 on sm_90 has conv + GenStats plans for the 3x3 and 1x1 cases,
    // with and without the prologue: a forced graph that falls back to the
    // split form means the plans failed (as the plain ones did in sessions
    // 12-13, when their timing passed a prologue's scale and shift).
    if (mode == ConvFusion::CuDNN && !graph && d.C % 8 == 0) {
      std::printf("  conv-stats %d: no graph form under mode cudnn\n", i);
      ++failures;
    }
  }
  ctx.checkLaunch("ops_check conv-stats");
}

// fused_conv2d_bwd_data's split form as the generated code has it: the
// backward-data convolution, then dx = reluOut > 0 ? dx + addend : 0 in
// place.
__global__ void addReluGrad(__half *dx, const __half *addend,
                            const __half *reluOut, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = __half2float(dx[i]) + __half2float(addend[i]);
    dx[i] = __float2half(__half2float(reluOut[i]) > 0.f ? v : 0.f);
  }
}

// ResNet-50's bottleneck at a small batch: conv1's 1x1 (256 -> 64 channels),
// conv2's 3x3, and a downsample's 1x1 stride 2, whose dgrad cuDNN's fused
// graph may not cover (then split).
const ConvDesc kDgradConvs[] = {
    {8, 256, 14, 14, 64, 1, 1, 14, 14, 0, 0, 0, 0, 1, 1, 1, 1, 1, DType::F16,
     Layout::NHWC},
    {8, 64, 14, 14, 64, 3, 3, 14, 14, 1, 1, 1, 1, 1, 1, 1, 1, 1, DType::F16,
     Layout::NHWC},
    {8, 128, 14, 14, 256, 1, 1, 7, 7, 0, 0, 0, 0, 2, 2, 1, 1, 1, DType::F16,
     Layout::NHWC},
};
const char *const kDgradNames[] = {"1x1 C=256 K=64", "3x3 C=64 K=64",
                                   "1x1 stride2 C=128 K=256"};

template <int I>
void dgradSplit(Context &ctx, const void *dy, const void *w, const void *addend,
                const void *reluOut, void *dx) {
  const ConvDesc &d = kDgradConvs[I];
  ctx.convBwdData(I, dy, w, dx);
  int64_t n = int64_t(d.N) * d.H * d.W * d.C;
  addReluGrad<<<gridFor(n), 256, 0, ctx.stream()>>>(
      (__half *)dx, (const __half *)addend, (const __half *)reluOut, n);
  ctx.checkLaunch("dgrad+add+drelu split");
}
const ConvDgradEpilogueFn kDgradSplits[] = {dgradSplit<0>, dgradSplit<1>,
                                            dgradSplit<2>};

/// registerConvBwdDataAddRelu / convBwdDataAddRelu under `mode` (split,
/// cudnn = the dgrad + add + ReLU-backward graph whenever cuDNN has a plan,
/// auto = timed) against a double-precision reference of reluOut > 0 ?
/// dgrad(dy, w) + addend : 0.
void checkDgradAddRelu(ConvFusion mode, const char *modeName) {
  ModelSpec spec{"ops_check_dgrad_add_relu", 256, nullptr, 0, 1, 1, 1, 1, 1,
                 nullptr, nullptr, nullptr};
  ContextOptions opts = ContextOptions::fromEnv();
  opts.convFusion = mode;
  Context ctx(spec, opts);
  const int n = int(sizeof(kDgradConvs) / sizeof(kDgradConvs[0]));
  for (int i = 0; i < n; ++i) {
    ctx.registerConv(i, kDgradConvs[i], "dgrad+add+drelu");
    ctx.registerConvBwdDataAddRelu(i, i, kDgradSplits[i], "dgrad+add+drelu");
  }
  ctx.finishPrepare();
  for (int i = 0; i < n; ++i) {
    const ConvDesc &d = kDgradConvs[i];
    size_t nx = size_t(d.N) * d.C * d.H * d.W,
           nw = size_t(d.K) * d.C * d.R * d.S,
           ny = size_t(d.N) * d.K * d.P * d.Q;
    // dx starts as garbage: the graph must overwrite it (beta 0), as
    // training reuses the buffer step after step.
    Buf dy(ny, d.dtype, true), w(nw, d.dtype, true), addend(nx, d.dtype, true),
        reluOut(nx, d.dtype, true), dx(nx, d.dtype, true);
    // A ReLU's output: about half exactly 0 (the mask's edge: the gradient
    // must stop there), the rest positive and f16-normal (>= 1/16: whether
    // a fused kernel flushes subnormal f16 inputs is not this check's
    // question).
    for (float &v : reluOut.h)
      v = v > 0.f ? __half2float(__float2half(0.0625f + v)) : 0.f;
    reluOut.upload();
    std::vector<double> want = refBwdData(d, dy.h, w.h);
    for (size_t j = 0; j < nx; ++j)
      want[j] = reluOut.h[j] > 0.f ? want[j] + addend.h[j] : 0.0;
    ctx.convBwdDataAddRelu(i, dy.d, w.d, addend.d, reluOut.d, dx.d);
    cudaStreamSynchronize(ctx.stream());
    bool graph = ctx.convBwdDataAddReluUsesGraph(i);
    std::string what = std::string("dgrad+add+drelu ") + kDgradNames[i] +
                       " nhwc f16 [" + modeName + ": " +
                       (graph ? "dgrad+add+drelu graph" : "split") + "]";
    // The split form rounds the dgrad to f16 before the add; the graph adds
    // in f32. Both are within f16's tolerance of the reference.
    compare(what.c_str(), dx.download(), want, 2e-2);
    // Twice more into the same dx (a training step's second and third
    // calls): the result must not change.
    for (int again = 0; again < 2; ++again)
      ctx.convBwdDataAddRelu(i, dy.d, w.d, addend.d, reluOut.d, dx.d);
    cudaStreamSynchronize(ctx.stream());
    compare((what + ", third call").c_str(), dx.download(), want, 2e-2);
    if (mode == ConvFusion::Split && graph) {
      std::printf("  dgrad+add+drelu %d: the graph form under mode split\n", i);
      ++failures;
    }
    // cuDNN 9 on sm_90 is expected to fuse the stride-1 cases; the
    // stride-2 dgrad may not be covered, so it only reports its form.
    if (mode == ConvFusion::CuDNN) {
      if (d.strideH == 1 && !graph) {
        std::printf("  dgrad+add+drelu %d: no graph form under mode cudnn "
                    "FAIL\n",
                    i);
        ++failures;
      } else if (d.strideH != 1) {
        std::printf("  dgrad+add+drelu %d (stride %d): the %s form ran under "
                    "mode cudnn\n",
                    i, d.strideH, graph ? "graph" : "split");
      }
    }
  }
  ctx.checkLaunch("ops_check dgrad+add+drelu");
}

// fused_conv2d_bwd_filter's convolutions: ResNet-50's 3x3 and 1x1 (64 ->
// 256) at a small batch, and a 3x3 stride 2, whose wgrad cuDNN's fused
// graph may not cover (then split).
const ConvDesc kWgradConvs[] = {
    {8, 64, 14, 14, 64, 3, 3, 14, 14, 1, 1, 1, 1, 1, 1, 1, 1, 1, DType::F16,
     Layout::NHWC},
    {8, 64, 14, 14, 256, 1, 1, 14, 14, 0, 0, 0, 0, 1, 1, 1, 1, 1, DType::F16,
     Layout::NHWC},
    {8, 128, 14, 14, 128, 3, 3, 7, 7, 1, 1, 1, 1, 2, 2, 1, 1, 1, DType::F16,
     Layout::NHWC},
};
const char *const kWgradNames[] = {"3x3 C=64 K=64", "1x1 C=64 K=256",
                                   "3x3 stride2 C=128 K=128"};

// fused_conv2d_bwd_filter's split form as the generated code has it: x' =
// relu(x * scale + shift) into the scratch buffer, then the backward-filter
// convolution on x'.
template <int I>
void wgradSplit(Context &ctx, const void *x, const void *dy, void *dw,
                const float *scale, const float *shift, void *scratch) {
  const ConvDesc &d = kWgradConvs[I];
  int64_t n = int64_t(d.N) * d.H * d.W * d.C;
  scaleShiftRelu<<<gridFor(n), 256, 0, ctx.stream()>>>(
      (const __half *)x, scale, shift, (__half *)scratch, n, d.C);
  ctx.checkLaunch("sbr+wgrad split");
  ctx.convBwdFilter(I, scratch, dy, dw);
}
const ConvWgradPrologueFn kWgradSplits[] = {wgradSplit<0>, wgradSplit<1>,
                                            wgradSplit<2>};

/// registerConvBwdFilterPrologue / convBwdFilterPrologue under `mode`
/// (split, cudnn = the prologue + wgrad graph whenever cuDNN has a plan,
/// auto = timed) against a double-precision reference of
/// conv_bwd_filter(relu(x * scale + shift), dy).
void checkWgradPrologue(ConvFusion mode, const char *modeName) {
  ModelSpec spec{"ops_check_wgrad_prologue", 256, nullptr, 0, 1, 1, 1, 1, 1,
                 nullptr, nullptr, nullptr};
  ContextOptions opts = ContextOptions::fromEnv();
  opts.convFusion = mode;
  Context ctx(spec, opts);
  const int n = int(sizeof(kWgradConvs) / sizeof(kWgradConvs[0]));
  for (int i = 0; i < n; ++i) {
    ctx.registerConv(i, kWgradConvs[i], "sbr+wgrad");
    ctx.registerConvBwdFilterPrologue(i, i, kWgradSplits[i], "sbr+wgrad");
  }
  ctx.finishPrepare();
  for (int i = 0; i < n; ++i) {
    const ConvDesc &d = kWgradConvs[i];
    size_t nx = size_t(d.N) * d.C * d.H * d.W,
           nw = size_t(d.K) * d.C * d.R * d.S,
           ny = size_t(d.N) * d.K * d.P * d.Q;
    // dw starts as garbage: the graph must overwrite it (beta 0), as
    // training reuses the buffer step after step.
    Buf x(nx, d.dtype, true), dy(ny, d.dtype, true), dw(nw, d.dtype, true),
        scale(d.C, DType::F32, true), shift(d.C, DType::F32, true);
    // x in about [-2, 2], a positive scale and a small shift: about half of
    // x * scale + shift is negative, so the ReLU's mask matters.
    for (float &v : x.h)
      v = __half2float(__float2half(2.f * v));
    x.upload();
    for (float &v : scale.h)
      v = 0.5f + 0.5f * std::fabs(v);
    for (float &v : shift.h)
      v *= 0.25f;
    scale.upload();
    shift.upload();
    ctx.convBwdFilterPrologue(i, x.d, dy.d, dw.d, static_cast<float *>(scale.d),
                              static_cast<float *>(shift.d));
    cudaStreamSynchronize(ctx.stream());
    bool graph = ctx.convBwdFilterPrologueUsesGraph(i);
    // What the wgrad reads: relu(x * scale + shift) rounded to f16, with
    // scale and shift rounded to f16 in the graph form (as checkConvStats'
    // prologue reference).
    auto param = [&](float v) {
      return graph ? __half2float(__float2half(v)) : v;
    };
    std::vector<float> xin(nx);
    for (size_t j = 0; j < nx; ++j) {
      float v = x.h[j] * param(scale.h[j % d.C]) + param(shift.h[j % d.C]);
      xin[j] = __half2float(__float2half(v > 0.f ? v : 0.f));
    }
    std::vector<double> want(nw, 0);
    for (int nn = 0; nn < d.N; ++nn)
      for (int p = 0; p < d.P; ++p)
        for (int q = 0; q < d.Q; ++q)
          for (int k = 0; k < d.K; ++k) {
            double g = dy.h[ai(d, true, nn, k, p, q, d.K, d.P, d.Q)];
            for (int r = 0; r < d.R; ++r)
              for (int t = 0; t < d.S; ++t) {
                int iy = p * d.strideH - d.padT + r * d.dilH;
                int ix = q * d.strideW - d.padL + t * d.dilW;
                if (iy < 0 || iy >= d.H || ix < 0 || ix >= d.W)
                  continue;
                const float *xr =
                    &xin[ai(d, true, nn, 0, iy, ix, d.C, d.H, d.W)];
                double *wr = &want[wi(d, true, k, 0, r, t)];
                for (int c = 0; c < d.C; ++c)
                  wr[c] += g * xr[c];
              }
          }
    std::string what = std::string("sbr+wgrad ") + kWgradNames[i] +
                       " nhwc f16 [" + modeName + ": " +
                       (graph ? "prologue+wgrad graph" : "split") + "]";
    compare(what.c_str(), dw.download(), want, 2e-2);
    // Twice more into the same dw (a training step's second and third
    // calls): the result must not change.
    for (int again = 0; again < 2; ++again)
      ctx.convBwdFilterPrologue(i, x.d, dy.d, dw.d,
                                static_cast<float *>(scale.d),
                                static_cast<float *>(shift.d));
    cudaStreamSynchronize(ctx.stream());
    compare((what + ", third call").c_str(), dw.download(), want, 2e-2);
    if (mode == ConvFusion::Split && graph) {
      std::printf("  sbr+wgrad %d: the graph form under mode split\n", i);
      ++failures;
    }
    // Whether cuDNN 9 on sm_90 fuses this prologue into a wgrad is not
    // known: report the form only.
    if (mode == ConvFusion::CuDNN)
      std::printf("  sbr+wgrad %d (%s): the %s form ran under mode cudnn\n", i,
                  kWgradNames[i], graph ? "graph" : "split");
  }
  ctx.checkLaunch("ops_check sbr+wgrad");
}
} // namespace

static int run() {
  ModelSpec spec{"ops_check", 256, nullptr, 0,       1,       1,
                 1,           1,   1,       nullptr, nullptr, nullptr};
  Context ctx(spec);
  std::vector<std::pair<ConvDesc, const char *>> convs = {
      {{2, 3, 7, 6, 4, 3, 2, 3, 6,          0,
        1, 1, 0, 2, 1, 1, 1, 1, DType::F32, Layout::NCHW},
       "conv asym-pad stride2 nchw f32"},
      {{2, 4, 6, 6, 6, 3, 3, 6, 6,          2,
        2, 2, 2, 1, 1, 2, 2, 2, DType::F32, Layout::NHWC},
       "conv groups2 dil2 nhwc f32"},
      {{2, 8, 5, 5, 8, 3, 3, 2, 2,          1,
        0, 0, 1, 2, 2, 1, 1, 1, DType::F32, Layout::NHWC},
       "conv asym-pad stride2 nhwc f32"},
      {{4, 16, 8, 8, 32, 3, 3, 8, 8,          1,
        1, 1,  1, 1, 1,  1, 1, 1, DType::F16, Layout::NHWC},
       "conv nhwc f16"},
      {{2, 8, 6, 6, 8, 1, 1, 6, 6,          0,
        0, 0, 0, 1, 1, 1, 1, 1, DType::F16, Layout::NCHW},
       "conv 1x1 nchw f16"},
      // Depthwise and grouped f16 convolutions (ConvNeXt, MobileNet,
      // RegNet): cuDNN graph API plans are timed for these too.
      {{4, 32, 14, 14, 32, 7, 7, 14, 14,          3,
        3, 3,  3,  1,  1,  1, 1, 32, DType::F16, Layout::NHWC},
       "conv depthwise 7x7 nhwc f16"},
      {{4, 32, 16, 16, 32, 3, 3, 8, 8,           1,
        1, 1,  1,  2,  2,  1, 1, 32, DType::F16, Layout::NHWC},
       "conv depthwise 3x3 stride2 nhwc f16"},
      {{4, 32, 8, 8, 64, 3, 3, 8, 8,          1,
        1, 1, 1, 1, 1,  1, 1, 4, DType::F16, Layout::NHWC},
       "conv groups4 nhwc f16"},
      // Inputs padded to 4 channels (cnn-precision, the RGB stem): SimpleCNN's
      // first convolution at batch 128 and a ResNet stem in small.
      {{128, 4, 32, 32, 16, 3, 3, 32, 32,          1,
        1, 1,   1, 1, 1,  1, 1, 1, DType::F16, Layout::NHWC},
       "conv C=4 3x3 nhwc f16 (SimpleCNN conv1)"},
      {{8, 4, 32, 32, 16, 7, 7, 16, 16,          3,
        3, 3,  3, 2, 2,  1, 1, 1, DType::F16, Layout::NHWC},
       "conv C=4 7x7 stride2 nhwc f16 (stem)"},
      {{128, 16, 16, 16, 32, 3, 3, 16, 16,          1,
        1, 1,   1, 1, 1,  1, 1, 1, DType::F16, Layout::NHWC},
       "conv 3x3 nhwc f16 (SimpleCNN conv2)"},
  };
  for (size_t i = 0; i < convs.size(); ++i)
    ctx.registerConv(int(i), convs[i].first, convs[i].second);
  std::vector<MatmulDesc> mms;
  for (int t = 0; t < 4; ++t)
    mms.push_back({5, 7, 3, bool(t & 1), bool(t & 2), DType::F32});
  mms.push_back({64, 48, 40, false, true, DType::F16});
  mms.push_back({33, 17, 65, true, false, DType::F32});
  for (size_t i = 0; i < mms.size(); ++i)
    ctx.registerMatmul(int(i), mms[i], "matmul");
  ctx.finishPrepare();
  for (size_t i = 0; i < convs.size(); ++i)
    checkConv(ctx, int(i), convs[i].first, convs[i].second);
  for (size_t i = 0; i < mms.size(); ++i)
    checkMatmul(ctx, int(i), mms[i], i == mms.size() - 1);
  ctx.checkLaunch("ops_check");
  checkFusedConvs(ConvFusion::Split, "split");
  checkFusedConvs(ConvFusion::CuDNN, "cudnn");
  checkFusedConvs(ConvFusion::Auto, "auto");
  checkConvStats(ConvFusion::Split, "split");
  checkConvStats(ConvFusion::CuDNN, "cudnn");
  checkConvStats(ConvFusion::Auto, "auto");
  checkDgradAddRelu(ConvFusion::Split, "split");
  checkDgradAddRelu(ConvFusion::CuDNN, "cudnn");
  checkDgradAddRelu(ConvFusion::Auto, "auto");
  checkWgradPrologue(ConvFusion::Split, "split");
  checkWgradPrologue(ConvFusion::CuDNN, "cudnn");
  checkWgradPrologue(ConvFusion::Auto, "auto");
  std::printf("%s\n", failures ? "ops_check: FAILED" : "ops_check: all ok");
  return failures ? 1 : 0;
}

// A runtime error (cnnrt::Error) is reported as trainMain reports it: its
// message and exit code (3 without a GPU: ctest's SKIP_RETURN_CODE).
int main() {
  try {
    return run();
  } catch (const cnnrt::Error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.exitCode();
  }
}
