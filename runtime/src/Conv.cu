//===- Conv.cu - convolution engines: cuDNN's legacy and graph APIs -------===//
//
// Every convolution is registered once (registerConv): its legacy cuDNN
// algorithm per direction is found by timing (cudnnFind*AlgorithmEx) and,
// for f16, timed against the graph API's plans (CudnnGraph.h); the faster
// is kept, by shape, in the algorithm cache. The fused-convolution
// families run on a registered convolution: bias + activation (cuDNN's
// legacy fused call or the split form) and the three graph-or-split
// families (conv + statistics, dgrad + add + ReLU backward, prologue +
// wgrad): each is a table (GraphFamily) over one registration, lookup,
// choice (chooseGraphOrSplit), `*UsesGraph` query and step-time run.
//
//===----------------------------------------------------------------------===//

#include "ContextImpl.h"
#include "GraphChoice.h"
#include "ReproProbe.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <sstream>

namespace cnnrt {

namespace cg = cnnrt::cudnn_graph;

namespace {

//===--- padding emulation kernels ----------------------------------------===//

template <typename T>
__global__ void padKernel(const T *__restrict__ x, T *__restrict__ xp, int N,
                          int C, int H, int W, int Hp, int Wp, int pt, int pl,
                          bool nhwc) {
  int64_t total = (int64_t)N * C * Hp * Wp;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t n, c, y, xx;
    if (nhwc) {
      c = i % C;
      xx = (i / C) % Wp;
      y = (i / C / Wp) % Hp;
      n = i / C / Wp / Hp;
    } else {
      xx = i % Wp;
      y = (i / Wp) % Hp;
      c = (i / Wp / Hp) % C;
      n = i / Wp / Hp / C;
    }
    int64_t sy = y - pt, sx = xx - pl;
    T v = T(0.0f);
    if (sy >= 0 && sy < H && sx >= 0 && sx < W)
      v = nhwc ? x[((n * H + sy) * W + sx) * C + c]
               : x[((n * C + c) * H + sy) * W + sx];
    xp[i] = v;
  }
}

template <typename T>
__global__ void cropKernel(const T *__restrict__ xp, T *__restrict__ x, int N,
                           int C, int H, int W, int Hp, int Wp, int pt, int pl,
                           bool nhwc, bool accumulate) {
  int64_t total = (int64_t)N * C * H * W;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t n, c, y, xx, src;
    if (nhwc) {
      c = i % C;
      xx = (i / C) % W;
      y = (i / C / W) % H;
      n = i / C / W / H;
      src = ((n * Hp + y + pt) * Wp + xx + pl) * C + c;
    } else {
      xx = i % W;
      y = (i / W) % H;
      c = (i / W / H) % C;
      n = i / W / H / C;
      src = ((n * C + c) * Hp + y + pt) * Wp + xx + pl;
    }
    float v = static_cast<float>(xp[src]);
    if (accumulate)
      v += static_cast<float>(x[i]);
    x[i] = T(v);
  }
}

template <typename Perf>
bool pickPerf(const Perf *perf, int n, bool deterministic, size_t maxWs,
              int &algo, cudnnMathType_t &math, size_t &ws) {
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < n; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > maxWs)
        continue;
      if (pass == 0 && deterministic &&
          perf[i].determinism != CUDNN_DETERMINISTIC)
        continue;
      algo = static_cast<int>(perf[i].algo);
      math = perf[i].mathType;
      ws = perf[i].memory;
      return true;
    }
  return false;
}

} // namespace

void releaseConvolutions(Context::Impl &I) {
  for (ConvEntry &c : I.convs) {
    if (!c.valid)
      continue;
    cudnnDestroyTensorDescriptor(c.xDesc);
    cudnnDestroyTensorDescriptor(c.yDesc);
    cudnnDestroyFilterDescriptor(c.wDesc);
    cudnnDestroyConvolutionDescriptor(c.cDesc);
  }
  for (FusedConvEntry &f : I.fusedConvs) {
    if (f.biasDesc)
      cudnnDestroyTensorDescriptor(f.biasDesc);
    if (f.actDesc)
      cudnnDestroyActivationDescriptor(f.actDesc);
  }
  auto freeBuffers = [](auto &entries) {
    for (auto &e : entries) {
      cudaFree(e.scratch);
      cudaFree(e.halfScaleShift);
    }
  };
  freeBuffers(I.convStats);
  freeBuffers(I.convDgrads);
  freeBuffers(I.convWgrads);
  for (void *p : I.scratch)
    cudaFree(p);
  cudaFree(I.tuneWs);
  cudaFree(I.padBuf);
}

static void ensureScratch(Context &ctx, Context::Impl &I, int slot,
                          size_t bytes, const char *loc) {
  if (I.scratchBytes[slot] >= bytes)
    return;
  cudaFree(I.scratch[slot]);
  I.scratch[slot] = nullptr;
  I.scratchBytes[slot] = 0;
  if (cudaMalloc(&I.scratch[slot], bytes) != cudaSuccess)
    throwOutOfMemory(ctx.spec(), "algorithm-tuning scratch", bytes);
  CNNRT_CUDA(ctx, cudaMemset(I.scratch[slot], 0, bytes), loc);
  CNNRT_CUDA(ctx, cudaDeviceSynchronize(), loc);
  I.scratchBytes[slot] = bytes;
}

static void ensureTuneWorkspace(Context &ctx, Context::Impl &I) {
  if (I.tuneWs)
    return;
  size_t freeB = 0, totalB = 0;
  cudaMemGetInfo(&freeB, &totalB);
  size_t want = std::min(I.tuneWsLimit, freeB / 2);
  while (want >= (1u << 20)) {
    if (cudaMalloc(&I.tuneWs, want) == cudaSuccess) {
      I.tuneWsBytes = want;
      return;
    }
    cudaGetLastError();
    want /= 2;
  }
  I.tuneWs = nullptr;
  I.tuneWsBytes = 0;
}

namespace {
/// Two timing events, destroyed also when a timed call throws.
struct EventPair {
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  EventPair() {
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
  }
  ~EventPair() {
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  EventPair(const EventPair &) = delete;
  EventPair &operator=(const EventPair &) = delete;
};
} // namespace

/// Milliseconds per call of `run` on the context's stream (one warm-up, then
/// the mean of five), or a negative number when a call fails.
template <typename Fn> static float timeCalls(Context &ctx, Fn run) {
  if (!run())
    return -1;
  EventPair ev;
  cudaEventRecord(ev.e0, ctx.stream());
  bool ok = true;
  for (int i = 0; i < 5 && ok; ++i)
    ok = run();
  cudaEventRecord(ev.e1, ctx.stream());
  float ms = -1;
  if (cudaEventSynchronize(ev.e1) == cudaSuccess && ok)
    cudaEventElapsedTime(&ms, ev.e0, ev.e1);
  cudaGetLastError();
  return ok && ms >= 0 ? ms / 5 : -1;
}

/// Runs `run` once and waits for it. A choice read from the algorithm cache
/// is run so once during start-up (CNNRT_WARM_CACHED, on by default): CUDA
/// loads a library kernel lazily, at its first launch, and timing a choice
/// launches it, so without this a run whose choices all come from the cache
/// paid the loading in its first step (~120 ms for ResNet-50) where a run
/// that timed them paid it at start-up. A failure here is left to the step
/// to report: the same call fails there with its own diagnostic.
template <typename Fn> static void runOnce(Context &ctx, Fn run) {
  run();
  cudaStreamSynchronize(ctx.stream());
  cudaGetLastError();
}

/// Enqueues direction `dir` of `c` through its legacy algorithm on the
/// buffers x, w, y (any contents: only shapes matter) with workspace `ws`;
/// false when the call fails or needs more than `wsBytes`.
static bool runLegacy(Context::Impl &I, ConvEntry &c, int dir, void *x,
                      void *w, void *y, void *ws, size_t wsBytes) {
  float alpha = 1.f, beta = 0.f;
  if (c.ws[dir] > wsBytes ||
      cudnnSetConvolutionMathType(c.cDesc, c.math[dir]) != CUDNN_STATUS_SUCCESS)
    return false;
  cudnnStatus_t st;
  if (dir == kFwd)
    st = cudnnConvolutionForward(
        I.cudnn, &alpha, c.xDesc, x, c.wDesc, w, c.cDesc,
        static_cast<cudnnConvolutionFwdAlgo_t>(c.algo[dir]), ws, c.ws[dir],
        &beta, c.yDesc, y);
  else if (dir == kBwdData)
    st = cudnnConvolutionBackwardData(
        I.cudnn, &alpha, c.wDesc, w, c.yDesc, y, c.cDesc,
        static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo[dir]), ws, c.ws[dir],
        &beta, c.xDesc, x);
  else
    st = cudnnConvolutionBackwardFilter(
        I.cudnn, &alpha, c.xDesc, x, c.yDesc, y, c.cDesc,
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo[dir]), ws,
        c.ws[dir], &beta, c.wDesc, w);
  return st == CUDNN_STATUS_SUCCESS;
}

/// Times cuDNN graph API plans of one direction of `c` against its legacy
/// algorithm (already chosen) and keeps the graph plan when it is faster by
/// more than 3 %. The choice is cached like the legacy algorithm (key
/// suffix "|graph": heuristics index and workspace, index -1 = legacy).
/// Returns whether it timed (and so ran) the candidates; false when the
/// choice came from the cache.
///
/// With the planned default workspace (not --workspace-mb's cap), plans
/// that need more (up to kOverflowWorkspaceMax) are timed too, and one that
/// runs at least twice as fast as the best choice within the workspace
/// runs with a workspace of its own outside the arena (ConvEntry::overflow,
/// said on stderr): ResNeSt's grouped 3x3 data gradient at batch 32 found
/// 25 of its 26 engines over the planned 49 MiB and fell back to a 58 ms
/// legacy algorithm.
static constexpr size_t kOverflowWorkspaceMax = size_t(1) << 30;

static bool overflowAllowed(const Context::Impl &I) {
  return I.plannedWorkspace && !I.workspaceIsCap;
}

static void noteOverflow(const ConvEntry &c, int dir, size_t planned,
                         const char *how) {
  const size_t need = c.graph[dir]->workspaceBytes();
  std::fprintf(stderr,
               "cnnrt: note: %s %s: cuDNN graph plan #%d needs %.1f MiB of "
               "workspace, beyond the planned %.1f MiB, and %s: it runs with "
               "a workspace of its own outside the arena (cnnc --workspace-mb "
               "%zu plans it in the arena; a smaller --workspace-mb is a cap)\n",
               c.loc.c_str(), kDirName[dir], c.graph[dir]->index(),
               need / 1048576.0, planned / 1048576.0, how,
               (need + (1u << 20) - 1) >> 20);
}

static bool chooseGraphConv(Context &ctx, Context::Impl &I, ConvEntry &c,
                            int dir, int pH, int pW, size_t wsCap,
                            size_t xBytes, size_t wBytes, size_t yBytes) {
  const ConvDesc &d = c.d;
  cg::ConvGeometry g{d.N,
                     d.C,
                     c.Hp,
                     c.Wp,
                     d.K,
                     d.R,
                     d.S,
                     d.P,
                     d.Q,
                     pH,
                     pW,
                     d.strideH,
                     d.strideW,
                     d.dilH,
                     d.dilW,
                     d.groups,
                     CUDNN_DATA_HALF,
                     d.layout == Layout::NHWC};
  const char *loc = c.loc.c_str();
  std::string key = c.key + kDirName[dir] + "|graph";
  if (const std::string *hit = I.cache.find(key)) {
    std::istringstream v(*hit);
    int index = -1;
    size_t ws = 0;
    if ((v >> index >> ws) &&
        (ws <= wsCap || (overflowAllowed(I) && ws <= kOverflowWorkspaceMax))) {
      if (index < 0)
        return false;
      std::string why, engine;
      c.graph[dir] =
          cg::convPlanAt(I.cudnn, g, static_cast<cg::Dir>(dir), index, &why);
      // " engine=<tag>" (since issue 37; older values end at ws): the
      // position must still name the engine that was timed
      // (GraphChoice.h says why); if not, time again.
      if (c.graph[dir] && (v >> engine) && engine.rfind("engine=", 0) == 0 &&
          !c.graph[dir]->engineTag().empty() &&
          engine.substr(7) != c.graph[dir]->engineTag()) {
        std::fprintf(stderr,
                     "cnnrt: warning: %s %s: cached graph plan #%d was cuDNN "
                     "engine %s, the position now names %s; timing again\n",
                     loc, kDirName[dir], index, engine.c_str() + 7,
                     c.graph[dir]->engineTag().c_str());
        c.graph[dir].reset();
      } else {
        if (ctx.options().verbose)
          std::fprintf(stderr, "cnnrt: %s %s graph plan #%d (cached)%s%s\n",
                       loc, kDirName[dir], index,
                       c.graph[dir] ? "" : ": unavailable, ",
                       c.graph[dir] ? "" : why.c_str());
        if (c.graph[dir] && c.graph[dir]->workspaceBytes() > wsCap) {
          if (overflowAllowed(I) &&
              c.graph[dir]->workspaceBytes() <= kOverflowWorkspaceMax) {
            c.overflow[dir] = true;
            noteOverflow(c, dir, wsCap, "was chosen (cached)");
          } else {
            c.graph[dir].reset();
          }
        }
        return false;
      }
    }
  }
  ensureTuneWorkspace(ctx, I);
  ensureScratch(ctx, I, 0, xBytes, loc);
  ensureScratch(ctx, I, 1, wBytes, loc);
  ensureScratch(ctx, I, 2, yBytes, loc);
  size_t wsLimit = std::min(I.tuneWsBytes, wsCap);
  void *s0 = I.scratch[0], *s1 = I.scratch[1], *s2 = I.scratch[2];
  float legacyMs = timeCalls(ctx, [&]() {
    return runLegacy(I, c, dir, s0, s1, s2, I.tuneWs, I.tuneWsBytes);
  });
  std::string why;
  auto plans = cg::convPlans(I.cudnn, g, static_cast<cg::Dir>(dir),
                             ctx.options().graphPlans,
                             ctx.options().deterministic, &why, wsLimit);
  std::shared_ptr<cg::ConvPlan> best;
  float bestMs = -1;
  for (auto &p : plans) {
    if (p->workspaceBytes() > wsLimit)
      continue;
    float ms = timeCalls(ctx, [&]() {
      return p->execute(I.cudnn, s0, s1, s2, I.tuneWs) == CUDNN_STATUS_SUCCESS;
    });
    if (ms >= 0 && (bestMs < 0 || ms < bestMs)) {
      bestMs = ms;
      best = std::move(p);
    }
  }
  bool useGraph = best && (legacyMs < 0 || bestMs < 0.97f * legacyMs);
  if (useGraph)
    c.graph[dir] = best;
  // Beyond the planned default workspace (overflowAllowed): timed in the
  // tuning workspace, kept when at least twice as fast.
  std::shared_ptr<cg::ConvPlan> beyond;
  float beyondMs = -1, withinMs = useGraph ? bestMs : legacyMs;
  size_t beyondLimit = std::min(I.tuneWsBytes, kOverflowWorkspaceMax);
  // Searched only where the choice within the workspace is poor: nothing
  // ran, or a launch of over 0.5 ms at under 50 TFLOP/s in f16 (10 in f32;
  // Hopper's dense f16 Tensor Cores peak near 1,000, ResNet-50's 3x3
  // convolutions run at 150-300): each graph plan costs start-up time to
  // build and time, and most convolutions have a fast plan within the
  // default workspace. (ResNeSt's grouped 3x3 forward, 1.36 ms at 22
  // TFLOP/s, is such a launch; its weight gradient runs at 138.)
  const double flops = 2.0 * d.N * d.K * d.P * d.Q * (double(d.C) / d.groups) *
                       d.R * d.S;
  const double floorTflops = d.dtype == DType::F16 ? 50.0 : 10.0;
  const bool poor = withinMs < 0 || (withinMs > 0.5f &&
                                     flops / (withinMs * 1e9) < floorTflops);
  if (overflowAllowed(I) && poor && wsCap < beyondLimit) {
    std::string whyBeyond;
    auto more = cg::convPlans(I.cudnn, g, static_cast<cg::Dir>(dir),
                              ctx.options().graphPlans,
                              ctx.options().deterministic, &whyBeyond,
                              beyondLimit, wsCap + 1);
    for (auto &p : more) {
      float ms = timeCalls(ctx, [&]() {
        return p->execute(I.cudnn, s0, s1, s2, I.tuneWs) ==
               CUDNN_STATUS_SUCCESS;
      });
      if (ms >= 0 && (beyondMs < 0 || ms < beyondMs)) {
        beyondMs = ms;
        beyond = std::move(p);
      }
    }
  }
  if (beyond && (withinMs < 0 || 2.f * beyondMs <= withinMs)) {
    c.graph[dir] = beyond;
    c.overflow[dir] = true;
    useGraph = true;
    best = beyond;
    char how[96];
    std::snprintf(how, sizeof(how), "runs in %.3f ms against %.3f ms within it",
                  beyondMs, withinMs);
    noteOverflow(c, dir, wsCap, how);
  }
  if (ctx.options().verbose)
    std::fprintf(stderr,
                 "cnnrt: %s %s: legacy algo %d %.3f ms, graph %s%d %.3f ms%s%s "
                 "-> %s\n",
                 loc, kDirName[dir], c.algo[dir], legacyMs, "plan #",
                 best ? best->index() : -1, bestMs, best ? "" : ": ",
                 best ? "" : why.c_str(), useGraph ? "graph" : "legacy");
  std::ostringstream v;
  v << (useGraph ? best->index() : -1) << ' '
    << (useGraph ? best->workspaceBytes() : 0);
  if (useGraph && !best->engineTag().empty())
    v << " engine=" << best->engineTag();
  I.cache.put(key, v.str());
  return true;
}

void Context::registerConv(int id, const ConvDesc &d, const char *loc) {
  Impl &I = *impl_;
  if (I.prepared)
    fail(loc, "registerConv after prepare finished");
  if (id < 0)
    fail(loc, "negative conv id");
  if (static_cast<size_t>(id) >= I.convs.size())
    I.convs.resize(id + 1);
  ConvEntry &c = I.convs[id];
  if (c.valid)
    fail(loc, "conv id " + std::to_string(id) + " registered twice");
  if (d.dtype != DType::F32 && d.dtype != DType::F16)
    fail(loc, "convolution dtype must be f32 or f16");
  if (d.groups < 1 || d.C % d.groups || d.K % d.groups)
    fail(loc, "bad group count " + std::to_string(d.groups));
  c.d = d;
  c.loc = loc;
  c.asym = d.padT != d.padB || d.padL != d.padR;
  int pH = c.asym ? 0 : d.padT, pW = c.asym ? 0 : d.padL;
  c.Hp = c.asym ? d.H + d.padT + d.padB : d.H;
  c.Wp = c.asym ? d.W + d.padL + d.padR : d.W;
  size_t es = dtypeSize(d.dtype);
  size_t xBytes = static_cast<size_t>(d.N) * d.C * c.Hp * c.Wp * es;
  size_t wBytes = static_cast<size_t>(d.K) * (d.C / d.groups) * d.R * d.S * es;
  size_t yBytes = static_cast<size_t>(d.N) * d.K * d.P * d.Q * es;
  if (c.asym) {
    c.xpBytes = xBytes;
    I.neededPad = std::max(I.neededPad, xBytes);
  }
  cudnnTensorFormat_t fmt =
      d.layout == Layout::NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  cudnnDataType_t dt = cudnnType(d.dtype);
  CNNRT_CUDNN(*this, cudnnCreateTensorDescriptor(&c.xDesc), loc);
  CNNRT_CUDNN(*this, cudnnCreateTensorDescriptor(&c.yDesc), loc);
  CNNRT_CUDNN(*this, cudnnCreateFilterDescriptor(&c.wDesc), loc);
  CNNRT_CUDNN(*this, cudnnCreateConvolutionDescriptor(&c.cDesc), loc);
  c.valid = true;
  CNNRT_CUDNN(
      *this, cudnnSetTensor4dDescriptor(c.xDesc, fmt, dt, d.N, d.C, c.Hp, c.Wp),
      loc);
  CNNRT_CUDNN(*this,
              cudnnSetTensor4dDescriptor(c.yDesc, fmt, dt, d.N, d.K, d.P, d.Q),
              loc);
  CNNRT_CUDNN(*this,
              cudnnSetFilter4dDescriptor(c.wDesc, dt, fmt, d.K, d.C / d.groups,
                                         d.R, d.S),
              loc);
  CNNRT_CUDNN(*this,
              cudnnSetConvolution2dDescriptor(
                  c.cDesc, pH, pW, d.strideH, d.strideW, d.dilH, d.dilW,
                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              loc);
  CNNRT_CUDNN(*this, cudnnSetConvolutionGroupCount(c.cDesc, d.groups), loc);
  cudnnMathType_t baseMath =
      d.dtype == DType::F16
          ? CUDNN_TENSOR_OP_MATH
          : (opts_.allowTF32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
  CNNRT_CUDNN(*this, cudnnSetConvolutionMathType(c.cDesc, baseMath), loc);
  int n = 0, k = 0, p = 0, q = 0;
  CNNRT_CUDNN(*this,
              cudnnGetConvolution2dForwardOutputDim(c.cDesc, c.xDesc, c.wDesc,
                                                    &n, &k, &p, &q),
              loc);
  if (n != d.N || k != d.K || p != d.P || q != d.Q)
    fail(loc, "convolution output shape mismatch: descriptor says [" +
                  std::to_string(d.N) + "," + std::to_string(d.K) + "," +
                  std::to_string(d.P) + "," + std::to_string(d.Q) +
                  "], cuDNN computes [" + std::to_string(n) + "," +
                  std::to_string(k) + "," + std::to_string(p) + "," +
                  std::to_string(q) + "]");

  std::ostringstream key;
  key << I.gpuName << "|cudnn" << I.cudnnVer << "|conv|" << dtypeName(d.dtype)
      << (d.layout == Layout::NHWC ? "|nhwc|" : "|nchw|") << d.N << ',' << d.C
      << ',' << c.Hp << ',' << c.Wp << ',' << d.K << ',' << d.R << ',' << d.S
      << ",p" << pH << ',' << pW << ",s" << d.strideH << ',' << d.strideW
      << ",d" << d.dilH << ',' << d.dilW << ",g" << d.groups
      << "|tf32=" << opts_.allowTF32 << "|det=" << opts_.deterministic << '|';
  // A planned workspace caps the algorithms (and keys their cache entries).
  size_t wsCap = I.plannedWorkspace ? I.workspaceBytes : SIZE_MAX;
  if (I.plannedWorkspace)
    key << "wsmax=" << wsCap << '|';
  c.key = key.str();
  // Which directions took their legacy algorithm from the cache (and so
  // have not run it yet), and which timed graph plans (running both forms).
  bool cached[3] = {false, false, false};
  bool graphTimed[3] = {false, false, false};
  for (int dir = 0; dir < 3; ++dir) {
    std::string k2 = key.str() + kDirName[dir];
    if (const std::string *hit = I.cache.find(k2)) {
      std::istringstream v(*hit);
      int algo = -1, math = 0;
      size_t ws = 0;
      if ((v >> algo >> math >> ws) && ws <= wsCap) {
        c.algo[dir] = algo;
        c.math[dir] = static_cast<cudnnMathType_t>(math);
        c.ws[dir] = ws;
        if (opts_.verbose)
          std::fprintf(stderr, "cnnrt: %s %s algo %d (cached)\n", loc,
                       kDirName[dir], algo);
        cached[dir] = true;
        continue;
      }
    }
    // Time the candidates on scratch buffers.
    ensureTuneWorkspace(*this, I);
    ensureScratch(*this, I, 0, xBytes, loc);
    ensureScratch(*this, I, 1, wBytes, loc);
    ensureScratch(*this, I, 2, yBytes, loc);
    int got = 0;
    bool ok = false;
    int algo = -1;
    cudnnMathType_t math = baseMath;
    size_t ws = 0;
    if (dir == kFwd) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      CNNRT_CUDNN(*this,
                  cudnnFindConvolutionForwardAlgorithmEx(
                      I.cudnn, c.xDesc, I.scratch[0], c.wDesc, I.scratch[1],
                      c.cDesc, c.yDesc, I.scratch[2],
                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf, I.tuneWs,
                      std::min(I.tuneWsBytes, wsCap)),
                  loc);
      ok = pickPerf(perf, got, opts_.deterministic, wsCap, algo, math, ws);
    } else if (dir == kBwdData) {
      cudnnConvolutionBwdDataAlgoPerf_t
          perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      CNNRT_CUDNN(*this,
                  cudnnFindConvolutionBackwardDataAlgorithmEx(
                      I.cudnn, c.wDesc, I.scratch[1], c.yDesc, I.scratch[2],
                      c.cDesc, c.xDesc, I.scratch[0],
                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf,
                      I.tuneWs, std::min(I.tuneWsBytes, wsCap)),
                  loc);
      ok = pickPerf(perf, got, opts_.deterministic, wsCap, algo, math, ws);
    } else {
      cudnnConvolutionBwdFilterAlgoPerf_t
          perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      CNNRT_CUDNN(*this,
                  cudnnFindConvolutionBackwardFilterAlgorithmEx(
                      I.cudnn, c.xDesc, I.scratch[0], c.yDesc, I.scratch[2],
                      c.cDesc, c.wDesc, I.scratch[1],
                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf,
                      I.tuneWs, std::min(I.tuneWsBytes, wsCap)),
                  loc);
      ok = pickPerf(perf, got, opts_.deterministic, wsCap, algo, math, ws);
    }
    if (!ok)
      fail(loc,
           std::string("cuDNN found no usable ") + kDirName[dir] +
               " algorithm for this convolution",
           ErrorKind::Cudnn);
    c.algo[dir] = algo;
    c.math[dir] = math;
    c.ws[dir] = ws;
    std::ostringstream v;
    v << algo << ' ' << static_cast<int>(math) << ' ' << ws;
    I.cache.put(k2, v.str());
    if (opts_.verbose)
      std::fprintf(stderr, "cnnrt: %s %s algo %d math %d workspace %zu\n", loc,
                   kDirName[dir], algo, static_cast<int>(math), ws);
  }
  // Grouped and depthwise convolutions too: the graph API takes the group
  // count from the filter's C / groups channels, and its runtime-compiled
  // kernels are far faster than the legacy NHWC depthwise algorithms
  // (ConvNeXt's 7x7 depthwise weight gradient: 10 ms legacy at batch 64).
  if (opts_.convGraph && d.dtype == DType::F16)
    for (int dir = 0; dir < 3; ++dir)
      graphTimed[dir] = chooseGraphConv(*this, I, c, dir, pH, pW, wsCap,
                                        xBytes, wBytes, yBytes);
  // Run each cached choice once (runOnce says why): a graph plan read from
  // the cache, or a cached legacy algorithm no graph timing ran.
  for (int dir = 0; dir < 3 && opts_.warmCached; ++dir) {
    if (graphTimed[dir] || (!c.graph[dir] && !cached[dir]))
      continue;
    ensureTuneWorkspace(*this, I);
    ensureScratch(*this, I, 0, xBytes, loc);
    ensureScratch(*this, I, 1, wBytes, loc);
    ensureScratch(*this, I, 2, yBytes, loc);
    void *s0 = I.scratch[0], *s1 = I.scratch[1], *s2 = I.scratch[2];
    runOnce(*this, [&]() {
      if (!c.graph[dir])
        return runLegacy(I, c, dir, s0, s1, s2, I.tuneWs, I.tuneWsBytes);
      return c.graph[dir]->workspaceBytes() <= I.tuneWsBytes &&
             c.graph[dir]->execute(I.cudnn, s0, s1, s2, I.tuneWs) ==
                 CUDNN_STATUS_SUCCESS;
    });
  }
  for (int dir = 0; dir < 3; ++dir) {
    I.neededWorkspace = std::max(I.neededWorkspace, c.ws[dir]);
    if (c.graph[dir] && c.overflow[dir])
      I.neededOverflow =
          std::max(I.neededOverflow, c.graph[dir]->workspaceBytes());
    else if (c.graph[dir])
      I.neededWorkspace =
          std::max(I.neededWorkspace, c.graph[dir]->workspaceBytes());
  }
}
static ConvEntry &getConv(Context &ctx, int id) {
  auto &v = ctx.impl()->convs;
  if (id < 0 || static_cast<size_t>(id) >= v.size() || !v[id].valid)
    ctx.fail("conv", "conv id " + std::to_string(id) + " was not registered");
  if (!ctx.impl()->prepared)
    ctx.fail(v[id].loc.c_str(), "convolution used before finishPrepare()");
  return v[id];
}

static void launchPad(Context &ctx, ConvEntry &c, const void *x) {
  const ConvDesc &d = c.d;
  int64_t total = (int64_t)d.N * d.C * c.Hp * c.Wp;
  unsigned g = std::min<unsigned>(gridFor(total), 65535u * 8);
  bool nhwc = d.layout == Layout::NHWC;
  if (d.dtype == DType::F16)
    padKernel<__half><<<g, 256, 0, ctx.stream()>>>(
        (const __half *)x, (__half *)ctx.impl()->padBuf, d.N, d.C, d.H, d.W,
        c.Hp, c.Wp, d.padT, d.padL, nhwc);
  else
    padKernel<float><<<g, 256, 0, ctx.stream()>>>(
        (const float *)x, (float *)ctx.impl()->padBuf, d.N, d.C, d.H, d.W, c.Hp,
        c.Wp, d.padT, d.padL, nhwc);
  ctx.checkLaunch(c.loc.c_str());
}

static void enqueueConvFwd(Context &ctx, ConvEntry &c, const void *x,
                           const void *w, void *y, bool accumulate) {
  const char *loc = c.loc.c_str();
  if (c.asym) {
    launchPad(ctx, c, x);
    x = ctx.impl()->padBuf;
  }
  if (c.graph[kFwd] && !accumulate) {
    CNNRT_CUDNN(ctx,
                c.graph[kFwd]->execute(ctx.impl()->cudnn, x, w, y,
                                       c.overflow[kFwd]
                                           ? ctx.impl()->overflowWs
                                           : ctx.impl()->workspace),
                loc);
    profileMark(ctx, loc, "cuDNN graph conv fwd");
    return;
  }
  float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  CNNRT_CUDNN(ctx, cudnnSetConvolutionMathType(c.cDesc, c.math[kFwd]), loc);
  CNNRT_CUDNN(ctx,
              cudnnConvolutionForward(
                  ctx.impl()->cudnn, &alpha, c.xDesc, x, c.wDesc, w, c.cDesc,
                  static_cast<cudnnConvolutionFwdAlgo_t>(c.algo[kFwd]),
                  ctx.impl()->workspace, c.ws[kFwd], &beta, c.yDesc, y),
              loc);
  profileMark(ctx, loc, "cuDNN conv fwd");
}

void Context::convFwd(int id, const void *x, const void *w, void *y,
                      bool accumulate) {
  enqueueConvFwd(*this, getConv(*this, id), x, w, y, accumulate);
}

void Context::convBwdData(int id, const void *dy, const void *w, void *dx,
                          bool accumulate) {
  ConvEntry &c = getConv(*this, id);
  const char *loc = c.loc.c_str();
  float alpha = 1.f, beta = (accumulate && !c.asym) ? 1.f : 0.f;
  void *out = c.asym ? impl_->padBuf : dx;
  if (c.graph[kBwdData] && beta == 0.f) {
    CNNRT_CUDNN(
        *this,
        c.graph[kBwdData]->execute(impl_->cudnn, out, w, dy,
                                   c.overflow[kBwdData] ? impl_->overflowWs
                                                        : impl_->workspace),
        loc);
  } else {
    CNNRT_CUDNN(*this, cudnnSetConvolutionMathType(c.cDesc, c.math[kBwdData]),
                loc);
    CNNRT_CUDNN(
        *this,
        cudnnConvolutionBackwardData(
            impl_->cudnn, &alpha, c.wDesc, w, c.yDesc, dy, c.cDesc,
            static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo[kBwdData]),
            impl_->workspace, c.ws[kBwdData], &beta, c.xDesc, out),
        loc);
  }
  profileMark(*this, loc, "cuDNN conv bwd data");
  if (c.asym) {
    const ConvDesc &d = c.d;
    int64_t total = (int64_t)d.N * d.C * d.H * d.W;
    unsigned g = std::min<unsigned>(gridFor(total), 65535u * 8);
    bool nhwc = d.layout == Layout::NHWC;
    if (d.dtype == DType::F16)
      cropKernel<__half><<<g, 256, 0, stream_>>>(
          (const __half *)impl_->padBuf, (__half *)dx, d.N, d.C, d.H, d.W, c.Hp,
          c.Wp, d.padT, d.padL, nhwc, accumulate);
    else
      cropKernel<float><<<g, 256, 0, stream_>>>(
          (const float *)impl_->padBuf, (float *)dx, d.N, d.C, d.H, d.W, c.Hp,
          c.Wp, d.padT, d.padL, nhwc, accumulate);
    checkLaunch(loc);
  }
}

void Context::convBwdFilter(int id, const void *x, const void *dy, void *dw,
                            bool accumulate) {
  ConvEntry &c = getConv(*this, id);
  const char *loc = c.loc.c_str();
  if (c.asym) {
    launchPad(*this, c, x);
    x = impl_->padBuf;
  }
  if (c.graph[kBwdFilter] && !accumulate) {
    CNNRT_CUDNN(
        *this,
        c.graph[kBwdFilter]->execute(impl_->cudnn, x, dw, dy,
                                     c.overflow[kBwdFilter]
                                         ? impl_->overflowWs
                                         : impl_->workspace),
        loc);
    profileMark(*this, loc, "cuDNN graph conv bwd filter");
    return;
  }
  float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  CNNRT_CUDNN(*this, cudnnSetConvolutionMathType(c.cDesc, c.math[kBwdFilter]),
              loc);
  CNNRT_CUDNN(
      *this,
      cudnnConvolutionBackwardFilter(
          impl_->cudnn, &alpha, c.xDesc, x, c.yDesc, dy, c.cDesc,
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo[kBwdFilter]),
          impl_->workspace, c.ws[kBwdFilter], &beta, c.wDesc, dw),
      loc);
  profileMark(*this, loc, "cuDNN conv bwd filter");
}

//===--- fused convolutions: registration and lookup ----------------------===//

/// The checks and bookkeeping every fused-convolution registration shares:
/// the entry `id` of `entries` for convolution `convId`, marked valid.
/// `api` names the call, `what` the entry and `fnWhat` its generated
/// function (`hasFn`: given) in the messages; the graph-or-split families
/// (`nhwcF16`) run only on NHWC f16 convolutions.
template <typename Entry>
static Entry &registerFused(Context &ctx, std::vector<Entry> &entries, int id,
                            int convId, bool hasFn, const char *api,
                            const std::string &what, const char *fnWhat,
                            bool nhwcF16, const char *loc) {
  Context::Impl &I = *ctx.impl();
  if (I.prepared)
    ctx.fail(loc, std::string(api) + " after prepare finished");
  if (id < 0)
    ctx.fail(loc, "negative " + what + " id");
  if (convId < 0 || static_cast<size_t>(convId) >= I.convs.size() ||
      !I.convs[convId].valid)
    ctx.fail(loc, what + " " + std::to_string(id) + " names conv id " +
                      std::to_string(convId) + ", which was not registered");
  if (!hasFn)
    ctx.fail(loc, what + " without " + fnWhat);
  const ConvDesc &d = I.convs[convId].d;
  if (nhwcF16 && (d.layout != Layout::NHWC || d.dtype != DType::F16))
    ctx.fail(loc, what + " needs an NHWC f16 convolution");
  if (static_cast<size_t>(id) >= entries.size())
    entries.resize(id + 1);
  Entry &e = entries[id];
  if (e.valid)
    ctx.fail(loc, what + " id " + std::to_string(id) + " registered twice");
  e.valid = true;
  e.conv = convId;
  e.loc = loc;
  return e;
}

/// The fused convolution `id` of `entries`, registered, on a registered and
/// prepared convolution; `what` names the family in the message.
template <typename Entry>
static Entry &getFused(Context &ctx, std::vector<Entry> &entries, int id,
                       const char *what) {
  if (id < 0 || static_cast<size_t>(id) >= entries.size() || !entries[id].valid)
    ctx.fail("conv", std::string(what) + " id " + std::to_string(id) +
                         " was not registered");
  getConv(ctx, entries[id].conv); // registered and prepared
  return entries[id];
}

/// Entry `id` of `entries` when it was registered, else null (the
/// `*Uses*` queries answer false for an id that names none).
template <typename Entry>
static const Entry *findFused(const std::vector<Entry> &entries, int id) {
  return id >= 0 && static_cast<size_t>(id) < entries.size() &&
                 entries[id].valid
             ? &entries[id]
             : nullptr;
}

//===--- convolutions with a bias/activation epilogue ---------------------===//

void Context::registerConvBiasAct(int id, int convId, Activation act,
                                  bool residual, ConvEpilogueFn epilogue,
                                  const char *loc) {
  Impl &I = *impl_;
  FusedConvEntry &f =
      registerFused(*this, I.fusedConvs, id, convId, epilogue != nullptr,
                    "registerConvBiasAct", "fused conv", "an epilogue function",
                    /*nhwcF16=*/false, loc);
  f.act = act;
  f.residual = residual;
  f.epilogue = epilogue;
  const ConvDesc &d = I.convs[convId].d;
  CNNRT_CUDNN(*this, cudnnCreateTensorDescriptor(&f.biasDesc), loc);
  CNNRT_CUDNN(*this,
              cudnnSetTensor4dDescriptor(f.biasDesc, CUDNN_TENSOR_NCHW,
                                         cudnnType(d.dtype), 1, d.K, 1, 1),
              loc);
  CNNRT_CUDNN(*this, cudnnCreateActivationDescriptor(&f.actDesc), loc);
  CNNRT_CUDNN(*this,
              cudnnSetActivationDescriptor(f.actDesc,
                                           act == Activation::Relu
                                               ? CUDNN_ACTIVATION_RELU
                                               : CUDNN_ACTIVATION_IDENTITY,
                                           CUDNN_PROPAGATE_NAN, 0.0),
              loc);
}

/// One cudnnConvolutionBiasActivationForward call (z = y with alpha2 = 0 when
/// there is no residual).
static cudnnStatus_t
enqueueFusedCudnn(Context &ctx, FusedConvEntry &f, ConvEntry &c, int algo,
                  cudnnMathType_t math, size_t ws, const void *x, const void *w,
                  const void *bias, const void *residual, void *y) {
  if (c.asym) {
    launchPad(ctx, c, x);
    x = ctx.impl()->padBuf;
  }
  float alpha1 = 1.f, alpha2 = residual ? 1.f : 0.f;
  cudnnStatus_t s = cudnnSetConvolutionMathType(c.cDesc, math);
  if (s != CUDNN_STATUS_SUCCESS)
    return s;
  return cudnnConvolutionBiasActivationForward(
      ctx.impl()->cudnn, &alpha1, c.xDesc, x, c.wDesc, w, c.cDesc,
      static_cast<cudnnConvolutionFwdAlgo_t>(algo), ctx.impl()->workspace, ws,
      &alpha2, c.yDesc, residual ? residual : y, f.biasDesc, bias, f.actDesc,
      c.yDesc, y);
}

namespace {
/// Device buffers for timing one fused convolution (zero-filled; seven for
/// conv + statistics with the prologue's scale and shift).
struct TuneBuffers {
  void *p[7] = {};
  ~TuneBuffers() {
    for (void *q : p)
      cudaFree(q);
  }
};
} // namespace

/// Times each fused convolution's two forms (cuDNN's fused call with the
/// chosen forward algorithm and with IMPLICIT_PRECOMP_GEMM, the only one that
/// supports the identity activation; and convolution + generated epilogue)
/// and keeps the faster, through the algorithm cache.
static void chooseFusedConvs(Context &ctx) {
  Context::Impl &I = *ctx.impl();
  const ContextOptions &opts = ctx.options();
  cudaStream_t st = ctx.stream();
  for (FusedConvEntry &f : I.fusedConvs) {
    if (!f.valid)
      continue;
    ConvEntry &c = I.convs[f.conv];
    const char *loc = f.loc.c_str();
    f.useCudnn = false;
    if (opts.convFusion == ConvFusion::Split)
      continue;
    std::string key = c.key + "biasact|" +
                      (f.act == Activation::Relu ? "relu" : "identity") +
                      "|z=" + std::to_string(f.residual) +
                      "|ws=" + std::to_string(I.workspaceBytes);
    const std::string *hit = I.cache.find(key);
    bool fromCache = false;
    if (opts.convFusion == ConvFusion::Auto && hit) {
      std::istringstream v(*hit);
      int algo = -1, math = 0;
      size_t ws = 0;
      if ((v >> algo >> math >> ws) && ws <= I.workspaceBytes) {
        f.useCudnn = algo >= 0;
        f.algo = algo;
        f.math = static_cast<cudnnMathType_t>(math);
        f.ws = ws;
        if (opts.verbose)
          std::fprintf(stderr, "cnnrt: %s fused conv: %s (cached)\n", loc,
                       f.useCudnn ? "cuDNN bias+activation call"
                                  : "conv + epilogue kernel");
        fromCache = true;
        // The split form's convolution was run by registerConv; only the
        // fused call is left to run once (runOnce says why).
        if (!f.useCudnn || !opts.warmCached)
          continue;
      }
    }
    const ConvDesc &d = c.d;
    size_t es = dtypeSize(d.dtype);
    size_t bytes[5] = {static_cast<size_t>(d.N) * d.C * d.H * d.W * es,
                       static_cast<size_t>(d.K) * (d.C / d.groups) * d.R * d.S *
                           es,
                       static_cast<size_t>(d.N) * d.K * d.P * d.Q * es,
                       static_cast<size_t>(d.K) * es,
                       static_cast<size_t>(d.N) * d.K * d.P * d.Q * es};
    TuneBuffers b;
    for (int k = 0; k < 5; ++k) {
      if (k == 4 && !f.residual)
        continue;
      if (cudaMalloc(&b.p[k], bytes[k]) != cudaSuccess)
        throwOutOfMemory(ctx.spec(), "fused-convolution timing buffers",
                         bytes[k]);
      CNNRT_CUDA(ctx, cudaMemset(b.p[k], 0, bytes[k]), loc);
    }
    if (fromCache) {
      runOnce(ctx, [&]() {
        return enqueueFusedCudnn(ctx, f, c, f.algo, f.math, f.ws, b.p[0],
                                 b.p[1], b.p[3], b.p[4], b.p[2]);
      });
      continue;
    }
    cudaEvent_t e0, e1;
    CNNRT_CUDA(ctx, cudaEventCreate(&e0), loc);
    CNNRT_CUDA(ctx, cudaEventCreate(&e1), loc);
    auto timeMs = [&](auto &&run) {
      for (int i = 0; i < 2; ++i)
        run();
      cudaEventRecord(e0, st);
      const int iters = 10;
      for (int i = 0; i < iters; ++i)
        run();
      cudaEventRecord(e1, st);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      return ms / iters;
    };
    float bestMs = 1e30f;
    if (opts.convFusion == ConvFusion::Auto)
      bestMs = timeMs([&] {
        enqueueConvFwd(ctx, c, b.p[0], b.p[1], b.p[2], false);
        f.epilogue(ctx, b.p[2], b.p[3], b.p[4]);
      });
    float splitMs = bestMs;
    int candidates[2] = {c.algo[kFwd],
                         CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM};
    for (int k = 0; k < 2; ++k) {
      int algo = candidates[k];
      if (k == 1 && algo == candidates[0])
        continue;
      if (f.act == Activation::Identity &&
          algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
        continue;
      cudnnMathType_t math = c.math[kFwd];
      size_t ws = 0;
      cudnnSetConvolutionMathType(c.cDesc, math);
      if (cudnnGetConvolutionForwardWorkspaceSize(
              I.cudnn, c.xDesc, c.wDesc, c.cDesc, c.yDesc,
              static_cast<cudnnConvolutionFwdAlgo_t>(algo),
              &ws) != CUDNN_STATUS_SUCCESS ||
          ws > I.workspaceBytes)
        continue;
      // A configuration cuDNN's fused call does not support fails at once:
      // try it before timing.
      if (enqueueFusedCudnn(ctx, f, c, algo, math, ws, b.p[0], b.p[1], b.p[3],
                            b.p[4], b.p[2]) != CUDNN_STATUS_SUCCESS ||
          cudaStreamSynchronize(st) != cudaSuccess) {
        cudaGetLastError();
        if (opts.verbose)
          std::fprintf(stderr,
                       "cnnrt: %s fused conv: cuDNN algo %d unsupported\n", loc,
                       algo);
        continue;
      }
      float ms = timeMs([&] {
        enqueueFusedCudnn(ctx, f, c, algo, math, ws, b.p[0], b.p[1], b.p[3],
                          b.p[4], b.p[2]);
      });
      if (ms < bestMs) {
        bestMs = ms;
        f.useCudnn = true;
        f.algo = algo;
        f.math = math;
        f.ws = ws;
      }
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    CNNRT_CUDA(ctx, cudaDeviceSynchronize(), loc);
    if (opts.convFusion == ConvFusion::CuDNN && !f.useCudnn)
      std::fprintf(stderr,
                   "cnnrt: warning: %s: cuDNN cannot fuse this convolution; "
                   "running conv + epilogue kernel\n",
                   loc);
    if (opts.verbose)
      std::fprintf(stderr,
                   "cnnrt: %s fused conv: %s (conv + epilogue %.3f ms, best "
                   "%.3f ms)\n",
                   loc,
                   f.useCudnn ? "cuDNN bias+activation call"
                              : "conv + epilogue kernel",
                   splitMs, bestMs);
    if (opts.convFusion == ConvFusion::Auto) {
      std::ostringstream v;
      v << (f.useCudnn ? f.algo : -1) << ' ' << static_cast<int>(f.math) << ' '
        << (f.useCudnn ? f.ws : 0);
      I.cache.put(key, v.str());
    }
  }
}

void Context::convBiasActFwd(int id, const void *x, const void *w,
                             const void *bias, const void *residual, void *y) {
  FusedConvEntry &f = getFused(*this, impl_->fusedConvs, id, "fused conv");
  ConvEntry &c = impl_->convs[f.conv];
  if (f.residual != (residual != nullptr))
    fail(f.loc.c_str(), f.residual ? "fused conv needs its residual operand"
                                   : "fused conv registered without residual");
  if (!f.useCudnn) {
    enqueueConvFwd(*this, c, x, w, y, false);
    f.epilogue(*this, y, bias, residual);
    return;
  }
  CNNRT_CUDNN(*this,
              enqueueFusedCudnn(*this, f, c, f.algo, f.math, f.ws, x, w, bias,
                                residual, y),
              f.loc.c_str());
  profileMark(*this, f.loc.c_str(), "cuDNN conv+bias+act fwd");
}

bool Context::convBiasActUsesCudnn(int id) const {
  const FusedConvEntry *f = findFused(impl_->fusedConvs, id);
  return f && f->useCudnn;
}

//===--- graph-or-split fused convolutions: the choice of a form ----------===//

/// The prologue's f32 scale and shift as the f16 pair the graph reads.
__global__ void scaleShiftToHalf(const float *scale, const float *shift,
                                 __half *out, int C) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < C) {
    out[c] = __float2half_rn(scale[c]);
    out[C + c] = __float2half_rn(shift[c]);
  }
}

namespace {
/// What differs between the fused convolutions that finishPrepare times as
/// one cuDNN graph against their split form (chooseGraphOrSplit does the
/// rest).
struct GraphOrSplit {
  cnnrt::cudnn_graph::Dir dir;
  /// The geometry's prologue (relu(x * scale + shift) per input channel).
  bool prologue = false;
  /// The graph's results may differ from run to run although cuDNN notes
  /// none of its plans as nondeterministic: conv+GenStats (measured on an
  /// H100, session 25: two processes with the same cached plan gave
  /// forward losses 2.3522718 and 2.35227323, its statistics summed in an
  /// order that varies). Under CNNRT_DETERMINISTIC (the default) such a
  /// plan is admitted only after the reproducibility probe (ReproProbe.h)
  /// saw it repeat its outputs bitwise, and the verdict is cached with
  /// the choice, so a later process takes the same probed plan.
  bool needsReproProbe = false;
  /// With needsReproProbe: which bufferBytes are outputs (the probe
  /// compares them; the others are inputs it fills), and their names.
  std::vector<int> outputs;
  std::vector<const char *> bufferNames;
  /// The algorithm cache key is the convolution's key + "|" + cacheTag +
  /// "|ws=" + the workspace bytes (caches on disk hold these keys).
  const char *cacheTag = nullptr;
  /// Names the entry in the verbose lines ("cnnrt: <loc> <label>: ...").
  std::string label;
  /// Names the graph in the forced-mode warning ("cuDNN has no <planName>
  /// plan").
  const char *planName = nullptr;
  /// The timing buffers (zeroed: the timing only needs the shapes) and what
  /// the out-of-memory message calls them.
  std::vector<size_t> bufferBytes;
  const char *buffersWhat = nullptr;
  /// Allocates what the split form needs; called when it is kept and before
  /// it is timed.
  std::function<void()> readySplit = [] {};
  /// Gives back what only the split form needs and allocates what the graph
  /// needs; called when a plan is kept.
  std::function<void()> readyGraph = [] {};
  /// Enqueue the split form or a plan on the timing buffers.
  std::function<void(void **)> runSplit;
  std::function<cudnnStatus_t(const cnnrt::cudnn_graph::ConvPlan &, void **)>
      runPlan;
};
} // namespace

/// Allocates and zeroes `f`'s timing buffers into `b` (the contents do not
/// matter, only the shapes).
static void allocTuneBuffers(Context &ctx, TuneBuffers &b,
                             const GraphOrSplit &f, const char *loc) {
  for (size_t k = 0; k < f.bufferBytes.size(); ++k) {
    if (cudaMalloc(&b.p[k], f.bufferBytes[k]) != cudaSuccess)
      throwOutOfMemory(ctx.spec(), f.buffersWhat, f.bufferBytes[k]);
    CNNRT_CUDA(ctx, cudaMemset(b.p[k], 0, f.bufferBytes[k]), loc);
  }
}

/// Keeps in `graph` either a cuDNN graph plan of convolution `c` as `f`
/// describes it or null (the split form): the cached choice (heuristics
/// index, -1 = split; GraphChoice.h) when there is one, else the faster of
/// the split form and the heuristics' first CNNRT_GRAPH_PLANS plans, then
/// cached. Under CNNRT_DETERMINISTIC a family with needsReproProbe admits
/// only the plans the reproducibility probe passed. CNNRT_CONV_GRAPH=0
/// keeps the split form.
static void
chooseGraphOrSplit(Context &ctx, ConvEntry &c, const char *loc,
                   std::shared_ptr<cnnrt::cudnn_graph::ConvPlan> &graph,
                   const GraphOrSplit &f) {
  Context::Impl &I = *ctx.impl();
  const ContextOptions &opts = ctx.options();
  graph.reset();
  // CNNRT_CONV_FUSION=split / cudnn force a form (ops_check runs both);
  // forced choices are not cached. An asymmetric padding's emulation
  // (padded copy, crop) is the split form's business.
  bool forced = opts.convFusion != ConvFusion::Auto;
  if (!opts.convGraph || c.asym || opts.convFusion == ConvFusion::Split) {
    f.readySplit();
    return;
  }
  // Determinism binds the forced graph form too (CNNRT_CONV_FUSION=cudnn
  // runs a probed plan or, when none passes, the split form with a
  // warning): a test mode that silently broke reproducibility would make
  // CNNRT_DETERMINISTIC=1 a promise with exceptions.
  bool probe = opts.deterministic && f.needsReproProbe;
  // Every plan kept fits workspaceBytes, so this never fails finishPrepare's
  // check; it keeps neededWorkspace the most any kept algorithm needs.
  auto keepGraph = [&]() {
    f.readyGraph();
    I.neededWorkspace = std::max(I.neededWorkspace, graph->workspaceBytes());
  };
  const ConvDesc &d = c.d;
  // clang-format off
  cg::ConvGeometry g{d.N,    d.C,    d.H,       d.W,       d.K,    d.R,
                     d.S,    d.P,    d.Q,       d.padT,    d.padL, d.strideH,
                     d.strideW, d.dilH, d.dilW, d.groups,
                     CUDNN_DATA_HALF, /*nhwc=*/true, f.prologue};
  // clang-format on
  std::string key =
      c.key + "|" + f.cacheTag + "|ws=" + std::to_string(I.workspaceBytes);
  const std::string *hit = forced ? nullptr : I.cache.find(key);
  GraphChoice cached;
  std::string bad;
  if (hit && !parseGraphChoice(*hit, cached, bad)) {
    // Someone's edit or a truncated file: say so and choose again (the
    // new choice replaces the entry).
    std::fprintf(stderr,
                 "cnnrt: warning: %s %s: algorithm cache (%s): %s; choosing "
                 "again\n",
                 loc, f.label.c_str(), opts.algoCachePath.c_str(), bad.c_str());
    hit = nullptr;
  }
  if (hit && probe && cached.index >= 0 && cached.reproduced < opts.reproRuns) {
    // A plan cached without the probe's verdict (CNNRT_DETERMINISTIC
    // before the probe existed, or fewer runs): probe it again.
    if (opts.verbose)
      std::fprintf(stderr,
                   "cnnrt: %s %s: cached plan #%d has no reproducibility "
                   "verdict of %d runs; probing again\n",
                   loc, f.label.c_str(), cached.index, opts.reproRuns);
    hit = nullptr;
  }
  std::string why;
  if (hit && cached.index >= 0) {
    graph = cg::convPlanAt(I.cudnn, g, f.dir, cached.index, &why);
    if (graph && !cached.engine.empty() && !graph->engineTag().empty() &&
        graph->engineTag() != cached.engine) {
      // The heuristics list differs from the one the choice was made on:
      // its position now names another engine, which neither was timed
      // nor (under CNNRT_DETERMINISTIC) probed, and whose results may
      // differ from the process that cached it.
      std::fprintf(stderr,
                   "cnnrt: warning: %s %s: cached plan #%d was cuDNN engine "
                   "%s, the position now names %s; choosing again\n",
                   loc, f.label.c_str(), cached.index, cached.engine.c_str(),
                   graph->engineTag().c_str());
      graph.reset();
      hit = nullptr;
    }
  }
  if (hit) {
    if (graph && graph->workspaceBytes() > I.workspaceBytes)
      graph.reset();
    if (graph)
      keepGraph();
    else
      f.readySplit();
    if (opts.verbose)
      std::fprintf(
          stderr, "cnnrt: %s %s: %s (cached)%s%s\n", loc, f.label.c_str(),
          graph ? "graph" : "split",
          graph && cached.reproduced
              ? (" reproduced=" + std::to_string(cached.reproduced)).c_str()
              : "",
          why.c_str());
    if (!opts.warmCached)
      return;
    // Run the cached form once (runOnce says why).
    TuneBuffers b;
    allocTuneBuffers(ctx, b, f, loc);
    runOnce(ctx, [&]() {
      if (graph)
        return f.runPlan(*graph, b.p) == CUDNN_STATUS_SUCCESS;
      f.runSplit(b.p);
      return true;
    });
    return;
  }
  TuneBuffers b;
  allocTuneBuffers(ctx, b, f, loc);
  f.readySplit();
  float splitMs = timeCalls(ctx, [&]() {
    f.runSplit(b.p);
    return cudaGetLastError() == cudaSuccess;
  });
  why.clear();
  // A workspace of our own grows to 256 MiB for a plan (below).
  auto plans = cg::convPlans(I.cudnn, g, f.dir, ctx.options().graphPlans,
                             opts.deterministic, &why,
                             I.plannedWorkspace
                                 ? I.workspaceBytes
                                 : std::max<size_t>(I.workspaceBytes,
                                                    256u << 20));
  struct Timed {
    std::shared_ptr<cg::ConvPlan> plan;
    float ms;
  };
  std::vector<Timed> timed;
  for (auto &pl : plans) {
    size_t need = pl->workspaceBytes();
    if (need > I.workspaceBytes && !I.plannedWorkspace &&
        need <= (256u << 20)) {
      // The workspace is ours (not planned in the arena): grow it.
      CNNRT_CUDA(ctx, cudaDeviceSynchronize(), loc);
      cudaFree(I.workspace);
      I.workspace = nullptr;
      if (cudaMalloc(&I.workspace, need) != cudaSuccess)
        throwOutOfMemory(ctx.spec(), "the algorithm workspace", need);
      I.workspaceBytes = need;
    }
    if (need > I.workspaceBytes) {
      if (why.empty())
        why = "plan #" + std::to_string(pl->index()) + " needs " +
              std::to_string(need) + " workspace bytes, " +
              std::to_string(I.workspaceBytes) + " planned";
      continue;
    }
    float ms = timeCalls(
        ctx, [&]() { return f.runPlan(*pl, b.p) == CUDNN_STATUS_SUCCESS; });
    if (ms < 0 && why.empty())
      why = "plan #" + std::to_string(pl->index()) + " failed to run";
    if (ms >= 0)
      timed.push_back({std::move(pl), ms});
  }
  // Fastest first; under the probe the fastest plan that reproduces wins.
  std::stable_sort(timed.begin(), timed.end(),
                   [](const Timed &a, const Timed &b) { return a.ms < b.ms; });
  std::shared_ptr<cg::ConvPlan> best;
  float bestMs = -1;
  int rejected = 0;
  for (Timed &t : timed) {
    if (probe) {
      // Fastest first until one passes; under CNNRT_VERBOSE every plan,
      // to list each verdict (the runs cost far less than the plans'
      // compilation, already paid).
      std::vector<repro::Buffer> bufs;
      for (size_t k = 0; k < f.bufferBytes.size(); ++k)
        bufs.push_back({b.p[k], f.bufferBytes[k],
                        std::find(f.outputs.begin(), f.outputs.end(), (int)k) !=
                            f.outputs.end(),
                        k < f.bufferNames.size() ? f.bufferNames[k] : ""});
      repro::Verdict v =
          repro::probe(ctx.stream(), bufs, I.workspace,
                       t.plan->workspaceBytes(), opts.reproRuns, [&]() {
                         return f.runPlan(*t.plan, b.p) == CUDNN_STATUS_SUCCESS;
                       });
      if (opts.verbose)
        std::fprintf(
            stderr, "cnnrt: %s %s: plan #%d (%s) %.3f ms %s%s\n", loc,
            f.label.c_str(), t.plan->index(), t.plan->engineTag().c_str(), t.ms,
            v.reproduced ? "reproduces bitwise over " : "does not reproduce: ",
            v.reproduced ? (std::to_string(v.runs) + " runs").c_str()
                         : v.why.c_str());
      if (!v.reproduced) {
        ++rejected;
        if (why.empty() || best == nullptr)
          why = "plan #" + std::to_string(t.plan->index()) +
                " does not reproduce (" + v.why + ")";
        continue;
      }
    }
    if (!best) {
      best = t.plan;
      bestMs = t.ms;
      if (!probe || !opts.verbose)
        break;
    }
  }
  if (best && (forced || splitMs < 0 || bestMs < splitMs)) {
    graph = best;
    keepGraph();
  }
  if (opts.verbose)
    std::fprintf(stderr,
                 "cnnrt: %s %s: split %.3f ms, graph plan #%d %.3f ms%s%s%s -> "
                 "%s\n",
                 loc, f.label.c_str(), splitMs, best ? best->index() : -1,
                 bestMs, best ? "" : ": ", best ? "" : why.c_str(),
                 rejected ? (", " + std::to_string(rejected) +
                             " plan(s) not reproducible")
                                .c_str()
                          : "",
                 graph ? "graph" : "split");
  CNNRT_CUDA(ctx, cudaDeviceSynchronize(), loc);
  if (forced) {
    if (!graph)
      std::fprintf(stderr,
                   "cnnrt: warning: %s: %s%s plan for this convolution (%s); "
                   "running the split form\n",
                   loc,
                   rejected ? "CNNRT_CONV_FUSION=cudnn under "
                              "CNNRT_DETERMINISTIC=1 admits no reproducible "
                            : "cuDNN has no ",
                   f.planName, why.c_str());
    return;
  }
  GraphChoice chosen;
  chosen.index = graph ? graph->index() : -1;
  chosen.reproduced = graph && probe ? opts.reproRuns : 0;
  chosen.engine = graph ? graph->engineTag() : "";
  I.cache.put(key, formatGraphChoice(chosen));
}

/// The prologue's buffers of a graph-or-split entry with one (conv +
/// statistics with a prologue, prologue + wgrad), allocated by the form
/// chosen: the split form writes the normalized input (x-sized) into
/// `scratch`, the graph form reads the f16 scale and shift (2 x C) from
/// `halfScaleShift` and needs no scratch. `what` names them in the
/// out-of-memory report.
template <typename Entry>
static void prologueBuffers(Context &ctx, Entry &e, GraphOrSplit &f,
                            size_t xBytes, int C, const std::string &what) {
  f.readySplit = [&ctx, &e, xBytes, what]() {
    if (e.prologue && !e.scratch &&
        cudaMalloc(&e.scratch, xBytes) != cudaSuccess)
      throwOutOfMemory(ctx.spec(), ("a " + what + " prologue buffer").c_str(),
                       xBytes);
  };
  f.readyGraph = [&ctx, &e, C, what]() {
    if (e.scratch) {
      CNNRT_CUDA(ctx, cudaDeviceSynchronize(), e.loc.c_str());
      cudaFree(e.scratch);
      e.scratch = nullptr;
    }
    size_t bytes = 2 * static_cast<size_t>(C) * sizeof(__half);
    if (e.prologue && !e.halfScaleShift &&
        cudaMalloc(&e.halfScaleShift, bytes) != cudaSuccess)
      throwOutOfMemory(ctx.spec(),
                       ("a " + what + " prologue's scale and shift").c_str(),
                       bytes);
  };
}

/// The prologue's f32 scale and shift as the entry's f16 pair (cuDNN's fast
/// engines take them in f16), enqueued on ctx.stream().
template <typename Entry>
static void toHalfScaleShift(Context &ctx, Entry &e, const float *scale,
                             const float *shift, int C) {
  scaleShiftToHalf<<<(C + 255) / 256, 256, 0, ctx.stream()>>>(
      scale, shift, e.halfScaleShift, C);
  ctx.checkLaunch(e.loc.c_str());
}

/// The f16 tensors of a fused-convolution entry's timing buffers, in
/// bytes: input x, filter w (C / groups input channels per filter), output y.
struct ConvF16Bytes {
  size_t x, w, y;
};
static ConvF16Bytes convF16Bytes(const ConvDesc &d) {
  return {static_cast<size_t>(d.N) * d.C * d.H * d.W * 2,
          static_cast<size_t>(d.K) * (d.C / d.groups) * d.R * d.S * 2,
          static_cast<size_t>(d.N) * d.K * d.P * d.Q * 2};
}

//===--- the graph-or-split families over one table -----------------------===//

namespace {
/// A graph-or-split family's plan direction and names: a row of
/// kGraphFamilyNames.
struct GraphFamilyNames {
  cg::Dir dir;
  /// The registration call and the entry in the registration's and the
  /// lookup's messages ("<what> id 3 was not registered").
  const char *api;
  const char *what;
  /// GraphOrSplit::planName and buffersWhat.
  const char *planName;
  const char *buffersWhat;
  /// The profile's label of a graph-form run.
  const char *graphProfileWhat;
};
/// The rows of kGraphFamilyNames.
enum GraphFamilyRow { kStatsRow, kDgradRow, kWgradRow, kGraphFamilyRows };

/// One graph-or-split family (conv + statistics, dgrad + add + ReLU
/// backward, prologue + wgrad): where its entries live, what finishPrepare
/// times for one of them, and its names. Registration (registerGraphFused),
/// lookup (getGraphFused), the `*UsesGraph` query (runsAsGraph), the choice
/// (chooseGraphFamily) and the step-time run of the chosen form
/// (runChosenForm) are one implementation over it; a family's own code is
/// its describe function, its split-form call and its cuDNN graph call.
template <typename SplitFn> struct GraphFamily {
  using Entry = GraphFusedEntry<SplitFn>;
  /// The context's vector of this family's entries.
  using EntriesMember = std::vector<Entry> Context::Impl::*;
  EntriesMember entries;
  /// Fills the rest of `f` (cache tag, label, timing buffers, the two
  /// forms) for entry `e` on convolution `d` (f16 tensors of `bytes`). The
  /// functions it stores outlive the call: they capture `ctx`, `e` and `d`
  /// by reference, nothing of the call's own.
  void (*describe)(Context &ctx, Entry &e, const ConvDesc &d,
                   const ConvF16Bytes &bytes, GraphOrSplit &f);
  GraphFamilyNames names;
};
} // namespace

/// Registers entry `id` of `family` on convolution `convId`
/// (registerFused's checks, with its split form).
template <typename SplitFn>
static GraphFusedEntry<SplitFn> &
registerGraphFused(Context &ctx, const GraphFamily<SplitFn> &family, int id,
                   int convId, SplitFn split, const char *loc) {
  GraphFusedEntry<SplitFn> &e =
      registerFused(ctx, ctx.impl()->*family.entries, id, convId,
                    split != nullptr, family.names.api, family.names.what,
                    "a split-form function", /*nhwcF16=*/true, loc);
  e.split = split;
  return e;
}

/// Entry `id` of `family`, registered, on a prepared convolution.
template <typename SplitFn>
static GraphFusedEntry<SplitFn> &
getGraphFused(Context &ctx, const GraphFamily<SplitFn> &family, int id) {
  return getFused(ctx, ctx.impl()->*family.entries, id, family.names.what);
}

/// After finishPrepare: whether entry `id` of `family` runs as its cuDNN
/// graph.
template <typename SplitFn>
static bool runsAsGraph(const Context::Impl &I,
                        const GraphFamily<SplitFn> &family, int id) {
  const GraphFusedEntry<SplitFn> *e = findFused(I.*family.entries, id);
  return e && e->graph != nullptr;
}

/// finishPrepare's choice for each registered entry of `family`: its form
/// as family.describe says, chosen by chooseGraphOrSplit.
template <typename SplitFn>
static void chooseGraphFamily(Context &ctx,
                              const GraphFamily<SplitFn> &family) {
  Context::Impl &I = *ctx.impl();
  for (GraphFusedEntry<SplitFn> &e : I.*family.entries) {
    if (!e.valid)
      continue;
    ConvEntry &c = I.convs[e.conv];
    GraphOrSplit f;
    f.dir = family.names.dir;
    f.planName = family.names.planName;
    f.buffersWhat = family.names.buffersWhat;
    family.describe(ctx, e, c.d, convF16Bytes(c.d), f);
    chooseGraphOrSplit(ctx, c, e.loc.c_str(), e.graph, f);
  }
}

/// Runs entry `e` of `family` in the form finishPrepare chose: `runSplit()`,
/// or `runGraph()` (which enqueues the plan and checks its status), marked
/// for the profile.
template <typename SplitFn, typename RunSplit, typename RunGraph>
static void runChosenForm(Context &ctx, const GraphFamily<SplitFn> &family,
                          GraphFusedEntry<SplitFn> &e, RunSplit runSplit,
                          RunGraph runGraph) {
  if (!e.graph) {
    runSplit();
    return;
  }
  runGraph();
  profileMark(ctx, e.loc.c_str(), family.names.graphProfileWhat);
}

/// Each family's row, in GraphFamilyRow's order.
static constexpr GraphFamilyNames kGraphFamilyNames[] = {
    {cg::Dir::FwdStats, "registerConvStats", "conv-stats", "conv+GenStats",
     "conv+statistics timing buffers", "cuDNN graph conv fwd+genstats"},
    {cg::Dir::BwdDataAddRelu, "registerConvBwdDataAddRelu", "dgrad+add+drelu",
     "dgrad+add+drelu", "dgrad+add+drelu timing buffers",
     "cuDNN graph dgrad+add+drelu"},
    {cg::Dir::BwdFilter, "registerConvBwdFilterPrologue", "sbr+wgrad",
     "prologue+wgrad", "sbr+wgrad timing buffers", "cuDNN graph sbr+wgrad"}};
static_assert(std::size(kGraphFamilyNames) == kGraphFamilyRows);

/// conv + statistics: cuDNN's conv + GenStats graph plans (with the
/// prologue when registered with one) against the split form (the
/// convolution as chosen, then the statistics kernels); cached by shape
/// ("|genstats" or "|sbr+genstats": heuristics index, -1 = split).
static void describeConvStats(Context &ctx, ConvStatsEntry &e,
                              const ConvDesc &d, const ConvF16Bytes &bytes,
                              GraphOrSplit &f) {
  size_t kBytes = (size_t)d.K * sizeof(float),
         cBytes = (size_t)d.C * sizeof(float);
  f.prologue = e.prologue;
  f.cacheTag = e.prologue ? "sbr+genstats" : "genstats";
  f.needsReproProbe = true;
  f.outputs = {2, 3, 4};
  f.bufferNames = {"x", "w", "y", "sum", "sumSq", "scale", "shift"};
  f.label = e.prologue ? "conv+genstats (prologue)" : "conv+genstats";
  // x, w, y, sum, sumSq, the prologue's scale and shift.
  f.bufferBytes = {bytes.x, bytes.w, bytes.y, kBytes, kBytes, cBytes, cBytes};
  prologueBuffers(ctx, e, f, bytes.x, d.C, "conv+statistics");
  f.runSplit = [&ctx, &e](void **p) {
    const float *scale = e.prologue ? static_cast<float *>(p[5]) : nullptr;
    const float *shift = e.prologue ? static_cast<float *>(p[6]) : nullptr;
    e.split(ctx, p[0], p[1], p[2], static_cast<float *>(p[3]),
            static_cast<float *>(p[4]), scale, shift, e.scratch);
  };
  f.runPlan = [&ctx, &e, &d](const cg::ConvPlan &pl, void **p) {
    // A plan without the prologue takes no scale and shift: passing
    // them makes its variant pack invalid and the plan "fail to run"
    // (sessions 12-13 timed every plain conv+GenStats graph that way and
    // kept the split form). The graph reads the f16 pair: the zeroed f32
    // scale buffer holds 2 x C halves, zeros too.
    const void *hScale = e.prologue ? p[5] : nullptr;
    const void *hShift =
        e.prologue ? static_cast<char *>(p[5]) + d.C * 2 : nullptr;
    Context::Impl &I = *ctx.impl();
    return pl.executeStats(
        I.cudnn, p[0], p[1], p[2], static_cast<float *>(p[3]),
        static_cast<float *>(p[4]), hScale, hShift, I.workspace);
  };
}

/// dgrad + add + ReLU backward: cuDNN's graph plans against the split form
/// (the backward-data convolution as chosen, then the generated epilogue
/// kernel); cached by shape ("|dgrad+add+drelu": heuristics index, -1 =
/// split).
static void describeConvDgrad(Context &ctx, ConvDgradEntry &e, const ConvDesc &,
                              const ConvF16Bytes &bytes, GraphOrSplit &f) {
  f.cacheTag = "dgrad+add+drelu";
  f.label = "dgrad+add+drelu";
  // dy, w, addend, reluOut, dx.
  f.bufferBytes = {bytes.y, bytes.w, bytes.x, bytes.x, bytes.x};
  f.runSplit = [&ctx, &e](void **p) {
    e.split(ctx, p[0], p[1], p[2], p[3], p[4]);
  };
  f.runPlan = [&ctx](const cg::ConvPlan &pl, void **p) {
    return pl.executeDgradAddRelu(ctx.impl()->cudnn, p[0], p[1], p[2], p[3],
                                  p[4], ctx.impl()->workspace);
  };
}

/// prologue (scale, shift, ReLU) + wgrad: cuDNN's graph plans against the
/// split form (the generated normalization into the scratch buffer, then
/// the backward-filter convolution as chosen); cached by shape
/// ("|sbr+wgrad": heuristics index, -1 = split).
static void describeConvWgrad(Context &ctx, ConvWgradEntry &e,
                              const ConvDesc &d, const ConvF16Bytes &bytes,
                              GraphOrSplit &f) {
  size_t cBytes = (size_t)d.C * sizeof(float);
  f.prologue = true;
  f.cacheTag = "sbr+wgrad";
  f.label = "sbr+wgrad";
  // x, dy, dw, scale, shift.
  f.bufferBytes = {bytes.x, bytes.y, bytes.w, cBytes, cBytes};
  prologueBuffers(ctx, e, f, bytes.x, d.C, "wgrad");
  f.runSplit = [&ctx, &e](void **p) {
    e.split(ctx, p[0], p[1], p[2], static_cast<float *>(p[3]),
            static_cast<float *>(p[4]), e.scratch);
  };
  f.runPlan = [&ctx, &d](const cg::ConvPlan &pl, void **p) {
    // The graph reads the f16 pair: the zeroed f32 scale buffer holds
    // 2 x C halves, zeros too.
    return pl.executeWgradPrologue(ctx.impl()->cudnn, p[0], p[1], p[2], p[3],
                                   static_cast<char *>(p[3]) + d.C * 2,
                                   ctx.impl()->workspace);
  };
}

static constexpr GraphFamily<ConvStatsFn> kConvStats{
    &Context::Impl::convStats, describeConvStats, kGraphFamilyNames[kStatsRow]};
static constexpr GraphFamily<ConvDgradEpilogueFn> kConvDgrad{
    &Context::Impl::convDgrads, describeConvDgrad,
    kGraphFamilyNames[kDgradRow]};
static constexpr GraphFamily<ConvWgradPrologueFn> kConvWgrad{
    &Context::Impl::convWgrads, describeConvWgrad,
    kGraphFamilyNames[kWgradRow]};

//===--- convolutions with BatchNorm statistics ---------------------------===//

void Context::registerConvStats(int id, int convId, ConvStatsFn split,
                                bool prologue, const char *loc) {
  registerGraphFused(*this, kConvStats, id, convId, split, loc).prologue =
      prologue;
}

bool Context::convStatsUsesGraph(int id) const {
  return runsAsGraph(*impl_, kConvStats, id);
}

void Context::convStatsFwd(int id, const void *x, const void *w, void *y,
                           float *sum, float *sumSq, const float *scale,
                           const float *shift) {
  ConvStatsEntry &e = getGraphFused(*this, kConvStats, id);
  if (e.prologue != (scale && shift) || (!e.prologue && (scale || shift)))
    fail(e.loc.c_str(), e.prologue
                            ? "conv-stats needs its prologue's scale "
                              "and shift"
                            : "conv-stats registered without a prologue");
  runChosenForm(
      *this, kConvStats, e,
      [&] { e.split(*this, x, w, y, sum, sumSq, scale, shift, e.scratch); },
      [&] {
        const void *gScale = nullptr, *gShift = nullptr;
        if (e.prologue) {
          int C = impl_->convs[e.conv].d.C;
          toHalfScaleShift(*this, e, scale, shift, C);
          gScale = e.halfScaleShift;
          gShift = e.halfScaleShift + C;
        }
        CNNRT_CUDNN(*this,
                    e.graph->executeStats(impl_->cudnn, x, w, y, sum, sumSq,
                                          gScale, gShift, impl_->workspace),
                    e.loc.c_str());
      });
}

//===--- backward-data convolutions with the residual-gradient epilogue ---===//

void Context::registerConvBwdDataAddRelu(int id, int convId,
                                         ConvDgradEpilogueFn split,
                                         const char *loc) {
  registerGraphFused(*this, kConvDgrad, id, convId, split, loc);
}

bool Context::convBwdDataAddReluUsesGraph(int id) const {
  return runsAsGraph(*impl_, kConvDgrad, id);
}

void Context::convBwdDataAddRelu(int id, const void *dy, const void *w,
                                 const void *addend, const void *reluOut,
                                 void *dx) {
  ConvDgradEntry &e = getGraphFused(*this, kConvDgrad, id);
  runChosenForm(
      *this, kConvDgrad, e, [&] { e.split(*this, dy, w, addend, reluOut, dx); },
      [&] {
        CNNRT_CUDNN(*this,
                    e.graph->executeDgradAddRelu(impl_->cudnn, dy, w, addend,
                                                 reluOut, dx, impl_->workspace),
                    e.loc.c_str());
      });
}

//===--- backward-filter convolutions with the scale-shift-ReLU prologue --===//

void Context::registerConvBwdFilterPrologue(int id, int convId,
                                            ConvWgradPrologueFn split,
                                            const char *loc) {
  registerGraphFused(*this, kConvWgrad, id, convId, split, loc).prologue = true;
}

bool Context::convBwdFilterPrologueUsesGraph(int id) const {
  return runsAsGraph(*impl_, kConvWgrad, id);
}

void Context::convBwdFilterPrologue(int id, const void *x, const void *dy,
                                    void *dw, const float *scale,
                                    const float *shift) {
  ConvWgradEntry &e = getGraphFused(*this, kConvWgrad, id);
  int C = impl_->convs[e.conv].d.C;
  if (!scale || !shift)
    fail(e.loc.c_str(), "sbr+wgrad needs its prologue's scale and shift");
  runChosenForm(
      *this, kConvWgrad, e,
      [&] { e.split(*this, x, dy, dw, scale, shift, e.scratch); },
      [&] {
        toHalfScaleShift(*this, e, scale, shift, C);
        // CNNRT_CUDNN's message quotes the call's text, in which a line
        // break after `(` would be a space.
        // clang-format off
        CNNRT_CUDNN(*this,
                    e.graph->executeWgradPrologue(impl_->cudnn, x, dy, dw,
                                                  e.halfScaleShift,
                                                  e.halfScaleShift + C,
                                                  impl_->workspace),
                    e.loc.c_str());
        // clang-format on
      });
}

void chooseFusedConvForms(Context &ctx) {
  chooseFusedConvs(ctx);
  chooseGraphFamily(ctx, kConvStats);
  chooseGraphFamily(ctx, kConvDgrad);
  chooseGraphFamily(ctx, kConvWgrad);
}

} // namespace cnnrt
