//===- Context.cu - the arena, streams, handles and errors of a Context ---===//
//
// The Context's other members live by concern in Config.cu, AlgoCache.cu,
// Profile.cu, Conv.cu and Gemm.cu (ContextImpl.h). Every failure here is a
// thrown cnnrt::Error (cnnrt/Error.h), never an exit: the C API returns it
// to its caller, trainMain prints it and exits with its code.
//
//===----------------------------------------------------------------------===//

#include "ContextImpl.h"
#include "cnnrt/Distributed.h"

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace cnnrt {

//===--- errors -----------------------------------------------------------===//

void requireGPU() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    throw Error(
        ErrorKind::NoGPU,
        std::string("cnnrt: no CUDA GPU available (") +
            (e != cudaSuccess ? cudaGetErrorString(e) : "no device found") +
            ")");
}

const TensorSpec *findTensor(const ModelSpec &spec, Role role) {
  for (int i = 0; i < spec.numTensors; ++i)
    if (spec.tensors[i].role == role)
      return &spec.tensors[i];
  return nullptr;
}

const TensorSpec *findTensor(const ModelSpec &spec, const char *name) {
  for (int i = 0; i < spec.numTensors; ++i)
    if (std::strcmp(spec.tensors[i].name, name) == 0)
      return &spec.tensors[i];
  return nullptr;
}

namespace {
/// printf into `out` (the out-of-memory report is built as it was printed).
void appendf(std::string &out, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  if (n > 0) {
    std::vector<char> buf(static_cast<size_t>(n) + 1);
    std::vsnprintf(buf.data(), buf.size(), fmt, ap2);
    out.append(buf.data(), static_cast<size_t>(n));
  }
  va_end(ap2);
}
} // namespace

void throwOutOfMemory(const ModelSpec &spec, const char *what, size_t bytes) {
  size_t freeB = 0, totalB = 0;
  cudaGetLastError();
  cudaMemGetInfo(&freeB, &totalB);
  std::string msg;
  if (bytes > 0)
    appendf(msg,
            "cnnrt: out of GPU memory allocating %s of model '%s': "
            "requested %zu bytes (%.1f MiB); device has %.1f MiB free of "
            "%.1f MiB\n",
            what, spec.name ? spec.name : "?", bytes, bytes / 1048576.0,
            freeB / 1048576.0, totalB / 1048576.0);
  else
    appendf(msg,
            "cnnrt: out of GPU memory at %s of model '%s'; device has "
            "%.1f MiB free of %.1f MiB\n",
            what, spec.name ? spec.name : "?", freeB / 1048576.0,
            totalB / 1048576.0);
  std::vector<const TensorSpec *> ts;
  for (int i = 0; i < spec.numTensors; ++i)
    ts.push_back(&spec.tensors[i]);
  std::sort(ts.begin(), ts.end(), [](const TensorSpec *a, const TensorSpec *b) {
    return a->bytes > b->bytes;
  });
  appendf(msg,
          "cnnrt: the memory plan: arena %.1f MiB (batch %d); its "
          "largest buffers:\n",
          spec.arenaBytes / 1048576.0, spec.batch);
  for (size_t i = 0; i < ts.size() && i < 10; ++i)
    appendf(msg, "  %-40s %-10s %14zu bytes (%.1f MiB) at offset %zu\n",
            ts[i]->name, roleEnumerator(ts[i]->role), ts[i]->bytes,
            ts[i]->bytes / 1048576.0, ts[i]->offset);
  msg += "cnnrt: compile with a smaller --batch (cnnc --batch N) or use a "
         "GPU with more memory";
  throw Error(ErrorKind::OutOfMemory, msg);
}

const char *cudnnErr(cudnnStatus_t s) { return cudnnGetErrorString(s); }

const char *cublasErr(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH:
    return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR:
    return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  default:
    return "cuBLAS error";
  }
}
Context::Context(const ModelSpec &spec, const ContextOptions &opts)
    : spec_(spec), opts_(opts), impl_(new Impl) {
  // A constructor that throws runs no destructor: give back what it got.
  try {
    init();
  } catch (...) {
    release();
    throw;
  }
}

void Context::init() {
  const ModelSpec &spec = spec_;
  // Per-pixel labels (a dense-prediction step, N x H x W) are read whole by
  // the loaders (masks) and the C API's staging since session 23.
  requireGPU();
  // One process per GPU in data-parallel runs: the launcher's local rank
  // picks the device (Distributed.h); otherwise device 0.
  int device = 0;
  {
    LaunchInfo li;
    std::string err;
    if (resolveLaunch([](const char *k) { return std::getenv(k); }, "", li,
                      err) &&
        li.distributed())
      device = li.localRank;
    // A rank whose local rank has no GPU: say so, not "invalid device
    // ordinal" from cudaSetDevice.
    int visible = 0;
    if (cudaGetDeviceCount(&visible) == cudaSuccess && device >= visible)
      throw Error(ErrorKind::Invalid,
                  "cnnrt: error: rank " + std::to_string(li.rank) + " of " +
                      std::to_string(li.worldSize) + " needs GPU " +
                      std::to_string(device) + " (its local rank) but " +
                      std::to_string(visible) + " GPU(s) are visible");
  }
  CNNRT_CUDA(*this, cudaSetDevice(device), "runtime init");
  // The baseline of the reported peak memory: this GPU's use once the CUDA
  // context exists (cudaFree(nullptr) creates it), before the arena.
  CNNRT_CUDA(*this, cudaFree(nullptr), "runtime init");
  {
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaMemGetInfo(&freeBytes, &totalBytes) == cudaSuccess)
      impl_->memoryInUseAtStart = totalBytes - freeBytes;
  }
  cudaDeviceProp prop;
  CNNRT_CUDA(*this, cudaGetDeviceProperties(&prop, device), "runtime init");
  impl_->gpuName = prop.name;
  for (char &c : impl_->gpuName)
    if (c == ' ' || c == '|' || c == '\t')
      c = '_';
  impl_->cudnnVer = std::to_string(cudnnGetVersion());
  CNNRT_CUDA(*this, cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
             "runtime init");
  CNNRT_CUDA(*this,
             cudaStreamCreateWithFlags(&copyStream_, cudaStreamNonBlocking),
             "runtime init");
  cudnnStatus_t s = cudnnCreate(&impl_->cudnn);
  if (s == CUDNN_STATUS_NOT_INITIALIZED)
    throw Error(ErrorKind::NoGPU,
                std::string("cnnrt: no CUDA GPU available (cudnnCreate: ") +
                    cudnnErr(s) + ")");
  CNNRT_CUDNN(*this, s, "runtime init (cudnnCreate)");
  CNNRT_CUDNN(*this, cudnnSetStream(impl_->cudnn, stream_), "runtime init");
  CNNRT_CUBLAS(*this, cublasLtCreate(&impl_->lt), "runtime init");
  impl_->matmulWsLimit = opts_.matmulWorkspaceBytes;
  impl_->tuneWsLimit = opts_.tuneWorkspaceBytes;

  size_t bytes = std::max<size_t>(spec.arenaBytes, 256);
  if (cudaMalloc(&arena_, bytes) != cudaSuccess)
    throwOutOfMemory(spec, "the arena", bytes);
  CNNRT_CUDA(*this, cudaMemset(arena_, 0, bytes), "runtime init");
  CNNRT_CUDA(*this, cudaDeviceSynchronize(), "runtime init");
  if (spec.workspaceBytes > 0) {
    if (spec.workspaceOffset % 256 != 0 ||
        spec.workspaceOffset + spec.workspaceBytes > bytes)
      fail("runtime init", "the planned workspace [" +
                               std::to_string(spec.workspaceOffset) + ", +" +
                               std::to_string(spec.workspaceBytes) +
                               ") is not an aligned region of the arena (" +
                               std::to_string(bytes) + " bytes)");
    impl_->workspace = arena_ + spec.workspaceOffset;
    impl_->workspaceBytes = spec.workspaceBytes;
    impl_->plannedWorkspace = true;
    impl_->workspaceIsCap = spec.workspaceIsCap;
    impl_->matmulWsLimit = std::min(impl_->matmulWsLimit, spec.workspaceBytes);
  }
  impl_->cache.load(opts_.algoCachePath);
}

namespace {
std::atomic<bool> stuck{false}, exitOnStuck{false};
} // namespace

void markDeviceStuck() { stuck = true; }
bool deviceStuck() { return stuck; }
void setExitOnStuckDevice(bool exit) { exitOnStuck = exit; }
bool exitOnStuckDevice() { return exitOnStuck; }

void Context::release() {
  if (!impl_)
    return;
  if (deviceStuck()) {
    // An aborted collective may never drain: any free or destroy would
    // wait for it. The memory goes back with the process.
    impl_ = nullptr;
    arena_ = nullptr;
    stream_ = copyStream_ = nullptr;
    return;
  }
  cudaDeviceSynchronize();
  releaseConvolutions(*impl_);
  releaseMatmuls(*impl_);
  if (!impl_->plannedWorkspace)
    cudaFree(impl_->workspace);
  cudaFree(impl_->overflowWs);
  cudaFree(arena_);
  cudaFree(impl_->reductionScratch);
  if (impl_->lt)
    cublasLtDestroy(impl_->lt);
  if (impl_->cudnn)
    cudnnDestroy(impl_->cudnn);
  if (stream_)
    cudaStreamDestroy(stream_);
  if (copyStream_)
    cudaStreamDestroy(copyStream_);
  delete impl_;
  impl_ = nullptr;
  arena_ = nullptr;
  stream_ = copyStream_ = nullptr;
}

Context::~Context() { release(); }

void Context::fail(const char *loc, const std::string &what, ErrorKind kind) {
  throw Error(kind, std::string("cnnrt: error at ") + (loc ? loc : "?") + ": " +
                        what);
}

void Context::check(cudaError_t e, const char *loc) {
  // Running out of memory anywhere (input pipeline, a library's workspace)
  // is reported like the arena's: the plan's largest buffers, exit 2.
  if (e == cudaErrorMemoryAllocation)
    throwOutOfMemory(spec_, loc ? loc : "GPU memory", 0);
  if (e != cudaSuccess)
    fail(loc, cudaGetErrorString(e), ErrorKind::Cuda);
}

void Context::checkLaunch(const char *loc) {
  profileMark(*this, loc, nullptr);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    fail(loc, std::string("kernel launch: ") + cudaGetErrorString(e),
         ErrorKind::Cuda);
  if (opts_.syncCheck) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(stream_, &st);
    if (st == cudaStreamCaptureStatusNone) {
      e = cudaStreamSynchronize(stream_);
      if (e != cudaSuccess)
        fail(loc, std::string("kernel execution: ") + cudaGetErrorString(e),
             ErrorKind::Cuda);
    }
  }
}

void *Context::cudnnHandle() const { return impl_->cudnn; }
void *Context::cublasLtHandle() const { return impl_->lt; }
void *Context::workspace() const { return impl_->workspace; }
size_t Context::workspaceBytes() const { return impl_->workspaceBytes; }

double *Context::reductionScratch(size_t doubles) {
  Impl &I = *impl_;
  if (doubles <= I.reductionScratchDoubles)
    return I.reductionScratch;
  // Allocating (or freeing) is not capturable; the generated prepareModel
  // reserves the largest need first, so only a mismatch gets here.
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(stream_, &st);
  if (st != cudaStreamCaptureStatusNone)
    fail("reduction scratch",
         "a step asked for " + std::to_string(doubles) +
             " doubles of reduction scratch while the stream is captured; "
             "prepare reserved " +
             std::to_string(I.reductionScratchDoubles));
  if (I.reductionScratch) {
    // Kernels of an earlier step may still read the old buffer.
    check(cudaStreamSynchronize(stream_), "reduction scratch");
    cudaFree(I.reductionScratch);
    I.reductionScratch = nullptr;
    I.reductionScratchDoubles = 0;
  }
  void *p = nullptr;
  if (cudaMalloc(&p, doubles * sizeof(double)) != cudaSuccess)
    throwOutOfMemory(spec_, "the reduction scratch", doubles * sizeof(double));
  I.reductionScratch = static_cast<double *>(p);
  I.reductionScratchDoubles = doubles;
  return I.reductionScratch;
}

void Context::finishPrepare() {
  Impl &I = *impl_;
  for (int s = 0; s < 3; ++s) {
    cudaFree(I.scratch[s]);
    I.scratch[s] = nullptr;
    I.scratchBytes[s] = 0;
  }
  cudaFree(I.tuneWs);
  I.tuneWs = nullptr;
  I.tuneWsBytes = 0;
  if (I.plannedWorkspace && I.neededWorkspace > I.workspaceBytes)
    fail("prepare", "an algorithm needs " + std::to_string(I.neededWorkspace) +
                        " workspace bytes, more than the " +
                        std::to_string(I.workspaceBytes) + " planned");
  if (!I.plannedWorkspace && I.neededWorkspace > I.workspaceBytes) {
    cudaFree(I.workspace);
    I.workspace = nullptr;
    if (cudaMalloc(&I.workspace, I.neededWorkspace) != cudaSuccess)
      throwOutOfMemory(spec_, "the algorithm workspace", I.neededWorkspace);
    I.workspaceBytes = I.neededWorkspace;
  }
  if (I.neededOverflow > I.overflowWsBytes) {
    cudaFree(I.overflowWs);
    I.overflowWs = nullptr;
    if (cudaMalloc(&I.overflowWs, I.neededOverflow) != cudaSuccess)
      throwOutOfMemory(spec_, "the workspace of the convolution plans beyond "
                              "the planned one",
                       I.neededOverflow);
    I.overflowWsBytes = I.neededOverflow;
  }
  if (I.neededPad > I.padBytes) {
    cudaFree(I.padBuf);
    I.padBuf = nullptr;
    if (cudaMalloc(&I.padBuf, I.neededPad) != cudaSuccess)
      throwOutOfMemory(spec_, "the padding scratch buffer", I.neededPad);
    I.padBytes = I.neededPad;
  }
  I.prepared = true;
  chooseFusedConvForms(*this);
  I.cache.save(opts_.algoCachePath);
  CNNRT_CUDA(*this, cudaDeviceSynchronize(), "prepare");
}

size_t Context::memoryInUseAtStart() const {
  return impl_->memoryInUseAtStart;
}

} // namespace cnnrt
