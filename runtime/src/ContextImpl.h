//===- ContextImpl.h - what the Context's modules share ------*- C++ -*-===//
//
// Internal header (not installed). The Context is one class whose members
// live in files by concern:
//   Context.cu   the arena, handles, streams, errors, finishPrepare
//   Config.cu    ContextOptions::fromEnv (every CNNRT_* setting, read once)
//   AlgoCache.cu the algorithm-cache file
//   Profile.cu   CNNRT_PROFILE's per-launch timing
//   Conv.cu      convolution engines: cuDNN's legacy API (autotuned) and its
//                graph API, and the fused-convolution families
//   Gemm.cu      matmuls through cuBLASLt
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_SRC_CONTEXTIMPL_H
#define CNNRT_SRC_CONTEXTIMPL_H

// The legacy cuDNN convolution API is deprecated in cuDNN 9; it is what we
// use, so keep its deprecation warnings off in the runtime.
#undef CUDNN_WARN_DEPRECATED
#include "CudnnGraph.h"
#include "cnnrt/cnnrt.h"

#include <cublasLt.h>
#include <cudnn.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cnnrt {

//===--- errors -----------------------------------------------------------===//

/// Throws Error(OutOfMemory) with the report trainMain prints before exit
/// 2: the request (`bytes` > 0) or the place, the device's free memory and
/// the memory plan's largest buffers.
[[noreturn]] void throwOutOfMemory(const ModelSpec &spec, const char *what,
                                   size_t bytes);
const char *cudnnErr(cudnnStatus_t s);
const char *cublasErr(cublasStatus_t s);

#define CNNRT_CUDA(ctx, call, loc)                                             \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess)                                                     \
      (ctx).fail(loc, std::string(#call) + ": " + cudaGetErrorString(e_),      \
                 ::cnnrt::ErrorKind::Cuda);                                    \
  } while (0)
#define CNNRT_CUDNN(ctx, call, loc)                                            \
  do {                                                                         \
    cudnnStatus_t s_ = (call);                                                 \
    if (s_ == CUDNN_STATUS_ALLOC_FAILED)                                       \
      ::cnnrt::throwOutOfMemory((ctx).spec(), loc, 0);                         \
    if (s_ != CUDNN_STATUS_SUCCESS)                                            \
      (ctx).fail(loc, std::string(#call) + ": " + ::cnnrt::cudnnErr(s_),       \
                 ::cnnrt::ErrorKind::Cudnn);                                   \
  } while (0)
#define CNNRT_CUBLAS(ctx, call, loc)                                           \
  do {                                                                         \
    cublasStatus_t s_ = (call);                                                \
    if (s_ == CUBLAS_STATUS_ALLOC_FAILED)                                      \
      ::cnnrt::throwOutOfMemory((ctx).spec(), loc, 0);                         \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                           \
      (ctx).fail(loc, std::string(#call) + ": " + ::cnnrt::cublasErr(s_),      \
                 ::cnnrt::ErrorKind::Cublas);                                  \
  } while (0)

inline cudnnDataType_t cudnnType(DType d) {
  return d == DType::F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}
inline cudaDataType_t cudaType(DType d) {
  return d == DType::F16 ? CUDA_R_16F : CUDA_R_32F;
}

//===--- the algorithm cache (AlgoCache.cu) -------------------------------===//

/// The algorithm choices by shape ("key value" lines of a text file,
/// CNNRT_ALGO_CACHE): each chooser looks its key up before timing and
/// stores what it chose; finishPrepare writes the file back.
class AlgoCache {
public:
  /// Reads `path` (a missing or unreadable file is an empty cache).
  void load(const std::string &path);
  /// The value stored under `key`, or null.
  const std::string *find(const std::string &key) const;
  void put(const std::string &key, const std::string &value);
  /// When something was put: re-reads `path` (entries of concurrent runs
  /// are kept), merges ours and writes it atomically; a failure to write
  /// is a warning (the run goes on without the cache).
  void save(const std::string &path);

private:
  std::map<std::string, std::string> entries_;
  bool dirty_ = false;
};

//===--- profiling (Profile.cu) -------------------------------------------===//

/// Under CNNRT_PROFILE: records an event after the launch or library call
/// just enqueued, labelled `loc` and `what` (null: "runtime kernel").
void profileMark(Context &ctx, const char *loc, const char *what);

//===--- convolutions (Conv.cu) -------------------------------------------===//

enum Dir { kFwd = 0, kBwdData = 1, kBwdFilter = 2 };
inline constexpr const char *kDirName[3] = {"fwd", "bwd_data", "bwd_filter"};

struct ConvEntry {
  bool valid = false;
  ConvDesc d{};
  std::string loc;
  bool asym = false;
  int Hp = 0, Wp = 0; ///< x geometry seen by cuDNN (padded if asym)
  size_t xpBytes = 0; ///< bytes of the padded x copy (asym only)
  cudnnTensorDescriptor_t xDesc = nullptr, yDesc = nullptr;
  cudnnFilterDescriptor_t wDesc = nullptr;
  cudnnConvolutionDescriptor_t cDesc = nullptr;
  int algo[3] = {-1, -1, -1};
  cudnnMathType_t math[3] = {CUDNN_DEFAULT_MATH, CUDNN_DEFAULT_MATH,
                             CUDNN_DEFAULT_MATH};
  size_t ws[3] = {0, 0, 0};
  std::string key; ///< algorithm-cache key prefix of this shape
  /// A cuDNN graph API plan per direction where it beat the legacy
  /// algorithm when timed (null: the legacy call). Runs only calls that
  /// overwrite their output (beta 0); accumulating calls take the legacy one.
  std::shared_ptr<cnnrt::cudnn_graph::ConvPlan> graph[3];
  /// The graph plan of a direction needs more than the planned (default)
  /// workspace and runs with Impl::overflowWs (chooseGraphConv: at least
  /// twice as fast as the best within it).
  bool overflow[3] = {false, false, false};
};

/// What every fused convolution has: the registered convolution it runs
/// on and its op's location (for messages).
struct FusedConvBase {
  bool valid = false;
  int conv = -1;
  std::string loc;
};

/// A convolution with a bias/residual/activation epilogue
/// (registerConvBiasAct): cuDNN's legacy fused call or the split form.
struct FusedConvEntry : FusedConvBase {
  Activation act = Activation::Relu;
  bool residual = false;
  ConvEpilogueFn epilogue = nullptr;
  /// Chosen in finishPrepare: one cuDNN call (algo/math/ws) or the split form.
  bool useCudnn = false;
  int algo = -1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t ws = 0;
  cudnnTensorDescriptor_t biasDesc = nullptr;
  cudnnActivationDescriptor_t actDesc = nullptr;
};

/// A fused convolution that runs as one cuDNN graph API plan or as its
/// split form (generated code of type SplitFn): the conv + BatchNorm
/// statistics (registerConvStats), the dgrad + add + ReLU backward
/// (registerConvBwdDataAddRelu) and the prologue + wgrad
/// (registerConvBwdFilterPrologue) families.
template <typename SplitFn> struct GraphFusedEntry : FusedConvBase {
  SplitFn split = nullptr;
  /// The scale-shift-ReLU prologue on the convolution's input (always for
  /// the wgrad family, never for the dgrad one).
  bool prologue = false;
  /// The split form's normalized input (prologue only; x-sized, allocated
  /// in finishPrepare when the split form is chosen).
  void *scratch = nullptr;
  /// The graph form's scale and shift in f16 (2 x C; prologue only).
  __half *halfScaleShift = nullptr;
  /// Chosen in finishPrepare: the plan, or null (split).
  std::shared_ptr<cnnrt::cudnn_graph::ConvPlan> graph;
};
using ConvStatsEntry = GraphFusedEntry<ConvStatsFn>;
using ConvDgradEntry = GraphFusedEntry<ConvDgradEpilogueFn>;
using ConvWgradEntry = GraphFusedEntry<ConvWgradPrologueFn>;

/// finishPrepare's part for the fused convolutions: each family's form
/// (cached or timed).
void chooseFusedConvForms(Context &ctx);
/// Destroys the convolutions' descriptors and buffers (Context::release).
void releaseConvolutions(Context::Impl &I);

//===--- matmuls (Gemm.cu) ------------------------------------------------===//

struct MatmulEntry {
  bool valid = false;
  MatmulDesc d{};
  std::string loc;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t aL = nullptr, bL = nullptr, cL = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t ws = 0;
};

/// Destroys the matmuls' descriptors (Context::release).
void releaseMatmuls(Context::Impl &I);

//===--- the context's state ----------------------------------------------===//

struct Context::Impl {
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t lt = nullptr;
  std::vector<ConvEntry> convs;
  std::vector<FusedConvEntry> fusedConvs;
  std::vector<ConvStatsEntry> convStats;
  std::vector<ConvDgradEntry> convDgrads;
  std::vector<ConvWgradEntry> convWgrads;
  std::vector<MatmulEntry> matmuls;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  size_t neededWorkspace = 0;
  /// The workspace is the arena region ModelSpec plans: algorithms must fit
  /// in workspaceBytes, nothing is allocated or freed.
  bool plannedWorkspace = false;
  /// ModelSpec::workspaceIsCap: the planned workspace was given
  /// (--workspace-mb), so no convolution plan may exceed it.
  bool workspaceIsCap = false;
  /// The workspace of the convolution plans beyond the planned default one
  /// (ConvEntry::overflow): allocated by finishPrepare, outside the arena.
  void *overflowWs = nullptr;
  size_t overflowWsBytes = 0, neededOverflow = 0;
  /// Context::reductionScratch's buffer and its size in doubles.
  double *reductionScratch = nullptr;
  size_t reductionScratchDoubles = 0;
  void *padBuf = nullptr;
  size_t padBytes = 0;
  size_t neededPad = 0;
  bool prepared = false;
  // tuning scratch
  void *tuneWs = nullptr;
  size_t tuneWsBytes = 0;
  void *scratch[3] = {nullptr, nullptr, nullptr};
  size_t scratchBytes[3] = {0, 0, 0};
  // algorithm cache
  std::string gpuName;
  size_t memoryInUseAtStart = 0;
  std::string cudnnVer;
  AlgoCache cache;
  // profiling (CNNRT_PROFILE): one event after each launch, with its labels
  struct Mark {
    cudaEvent_t ev;
    std::string loc, what;
  };
  bool profiling = false;
  cudaEvent_t profileStart = nullptr;
  std::vector<Mark> marks;
  /// ContextOptions::matmulWorkspaceBytes, capped by a planned workspace.
  size_t matmulWsLimit = 0;
  size_t tuneWsLimit = 0;
};

} // namespace cnnrt

#endif // CNNRT_SRC_CONTEXTIMPL_H
