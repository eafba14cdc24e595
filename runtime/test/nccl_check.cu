//===- nccl_check.cu - device checks of the NCCL data-parallel runtime ----===//
//
//   nccl_check single   world size 1 through real NCCL: two buckets (f32 and
//                       f16) all-reduced inside a captured CUDA graph on the
//                       communication stream, forked/joined with events;
//                       values checked after 3 replays. Exit 0. Under a
//                       launcher (CNNC_RANK/..., torchrun, mpirun) the same
//                       check runs with the launch's world size, one GPU per
//                       rank (bench/device-dp.sh part R: 2 ranks).
//   nccl_check dead     (run with CNNC_RANK=0 CNNC_WORLD_SIZE=2
//                       CNNC_DIST_INIT=file:///... CNNC_DIST_TIMEOUT=T): rank
//                       1 never comes; must exit 1 with a message after ~T s.
//   nccl_check devices  (CNNC_RANK=1 CNNC_WORLD_SIZE=2 on a 1-GPU machine):
//                       must exit 1 naming the missing GPU.
// Exit 3 without a GPU (ctest SKIP_RETURN_CODE).
//
//===----------------------------------------------------------------------===//
#include "cnnrt/Nccl.h"
#include "cnnrt/cnnrt.h"

#include <cuda_fp16.h>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {
constexpr int N = 1000;

__global__ void affine(float *x, int n, float a, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] = a * x[i] + b;
}
__global__ void affineH(__half *x, int n, float a, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] = __float2half(a * __half2float(x[i]) + b);
}

void prepare(cnnrt::Context &ctx) { cnnrt::dist::prepare(ctx, 2); }

// x = 2x; all-reduce (avg over 1 rank: unchanged) while y = y + 1 runs on
// the compute stream; join; x = x + 1.
void step(cnnrt::Context &ctx) {
  float *x = ctx.at<float>(0);
  __half *h = ctx.at<__half>(4096 * 4);
  float *y = ctx.at<float>(8192 * 4);
  affine<<<4, 256, 0, ctx.stream()>>>(x, N, 2.f, 0.f);
  affineH<<<4, 256, 0, ctx.stream()>>>(h, N, 1.f, 1.f);
  cnnrt::dist::begin(ctx, 0);
  cnnrt::dist::allReduce(ctx, x, N, (int)cnnrt::DType::F32, cnnrt::dist::kAvg,
                         "check.f32");
  cnnrt::dist::end(ctx, 0);
  cnnrt::dist::begin(ctx, 1);
  cnnrt::dist::allReduce(ctx, h, N, (int)cnnrt::DType::F16, cnnrt::dist::kSum,
                         "check.f16");
  cnnrt::dist::end(ctx, 1);
  affine<<<4, 256, 0, ctx.stream()>>>(y, N, 1.f, 1.f);
  cnnrt::dist::join(ctx, 0);
  cnnrt::dist::join(ctx, 1);
  affine<<<4, 256, 0, ctx.stream()>>>(x, N, 1.f, 1.f);
}

const cnnrt::ModelSpec kSpec = {"nccl_check", 16 * 4096 * 4, nullptr, 0, 1,
                                1, 1, 1, 2, prepare, step, nullptr};
} // namespace

// Where the check is, on stderr (unbuffered): a run killed by its time-out
// shows the phase it hung in (bench/device-dp.sh part R's two-rank run hung
// without a line while stdout sat in its buffer).
static void phase(const char *what) {
  std::fprintf(stderr, "nccl_check: %s\n", what);
}

static int run(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "single";
  cnnrt::requireGPU();
  cnnrt::Context ctx(kSpec);
  phase("context ready; dist::prepare");
  kSpec.prepare(ctx); // "dead" and "devices" throw in here (main: exit 1)
  phase("communicator ready (handshake and warm-up done)");
  const int W = cnnrt::dist::launch().worldSize;
  const int R = cnnrt::dist::launch().rank;
  if (mode != "single") {
    std::fprintf(stderr, "nccl_check %s: expected an error in dist::prepare\n",
                 mode.c_str());
    return 1;
  }
  std::vector<float> x(N), y(N, 0.f);
  std::vector<__half> h(N);
  for (int i = 0; i < N; ++i) {
    x[i] = 0.25f * i + R;
    h[i] = __float2half(0.5f * (i % 64));
  }
  ctx.check(cudaMemcpy(ctx.at<float>(0), x.data(), N * 4,
                       cudaMemcpyHostToDevice), "copy");
  ctx.check(cudaMemcpy(ctx.at<__half>(4096 * 4), h.data(), N * 2,
                       cudaMemcpyHostToDevice), "copy");
  ctx.check(cudaMemcpy(ctx.at<float>(8192 * 4), y.data(), N * 4,
                       cudaMemcpyHostToDevice), "copy");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ctx.check(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeRelaxed),
            "capture");
  step(ctx);
  ctx.check(cudaStreamEndCapture(ctx.stream(), &graph), "capture");
  phase("captured");
  ctx.check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  phase("instantiated; 3 replays");
  size_t nodes = 0;
  cudaGraphGetNodes(graph, nullptr, &nodes);
  for (int k = 0; k < 3; ++k)
    ctx.check(cudaGraphLaunch(exec, ctx.stream()), "launch");
  cnnrt::dist::waitStream(ctx, ctx.stream(), "replays");
  phase("replays done");
  std::vector<float> xo(N), yo(N);
  std::vector<__half> ho(N);
  cudaMemcpy(xo.data(), ctx.at<float>(0), N * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(ho.data(), ctx.at<__half>(4096 * 4), N * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(yo.data(), ctx.at<float>(8192 * 4), N * 4, cudaMemcpyDeviceToHost);
  // The graph goes before the communicator, as in trainMain: NCCL keeps a
  // captured collective's resources until its graph is destroyed, and the
  // communicator's destruction at exit (dist::shutdown) waited for them.
  // Without this both ranks of bench/device-dp.sh part R hung after
  // "replays done" until their time-out, their result line still in
  // stdout's buffer (sessions 7-22).
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  int bad = 0;
  for (int i = 0; i < N; ++i) {
    // x: 2x, averaged over the ranks, + 1; h: h + 1 summed over the ranks.
    float want = 0.25f * i + 0.5f * (W - 1), wantH = 0.5f * (i % 64);
    for (int k = 0; k < 3; ++k) {
      want = 2 * want + 1;
      wantH = W * (wantH + 1);
    }
    if (xo[i] != want || __half2float(ho[i]) != wantH || yo[i] != 3.f) {
      if (bad++ < 5)
        std::fprintf(stderr, "element %d: x %g (want %g) h %g (want %g) y %g\n",
                     i, xo[i], want, __half2float(ho[i]), wantH, yo[i]);
    }
  }
  std::printf("nccl_check single: %s; world size %d through NCCL, "
              "2 buckets (f32 avg, f16 sum) in a captured graph of %zu nodes, "
              "3 replays: %s\n",
              cnnrt::dist::launch().describe().c_str(), W, nodes, bad ? "MISMATCH" : "ok");
  std::fflush(stdout);
  return bad ? 1 : 0;
}

// A runtime error (cnnrt::Error) is reported as trainMain reports it: its
// message and exit code (3 without a GPU: ctest's SKIP_RETURN_CODE).
int main(int argc, char **argv) {
  // As the executable: a dead peer ends the process (exit 1) at once.
  cnnrt::setExitOnStuckDevice(true);
  try {
    return run(argc, argv);
  } catch (const cnnrt::Error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.exitCode();
  }
}
