// Issue 37: under CNNRT_DETERMINISTIC (the default) the runtime admits a
// cuDNN conv+GenStats plan only after its reproducibility probe (see
// runtime/src/ReproProbe.h). This check runs a few ResNet-50 conv+stats
// shapes through the runtime's own selection and asserts what the step
// relies on: y, sum and sumSq come out bitwise identical
//   - over K calls of one context (outputs poisoned between calls),
//   - in a second context that reads the first one's algorithm cache (the
//     next process of a resumed run), which must also make the same choice,
//   - with the forced graph form (CNNRT_CONV_FUSION=cudnn), which obeys
//     determinism too;
// and that every graph choice in the cache carries the probe's verdict
// ("<index> reproduced=<runs>"). The graph-or-split choice per shape is
// printed, not judged: whether a plan passes or wins is cuDNN's and the
// GPU's business. Exit 0: passed; 1: a check failed; 3: no GPU (SKIPPED).
// Argument: the batch (8).
#include "GpuCheck.cuh"
#include "cnnrt/cnnrt.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace cnnrt;


namespace {

constexpr int kCalls = 8;

// ResNet-50 conv+stats shapes (NHWC f16; batch set in main): a bottleneck's
// 1x1 reduce without prologue, its 3x3 and 1x1 expand with the BN-apply +
// ReLU prologue, a stride-2 3x3.
ConvDesc gShapes[] = {
    {8, 256, 56, 56, 64, 1, 1, 56, 56, 0, 0, 0, 0, 1, 1, 1, 1, 1, DType::F16,
     Layout::NHWC},
    {8, 64, 56, 56, 64, 3, 3, 56, 56, 1, 1, 1, 1, 1, 1, 1, 1, 1, DType::F16,
     Layout::NHWC},
    {8, 64, 56, 56, 256, 1, 1, 56, 56, 0, 0, 0, 0, 1, 1, 1, 1, 1, DType::F16,
     Layout::NHWC},
    {8, 128, 56, 56, 128, 3, 3, 28, 28, 1, 1, 1, 1, 2, 2, 1, 1, 1, DType::F16,
     Layout::NHWC},
};
constexpr int kShapes = sizeof(gShapes) / sizeof(gShapes[0]);
bool hasPrologue(int i) { return i == 1 || i == 2; }


__global__ void scaleShiftRelu(const __half *x, const float *scale,
                               const float *shift, __half *out, int64_t n,
                               int C) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = __half2float(x[i]) * scale[i % C] + shift[i % C];
    out[i] = __float2half(v > 0.f ? v : 0.f);
  }
}

// The split form's statistics: one thread per channel, a fixed order.
__global__ void channelSums(const __half *y, float *sum, float *sumSq,
                            int64_t rows, int K) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= K)
    return;
  float s = 0, q = 0;
  for (int64_t r = 0; r < rows; ++r) {
    float v = __half2float(y[r * K + k]);
    s += v;
    q += v * v;
  }
  sum[k] = s;
  sumSq[k] = q;
}

template <int I>
void statsSplit(Context &ctx, const void *x, const void *w, void *y,
                float *sum, float *sumSq, const float *scale,
                const float *shift, void *scratch) {
  const ConvDesc &d = gShapes[I];
  if (scale) {
    int64_t n = int64_t(d.N) * d.H * d.W * d.C;
    scaleShiftRelu<<<1024, 256, 0, ctx.stream()>>>(
        (const __half *)x, scale, shift, (__half *)scratch, n, d.C);
    x = scratch;
  }
  ctx.convFwd(I, x, w, y);
  channelSums<<<(d.K + 63) / 64, 64, 0, ctx.stream()>>>(
      (const __half *)y, sum, sumSq, int64_t(d.N) * d.P * d.Q, d.K);
  ctx.checkLaunch("genstats_repro split");
}
const ConvStatsFn kSplits[] = {statsSplit<0>, statsSplit<1>, statsSplit<2>,
                               statsSplit<3>};
static_assert(sizeof(kSplits) / sizeof(kSplits[0]) == kShapes,
              "one split form per shape");

/// One shape's device buffers, inputs filled once.
struct Bufs {
  void *x = nullptr, *w = nullptr, *y = nullptr;
  float *sum = nullptr, *sq = nullptr, *scale = nullptr, *shift = nullptr;
  size_t yBytes = 0;
  int K = 0;
  explicit Bufs(const ConvDesc &d, unsigned seed) {
    size_t nx = size_t(d.N) * d.C * d.H * d.W, nw = size_t(d.K) * d.C * d.R * d.S;
    yBytes = size_t(d.N) * d.K * d.P * d.Q * 2;
    K = d.K;
    CUDA_OK(cudaMalloc(&x, nx * 2));
    CUDA_OK(cudaMalloc(&w, nw * 2));
    CUDA_OK(cudaMalloc(&y, yBytes));
    CUDA_OK(cudaMalloc(&sum, d.K * 4));
    CUDA_OK(cudaMalloc(&sq, d.K * 4));
    CUDA_OK(cudaMalloc(&scale, d.C * 4));
    CUDA_OK(cudaMalloc(&shift, d.C * 4));
    gpucheck::fillHalf<<<1024, 256>>>((__half *)x, nx, seed, 4.f, 0.f);
    gpucheck::fillHalf<<<1024, 256>>>((__half *)w, nw, seed * 7 + 1, 0.25f,
                                      0.f);
    std::vector<float> sc(d.C), sh(d.C);
    for (int c = 0; c < d.C; ++c) {
      sc[c] = 0.5f + float((c * 37) % 17) / 17.f;
      sh[c] = float((c * 11) % 13) / 13.f - 0.5f;
    }
    CUDA_OK(cudaMemcpy(scale, sc.data(), d.C * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(shift, sh.data(), d.C * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
  }
  ~Bufs() {
    for (void *p : {x, w, y, (void *)sum, (void *)sq, (void *)scale,
                    (void *)shift})
      cudaFree(p);
  }
  Bufs(const Bufs &) = delete;
  Bufs &operator=(const Bufs &) = delete;
};

/// y, sum and sumSq of one call, as bytes.
struct Result {
  std::vector<unsigned char> y, sum, sq;
  bool operator==(const Result &o) const {
    return y == o.y && sum == o.sum && sq == o.sq;
  }
  const char *firstDiff(const Result &o) const {
    return y != o.y ? "y" : sum != o.sum ? "sum" : sq != o.sq ? "sumSq" : "";
  }
};

Result callOnce(Context &ctx, int id, Bufs &b, int poison) {
  // A different byte in every output first: a form that reads its outputs
  // instead of overwriting them shows up as a difference.
  CUDA_OK(cudaMemsetAsync(b.y, poison, b.yBytes, ctx.stream()));
  CUDA_OK(cudaMemsetAsync(b.sum, poison, b.K * 4, ctx.stream()));
  CUDA_OK(cudaMemsetAsync(b.sq, poison, b.K * 4, ctx.stream()));
  bool pro = hasPrologue(id);
  ctx.convStatsFwd(id, b.x, b.w, b.y, b.sum, b.sq, pro ? b.scale : nullptr,
                   pro ? b.shift : nullptr);
  CUDA_OK(cudaStreamSynchronize(ctx.stream()));
  Result r;
  r.y.resize(b.yBytes);
  r.sum.resize(b.K * 4);
  r.sq.resize(b.K * 4);
  CUDA_OK(cudaMemcpy(r.y.data(), b.y, b.yBytes, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(r.sum.data(), b.sum, b.K * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(r.sq.data(), b.sq, b.K * 4, cudaMemcpyDeviceToHost));
  return r;
}

int failures = 0;

/// A context under `mode` with `cachePath` ("" = none): registers every
/// shape, prepares, and calls each kCalls times; returns the first call's
/// results and each shape's form (graph or split) in `graph`.
std::vector<Result> runContext(const char *tag, ConvFusion mode,
                               const std::string &cachePath,
                               std::vector<Bufs *> &bufs,
                               std::vector<bool> &graph) {
  ModelSpec spec{"genstats_repro_check", 256, nullptr, 0, 1, 1, 1, 1, 1,
                 nullptr, nullptr, nullptr};
  ContextOptions opts = ContextOptions::fromEnv();
  opts.deterministic = true;
  opts.convFusion = mode;
  opts.algoCachePath = cachePath;
  Context ctx(spec, opts);
  for (int i = 0; i < kShapes; ++i) {
    ctx.registerConv(i, gShapes[i], "genstats_repro");
    ctx.registerConvStats(i, i, kSplits[i], hasPrologue(i), "genstats_repro");
  }
  ctx.finishPrepare();
  std::vector<Result> first;
  graph.assign(kShapes, false);
  for (int i = 0; i < kShapes; ++i) {
    graph[i] = ctx.convStatsUsesGraph(i);
    first.push_back(callOnce(ctx, i, *bufs[i], 0x11));
    int same = 1;
    for (int k = 1; k < kCalls; ++k) {
      Result r = callOnce(ctx, i, *bufs[i], 0x11 * (k + 1));
      if (r == first.back()) {
        ++same;
      } else {
        std::printf("FAIL  %s shape %d (%s): call %d's %s differs from call "
                    "1's\n",
                    tag, i, graph[i] ? "graph" : "split", k + 1,
                    r.firstDiff(first.back()));
        ++failures;
        break;
      }
    }
    const ConvDesc &d = gShapes[i];
    std::printf("%-8s shape %d (N%d C%d %dx%d K%d %dx%d s%d%s): %s, %d/%d "
                "calls bitwise equal\n",
                tag, i, d.N, d.C, d.H, d.W, d.K, d.R, d.S, d.strideH,
                hasPrologue(i) ? " prologue" : "", graph[i] ? "graph" : "split",
                same, kCalls);
  }
  return first;
}

} // namespace

int main(int argc, char **argv) {
  if (gpucheck::skippedWithoutGpu("genstats_repro_check"))
    return 3;
  int batch = argc > 1 ? std::atoi(argv[1]) : 8;
  if (batch < 1) {
    std::fprintf(stderr, "genstats_repro_check: batch must be >= 1\n");
    return 2;
  }
  for (ConvDesc &d : gShapes)
    d.N = batch;
  std::vector<Bufs *> bufs;
  for (int i = 0; i < kShapes; ++i)
    bufs.push_back(new Bufs(gShapes[i], 1234u + 17u * i));
  std::string cache = "/tmp/genstats_repro_" + std::to_string(getpid()) + ".txt";
  std::remove(cache.c_str());

  std::vector<bool> gTune, gCached, gForced;
  std::vector<Result> tune =
      runContext("tune", ConvFusion::Auto, cache, bufs, gTune);
  // Every graph choice the tuning context cached carries the verdict.
  std::ifstream in(cache);
  std::string line;
  int graphEntries = 0;
  while (std::getline(in, line)) {
    if (line.find("genstats|ws=") == std::string::npos)
      continue;
    std::string value = line.substr(line.find(' ') + 1);
    if (value.rfind("-1", 0) == 0)
      continue;
    ++graphEntries;
    if (value.find(" reproduced=") == std::string::npos) {
      std::printf("FAIL  cached graph choice without a verdict: %s\n",
                  line.c_str());
      ++failures;
    }
  }
  std::printf("cache: %d graph choice(s), each with its verdict\n",
              graphEntries);
  std::vector<Result> cached =
      runContext("cached", ConvFusion::Auto, cache, bufs, gCached);
  for (int i = 0; i < kShapes; ++i) {
    if (gCached[i] != gTune[i]) {
      std::printf("FAIL  shape %d: the cached context runs %s, the tuning one "
                  "%s\n",
                  i, gCached[i] ? "graph" : "split", gTune[i] ? "graph" : "split");
      ++failures;
    } else if (!(cached[i] == tune[i])) {
      std::printf("FAIL  shape %d: the cached context's %s differs from the "
                  "tuning one's\n",
                  i, cached[i].firstDiff(tune[i]));
      ++failures;
    }
  }
  runContext("forced", ConvFusion::CuDNN, "", bufs, gForced);
  std::remove(cache.c_str());
  for (Bufs *b : bufs)
    delete b;
  std::printf("genstats_repro_check: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
