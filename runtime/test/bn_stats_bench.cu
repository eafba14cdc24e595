//===- bn_stats_bench.cu - the split conv+stats form's own kernels --------===//
//
// Issue 37: under CNNRT_DETERMINISTIC (the default) every conv + BN
// statistics pair of an f16 NHWC step runs as fused_conv2d_stats' split form
// (cuDNN's conv + GenStats plans do not repeat themselves bitwise): the
// prologue relu(x * scale + shift) into scratch (nhwcScaleShiftRelu), the
// convolution, the per-channel shifted sums of y (nhwcPartial8<1>) and their
// fixed-order finish (nhwcSumsFinish). This binary runs the kernels that
// form prints, launched as EmitCUDA.cpp launches them, old and new side by
// side:
//   stats:    nhwcPartial8<1> + nhwcSumsFinish  against
//             nhwcShiftedSums8 + nhwcSumsFinish (f32 chunks; the variant
//             cnnc emits and three others, see kStatsKernels);
//   prologue: nhwcScaleShiftRelu  against  nhwcScaleShiftRelu8.
//
//   cnnrt_bn_stats_bench check   correctness (the ctest, label gpu): every
//       kernel against a host f64 reference on small shapes with a large
//       mean, each new one bitwise equal over 5 runs with poisoned
//       scratch and outputs;
//   cnnrt_bn_stats_bench [N]     timing (not a ctest): ResNet-50's 53 conv
//       output shapes at batch N (default 128), L2 flushed before each run,
//       median of 9 runs, GB/s against the HBM peak from the device's memory
//       clock and bus width, and the totals per training step.
//
// Exit 0 when all pass, 1 on a mismatch, 2 on a CUDA error, 3 without a GPU.
//
//===----------------------------------------------------------------------===//

#include "Prelude.cuh"

#include "GpuCheck.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;

// EmitCUDA.cpp's nhwcTiling for the vec8 kernels with cnn-prepare-for-
// emission's launch attributes on a 132-SM target (partial_blocks 2048,
// block 256, grid_limit 132 x 32) and LoweringLimits.h's scratch limit.
constexpr int64_t kPartialBlocks = 2048, kThreads = 256, kGridLimit = 132 * 32,
                  kScratchDoubles = int64_t(1) << 18;
struct Tiling {
  int64_t lanes, colBlocks, tiles, rowsPerTile;
  dim3 grid() const { return dim3((unsigned)colBlocks, (unsigned)tiles); }
  dim3 block() const {
    return dim3((unsigned)lanes, (unsigned)(kThreads / lanes));
  }
};
/// `maxTiles` > 0: at most that many tiles (the check's long tiles: many
/// chunks per thread, which the small shapes' default tiling never gives).
Tiling tiling(int64_t M, int64_t C, int64_t maxTiles = 0) {
  Tiling t;
  t.lanes = std::min<int64_t>(C / 8, 32);
  t.colBlocks = (C / 8 + t.lanes - 1) / t.lanes;
  t.tiles = std::max<int64_t>(
      1, std::min({(M + 63) / 64, kPartialBlocks / t.colBlocks,
                   kScratchDoubles / C}));
  if (maxTiles > 0)
    t.tiles = std::min(t.tiles, maxTiles);
  t.rowsPerTile = (M + t.tiles - 1) / t.tiles;
  t.tiles = (M + t.rowsPerTile - 1) / t.rowsPerTile;
  return t;
}
unsigned gridFor(int64_t n) {
  return (unsigned)std::max<int64_t>(
      1, std::min<int64_t>((n + kThreads - 1) / kThreads, kGridLimit));
}

/// The statistics kernels: the old one, the emitted new one (the template's
/// defaults) and the other variants of nhwcShiftedSums8 (U rows in flight,
/// f64 sums in shared memory or registers), to pick from on the device.
const char *const kStatsKernels[] = {
    "nhwcPartial8<1> (old)", "nhwcShiftedSums8 (new, emitted: U=4 regs)",
    "nhwcShiftedSums8<U=4, shared>", "nhwcShiftedSums8<U=2, regs>",
    "nhwcShiftedSums8<U=8, regs>"};
constexpr int kNumStats = 5;

/// The statistics pass of the split form with kernel `which` of
/// kStatsKernels, then nhwcSumsFinish; `finish` false times the partial
/// sums alone.
void statsPass(int which, double *scratch, const __half *y, float *sum,
               float *sumSq, int64_t M, int C, bool finish = true,
               int64_t maxTiles = 0) {
  Tiling t = tiling(M, C, maxTiles);
  dim3 g = t.grid(), b = t.block();
  int64_t rpt = t.rowsPerTile;
  switch (which) {
  case 0:
    nhwcPartial8<1, __half><<<g, b>>>(scratch, y, nullptr, nullptr, nullptr,
                                      nullptr, nullptr, nullptr, M, C, rpt);
    break;
  case 1:
    nhwcShiftedSums8<__half><<<g, b>>>(scratch, y, M, C, rpt);
    break;
  case 2:
    nhwcShiftedSums8<__half, 4, true><<<g, b>>>(scratch, y, M, C, rpt);
    break;
  case 3:
    nhwcShiftedSums8<__half, 2, false><<<g, b>>>(scratch, y, M, C, rpt);
    break;
  default:
    nhwcShiftedSums8<__half, 8, false><<<g, b>>>(scratch, y, M, C, rpt);
    break;
  }
  if (finish)
    nhwcSumsFinish<__half>
        <<<C, kThreads>>>(scratch, y, sum, sumSq, M, C, (int)t.tiles);
}

void prologue(bool newKernel, const __half *x, const float *scale,
              const float *shift, __half *out, int64_t n, int C) {
  if (newKernel)
    nhwcScaleShiftRelu8<__half>
        <<<gridFor(n / 8), kThreads>>>(x, scale, shift, out, n, C);
  else
    nhwcScaleShiftRelu<__half>
        <<<gridFor(n), kThreads>>>(x, scale, shift, out, n, C);
}

template <typename T> std::vector<T> download(const T *d, size_t n) {
  std::vector<T> h(n);
  CUDA_OK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

/// One shape: the statistics of both kernels against the host f64 sums
/// (tolerance relative to sum |x| and sum x^2: the sums may cancel), the new
/// kernel's bitwise equality over 5 runs, and the prologue's.
void checkShape(int64_t M, int C, float mean) {
  int64_t n = M * C;
  __half *y, *out8, *out1;
  float *sum, *sumSq, *scale, *shift;
  double *scratch;
  CUDA_OK(cudaMalloc(&y, n * 2));
  CUDA_OK(cudaMalloc(&out8, n * 2));
  CUDA_OK(cudaMalloc(&out1, n * 2));
  CUDA_OK(cudaMalloc(&sum, C * 4));
  CUDA_OK(cudaMalloc(&sumSq, C * 4));
  CUDA_OK(cudaMalloc(&scale, C * 4));
  CUDA_OK(cudaMalloc(&shift, C * 4));
  CUDA_OK(cudaMalloc(&scratch, kScratchDoubles * 2 * sizeof(double)));
  // Values in [mean - 2, mean + 2]: a mean far from 0 is what the shift is
  // for (sum x^2 - (sum x)^2 / M cancels).
  gpucheck::fillHalf<<<256, 256>>>(y, n, 17u + (unsigned)C, 4.f, mean);
  std::vector<float> hs(C), hb(C);
  for (int c = 0; c < C; ++c) {
    hs[c] = 0.5f + 0.03f * (float)(c % 17);
    hb[c] = -mean * hs[c] + 0.1f * (float)(c % 5 - 2);
  }
  CUDA_OK(cudaMemcpy(scale, hs.data(), C * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(shift, hb.data(), C * 4, cudaMemcpyHostToDevice));
  std::vector<__half> hy = download(y, n);
  std::vector<double> wantS(C, 0), wantSS(C, 0), absS(C, 0);
  for (int64_t r = 0; r < M; ++r)
    for (int c = 0; c < C; ++c) {
      double v = __half2float(hy[r * C + c]);
      wantS[c] += v;
      wantSS[c] += v * v;
      absS[c] += std::fabs(v);
    }

  char what[160];
  std::vector<uint32_t> firstS, firstSS;
  for (int k = 0; k < kNumStats; ++k) {
    bool nk = k > 0;
    const char *name = kStatsKernels[k];
    // Runs 0..4 (new kernels; run 0 only for the old): the emitted tiling,
    // bitwise equal; the last run: 3 long tiles, against the reference.
    const int runs = nk ? 6 : 2;
    for (int run = 0; run < runs; ++run) {
      bool coarse = run == runs - 1;
      // Poisoned scratch and outputs (NaN bytes): a kernel that read what
      // it did not write this run would differ or fail the reference.
      CUDA_OK(cudaMemset(scratch, 0xff, kScratchDoubles * 2 * sizeof(double)));
      CUDA_OK(cudaMemset(sum, 0xff, C * 4));
      CUDA_OK(cudaMemset(sumSq, 0xff, C * 4));
      statsPass(k, scratch, y, sum, sumSq, M, C, true, coarse ? 3 : 0);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<float> gs = download(sum, C), gss = download(sumSq, C);
      if (run == 0 || coarse) {
        double worst = 0;
        int at = -1;
        for (int c = 0; c < C; ++c) {
          double e1 = std::fabs(gs[c] - wantS[c]) / std::max(1.0, absS[c]),
                 e2 = std::fabs(gss[c] - wantSS[c]) / std::max(1.0, wantSS[c]);
          double e = std::max(e1, e2);
          if (!(e <= worst)) { // NaN counts as worst
            worst = e;
            at = c;
          }
        }
        // f32 outputs, the new kernel's f32 chunks: a few f32 roundings
        // (~1e-7 each); one row missed or counted twice is ~1/M >= 1e-4 of
        // these shapes' sums.
        bool ok = worst <= 1e-5;
        std::snprintf(what, sizeof what,
                      "%s M=%lld C=%d mean=%g%s: max error %.3g (channel %d)",
                      name, (long long)M, C, mean, coarse ? " (3 tiles)" : "",
                      worst, at);
        std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
        failures += !ok;
      }
      if (nk && !coarse) {
        std::vector<uint32_t> bs(C), bss(C);
        std::memcpy(bs.data(), gs.data(), C * 4);
        std::memcpy(bss.data(), gss.data(), C * 4);
        if (run == 0) {
          firstS = bs;
          firstSS = bss;
        } else if (bs != firstS || bss != firstSS) {
          std::printf("FAIL %s M=%lld C=%d: run %d differs bitwise from run "
                      "0\n",
                      name, (long long)M, C, run);
          ++failures;
          break;
        } else if (run == 4) {
          std::printf("ok   %s M=%lld C=%d: 5 runs bitwise equal\n", name,
                      (long long)M, C);
        }
      }
    }
  }

  // The prologue: both kernels against the host (one f16 step: the device
  // may contract to an fma), and whether they agree bitwise.
  CUDA_OK(cudaMemset(out8, 0xff, n * 2));
  CUDA_OK(cudaMemset(out1, 0xff, n * 2));
  prologue(false, y, scale, shift, out1, n, C);
  prologue(true, y, scale, shift, out8, n, C);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<__half> g1 = download(out1, n), g8 = download(out8, n);
  double worst = 0;
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    int c = (int)(i % C);
    float v = std::fma(__half2float(hy[i]), hs[c], hb[c]);
    double want = __half2float(__float2half_rn(v > 0.f ? v : 0.f));
    double got = __half2float(g8[i]);
    double e = std::fabs(got - want) / std::max(1.0, std::fabs(want));
    if (!(e <= worst))
      worst = e;
    differ += std::memcmp(&g1[i], &g8[i], 2) != 0;
  }
  bool ok = worst <= 1.0 / 128;
  std::printf("%s nhwcScaleShiftRelu8 M=%lld C=%d: max error %.3g, %lld of "
              "%lld elements differ from nhwcScaleShiftRelu\n",
              ok ? "ok  " : "FAIL", (long long)M, C, worst, (long long)differ,
              (long long)n);
  failures += !ok;
  // A grid of 3 blocks: every thread walks several vectors, so the channel
  // advanced by the stride (768 % (C / 8)) is exercised; same output.
  CUDA_OK(cudaMemset(out1, 0xff, n * 2));
  nhwcScaleShiftRelu8<__half><<<3, kThreads>>>(y, scale, shift, out1, n, C);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<__half> g3 = download(out1, n);
  ok = std::memcmp(g3.data(), g8.data(), n * 2) == 0;
  std::printf("%s nhwcScaleShiftRelu8 M=%lld C=%d: a 3-block grid gives the "
              "same bits\n",
              ok ? "ok  " : "FAIL", (long long)M, C);
  failures += !ok;
  for (void *p : {(void *)y, (void *)out8, (void *)out1, (void *)sum,
                  (void *)sumSq, (void *)scale, (void *)shift, (void *)scratch})
    CUDA_OK(cudaFree(p));
}

int check() {
  // Rows that are no multiple of the tile, lanes < 32 (C = 24, 40), the
  // C = 2048 of ResNet-50's last stage at a small M, one tile of one row.
  checkShape(2 * 56 * 56, 64, 3.f);
  checkShape(4 * 7 * 7, 2048, 0.f);
  checkShape(3 * 13 * 11, 40, -5.f);
  checkShape(1000, 24, 1.f);
  checkShape(1, 8, 2.f);
  checkShape(4 * 28 * 28, 512, 10.f);
  std::printf(failures ? "bn_stats_check: %d FAILED\n" : "bn_stats_check: ok\n",
              failures);
  return failures ? 1 : 0;
}

/// ResNet-50 (torchvision, v1.5) at 224^2: each conv's output H = W and
/// channels, how many of the 53 conv + BN pairs have that output shape, and
/// how many split forms read it as their prologue's input (the input of
/// each bottleneck's 3x3 and last 1x1 convs is relu(bn(...)) of the
/// previous conv's output).
struct Shape {
  int hw, C, stats, prologues;
};
const Shape kResNet50[] = {{112, 64, 1, 0}, {56, 64, 6, 6},    {56, 256, 4, 0},
                           {56, 128, 1, 1}, {28, 128, 7, 7},   {28, 512, 5, 0},
                           {28, 256, 1, 1}, {14, 256, 11, 11}, {14, 1024, 7, 0},
                           {14, 512, 1, 1}, {7, 512, 5, 5},    {7, 2048, 4, 0}};

int bench(int N) {
  const double peak = gpucheck::printDeviceHbmPeak();
  int64_t most = 0;
  for (const Shape &s : kResNet50)
    most = std::max<int64_t>(most, (int64_t)N * s.hw * s.hw * s.C);
  __half *y, *out;
  float *sum, *sumSq, *scale, *shift;
  double *scratch;
  char *flush;
  const size_t flushBytes = size_t(512) << 20;
  CUDA_OK(cudaMalloc(&y, most * 2));
  CUDA_OK(cudaMalloc(&out, most * 2));
  CUDA_OK(cudaMalloc(&sum, 2048 * 4));
  CUDA_OK(cudaMalloc(&sumSq, 2048 * 4));
  CUDA_OK(cudaMalloc(&scale, 2048 * 4));
  CUDA_OK(cudaMalloc(&shift, 2048 * 4));
  CUDA_OK(cudaMalloc(&scratch, kScratchDoubles * 2 * sizeof(double)));
  CUDA_OK(cudaMalloc(&flush, flushBytes));
  gpucheck::fillHalf<<<1024, 256>>>(y, most, 3u, 4.f, 1.f);
  std::vector<float> ones(2048, 1.f), zeros(2048, 0.f);
  CUDA_OK(cudaMemcpy(scale, ones.data(), 2048 * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(shift, zeros.data(), 2048 * 4, cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  // Median of 9 runs, each after writing 512 MiB (more than any L2) so
  // that y comes from HBM as a conv's large output mostly does.
  bool flushL2 = true;
  auto timeMs = [&](auto fn) {
    std::vector<float> t;
    for (int i = 0; i < 10; ++i) {
      if (flushL2)
        CUDA_OK(cudaMemsetAsync(flush, i, flushBytes));
      CUDA_OK(cudaEventRecord(e0));
      fn();
      CUDA_OK(cudaEventRecord(e1));
      CUDA_OK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      if (i > 0) // the first is a warm-up
        t.push_back(ms);
    }
    CUDA_OK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return (double)t[t.size() / 2];
  };
  std::printf("\nstatistics pass (sum, sum of squares per channel; partial "
              "sums + nhwcSumsFinish), batch %d:\n",
              N);
  std::printf("%-14s %5s %8s %6s | %9s %9s %7s %5s | %9s %9s %7s %5s\n",
              "NxHxWxC", "count", "MB", "tiles", "old ms", "(partial)", "GB/s",
              "%peak", "new ms", "(partial)", "GB/s", "%peak");
  double totOld = 0, totNew = 0, totBytes = 0, tot[kNumStats] = {};
  std::vector<std::vector<double>> variants; // per shape, ms per kernel
  for (const Shape &s : kResNet50) {
    int64_t M = (int64_t)N * s.hw * s.hw;
    double bytes = (double)M * s.C * 2;
    double t[kNumStats], p[2];
    for (int k = 0; k < kNumStats; ++k) {
      t[k] = timeMs([&] { statsPass(k, scratch, y, sum, sumSq, M, s.C); });
      tot[k] += s.stats * t[k];
      if (k < 2)
        p[k] = timeMs(
            [&] { statsPass(k, scratch, y, sum, sumSq, M, s.C, false); });
    }
    variants.emplace_back(t, t + kNumStats);
    std::printf("%3dx%3dx%3dx%-4d %5d %8.1f %6lld | %9.4f %9.4f %7.0f %4.0f%% "
                "| %9.4f %9.4f %7.0f %4.0f%%\n",
                N, s.hw, s.hw, s.C, s.stats, bytes / 1e6,
                (long long)tiling(M, s.C).tiles, t[0], p[0], bytes / t[0] / 1e6,
                100 * bytes / t[0] / 1e-3 / peak, t[1], p[1],
                bytes / t[1] / 1e6, 100 * bytes / t[1] / 1e-3 / peak);
    totOld += s.stats * t[0];
    totNew += s.stats * t[1];
    totBytes += s.stats * bytes;
  }
  std::printf("per step (53 passes, %.2f GB): old %.3f ms, new %.3f ms; "
              "floor at the HBM peak %.3f ms\n",
              totBytes / 1e9, totOld, totNew, totBytes / peak * 1e3);
  // In the step y was just written by the convolution: the tensors that
  // fit in L2 are read from it. The same passes without the flush bound
  // that case from the other side.
  flushL2 = false;
  double warm[2] = {};
  for (const Shape &s : kResNet50)
    for (int k = 0; k < 2; ++k)
      warm[k] +=
          s.stats * timeMs([&] {
            statsPass(k, scratch, y, sum, sumSq, (int64_t)N * s.hw * s.hw, s.C);
          });
  flushL2 = true;
  std::printf("per step without the L2 flush: old %.3f ms, new %.3f ms\n",
              warm[0], warm[1]);
  std::printf("\nstatistics kernels, ms with nhwcSumsFinish:\n");
  for (int k = 0; k < kNumStats; ++k)
    std::printf("  [%d] %s\n", k, kStatsKernels[k]);
  std::printf("%-14s", "NxHxWxC");
  for (int k = 0; k < kNumStats; ++k) {
    char label[16];
    std::snprintf(label, sizeof label, "[%d]", k);
    std::printf(" %9s", label);
  }
  std::printf("\n");
  for (size_t i = 0; i < variants.size(); ++i) {
    const Shape &s = kResNet50[i];
    std::printf("%3dx%3dx%3dx%-4d", N, s.hw, s.hw, s.C);
    for (double ms : variants[i])
      std::printf(" %9.4f", ms);
    std::printf("\n");
  }
  std::printf("%-15s", "per step");
  for (double ms : tot)
    std::printf(" %9.3f", ms);
  std::printf("\n");

  std::printf("\nprologue relu(x * scale + shift) into scratch, batch %d:\n",
              N);
  std::printf("%-14s %5s %8s | %9s %7s %5s | %9s %7s %5s\n", "NxHxWxC", "count",
              "MB r+w", "old ms", "GB/s", "%peak", "new ms", "GB/s", "%peak");
  double pOld = 0, pNew = 0, pBytes = 0;
  for (const Shape &s : kResNet50) {
    if (!s.prologues)
      continue;
    int64_t n = (int64_t)N * s.hw * s.hw * s.C;
    double bytes = 4.0 * n; // read x, write the f16 result
    double t[2];
    for (int k = 0; k < 2; ++k)
      t[k] = timeMs([&] { prologue(k == 1, y, scale, shift, out, n, s.C); });
    std::printf("%3dx%3dx%3dx%-4d %5d %8.1f | %9.4f %7.0f %4.0f%% | %9.4f "
                "%7.0f %4.0f%%\n",
                N, s.hw, s.hw, s.C, s.prologues, bytes / 1e6, t[0],
                bytes / t[0] / 1e6, 100 * bytes / t[0] / 1e-3 / peak, t[1],
                bytes / t[1] / 1e6, 100 * bytes / t[1] / 1e-3 / peak);
    pOld += s.prologues * t[0];
    pNew += s.prologues * t[1];
    pBytes += s.prologues * bytes;
  }
  std::printf("per step (32 prologues, %.2f GB): old %.3f ms, new %.3f ms; "
              "floor at the HBM peak %.3f ms\n",
              pBytes / 1e9, pOld, pNew, pBytes / peak * 1e3);
  std::printf("split-form kernels per step: old %.3f ms, new %.3f ms "
              "(saved %.3f ms)\n",
              totOld + pOld, totNew + pNew, totOld + pOld - totNew - pNew);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (gpucheck::skippedWithoutGpu("bn_stats_bench"))
    return 3;
  if (argc > 1 && std::string(argv[1]) == "check")
    return check();
  int N = argc > 1 ? std::atoi(argv[1]) : 128;
  if (N < 1) {
    std::fprintf(stderr, "usage: %s [check | batch]\n", argv[0]);
    return 2;
  }
  return bench(N);
}
