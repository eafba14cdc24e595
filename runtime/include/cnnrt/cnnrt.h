//===- cnnrt.h - the runtime contract of generated model.cu ------*- C++
//-*-===//
//
// A generated model.cu includes this header, defines its kernels, a tensor
// table, prepare/trainStep/evalStep functions and a ModelSpec, and ends with
//   int main(int argc, char **argv) { return cnnrt::trainMain(argc, argv,
//   kModel); }
// See docs/runtime.md for the full contract and an example
// (runtime/test/tiny_model.cu).
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_CNNRT_H
#define CNNRT_CNNRT_H

#include "cnnrt/Error.h"
#include "cnnrt/FilterLayout.h"
#include "cnnrt/Role.h"
#include "cnnrt/TensorFile.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace cnnrt {

enum class Layout : uint32_t { NCHW = 0, NHWC = 1 };

/// One tensor of the arena. `dims` beyond `rank` are ignored. `layout`
/// matters for the InputImage tensor (dims are then N,H,W,C for NHWC) and
/// for a parameter or optimizer state of rank 4 (cnn-param-format): NHWC
/// there means `dims` are the public K, C, R, S (weights files, checkpoints,
/// the C API) and the arena holds K, R, S, `storedC` (channels past C are
/// zero); the runtime converts at its boundary (storedFromPublic /
/// publicFromStored).
struct TensorSpec {
  const char *name;
  DType dtype;
  int rank;
  int64_t dims[4];
  size_t offset; ///< byte offset in the arena (256-byte aligned recommended)
  size_t bytes;
  Role role;
  Layout layout = Layout::NCHW;
  int64_t storedC = 0;
};

/// True when `t` is a parameter (or its state) stored as K, R, S, C'.
inline bool storedKRSC(const TensorSpec &t) {
  return t.layout == Layout::NHWC && t.rank == 4 &&
         (t.role == Role::Param || t.role == Role::OptState);
}
/// Host conversions of a storedKRSC tensor's bytes (element size `es`):
/// public K, C, R, S -> the arena's K, R, S, C' (padding zero), and back.
void storedFromPublic(const TensorSpec &t, size_t es, const char *pub,
                      char *stored);
void publicFromStored(const TensorSpec &t, size_t es, const char *stored,
                      char *pub);

class Context;
struct LaunchInfo;
struct ModelSpec;

/// What a data-parallel step (compiled with cnnc --gpus, linked with
/// libcnnrt_nccl.a) lends the training driver, which itself does not link
/// NCCL. Valid after the model's prepare(). Each call is collective (every
/// rank makes it, in the same order) and waits with CNNC_DIST_TIMEOUT.
struct DistHooks {
  /// This process's rank, world size and local rank.
  const LaunchInfo &(*launch)();
  /// Copies `bytes` at device address `buf` from rank 0 to every rank.
  void (*broadcast)(Context &, void *buf, size_t bytes);
  /// Sums `n` host integers over the ranks, in place.
  void (*sumHost)(Context &, int64_t *values, int n);
  /// cudaStreamSynchronize that gives up (throws Error(DataParallel))
  /// when a peer died.
  void (*waitStream)(Context &, cudaStream_t, const char *what);
  /// With CNNC_ALLREDUCE_TIMING=1: the milliseconds the compute stream of
  /// the last finished step waited for all-reduce buckets (the all-reduce
  /// time the backward pass did not hide); -1 when not measured.
  double (*stallMs)(Context &);
  /// A pipeline stage with asynchronous transfers: turns them off (alone:
  /// sends and waits do nothing, a receive zero-fills its buffer) or back
  /// on, and returns true; any other step: does nothing, returns false.
  /// Used by runStageAlone (Session.h). Not collective.
  bool (*stageAlone)(Context &, bool alone);
  /// Segmented capture (ContextOptions::segmentedCapture): captures
  /// spec.trainStep as CUDA graphs cut at each asynchronous pipeline
  /// transfer, which is kept to be issued between them, and returns true;
  /// a step without such transfers: nothing captured, false.
  /// replaySegments enqueues the captured step: each graph, then the
  /// transfer after it. A graph's branches may run one after another;
  /// streams run side by side, which an interleaved step needs.
  bool (*captureSegments)(Context &, const ModelSpec &);
  void (*replaySegments)(Context &);
};

/// Everything the runtime needs to know about a generated model.
struct ModelSpec {
  const char *name;
  size_t arenaBytes;
  const TensorSpec *tensors;
  int numTensors;
  int batch;
  int imageC, imageH, imageW;
  int numClasses;
  /// Registers every conv/matmul descriptor by id. Called once, before any
  /// step.
  void (*prepare)(Context &);
  /// Enqueues one full training step on ctx.stream() using arena pointers only
  /// (it is captured into a CUDA graph: no host syncs, no allocation).
  void (*trainStep)(Context &);
  /// Forward in inference mode writing the Logits tensor (may be null).
  void (*evalStep)(Context &);
  float defaultLR = 0.01f;
  int64_t defaultSteps = 100;
  /// The cuDNN/cuBLASLt workspace as a region of the arena (planned by
  /// cnn-memory-plan). With workspaceBytes > 0 the runtime uses
  /// [workspaceOffset, workspaceOffset + workspaceBytes) and only picks
  /// algorithms whose workspace fits; with 0 it allocates one workspace
  /// buffer, sized to the largest chosen algorithm, outside the arena.
  size_t workspaceOffset = 0;
  size_t workspaceBytes = 0;
  /// Set by data-parallel steps (cnnrt::dist::kHooks); null otherwise.
  const DistHooks *dist = nullptr;
  /// The cross-entropy's ignore_index (cnnc --ignore-index): dense labels
  /// that are not a class must be this; validation leaves them out.
  int64_t ignoreIndex = -100;
  /// The planned workspace is a cap (cnnc --workspace-mb): no algorithm
  /// beyond it. Without it (the planned default) a convolution's graph plan
  /// that needs more and runs at least twice as fast as the best within it
  /// gets a workspace of its own outside the arena (said at start-up).
  bool workspaceIsCap = false;
  /// Set (to why) when the step must not be captured into a CUDA graph: the
  /// compiler decided it (cnn.step_uncaptured, e.g. interleaved pipeline
  /// stages), and the runtime then runs every step uncaptured, saying so
  /// once at start-up.
  const char *uncapturedWhy = nullptr;
};

/// A 2-D convolution. x: [N,C,H,W] (or NHWC), w: [K,C/groups,R,S] (or KRSC
/// for NHWC), y: [N,K,P,Q] (or NHWC). Asymmetric padding (padT != padB or
/// padL != padR) is emulated: x is copied into a zero-padded scratch buffer
/// and cuDNN runs with padding 0.
struct ConvDesc {
  int N, C, H, W;
  int K, R, S;
  int P, Q;
  int padT, padL, padB, padR;
  int strideH, strideW;
  int dilH, dilW;
  int groups;
  DType dtype;   ///< F32 or F16 (f16 accumulates in f32)
  Layout layout; ///< NCHW or NHWC
};

/// Row-major matmul: C[M,N] = op(A) * op(B), op(A) is [M,K], op(B) is [K,N].
/// A is stored [M,K] (or [K,M] if transA), B [K,N] (or [N,K] if transB).
struct MatmulDesc {
  int64_t M, N, K;
  bool transA, transB;
  DType dtype; ///< F32 or F16 (f32 accumulation)
};

/// The activation of a fused convolution's epilogue (see registerConvBiasAct).
enum class Activation : int { Identity = 0, Relu = 1 };

/// The generated kernel(s) of a fused convolution's epilogue, in place on the
/// convolution's output: y = act(y + bias [+ residual]), enqueued on
/// ctx.stream(). `residual` is null when the op has none.
using ConvEpilogueFn = void (*)(Context &ctx, void *y, const void *bias,
                                const void *residual);

/// The split form of a convolution with BatchNorm statistics (generated
/// code, see registerConvStats): y = conv(x', w), then the f32 per-channel
/// sum and sum of squares of y, enqueued on ctx.stream(); x' = x, or with a
/// prologue relu(x * scale + shift) per channel, written to `scratch` (an
/// x-sized buffer of the runtime's) first.
using ConvStatsFn = void (*)(Context &ctx, const void *x, const void *w,
                             void *y, float *sum, float *sumSq,
                             const float *scale, const float *shift,
                             void *scratch);

/// The split form of a backward-data convolution with the residual-gradient
/// epilogue (generated code, see registerConvBwdDataAddRelu): dx =
/// conv_bwd_data(dy, w), then dx = reluOut > 0 ? dx + addend : 0 in place,
/// enqueued on ctx.stream().
using ConvDgradEpilogueFn = void (*)(Context &ctx, const void *dy,
                                     const void *w, const void *addend,
                                     const void *reluOut, void *dx);

/// The split form of a backward-filter convolution whose input is the
/// previous BatchNorm's apply + ReLU (generated code, see
/// registerConvBwdFilterPrologue): x' = relu(x * scale + shift) per input
/// channel (f32 scale, shift; x' rounded to x's type) written to `scratch`
/// (an x-sized buffer of the runtime's), then dw = conv_bwd_filter(x', dy),
/// enqueued on ctx.stream().
using ConvWgradPrologueFn = void (*)(Context &ctx, const void *x,
                                     const void *dy, void *dw,
                                     const float *scale, const float *shift,
                                     void *scratch);

/// How a fused convolution runs: Auto times both forms once per shape (and
/// caches the choice); CuDNN and Split force one (CNNRT_CONV_FUSION).
enum class ConvFusion { Auto, CuDNN, Split };

/// The runtime's configuration: every CNNRT_* setting of the environment,
/// read once by fromEnv() (trainMain before it looks for the GPU, the C API
/// in cnnrt_create) and then only read from this struct.
struct ContextOptions {
  bool allowTF32 = false;    ///< CNNRT_ALLOW_TF32=1
  bool deterministic = true; ///< CNNRT_DETERMINISTIC=0 allows atomics algos
  std::string algoCachePath; ///< CNNRT_ALGO_CACHE or ~/.cache/cnnc/algos.txt
  bool syncCheck = false;    ///< CNNRT_SYNC_CHECK=1: sync after every launch
  bool verbose = false;      ///< CNNRT_VERBOSE=1: print algorithm choices
  /// CNNRT_CONV_FUSION=auto|cudnn|split
  ConvFusion convFusion = ConvFusion::Auto;
  /// CNNRT_CONV_GRAPH=0: convolutions only through cuDNN's legacy API. By
  /// default an f16 convolution also times cuDNN graph API (backend) plans
  /// and runs the faster of the two (see runtime/src/CudnnGraph.h).
  bool convGraph = true;
  /// CNNRT_WARM_CACHED=0: a convolution whose choice comes from the
  /// algorithm cache is not run during start-up. By default it runs once on
  /// scratch buffers then, so that CUDA's lazy loading of its cuDNN kernels
  /// happens before the first step, as it does when the choice is timed
  /// (without it, a run with a warm cache paid ~120 ms of kernel loading in
  /// its first step: ResNet-50, session 22's part T).
  bool warmCached = true;
  /// CNNRT_SEGMENTED_CAPTURE (default 1): a step the compiler marks
  /// uncaptured (ModelSpec::uncapturedWhy: interleaved pipeline stages) is
  /// captured instead as one CUDA graph per stretch between its pipeline
  /// transfers, the transfers issued on their link streams between the
  /// graphs' launches (DistHooks::captureSegments); 0 runs it uncaptured.
  /// On since session 36: ResNet-18 f32 S=4 x 2 and the relayed skip net
  /// trained through it on 4 H200s, ResNet-50 f16 S=4 x 2 ran 100 steps.
  bool segmentedCapture = true;
  /// CNNRT_PROFILE=1: time every launch of one (uncaptured) training step
  /// with CUDA events and print where the time goes.
  bool profile = false;
  /// CNNRT_PROFILE_TOP=N: the profile lists the N slowest launches.
  size_t profileTop = 20;
  /// CNNRT_PROFILE_JSON=FILE: the profile is also written to FILE as JSON,
  /// by location (src/ProfileJson.h; cnnc --pipeline-profile reads it);
  /// implies CNNRT_PROFILE (CNNRT_PROFILE=0 with it is a Config error).
  std::string profileJson;
  /// CNNRT_MATMUL_WORKSPACE_MB: the most workspace a cuBLASLt algorithm may
  /// use (capped by a planned workspace).
  size_t matmulWorkspaceBytes = size_t(32) << 20;
  /// CNNRT_WORKSPACE_LIMIT_MB: the most workspace convolution algorithms are
  /// timed with.
  size_t tuneWorkspaceBytes = size_t(1024) << 20;
  /// CNNRT_GRAPH_PLANS: how many of cuDNN's heuristic graph plans are timed
  /// per convolution (1-64; other values keep the default).
  int graphPlans = 4;
  /// CNNRT_REPRO_RUNS (2-100): under `deterministic`, how many runs a
  /// conv+GenStats graph plan must repeat bitwise before it is admitted
  /// (the reproducibility probe, docs/runtime.md); a cached verdict of
  /// fewer runs is probed again. Other values throw Error(Config).
  int reproRuns = 5;
  /// Fills the fields above from the environment; a value it cannot honour
  /// (CNNRT_CONV_FUSION=bogus) throws Error(ErrorKind::Config).
  static ContextOptions fromEnv();
};

/// Throws Error(ErrorKind::NoGPU, "cnnrt: no CUDA GPU available (<why>)")
/// if no usable GPU (no device, or the driver is too old).
void requireGPU();

/// Owns the arena, the workspace, the streams and the library handles.
class Context {
public:
  /// Checks the GPU (Error NoGPU: exit 3), creates streams and handles,
  /// allocates and zeroes the arena (Error OutOfMemory with a report: exit
  /// 2). Every failure of this class is a thrown cnnrt::Error.
  explicit Context(const ModelSpec &spec,
                   const ContextOptions &opts = ContextOptions::fromEnv());
  ~Context();
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  char *arena() const { return arena_; }
  /// Typed pointer into the arena: ctx.at<float>(offset).
  template <typename T> T *at(size_t offset) const {
    return reinterpret_cast<T *>(arena_ + offset);
  }
  cudaStream_t stream() const { return stream_; }
  cudaStream_t copyStream() const { return copyStream_; }
  const ModelSpec &spec() const { return spec_; }
  const ContextOptions &options() const { return opts_; }
  /// Device memory in use (all processes) on this context's GPU once it was
  /// selected and its CUDA context existed, before the arena: the baseline
  /// the executable reports its peak memory net of. Measured here because
  /// the GPU is chosen here (a rank's or stage's local rank), not on device 0.
  size_t memoryInUseAtStart() const;

  //--- prepare-time registration (algorithm choice happens here) ----------//
  void registerConv(int id, const ConvDesc &d, const char *loc);
  void registerMatmul(int id, const MatmulDesc &d, const char *loc);
  /// A convolution with an epilogue, y = act(conv(x, w) + bias [+ residual]),
  /// on the registered convolution `convId` (bias: K elements of its dtype,
  /// residual: like y). It runs either as one
  /// cudnnConvolutionBiasActivationForward call or as the convolution
  /// followed by `epilogue`: finishPrepare times both for the shape and keeps
  /// the faster (fused cuDNN calls are sometimes slower) in the algorithm
  /// cache.
  void registerConvBiasAct(int id, int convId, Activation act, bool residual,
                           ConvEpilogueFn epilogue, const char *loc);
  /// A forward convolution with the per-channel sum and sum of squares of
  /// its output (cnn.fused_conv2d_stats) on the registered NHWC f16
  /// convolution `convId`, with the scale-shift-ReLU prologue on its input
  /// when `prologue`: either one cuDNN graph (prologue + conv + GenStats) or
  /// `split`; finishPrepare times both and keeps the faster (cached). A
  /// split form with a prologue gets an x-sized scratch buffer, allocated
  /// then (outside the arena: only where cuDNN has no faster graph).
  void registerConvStats(int id, int convId, ConvStatsFn split, bool prologue,
                         const char *loc);
  /// A backward-data convolution with the residual-gradient epilogue
  /// (cnn.fused_conv2d_bwd_data), dx = relu_grad(conv_bwd_data(dy, w) +
  /// addend, reluOut), on the registered NHWC f16 convolution `convId`:
  /// either one cuDNN graph (dgrad + add + ReLU backward) or `split`;
  /// finishPrepare times both and keeps the faster (cached).
  void registerConvBwdDataAddRelu(int id, int convId, ConvDgradEpilogueFn split,
                                  const char *loc);
  /// A backward-filter convolution with the scale-shift-ReLU prologue on its
  /// input (cnn.fused_conv2d_bwd_filter), dw = conv_bwd_filter(relu(x *
  /// scale + shift), dy), on the registered NHWC f16 convolution `convId`:
  /// either one cuDNN graph (prologue + wgrad) or `split`; finishPrepare
  /// times both and keeps the faster (cached). The split form gets an
  /// x-sized scratch buffer, allocated then (outside the arena: only where
  /// cuDNN has no faster graph).
  void registerConvBwdFilterPrologue(int id, int convId,
                                     ConvWgradPrologueFn split,
                                     const char *loc);
  /// Allocates the workspace (max over chosen algorithms; nothing when the
  /// spec plans it in the arena) and saves the algorithm cache. trainMain
  /// calls it after spec.prepare.
  void finishPrepare();

  //--- step-time calls (enqueue on stream(); capturable) ------------------//
  /// y = conv(x, w)  (accumulate: y += conv(x, w)).
  void convFwd(int id, const void *x, const void *w, void *y,
               bool accumulate = false);
  /// y = act(conv(x, w) + bias [+ residual]) for registerConvBiasAct's `id`
  /// (residual may be null when registered without one).
  void convBiasActFwd(int id, const void *x, const void *w, const void *bias,
                      const void *residual, void *y);
  /// After finishPrepare: whether fused convolution `id` runs as one cuDNN
  /// call (false: convolution + generated epilogue).
  bool convBiasActUsesCudnn(int id) const;
  /// y = conv(x', w) and sum, sumSq (f32, K each) of y per channel, for
  /// registerConvStats' `id`; x' = relu(x * scale + shift) (f32, C each)
  /// when registered with a prologue, else x (scale, shift null).
  void convStatsFwd(int id, const void *x, const void *w, void *y, float *sum,
                    float *sumSq, const float *scale = nullptr,
                    const float *shift = nullptr);
  /// After finishPrepare: whether `id` runs as cuDNN's conv + GenStats graph
  /// (false: the split form).
  bool convStatsUsesGraph(int id) const;
  /// dx = relu_grad(conv_bwd_data(dy, w) + addend, reluOut) for
  /// registerConvBwdDataAddRelu's `id` (all tensors f16; addend, reluOut and
  /// dx have the shape of the convolution's x).
  void convBwdDataAddRelu(int id, const void *dy, const void *w,
                          const void *addend, const void *reluOut, void *dx);
  /// After finishPrepare: whether `id` runs as the cuDNN graph.
  bool convBwdDataAddReluUsesGraph(int id) const;
  /// dw = conv_bwd_filter(relu(x * scale + shift), dy) for
  /// registerConvBwdFilterPrologue's `id` (x, dy, dw f16; scale, shift f32,
  /// C each).
  void convBwdFilterPrologue(int id, const void *x, const void *dy, void *dw,
                             const float *scale, const float *shift);
  /// After finishPrepare: whether `id` runs as the cuDNN graph.
  bool convBwdFilterPrologueUsesGraph(int id) const;
  /// dx = conv_bwd_data(dy, w).
  void convBwdData(int id, const void *dy, const void *w, void *dx,
                   bool accumulate = false);
  /// dw = conv_bwd_filter(x, dy).
  void convBwdFilter(int id, const void *x, const void *dy, void *dw,
                     bool accumulate = false);
  /// C = op(A) op(B) (accumulate: C += ...).
  void matmul(int id, const void *A, const void *B, void *C,
              bool accumulate = false);

  /// Checks cudaGetLastError() (and syncs when CNNRT_SYNC_CHECK=1 outside
  /// capture); on error throws Error "cnnrt: error at <loc>: <what>".
  void checkLaunch(const char *loc);
  /// checkLaunch for a kernel of generated code; `what` ("<op> <kernel>")
  /// names it in CNNRT_PROFILE's report.
  void checkLaunch(const char *loc, const char *what);

  //--- profiling (CNNRT_PROFILE) -------------------------------------------//
  /// Starts recording an event after every launch and library call.
  void beginProfile();
  /// Waits for the stream and prints the time between consecutive events,
  /// by op kind and for the slowest launches, to stderr.
  void endProfile(const char *title);
  /// Checks a CUDA runtime status (out of memory: Error OutOfMemory with
  /// the memory plan's report).
  void check(cudaError_t e, const char *loc);
  /// Throws Error(kind, "cnnrt: error at <loc>: <what>").
  [[noreturn]] void fail(const char *loc, const std::string &what,
                         ErrorKind kind = ErrorKind::Invalid);

  /// Raw cuDNN (cudnnHandle_t) and cuBLASLt (cublasLtHandle_t) handles, for
  /// generated code that calls the libraries directly.
  void *cudnnHandle() const;
  void *cublasLtHandle() const;
  void *workspace() const;
  size_t workspaceBytes() const;
  /// The device buffer the prelude's two-pass reductions (the NHWC
  /// per-channel sums, the cross-entropy's per-block sums) write their
  /// partial sums to and their finishing kernels read: at least `doubles`
  /// doubles, owned by the context (one per context, so two host units of a
  /// split build, or two contexts, never read each other's sums). The first
  /// call allocates; the generated prepareModel reserves the step's largest
  /// need before any step is captured, so a call in a captured step only
  /// returns the pointer. A larger request while the stream is capturing is
  /// an error (Error Invalid).
  double *reductionScratch(size_t doubles);

  struct Impl;
  Impl *impl() const { return impl_; }

private:
  /// The constructor's work (a failure throws; the constructor releases).
  void init();
  /// Frees what the context holds (the destructor, a failed constructor).
  void release();

  const ModelSpec &spec_;
  ContextOptions opts_;
  char *arena_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copyStream_ = nullptr;
  Impl *impl_ = nullptr;
};

/// After every kernel launch in generated code:
///   kernel<<<g, b, 0, ctx.stream()>>>(...); CNNRT_CHECK_LAUNCH(ctx, "Conv_0");
#define CNNRT_CHECK_LAUNCH(ctx, loc) (ctx).checkLaunch(loc)
/// The same, naming the op and kernel for the profile.
#define CNNRT_CHECK_KERNEL(ctx, loc, what) (ctx).checkLaunch(loc, what)

/// Grid size for n elements with `threads` per block (at least 1).
inline unsigned gridFor(int64_t n, int threads = 256) {
  int64_t g = (n + threads - 1) / threads;
  if (g < 1)
    g = 1;
  if (g > 0x7fffffff)
    g = 0x7fffffff;
  return static_cast<unsigned>(g);
}

/// The training driver: flags, data, weights, steps, checkpoints, eval.
int trainMain(int argc, char **argv, const ModelSpec &spec);

/// Finds a tensor of the spec by role (first match) or by name (nullptr if
/// absent).
const TensorSpec *findTensor(const ModelSpec &spec, Role role);
const TensorSpec *findTensor(const ModelSpec &spec, const char *name);

} // namespace cnnrt

#endif // CNNRT_CNNRT_H
