//===- bn_grad_bench.cu - batch_norm_grad's NHWC kernels, old and new -----===//
//
// Issue 37: ResNet-50 f16 b128's BatchNorm gradients took 6.74 ms a step on
// the H100 (session 24's per-launch profile) against a two-pass floor of
// about 3.9 ms. This binary runs both passes of every form ResNet-50 uses,
// old (what cnnc prints: EmitCUDA.cpp's launches, kernels/NhwcTileLayout.h
// for the tiling, the generic elementwise kernel's grid and operand kinds
// for the apply) and new (Reductions.cuh's kernels outside the prelude, on
// the same tiling) side by side:
//   sums:  nhwcPartial8<2|3|4> / dualBnGradPartial8 (f64 per element, one
//          row of loads in flight)  against  nhwcBnGradSums8 /
//          dualBnGradSums8 (f32 chunks, U rows in flight; the templates'
//          default U and the others, see kSumVariants), each +
//          nhwcBnGradFinish / dualBnGradFinish;
//   apply: the generic elementwise kernel cnnc prints (ew::elementwiseVec8
//          with 5 to 13 per-channel operands and two f32 divisions an
//          element)  against  nhwcBnGradApply8 / dualBnGradApply8
//          (per-channel coefficients in registers, U rows in flight).
// Session 32's H100 run printed the new pair (U = 2, FROM_END) in the
// ResNet-50 f16 b128 step and the step got 2.7 % slower, so cnnc prints the
// old kernels again; this bench is what decides whether a new variant goes
// back in (the "both passes back to back" totals are the step's case).
//
//   cnnrt_bn_grad_bench check   correctness (the ctest, label gpu): every
//       new kernel variant against a host f64 reference on small odd
//       shapes (MODE 2, 3, 4 and the dual form), bitwise equal over 5 runs
//       with poisoned scratch and outputs;
//   cnnrt_bn_grad_bench [128]   timing (not a ctest): ResNet-50's BN
//       gradient shapes at batch 128 (the old apply kernels are compiled
//       for them: their sizes are template arguments, as cnnc prints them),
//       L2 flushed before each run, median of 9 runs, GB/s against the HBM
//       peak, and the totals per training step weighted by how many times
//       ResNet-50 runs each shape and form.
//
// Exit 0 when all pass, 1 on a mismatch, 2 on a CUDA error, 3 without a GPU.
//
//===----------------------------------------------------------------------===//

#include "Prelude.cuh"

#include "GpuCheck.cuh"
#include "NhwcTileLayout.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace {

int failures = 0;

// cnn-prepare-for-emission's launch attributes on a 132-SM target
// (partial_blocks 2048, block 256, grid_limit 132 x 32) and
// LoweringLimits.h's scratch limit (doubles per sum).
constexpr int64_t kPartialBlocks = 2048, kThreads = 256, kGridLimit = 132 * 32,
                  kScratchDoubles = int64_t(1) << 18;

/// EmitCUDA.cpp's launches: the sums on the scratch-bounded tiling of
/// partial_blocks blocks, the apply kernels on grid_limit blocks.
cnnc_kernels::NhwcTileLayout sumsLayout(int64_t M, int64_t C,
                                        int64_t maxTiles = 0) {
  return cnnc_kernels::nhwcTileLayout(M, C, true, kPartialBlocks,
                                      maxTiles > 0 ? maxTiles
                                                   : kScratchDoubles / C);
}
/// `minRows`: kNhwcApplyMinRows (the new apply's default), or another to
/// time.
cnnc_kernels::NhwcTileLayout
applyLayout(int64_t M, int64_t C,
            int64_t minRows = cnnc_kernels::kNhwcApplyMinRows) {
  return cnnc_kernels::nhwcTileLayout(
      M, C, true, kGridLimit, std::numeric_limits<int64_t>::max(), minRows);
}
dim3 gridOf(const cnnc_kernels::NhwcTileLayout &t) {
  return dim3((unsigned)t.colBlocks, (unsigned)t.tiles);
}
dim3 blockOf(const cnnc_kernels::NhwcTileLayout &t) {
  return dim3((unsigned)t.lanes, (unsigned)(kThreads / t.lanes));
}

/// The device tensors of one BN gradient (the dual form's second half in
/// the *B members).
struct Bufs {
  __half *dy, *x, *relu, *dx, *xB, *dxB;
  float *mean, *invstd, *scale, *alpha, *beta, *gScale, *gBias;
  float *meanB, *invB, *scaleB, *gScaleB, *gBiasB;
  double *scratch;
};

// MODE: 2 plain, 3 ReLU mask from the stored output, 4 mask recomputed from
// x * alpha + beta; 5 the dual form (fused_dual_batch_norm_grad).
constexpr int kDual = 5;

/// The sums kernels: the old one (what cnnc prints), the new one (the
/// template's default U) and the other U, to pick from on the device.
const char *const kSumVariants[] = {
    "old, emitted (nhwcPartial8 / dualBnGradPartial8)",
    "new (the template's default U, 2)", "new, U = 1", "new, U = 4"};
constexpr int kNumSums = 4;
/// The new apply kernels' variants (the old apply is compiled per shape:
/// oldApply below).
const char *const kApplyVariants[] = {
    "new (the template's default U, 2; tiles of >= kNhwcApplyMinRows = 32 "
    "rows)",
    "new, U = 1",
    "new, U = 4",
    "new, default U, tiles of >= 64 rows",
    "new, default U, tiles of >= 16 rows",
    "new, U = 2, tiles in block order (FROM_END = false)"};
constexpr int kNumApply = 6;

template <int MODE, int U>
void newSums(const Bufs &b, int64_t M, int C,
             const cnnc_kernels::NhwcTileLayout &t) {
  nhwcBnGradSums8<MODE, __half, U><<<gridOf(t), blockOf(t)>>>(
      b.scratch, b.dy, b.x, b.relu, b.mean, b.invstd, b.alpha, b.beta, M, C,
      t.rowsPerTile);
}
template <int U>
void newDualSums(const Bufs &b, int64_t M, int C,
                 const cnnc_kernels::NhwcTileLayout &t) {
  dualBnGradSums8<__half, U>
      <<<gridOf(t), blockOf(t)>>>(b.scratch, b.dy, b.x, b.xB, b.mean, b.invstd,
                                  b.meanB, b.invB, M, C, t.rowsPerTile);
}

/// Pass 1 of form `mode` with sums kernel `which` of kSumVariants, then its
/// finish; `finish` false times the partial sums alone.
void sumsPass(int mode, int which, const Bufs &b, int64_t M, int C,
              bool finish = true, int64_t maxTiles = 0) {
  cnnc_kernels::NhwcTileLayout t = sumsLayout(M, C, maxTiles);
  dim3 g = gridOf(t), bl = blockOf(t);
  if (mode == kDual) {
    switch (which) {
    case 0:
      dualBnGradPartial8<__half><<<g, bl>>>(b.scratch, b.dy, b.x, b.xB,
                                            b.mean, b.invstd, b.meanB, b.invB,
                                            M, C, t.rowsPerTile);
      break;
    case 1:
      dualBnGradSums8<__half><<<g, bl>>>(b.scratch, b.dy, b.x, b.xB, b.mean,
                                         b.invstd, b.meanB, b.invB, M, C,
                                         t.rowsPerTile);
      break;
    case 2:
      newDualSums<1>(b, M, C, t);
      break;
    default:
      newDualSums<4>(b, M, C, t);
      break;
    }
    if (finish)
      dualBnGradFinish<float><<<C, kThreads>>>(
          b.scratch, b.gScale, b.gBias, b.gScaleB, b.gBiasB, C, (int)t.tiles);
    return;
  }
  auto run = [&](auto modeTag) {
    constexpr int MODE = decltype(modeTag)::value;
    switch (which) {
    case 0:
      nhwcPartial8<MODE, __half><<<g, bl>>>(b.scratch, b.dy, b.x, b.relu,
                                            b.mean, b.invstd, b.alpha, b.beta,
                                            M, C, t.rowsPerTile);
      break;
    case 1:
      nhwcBnGradSums8<MODE, __half><<<g, bl>>>(b.scratch, b.dy, b.x, b.relu,
                                               b.mean, b.invstd, b.alpha,
                                               b.beta, M, C, t.rowsPerTile);
      break;
    case 2:
      newSums<MODE, 1>(b, M, C, t);
      break;
    default:
      newSums<MODE, 4>(b, M, C, t);
      break;
    }
  };
  if (mode == 2)
    run(std::integral_constant<int, 2>());
  else if (mode == 3)
    run(std::integral_constant<int, 3>());
  else
    run(std::integral_constant<int, 4>());
  if (finish)
    nhwcBnGradFinish<float>
        <<<C, kThreads>>>(b.scratch, b.gScale, b.gBias, C, (int)t.tiles);
}

/// The apply kernels with U rows in flight (0: the templates' defaults, what
/// cnnc emits) on applyLayout(M, C, minRows), tiles from the end unless
/// FROM_END is false.
template <int MODE, int U, bool FROM_END = true>
void newApply(const Bufs &b, int64_t M, int C, int64_t minRows) {
  cnnc_kernels::NhwcTileLayout t = applyLayout(M, C, minRows);
  if constexpr (U == 0)
    nhwcBnGradApply8<MODE, __half, float><<<gridOf(t), blockOf(t)>>>(
        b.dy, b.x, b.relu, b.mean, b.invstd, b.scale, b.gScale, b.gBias,
        b.alpha, b.beta, b.dx, M, C, t.rowsPerTile);
  else
    nhwcBnGradApply8<MODE, __half, float, U, FROM_END>
        <<<gridOf(t), blockOf(t)>>>(b.dy, b.x, b.relu, b.mean, b.invstd,
                                    b.scale, b.gScale, b.gBias, b.alpha, b.beta,
                                    b.dx, M, C, t.rowsPerTile);
}
template <int U, bool FROM_END = true>
void newDualApply(const Bufs &b, int64_t M, int C, int64_t minRows) {
  cnnc_kernels::NhwcTileLayout t = applyLayout(M, C, minRows);
  if constexpr (U == 0)
    dualBnGradApply8<__half, float><<<gridOf(t), blockOf(t)>>>(
        b.dy, b.x, b.mean, b.invstd, b.scale, b.gScale, b.gBias, b.xB, b.meanB,
        b.invB, b.scaleB, b.gScaleB, b.gBiasB, b.dx, b.dxB, M, C,
        t.rowsPerTile);
  else
    dualBnGradApply8<__half, float, U, FROM_END><<<gridOf(t), blockOf(t)>>>(
        b.dy, b.x, b.mean, b.invstd, b.scale, b.gScale, b.gBias, b.xB, b.meanB,
        b.invB, b.scaleB, b.gScaleB, b.gBiasB, b.dx, b.dxB, M, C,
        t.rowsPerTile);
}
/// Pass 2 of form `mode` with apply kernel `which` of kApplyVariants.
void applyPass(int mode, int which, const Bufs &b, int64_t M, int C) {
  int64_t minRows = which == 3   ? 64
                    : which == 4 ? 16
                                 : cnnc_kernels::kNhwcApplyMinRows;
  auto run = [&](auto uTag, auto fromEndTag) {
    constexpr int U = decltype(uTag)::value;
    constexpr bool FROM_END = decltype(fromEndTag)::value;
    switch (mode) {
    case 2:
      newApply<2, U, FROM_END>(b, M, C, minRows);
      break;
    case 3:
      newApply<3, U, FROM_END>(b, M, C, minRows);
      break;
    case 4:
      newApply<4, U, FROM_END>(b, M, C, minRows);
      break;
    default:
      newDualApply<U, FROM_END>(b, M, C, minRows);
      break;
    }
  };
  if (which == 1)
    run(std::integral_constant<int, 1>(), std::true_type());
  else if (which == 2)
    run(std::integral_constant<int, 4>(), std::true_type());
  else if (which == 5)
    run(std::integral_constant<int, 2>(), std::false_type());
  else
    run(std::integral_constant<int, 0>(), std::true_type());
}

// ---- The old apply: the elementwise kernels cnnc printed for
// batch_norm_grad (k16 in ResNet-50's model.cu), fused_batch_norm_affine_
// relu_grad (k18) and fused_dual_batch_norm_grad (k20), same operand kinds,
// expressions and grid (EmitCUDA.cpp's elementwise: gridFor(n / 8), the
// per-channel loads hoisted where the grid's stride is a multiple of C / 8
// vectors, the grid rounded down to make it so). ----
template <int64_t Vectors, int64_t C> struct OldApplyLaunch {
  static constexpr int64_t grid0 =
      std::min<int64_t>((Vectors + kThreads - 1) / kThreads, kGridLimit);
  static constexpr int64_t period = (C / 8) / std::gcd(C / 8, kThreads);
  static constexpr bool hoist = grid0 >= period && Vectors > grid0 * kThreads;
  static constexpr int64_t grid = hoist ? grid0 - grid0 % period : grid0;
  static constexpr ew::ChannelLoad load =
      hoist ? ew::ChannelLoad::Hoisted : ew::ChannelLoad::Vector;
  template <typename T> using Ch = ew::ChannelsLast<T, C, load>;
};

template <int64_t Vectors, int64_t C, int64_t M>
__global__ void __launch_bounds__(256)
    oldPlainApply(const __half *__restrict__ in0,
                  const __half *__restrict__ in1, const float *__restrict__ in2,
                  const float *__restrict__ in3, const float *__restrict__ in4,
                  const float *__restrict__ in5, const float *__restrict__ in6,
                  __half *__restrict__ out0) {
  using L = OldApplyLaunch<Vectors, C>;
  using Ch = typename L::template Ch<float>;
  ew::elementwiseVec8<Vectors, ew::In<__half>, ew::In<__half>, Ch, Ch, Ch, Ch,
                      Ch, ew::Out<__half>>(
      [=](const int64_t, float(&io)[8]) {
        float a0 = io[0], a1 = io[1], a2 = io[2], a3 = io[3], a4 = io[4],
              a5 = io[5], a6 = io[6];
        float r0;
        {
          float xhat = (a1 - a2) * a3;
          r0 = a4 * a3 * (a0 - a6 / (float)M - xhat * a5 / (float)M);
        }
        io[7] = r0;
      },
      in0, in1, in2, in3, in4, in5, in6, out0);
}
template <int64_t Vectors, int64_t C, int64_t M>
__global__ void __launch_bounds__(256)
    oldAffineApply(const __half *__restrict__ in0,
                   const __half *__restrict__ in1,
                   const float *__restrict__ in2, const float *__restrict__ in3,
                   const float *__restrict__ in4, const float *__restrict__ in5,
                   const float *__restrict__ in6, const float *__restrict__ in7,
                   const float *__restrict__ in8, __half *__restrict__ out0) {
  using L = OldApplyLaunch<Vectors, C>;
  using Ch = typename L::template Ch<float>;
  ew::elementwiseVec8<Vectors, ew::In<__half>, ew::In<__half>, Ch, Ch, Ch, Ch,
                      Ch, Ch, Ch, ew::Out<__half>>(
      [=](const int64_t, float(&io)[10]) {
        float a0 = io[0], a1 = io[1], a2 = io[2], a3 = io[3], a4 = io[4],
              a5 = io[5], a6 = io[6], a7 = io[7], a8 = io[8];
        float r0;
        float g = __half2float(__float2half_rn(a1 * a7 + a8)) > 0.f ? a0 : 0.f;
        {
          float xhat = (a1 - a2) * a3;
          r0 = a4 * a3 * (g - a6 / (float)M - xhat * a5 / (float)M);
        }
        io[9] = r0;
      },
      in0, in1, in2, in3, in4, in5, in6, in7, in8, out0);
}
template <int64_t Vectors, int64_t C, int64_t M>
__global__ void __launch_bounds__(256)
    oldDualApply(const __half *__restrict__ in0, const __half *__restrict__ in1,
                 const float *__restrict__ in2, const float *__restrict__ in3,
                 const float *__restrict__ in4, const float *__restrict__ in5,
                 const float *__restrict__ in6, const __half *__restrict__ in7,
                 const float *__restrict__ in8, const float *__restrict__ in9,
                 const float *__restrict__ in10, const float *__restrict__ in11,
                 const float *__restrict__ in12, __half *__restrict__ out0,
                 __half *__restrict__ out1) {
  using L = OldApplyLaunch<Vectors, C>;
  using Ch = typename L::template Ch<float>;
  ew::elementwiseVec8<Vectors, ew::In<__half>, ew::In<__half>, Ch, Ch, Ch, Ch,
                      Ch, ew::In<__half>, Ch, Ch, Ch, Ch, Ch, ew::Out<__half>,
                      ew::Out<__half>>(
      [=](const int64_t, float(&io)[15]) {
        float a0 = io[0], a1 = io[1], a2 = io[2], a3 = io[3], a4 = io[4],
              a5 = io[5], a6 = io[6], a7 = io[7], a8 = io[8], a9 = io[9],
              a10 = io[10], a11 = io[11], a12 = io[12];
        float r0, r1;
        {
          float xhat = (a1 - a2) * a3;
          r0 = a4 * a3 * (a0 - a6 / (float)M - xhat * a5 / (float)M);
        }
        {
          float xhat = (a7 - a8) * a9;
          r1 = a10 * a9 * (a0 - a12 / (float)M - xhat * a11 / (float)M);
        }
        io[13] = r0;
        io[14] = r1;
      },
      in0, in1, in2, in3, in4, in5, in6, in7, in8, in9, in10, in11, in12, out0,
      out1);
}

/// The old apply of form `mode` (2, 4 or dual) on N x HW x HW x C, N = 128.
template <int64_t HW, int64_t C> void oldApply(int mode, const Bufs &b) {
  constexpr int64_t M = 128 * HW * HW, Vectors = M * C / 8;
  using L = OldApplyLaunch<Vectors, C>;
  if (mode == 2)
    oldPlainApply<Vectors, C, M><<<(unsigned)L::grid, kThreads>>>(
        b.dy, b.x, b.mean, b.invstd, b.scale, b.gScale, b.gBias, b.dx);
  else if (mode == 4)
    oldAffineApply<Vectors, C, M><<<(unsigned)L::grid, kThreads>>>(
        b.dy, b.x, b.mean, b.invstd, b.scale, b.gScale, b.gBias, b.alpha,
        b.beta, b.dx);
  else
    oldDualApply<Vectors, C, M><<<(unsigned)L::grid, kThreads>>>(
        b.dy, b.x, b.mean, b.invstd, b.scale, b.gScale, b.gBias, b.xB, b.meanB,
        b.invB, b.scaleB, b.gScaleB, b.gBiasB, b.dx, b.dxB);
}

template <typename T> std::vector<T> download(const T *d, size_t n) {
  std::vector<T> h(n);
  CUDA_OK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}
template <typename T> void upload(T *d, const std::vector<T> &h) {
  CUDA_OK(
      cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}

Bufs allocBufs(int64_t n, int C) {
  Bufs b;
  for (__half **p : {&b.dy, &b.x, &b.relu, &b.dx, &b.xB, &b.dxB})
    CUDA_OK(cudaMalloc(p, n * 2));
  for (float **p :
       {&b.mean, &b.invstd, &b.scale, &b.alpha, &b.beta, &b.gScale, &b.gBias,
        &b.meanB, &b.invB, &b.scaleB, &b.gScaleB, &b.gBiasB})
    CUDA_OK(cudaMalloc(p, C * 4));
  CUDA_OK(cudaMalloc(&b.scratch, kScratchDoubles * 3 * sizeof(double)));
  return b;
}
void freeBufs(Bufs &b) {
  for (void *p :
       {(void *)b.dy, (void *)b.x, (void *)b.relu, (void *)b.dx, (void *)b.xB,
        (void *)b.dxB, (void *)b.mean, (void *)b.invstd, (void *)b.scale,
        (void *)b.alpha, (void *)b.beta, (void *)b.gScale, (void *)b.gBias,
        (void *)b.meanB, (void *)b.invB, (void *)b.scaleB, (void *)b.gScaleB,
        (void *)b.gBiasB, (void *)b.scratch})
    CUDA_OK(cudaFree(p));
}

/// The host side of one BN gradient: dy, x (and the dual form's xB) as
/// stored, the f32 statistics of x, scale, alpha, beta, the ReLU output.
struct Host {
  std::vector<__half> dy, x, xB, relu;
  std::vector<float> mean, invstd, scale, alpha, beta, meanB, invB, scaleB;
};

/// Fills the device tensors of an M x C gradient: x around a mean of
/// `offset` (its real statistics as mean and invstd), dy in [-1, 1].
Host fill(const Bufs &b, int64_t M, int C, float offset) {
  int64_t n = M * C;
  gpucheck::fillHalf<<<256, 256>>>(b.dy, n, 5u + (unsigned)C, 2.f, 0.f);
  gpucheck::fillHalf<<<256, 256>>>(b.x, n, 7u + (unsigned)C, 4.f, offset);
  gpucheck::fillHalf<<<256, 256>>>(b.xB, n, 11u + (unsigned)C, 3.f, -offset);
  CUDA_OK(cudaGetLastError());
  Host h;
  h.dy = download(b.dy, n);
  h.x = download(b.x, n);
  h.xB = download(b.xB, n);
  auto stats = [&](const std::vector<__half> &x, std::vector<float> &mean,
                   std::vector<float> &invstd) {
    std::vector<double> s(C, 0), ss(C, 0);
    for (int64_t r = 0; r < M; ++r)
      for (int c = 0; c < C; ++c) {
        double v = __half2float(x[r * C + c]);
        s[c] += v;
        ss[c] += v * v;
      }
    mean.resize(C);
    invstd.resize(C);
    for (int c = 0; c < C; ++c) {
      double m = s[c] / M, var = std::max(ss[c] / M - m * m, 0.0);
      mean[c] = (float)m;
      invstd[c] = (float)(1.0 / std::sqrt(var + 1e-5));
    }
  };
  stats(h.x, h.mean, h.invstd);
  stats(h.xB, h.meanB, h.invB);
  h.scale.resize(C);
  h.scaleB.resize(C);
  h.alpha.resize(C);
  h.beta.resize(C);
  for (int c = 0; c < C; ++c) {
    h.scale[c] = 0.5f + 0.05f * (float)(c % 21);
    h.scaleB[c] = 1.5f - 0.04f * (float)(c % 13);
    float bias = 0.2f * (float)(c % 7 - 3);
    h.alpha[c] = h.scale[c] * h.invstd[c];
    h.beta[c] = bias - h.mean[c] * h.alpha[c];
  }
  // The stored ReLU output of fused_batch_norm_relu_grad's forward.
  h.relu.resize(n);
  for (int64_t r = 0; r < M; ++r)
    for (int c = 0; c < C; ++c) {
      float v = std::fma(__half2float(h.x[r * C + c]), h.alpha[c], h.beta[c]);
      h.relu[r * C + c] = __float2half_rn(v > 0.f ? v : 0.f);
    }
  upload(b.relu, h.relu);
  upload(b.mean, h.mean);
  upload(b.invstd, h.invstd);
  upload(b.scale, h.scale);
  upload(b.alpha, h.alpha);
  upload(b.beta, h.beta);
  upload(b.meanB, h.meanB);
  upload(b.invB, h.invB);
  upload(b.scaleB, h.scaleB);
  return h;
}

/// The host f64 reference of one half: grad_bias, grad_scale (and the sums
/// of |g| and |g xhat| they are held to), dx and the magnitude of the terms
/// dx is the difference of, |scale invstd| (|g| + |sum(g)| / m +
/// |xhat sum(g xhat)| / m) (what the device's f32 rounding is relative to).
struct Want {
  std::vector<double> gBias, gScale, absG, absGX, dx, dxTerms;
};
Want reference(int mode, const Host &h, bool halfB, int64_t M, int C) {
  const std::vector<__half> &x = halfB ? h.xB : h.x;
  const std::vector<float> &mean = halfB ? h.meanB : h.mean,
                           &invstd = halfB ? h.invB : h.invstd,
                           &scale = halfB ? h.scaleB : h.scale;
  Want w;
  w.gBias.assign(C, 0);
  w.gScale.assign(C, 0);
  w.absG.assign(C, 0);
  w.absGX.assign(C, 0);
  w.dx.resize(M * C);
  w.dxTerms.resize(M * C);
  auto g = [&](int64_t r, int c) {
    double v = __half2float(h.dy[r * C + c]);
    float xv = __half2float(x[r * C + c]);
    if (mode == 3 && !(__half2float(h.relu[r * C + c]) > 0.f))
      v = 0;
    if (mode == 4 && !(__half2float(__float2half_rn(
                           std::fma(xv, h.alpha[c], h.beta[c]))) > 0.f))
      v = 0;
    return v;
  };
  for (int64_t r = 0; r < M; ++r)
    for (int c = 0; c < C; ++c) {
      double v = g(r, c),
             xhat = ((double)__half2float(x[r * C + c]) - mean[c]) * invstd[c];
      w.gBias[c] += v;
      w.gScale[c] += v * xhat;
      w.absG[c] += std::fabs(v);
      w.absGX[c] += std::fabs(v * xhat);
    }
  for (int64_t r = 0; r < M; ++r)
    for (int c = 0; c < C; ++c) {
      double xhat = ((double)__half2float(x[r * C + c]) - mean[c]) * invstd[c];
      double a = (double)scale[c] * invstd[c];
      w.dx[r * C + c] = a * (g(r, c) - w.gBias[c] / M - xhat * w.gScale[c] / M);
      w.dxTerms[r * C + c] =
          std::fabs(a) * (std::fabs(g(r, c)) + std::fabs(w.gBias[c]) / M +
                          std::fabs(xhat * w.gScale[c]) / M);
    }
  return w;
}

/// The largest error of the device's grad_scale / grad_bias (relative to the
/// sums of magnitudes) and dx (relative to max(|dx|, the tensor's largest
/// |dx| / 64, its terms' magnitude / 1024): f16 rounding is 2^-11 of |dx|;
/// the device's f32 coefficients add a few 2^-24 of the terms, which may
/// cancel. The terms' floor matters where every dx cancels to 0: one row
/// (M = 1) has x = mean, so xhat = 0, sum(g) = g and dx = 0 exactly, and
/// a g - a (g / m) in f32 leaves up to 2^-24 |a g| (session 32's run: "dx
/// inf"; 0 / 0 where g is masked, "dx -nan"). Against that floor such a
/// residue is an error of <= 2^-14, a missing or wrong term ~1024. An exact
/// result is error 0 even where every floor is 0; NaN counts as worst.
struct Errors {
  double sums = 0, dx = 0;
};
Errors compare(const Want &w, const float *gScale, const float *gBias,
               const __half *dx, int64_t M, int C) {
  Errors e;
  std::vector<float> gs = download(gScale, C), gb = download(gBias, C);
  for (int c = 0; c < C; ++c) {
    double a = std::fabs(gb[c] - w.gBias[c]) / std::max(1.0, w.absG[c]),
           b = std::fabs(gs[c] - w.gScale[c]) / std::max(1.0, w.absGX[c]);
    double m = std::max(a, b);
    if (!(m <= e.sums)) // NaN counts as worst
      e.sums = m;
  }
  std::vector<__half> d = download(dx, M * C);
  double big = 0;
  for (double v : w.dx)
    big = std::max(big, std::fabs(v));
  for (int64_t i = 0; i < M * C; ++i) {
    double diff = std::fabs(__half2float(d[i]) - w.dx[i]),
           m = diff == 0 ? 0.0
                         : diff / std::max({std::fabs(w.dx[i]), big / 64,
                                            w.dxTerms[i] / 1024});
    if (!(m <= e.dx))
      e.dx = m;
  }
  return e;
}

/// The new kernels' outputs of one run, as bits.
std::vector<uint16_t> outputBits(int mode, const Bufs &b, int64_t M, int C) {
  std::vector<uint16_t> bits;
  auto add = [&](const void *p, size_t bytes) {
    std::vector<uint16_t> h(bytes / 2);
    CUDA_OK(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
    bits.insert(bits.end(), h.begin(), h.end());
  };
  add(b.gScale, C * 4);
  add(b.gBias, C * 4);
  add(b.dx, M * C * 2);
  if (mode == kDual) {
    add(b.gScaleB, C * 4);
    add(b.gBiasB, C * 4);
    add(b.dxB, M * C * 2);
  }
  return bits;
}

void poison(const Bufs &b, int64_t M, int C) {
  CUDA_OK(cudaMemset(b.scratch, 0xff, kScratchDoubles * 3 * sizeof(double)));
  for (float *p : {b.gScale, b.gBias, b.gScaleB, b.gBiasB})
    CUDA_OK(cudaMemset(p, 0xff, C * 4));
  CUDA_OK(cudaMemset(b.dx, 0xff, M * C * 2));
  CUDA_OK(cudaMemset(b.dxB, 0xff, M * C * 2));
}

const char *modeName(int mode) {
  return mode == 2   ? "batch_norm_grad"
         : mode == 3 ? "bn_relu_grad"
         : mode == 4 ? "bn_affine_relu_grad"
                     : "dual_bn_grad";
}

/// One shape: every new sums variant with the default new apply and every
/// apply variant with the default new sums, each form, against the host
/// reference; the default new pair bitwise equal over 5 runs with poisoned
/// scratch and outputs; the sums with 3 long tiles (many chunks per thread)
/// too. The old sums (what cnnc prints) with the new apply; the old apply is
/// compiled for ResNet-50's shapes only, compared in the timing mode.
void checkShape(int64_t M, int C, float offset) {
  Bufs b = allocBufs(M * C, C);
  Host h = fill(b, M, C, offset);
  for (int mode : {2, 3, 4, kDual}) {
    Want wa = reference(mode == kDual ? 2 : mode, h, false, M, C), wb;
    if (mode == kDual)
      wb = reference(2, h, true, M, C);
    auto verify = [&](const char *what) {
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaDeviceSynchronize());
      Errors e = compare(wa, b.gScale, b.gBias, b.dx, M, C);
      if (mode == kDual) {
        Errors eb = compare(wb, b.gScaleB, b.gBiasB, b.dxB, M, C);
        e.sums = std::max(e.sums, eb.sums);
        e.dx = std::max(e.dx, eb.dx);
      }
      // Sums: a few f32 roundings (~1e-7 each) of the terms; one row
      // missed or counted twice is ~1/M >= 1e-4 of these shapes' sums.
      // dx: f16's rounding (4.9e-4) plus the f32 coefficients'.
      bool ok = e.sums <= 1e-5 && e.dx <= 1e-3;
      std::printf("%s %s M=%lld C=%d offset=%g %s: sums %.3g, dx %.3g\n",
                  ok ? "ok  " : "FAIL", modeName(mode), (long long)M, C, offset,
                  what, e.sums, e.dx);
      failures += !ok;
    };
    char what[96];
    for (int s = 1; s < kNumSums; ++s) {
      for (bool longTiles : {false, true}) {
        poison(b, M, C);
        sumsPass(mode, s, b, M, C, true, longTiles ? 3 : 0);
        applyPass(mode, 0, b, M, C);
        std::snprintf(what, sizeof what, "sums %s%s", kSumVariants[s],
                      longTiles ? " (3 tiles)" : "");
        verify(what);
      }
    }
    for (int a = 1; a < kNumApply; ++a) {
      poison(b, M, C);
      sumsPass(mode, 1, b, M, C);
      applyPass(mode, a, b, M, C);
      std::snprintf(what, sizeof what, "apply %s", kApplyVariants[a]);
      verify(what);
    }
    // The old sums (nhwcPartial8, f64 per element) against the same
    // reference, with the new apply: both pass the bound.
    poison(b, M, C);
    sumsPass(mode, 0, b, M, C);
    applyPass(mode, 0, b, M, C);
    verify("sums old");
    std::vector<uint16_t> first;
    bool same = true;
    for (int run = 0; run < 5 && same; ++run) {
      poison(b, M, C);
      sumsPass(mode, 1, b, M, C);
      applyPass(mode, 0, b, M, C);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<uint16_t> bits = outputBits(mode, b, M, C);
      if (run == 0)
        first = bits;
      else
        same = bits == first;
    }
    std::printf("%s %s M=%lld C=%d: the new kernels' 5 runs %s\n",
                same ? "ok  " : "FAIL", modeName(mode), (long long)M, C,
                same ? "bitwise equal" : "differ");
    failures += !same;
  }
  freeBufs(b);
}

int check() {
  // Rows that are no multiple of a tile, lanes < 32 (C = 24, 40), several
  // column blocks (C = 1024: 4), one row, a mean far from 0.
  checkShape(2 * 56 * 56, 64, 3.f);
  checkShape(3 * 13 * 11, 40, -5.f);
  checkShape(1000, 24, 1.f);
  checkShape(1, 8, 2.f);
  checkShape(4 * 7 * 7, 1024, 0.f);
  checkShape(2 * 28 * 28, 256, 10.f);
  std::printf(failures ? "bn_grad_check: %d FAILED\n" : "bn_grad_check: ok\n",
              failures);
  return failures ? 1 : 0;
}

/// ResNet-50 (torchvision, v1.5) at 224^2: each BN's output H = W and
/// channels, and how many BN gradients of each form a step runs there:
/// fused_batch_norm_affine_relu_grad (bn1, bn2 of each bottleneck and the
/// stem's), batch_norm_grad (bn3 of a block without a downsample) and
/// fused_dual_batch_norm_grad (bn3 + the downsample's BN).
struct Shape {
  int hw, C, affine, plain, dual;
};
const Shape kResNet50[] = {
    {112, 64, 1, 0, 0}, {56, 64, 6, 0, 0},   {56, 256, 0, 2, 1},
    {56, 128, 1, 0, 0}, {28, 128, 7, 0, 0},  {28, 512, 0, 3, 1},
    {28, 256, 1, 0, 0}, {14, 256, 11, 0, 0}, {14, 1024, 0, 5, 1},
    {14, 512, 1, 0, 0}, {7, 512, 5, 0, 0},   {7, 2048, 0, 2, 1}};
void oldApplyFor(const Shape &s, int mode, const Bufs &b) {
#define CNNC_OLD_APPLY(H, CH)                                                  \
  if (s.hw == H && s.C == CH)                                                  \
    return oldApply<H, CH>(mode, b);
  CNNC_OLD_APPLY(112, 64)
  CNNC_OLD_APPLY(56, 64)
  CNNC_OLD_APPLY(56, 256)
  CNNC_OLD_APPLY(56, 128)
  CNNC_OLD_APPLY(28, 128)
  CNNC_OLD_APPLY(28, 512)
  CNNC_OLD_APPLY(28, 256)
  CNNC_OLD_APPLY(14, 256)
  CNNC_OLD_APPLY(14, 1024)
  CNNC_OLD_APPLY(14, 512)
  CNNC_OLD_APPLY(7, 512)
  CNNC_OLD_APPLY(7, 2048)
#undef CNNC_OLD_APPLY
  std::fprintf(stderr, "no old apply kernel for %dx%dx%d\n", s.hw, s.hw, s.C);
  std::exit(2);
}

int bench() {
  const int N = 128; // the old apply kernels are compiled for it
  const double peak = gpucheck::printDeviceHbmPeak();
  int64_t most = 0;
  for (const Shape &s : kResNet50)
    most = std::max<int64_t>(most, (int64_t)N * s.hw * s.hw * s.C);
  Bufs b = allocBufs(most, 2048);
  char *flush;
  const size_t flushBytes = size_t(512) << 20;
  CUDA_OK(cudaMalloc(&flush, flushBytes));
  // Realistic values: x of mean 1 and its real statistics would need a
  // host pass over 205 MB; the kernels' time does not depend on them, so
  // mean 0, invstd 1, scale 1 (alpha 1, beta 0: about half the mask on).
  gpucheck::fillHalf<<<1024, 256>>>(b.dy, most, 3u, 2.f, 0.f);
  gpucheck::fillHalf<<<1024, 256>>>(b.x, most, 5u, 4.f, 0.f);
  gpucheck::fillHalf<<<1024, 256>>>(b.xB, most, 7u, 4.f, 0.f);
  gpucheck::fillHalf<<<1024, 256>>>(b.relu, most, 9u, 4.f, 0.f);
  std::vector<float> ones(2048, 1.f), zeros(2048, 0.f);
  for (float *p : {b.invstd, b.scale, b.alpha, b.invB, b.scaleB})
    upload(p, ones);
  for (float *p : {b.mean, b.beta, b.meanB})
    upload(p, zeros);
  CUDA_OK(cudaDeviceSynchronize());
  auto timeMs = [&](auto fn) {
    fn(); // warm-up
    CUDA_OK(cudaGetLastError());
    return (double)gpucheck::medianAfterFlushMs(flush, flushBytes, fn);
  };

  struct Form {
    int mode;
    const char *name;
    int Shape::*count;
    double sumsBytes, applyBytes; // per element
  };
  const Form forms[] = {{4, "affine+ReLU", &Shape::affine, 4, 6},
                        {2, "plain", &Shape::plain, 4, 6},
                        {kDual, "dual", &Shape::dual, 6, 10}};
  // Both passes (sums, finish, apply) back to back, the L2 flushed before
  // the sums only: the apply finds in L2 what the sums read last, as in the
  // step. Each pair is a sums variant (kSumVariants) and an apply variant
  // (-1 the old apply, else kApplyVariants): a pass can be chosen on its
  // own (old sums with the new apply or the reverse), and the U = 1 pair
  // (61-128 registers on sm_90a against U = 2's 92-178: two blocks of 256
  // threads an SM where U = 2's dual kernels get one) tells whether
  // occupancy is what U = 2 lost.
  struct Pair {
    int sums, apply;
    const char *name;
  };
  const Pair pairs[] = {{0, -1, "old (what cnnc prints)"},
                        {1, 0, "new"},
                        {1, 5, "new, apply tiles in block order"},
                        {0, 0, "old sums + new apply"},
                        {1, -1, "new sums + old apply"},
                        {2, 1, "new, U = 1 both"}};
  constexpr int kNumPairs = sizeof(pairs) / sizeof(pairs[0]);
  double totPair[kNumPairs] = {}, totFloor = 0;
  double totSums[kNumSums] = {}, totApply[kNumApply + 1] = {};
  for (const Form &f : forms) {
    std::printf("\n%s BN gradients, batch %d (ms; GB/s and %% of the HBM "
                "peak of the bytes read + written):\n",
                f.name, N);
    std::printf("%-15s %5s | %8s %8s %6s | %8s %8s %6s | %8s %8s %6s | %8s "
                "%8s %6s\n",
                "NxHxWxC", "count", "old sums", "GB/s", "%peak", "new sums",
                "GB/s", "%peak", "old appl", "GB/s", "%peak", "new appl",
                "GB/s", "%peak");
    double fPair[kNumPairs] = {}, fFloor = 0;
    for (const Shape &s : kResNet50) {
      int count = s.*f.count;
      if (!count)
        continue;
      int64_t M = (int64_t)N * s.hw * s.hw, n = M * s.C;
      double sb = f.sumsBytes * n, ab = f.applyBytes * n;
      double ts[kNumSums], ta[kNumApply + 1];
      for (int k = 0; k < kNumSums; ++k)
        ts[k] = timeMs([&] { sumsPass(f.mode, k, b, M, s.C); });
      ta[0] = timeMs([&] { oldApplyFor(s, f.mode, b); });
      for (int k = 0; k < kNumApply; ++k)
        ta[k + 1] = timeMs([&] { applyPass(f.mode, k, b, M, s.C); });
      auto gbs = [&](double bytes, double ms) { return bytes / ms / 1e6; };
      auto pct = [&](double bytes, double ms) {
        return 100 * bytes / ms / 1e-3 / peak;
      };
      std::printf("%3dx%3dx%3dx%-4d %5d | %8.4f %8.0f %5.0f%% | %8.4f %8.0f "
                  "%5.0f%% | %8.4f %8.0f %5.0f%% | %8.4f %8.0f %5.0f%%\n",
                  N, s.hw, s.hw, s.C, count, ts[0], gbs(sb, ts[0]),
                  pct(sb, ts[0]), ts[1], gbs(sb, ts[1]), pct(sb, ts[1]), ta[0],
                  gbs(ab, ta[0]), pct(ab, ta[0]), ta[1], gbs(ab, ta[1]),
                  pct(ab, ta[1]));
      std::printf("%-21s   sums variants:", "");
      for (int k = 0; k < kNumSums; ++k)
        std::printf(" [%d] %.4f", k, ts[k]);
      std::printf("; apply variants: [old] %.4f", ta[0]);
      for (int k = 0; k < kNumApply; ++k)
        std::printf(" [%d] %.4f", k, ta[k + 1]);
      std::printf("\n");
      std::printf("%-21s   both passes back to back:", "");
      for (int k = 0; k < kNumPairs; ++k) {
        double ms = timeMs([&] {
          sumsPass(f.mode, pairs[k].sums, b, M, s.C);
          if (pairs[k].apply < 0)
            oldApplyFor(s, f.mode, b);
          else
            applyPass(f.mode, pairs[k].apply, b, M, s.C);
        });
        std::printf("%s %s %.4f (%.0f%%)", k ? ";" : "", pairs[k].name, ms,
                    pct(sb + ab, ms));
        fPair[k] += count * ms;
      }
      std::printf("\n");
      for (int k = 0; k < kNumSums; ++k)
        totSums[k] += count * ts[k];
      for (int k = 0; k <= kNumApply; ++k)
        totApply[k] += count * ta[k];
      fFloor += count * (sb + ab) / peak * 1e3;
    }
    std::printf("%s per step, both passes back to back:", f.name);
    for (int k = 0; k < kNumPairs; ++k) {
      std::printf("%s %s %.3f ms", k ? ";" : "", pairs[k].name, fPair[k]);
      totPair[k] += fPair[k];
    }
    std::printf("; two-pass floor at the HBM peak %.3f ms\n", fFloor);
    totFloor += fFloor;
  }
  std::printf("\nBN gradients per step (45 single + 4 dual), both passes "
              "back to back:");
  for (int k = 0; k < kNumPairs; ++k)
    std::printf("%s %s %.3f ms (%+.3f against old)", k ? ";" : "",
                pairs[k].name, totPair[k], totPair[k] - totPair[0]);
  std::printf("; two-pass floor %.3f ms\n", totFloor);
  std::printf("per step by variant, each pass alone after an L2 flush, sums "
              "(with their finish):");
  for (int k = 0; k < kNumSums; ++k)
    std::printf("  [%d] %s %.3f ms", k, kSumVariants[k], totSums[k]);
  std::printf("\nper step by variant, apply:  [old] %.3f ms", totApply[0]);
  for (int k = 0; k < kNumApply; ++k)
    std::printf("  [%d] %s %.3f ms", k, kApplyVariants[k], totApply[k + 1]);
  std::printf("\n");
  // The new apply against the old one, each form on its first shape (the
  // bench's statistics are not x's own, so only closeness is meaningful): a
  // wrong launch or coefficient differs by far more than f16's rounding.
  for (const Form &f : forms) {
    for (const Shape &s : kResNet50) {
      if (!(s.*f.count))
        continue;
      int64_t M = (int64_t)N * s.hw * s.hw, n = M * s.C;
      sumsPass(f.mode, 1, b, M, s.C);
      oldApplyFor(s, f.mode, b);
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<__half> o = download(b.dx, n);
      applyPass(f.mode, 0, b, M, s.C);
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<__half> w = download(b.dx, n);
      double big = 0, worst = 0;
      for (int64_t i = 0; i < n; ++i)
        big = std::max(big, (double)std::fabs(__half2float(o[i])));
      for (int64_t i = 0; i < n; ++i) {
        double want = __half2float(o[i]),
               e = std::fabs(__half2float(w[i]) - want) /
                   std::max(big / 64, std::fabs(want));
        if (!(e <= worst)) // NaN counts as worst
          worst = e;
      }
      bool ok = worst <= 2e-3;
      std::printf("%s %s %dx%dx%d: new apply against old, max error %.3g\n",
                  ok ? "ok  " : "FAIL", f.name, s.hw, s.hw, s.C, worst);
      failures += !ok;
      break;
    }
  }
  CUDA_OK(cudaFree(flush));
  freeBufs(b);
  return failures ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  if (gpucheck::skippedWithoutGpu("bn_grad_bench"))
    return 3;
  if (argc > 1 && std::string(argv[1]) == "check")
    return check();
  // A batch may be given (bench/device-verify.sh passes BN_BATCH, as to
  // bn_stats_bench): the old apply kernels are compiled for 128 only.
  if (argc > 1 && std::string(argv[1]) != "128") {
    std::fprintf(stderr,
                 "usage: %s [check | 128] (the old apply kernels are "
                 "compiled for batch 128)\n",
                 argv[0]);
    return 2;
  }
  return bench();
}
