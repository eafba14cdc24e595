//===- CApi.cu - C API for embedding a generated model --------------------===//
//
// The boundary where the runtime's errors (cnnrt::Error, thrown anywhere in
// the Context, the session code or the generated step) become a status: no
// exception crosses into C, no failure ends the embedding process. Each
// function that can fail runs its body under `guarded`, which returns -1
// and keeps the message (cnnrt_last_error) and its kind
// (cnnrt_last_error_code).
//

#include "Session.h"
#include "cnnrt/Distributed.h"
#include "cnnrt/cnnrt_c.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

using namespace cnnrt;

// cnnrt_last_error_code's values are ErrorKind's.
static_assert(CNNRT_ERROR_INVALID == int(ErrorKind::Invalid) &&
                  CNNRT_ERROR_NO_GPU == int(ErrorKind::NoGPU) &&
                  CNNRT_ERROR_OUT_OF_MEMORY == int(ErrorKind::OutOfMemory) &&
                  CNNRT_ERROR_CUDA == int(ErrorKind::Cuda) &&
                  CNNRT_ERROR_CUDNN == int(ErrorKind::Cudnn) &&
                  CNNRT_ERROR_CUBLAS == int(ErrorKind::Cublas) &&
                  CNNRT_ERROR_CONFIG == int(ErrorKind::Config) &&
                  CNNRT_ERROR_DATA_PARALLEL == int(ErrorKind::DataParallel),
              "cnnrt_c.h's error codes and cnnrt::ErrorKind differ");

struct cnnrt_session {
  std::unique_ptr<Context> ctx;
  /// Enqueues the steps: captured on its third call in this process.
  std::unique_ptr<StepRunner> runner;
  int64_t step = 0;
  uint8_t *dImg = nullptr;
  int32_t *dLab = nullptr;
  size_t imgBytes = 0;
  // Staging for host float32 images / int64 labels (allocated on first use).
  float *dImgF32 = nullptr;
  int64_t *dLab64 = nullptr;
  float *dLogits = nullptr;
  // Orders the session's stream after / before the caller's stream.
  cudaEvent_t callerReady = nullptr, sessionDone = nullptr;
  std::vector<const TensorSpec *> state; ///< persistent tensors, spec order
  bool stateBroadcast = false; ///< data parallel: rank 0's state sent once
};

static thread_local std::string gLastError;
static thread_local int gLastErrorCode = 0;

static int setError(const std::string &e, ErrorKind kind = ErrorKind::Invalid) {
  gLastError = e;
  gLastErrorCode = static_cast<int>(kind);
  return -1;
}

static void clearError() {
  gLastError.clear();
  gLastErrorCode = 0;
}

/// Runs `body` (which returns 0 or a setError status) with the last error
/// cleared; a runtime error thrown inside becomes -1 and the last error.
/// An error thrown while a step was being captured into a CUDA graph has
/// already ended that capture (runStep).
template <typename Body> static int guarded(Body &&body) {
  clearError();
  try {
    return body();
  } catch (const Error &e) {
    return setError(e.what(), e.kind());
  } catch (const std::bad_alloc &) {
    return setError("cnnrt: out of host memory", ErrorKind::OutOfMemory);
  } catch (const std::exception &e) {
    return setError(std::string("cnnrt: error: ") + e.what());
  } catch (...) { // nothing may unwind into the C caller
    return setError("cnnrt: error: an unknown exception");
  }
}

namespace {
/// Labels per batch: one per image, or N x H x W of a dense-prediction step.
size_t labelsOf(const cnnrt::ModelSpec &spec) {
  const cnnrt::TensorSpec *lab =
      cnnrt::findTensor(spec, cnnrt::Role::InputLabel);
  return lab ? (size_t)cnnrt::labelCount(*lab) : (size_t)spec.batch;
}
} // namespace

namespace {
int runStep(cnnrt_session *s, float lr);
int setBatch(cnnrt_session *s, const uint8_t *images, const int32_t *labels);
} // namespace

extern "C" {

const char *cnnrt_last_error(void) { return gLastError.c_str(); }

int cnnrt_last_error_code(void) { return gLastErrorCode; }

cnnrt_session *cnnrt_create(const void *model_spec, const char *weights_path,
                            int use_graph) {
  clearError();
  if (!model_spec) {
    setError("cnnrt_create: null model spec");
    return nullptr;
  }
  const ModelSpec &spec = *static_cast<const ModelSpec *>(model_spec);
  // A session that fails half-way gives back what it got.
  std::unique_ptr<cnnrt_session, void (*)(cnnrt_session *)> s(new cnnrt_session,
                                                              cnnrt_destroy);
  int rc = guarded([&] {
    // The CNNRT_* settings first, as trainMain does: a bad one is reported
    // with or without a GPU. No usable GPU is an error (ErrorKind::NoGPU)
    // from the Context.
    const ContextOptions opts = ContextOptions::fromEnv();
    s->ctx.reset(new Context(spec, opts));
    s->runner = std::make_unique<StepRunner>(use_graph != 0);
    if (use_graph)
      noteUncapturedStep(*s->ctx, spec);
    if (spec.prepare)
      spec.prepare(*s->ctx);
    s->ctx->finishPrepare();
    s->imgBytes = (size_t)spec.batch * spec.imageC * spec.imageH * spec.imageW;
    if (cudaMalloc(&s->dImg, s->imgBytes) != cudaSuccess ||
        cudaMalloc(&s->dLab, labelsOf(spec) * sizeof(int32_t)) != cudaSuccess)
      return setError(
          "cnnrt_create: out of GPU memory for the input staging buffers",
          ErrorKind::OutOfMemory);
    if (cudaEventCreateWithFlags(&s->callerReady, cudaEventDisableTiming) !=
            cudaSuccess ||
        cudaEventCreateWithFlags(&s->sessionDone, cudaEventDisableTiming) !=
            cudaSuccess)
      return setError("cnnrt_create: cannot create CUDA events",
                      ErrorKind::Cuda);
    for (int i = 0; i < spec.numTensors; ++i) {
      if (persistent(spec.tensors[i].role))
        s->state.push_back(&spec.tensors[i]);
    }
    return 0;
  });
  if (rc != 0)
    return nullptr;
  if (weights_path && cnnrt_load(s.get(), weights_path) != 0)
    return nullptr;
  return s.release();
}

int cnnrt_load(cnnrt_session *s, const char *path) {
  return guarded([&] {
    std::vector<TensorEntry> entries;
    std::string err;
    if (!readTensorFile(path, entries, err) ||
        !loadStateIntoArena(*s->ctx, entries, path, err))
      return setError(err);
    if (const TensorEntry *st = findEntry(entries, "__step__"))
      if (st->dtype == DType::I64 && st->numel() == 1)
        s->step = st->as<int64_t>()[0];
    return 0;
  });
}

int cnnrt_set_batch(cnnrt_session *s, const uint8_t *images,
                    const int32_t *labels) {
  return guarded([&] { return setBatch(s, images, labels); });
}

int cnnrt_step(cnnrt_session *s, float lr) {
  return guarded([&] { return runStep(s, lr); });
}

} // extern "C"

namespace {
int setBatch(cnnrt_session *s, const uint8_t *images, const int32_t *labels) {
  Context &ctx = *s->ctx;
  // Stream-ordered: the previous step has consumed the staging buffers
  // (launchInputConvert already ran) before these copies execute.
  ctx.check(cudaMemcpyAsync(s->dImg, images, s->imgBytes,
                            cudaMemcpyHostToDevice, ctx.stream()),
            "cnnrt_set_batch");
  if (labels)
    ctx.check(cudaMemcpyAsync(s->dLab, labels,
                              labelsOf(ctx.spec()) * sizeof(int32_t),
                              cudaMemcpyHostToDevice, ctx.stream()),
              "cnnrt_set_batch");
  launchInputConvert(ctx, s->dImg, s->dLab);
  // Pageable host memory: make sure the caller may reuse its buffers.
  ctx.check(cudaStreamSynchronize(ctx.stream()), "cnnrt_set_batch");
  return 0;
}

/// This process runs a pipeline stage: CNNC_PIPELINE_STAGES (set by the
/// executable's trainPipelineMain and by the Python entry) is 2 or more.
bool pipelineStage() {
  const char *e = std::getenv("CNNC_PIPELINE_STAGES");
  return e && std::atoi(e) >= 2;
}

/// Enqueues one step on the session's stream; the third step of a session
/// with use_graph is captured into a CUDA graph, later ones replay it.
int runStep(cnnrt_session *s, float lr) {
  Context &ctx = *s->ctx;
  const ModelSpec &spec = ctx.spec();
  // A data-parallel step under torchrun (the Python entry): before the
  // first step every rank takes rank 0's state (weights, BN statistics,
  // optimizer state), as DDP broadcasts the module at construction. Not for
  // a pipeline stage (CNNC_PIPELINE_STAGES, cnnrt_pipeline_stage_spec): the
  // world's ranks hold different stages' tensors, and each stage starts
  // from its own, as the executable's stages load theirs.
  if (!s->stateBroadcast && spec.dist && spec.dist->launch().worldSize > 1 &&
      !pipelineStage()) {
    for (const TensorSpec *t : s->state)
      spec.dist->broadcast(ctx, ctx.arena() + t->offset, t->bytes);
  }
  s->stateBroadcast = true;
  ++s->step;
  launchSetScalars(ctx, lr, s->step);
  s->runner->enqueue(ctx, spec, 3);
  return 0;
}

/// The session's stream waits for the work queued so far on `caller` (the
/// caller's stream, e.g. PyTorch's current stream). Null is CUDA's legacy
/// default stream, PyTorch's default current stream: the session's stream
/// is non-blocking, so it does not synchronize with it implicitly and the
/// order must be made explicit for it too.
void waitForCaller(cnnrt_session *s, cudaStream_t caller) {
  Context &ctx = *s->ctx;
  ctx.check(cudaEventRecord(s->callerReady, caller), "cnnrt: caller stream");
  ctx.check(cudaStreamWaitEvent(ctx.stream(), s->callerReady, 0),
            "cnnrt: caller stream");
}

/// Work queued on `caller` from now on waits for the session's stream.
void signalCaller(cnnrt_session *s, cudaStream_t caller) {
  Context &ctx = *s->ctx;
  ctx.check(cudaEventRecord(s->sessionDone, ctx.stream()),
            "cnnrt: caller stream");
  ctx.check(cudaStreamWaitEvent(caller, s->sessionDone, 0),
            "cnnrt: caller stream");
}

/// Stages float32 images / int64 labels (host memory: one async copy each
/// into device staging buffers) and converts them into the arena's input
/// tensors on the session's stream.
int stageInputs(cnnrt_session *s, const float *images, const int64_t *labels,
                bool onDevice) {
  Context &ctx = *s->ctx;
  const ModelSpec &spec = ctx.spec();
  size_t n = (size_t)spec.batch * spec.imageC * spec.imageH * spec.imageW;
  const size_t numLabels = labelsOf(spec);
  if (!onDevice) {
    if (!s->dImgF32 &&
        (cudaMalloc(&s->dImgF32, n * sizeof(float)) != cudaSuccess ||
         cudaMalloc(&s->dLab64, numLabels * sizeof(int64_t)) != cudaSuccess))
      return setError("out of GPU memory for the input staging buffers",
                      ErrorKind::OutOfMemory);
    if (images) {
      ctx.check(cudaMemcpyAsync(s->dImgF32, images, n * sizeof(float),
                                cudaMemcpyHostToDevice, ctx.stream()),
                "copying the input images");
      images = s->dImgF32;
    }
    if (labels) {
      ctx.check(cudaMemcpyAsync(s->dLab64, labels, numLabels * sizeof(int64_t),
                                cudaMemcpyHostToDevice, ctx.stream()),
                "copying the labels");
      labels = s->dLab64;
    }
  }
  launchInputConvertF32(ctx, images, labels);
  return 0;
}

const TensorSpec *findState(cnnrt_session *s, const char *name) {
  for (const TensorSpec *t : s->state)
    if (std::strcmp(t->name, name) == 0)
      return t;
  return nullptr;
}

int64_t numel(const TensorSpec &t) {
  int64_t n = 1;
  for (int r = 0; r < t.rank; ++r)
    n *= t.dims[r];
  return n;
}
} // namespace

extern "C" {

int cnnrt_input_shape(const cnnrt_session *s, int64_t *dims, int *rank) {
  const ModelSpec &spec = s->ctx->spec();
  dims[0] = spec.batch;
  dims[1] = spec.imageC;
  dims[2] = spec.imageH;
  dims[3] = spec.imageW;
  *rank = 4;
  return 0;
}

int cnnrt_labels_shape(const cnnrt_session *s, int64_t *dims, int *rank) {
  const ModelSpec &spec = s->ctx->spec();
  const TensorSpec *t = findTensor(spec, Role::InputLabel);
  *rank = t ? t->rank : 1;
  dims[0] = spec.batch;
  for (int i = 1; t && i < t->rank && i < 4; ++i)
    dims[i] = t->dims[i];
  return 0;
}

/// Elements of the logits evalStep writes: N x C, or N x C x H x W for a
/// dense model (its Logits tensor); N x C when there is none (eval refuses).
static int64_t logitsElements(const ModelSpec &spec) {
  const TensorSpec *t = findTensor(spec, Role::Logits);
  if (!t)
    return (int64_t)spec.batch * spec.numClasses;
  int64_t n = 1;
  for (int i = 0; i < t->rank; ++i)
    n *= t->dims[i];
  return n;
}

int cnnrt_output_shape(const cnnrt_session *s, int64_t *dims, int *rank) {
  const ModelSpec &spec = s->ctx->spec();
  const TensorSpec *t = findTensor(spec, Role::Logits);
  *rank = t ? t->rank : 2;
  dims[0] = spec.batch;
  dims[1] = spec.numClasses;
  for (int i = 2; t && i < t->rank && i < 4; ++i)
    dims[i] = t->dims[i];
  return 0;
}

int64_t cnnrt_num_classes(const cnnrt_session *s) {
  return s->ctx->spec().numClasses;
}

int cnnrt_train_step(cnnrt_session *s, const float *images,
                     const int64_t *labels, int on_device, float lr,
                     void *stream) {
  return guarded([&] {
    if (!images || !labels)
      return setError("cnnrt_train_step: null images or labels");
    cudaStream_t caller = static_cast<cudaStream_t>(stream);
    waitForCaller(s, caller);
    if (stageInputs(s, images, labels, on_device != 0) != 0)
      return -1;
    if (runStep(s, lr) != 0)
      return -1;
    signalCaller(s, caller);
    return 0;
  });
}

int cnnrt_loss_to_device(cnnrt_session *s, float *dst, void *stream) {
  return guarded([&] {
    if (!dst)
      return setError("cnnrt_loss_to_device: null destination");
    const TensorSpec *t = findTensor(s->ctx->spec(), Role::Loss);
    if (!t)
      return setError("the model has no Loss tensor");
    cudaStream_t caller = static_cast<cudaStream_t>(stream);
    // dst may be memory the caller's stream just freed and reallocated.
    waitForCaller(s, caller);
    launchToF32(*s->ctx, *t, dst, 1);
    signalCaller(s, caller);
    return 0;
  });
}

int cnnrt_eval_input(cnnrt_session *s, const float *images, int on_device,
                     float *logits, int logits_on_device, void *stream) {
  return guarded([&] {
    Context &ctx = *s->ctx;
    const ModelSpec &spec = ctx.spec();
    const TensorSpec *t = findTensor(spec, Role::Logits);
    if (!spec.evalStep || !t)
      return setError("the model has no evalStep or no Logits tensor");
    cudaStream_t caller = static_cast<cudaStream_t>(stream);
    waitForCaller(s, caller);
    if (stageInputs(s, images, nullptr, on_device != 0) != 0)
      return -1;
    spec.evalStep(ctx);
    const int64_t n = logitsElements(spec);
    float *dst = logits;
    if (!logits_on_device) {
      if (!s->dLogits &&
          cudaMalloc(&s->dLogits, n * sizeof(float)) != cudaSuccess)
        return setError("out of GPU memory for the logits",
                        ErrorKind::OutOfMemory);
      dst = s->dLogits;
    }
    launchToF32(ctx, *t, dst, n);
    if (!logits_on_device) {
      ctx.check(cudaMemcpyAsync(logits, dst, n * sizeof(float),
                                cudaMemcpyDeviceToHost, ctx.stream()),
                "cnnrt_eval_input");
      ctx.check(cudaStreamSynchronize(ctx.stream()), "cnnrt_eval_input");
    }
    signalCaller(s, caller);
    return 0;
  });
}

int cnnrt_num_state(const cnnrt_session *s) { return (int)s->state.size(); }

const char *cnnrt_state_name(const cnnrt_session *s, int i) {
  return i >= 0 && i < (int)s->state.size() ? s->state[i]->name : nullptr;
}

int cnnrt_state_role(const cnnrt_session *s, int i) {
  if (i < 0 || i >= (int)s->state.size())
    return -1;
  switch (s->state[i]->role) {
  case Role::Param:
    return CNNRT_STATE_PARAM;
  case Role::Buffer:
    return CNNRT_STATE_BUFFER;
  case Role::OptState:
    return CNNRT_STATE_OPT;
  default:
    return CNNRT_STATE_LOSS_SCALE;
  }
}

int cnnrt_state_shape(const cnnrt_session *s, int i, int64_t *dims, int *rank) {
  return guarded([&] {
    if (i < 0 || i >= (int)s->state.size())
      return setError("state index out of range");
    *rank = s->state[i]->rank;
    for (int r = 0; r < *rank; ++r)
      dims[r] = s->state[i]->dims[r];
    return 0;
  });
}

int cnnrt_read_state(cnnrt_session *s, const char *name, float *out) {
  return guarded([&] {
    const TensorSpec *t = findState(s, name);
    if (!t)
      return setError(std::string("no state tensor '") + name + "'");
    Context &ctx = *s->ctx;
    ctx.check(cudaStreamSynchronize(ctx.stream()), "cnnrt_read_state");
    int64_t n = numel(*t);
    std::vector<char> buf(n * dtypeSize(t->dtype));
    if (storedKRSC(*t)) {
      // Stored as the convolution reads it: read it back in the public form.
      std::vector<char> stored(t->bytes);
      ctx.check(cudaMemcpy(stored.data(), ctx.arena() + t->offset, t->bytes,
                           cudaMemcpyDeviceToHost),
                "cnnrt_read_state");
      publicFromStored(*t, dtypeSize(t->dtype), stored.data(), buf.data());
    } else
      ctx.check(cudaMemcpy(buf.data(), ctx.arena() + t->offset, buf.size(),
                           cudaMemcpyDeviceToHost),
                "cnnrt_read_state");
    for (int64_t i = 0; i < n; ++i)
      out[i] = t->dtype == DType::F16
                   ? __half2float(reinterpret_cast<__half *>(buf.data())[i])
                   : reinterpret_cast<float *>(buf.data())[i];
    return 0;
  });
}

int cnnrt_write_state(cnnrt_session *s, const char *name, const float *in) {
  return guarded([&] {
    const TensorSpec *t = findState(s, name);
    if (!t)
      return setError(std::string("no state tensor '") + name + "'");
    if (t->dtype != DType::F32 && t->dtype != DType::F16)
      return setError(std::string("state tensor '") + name +
                      "' is not floating point");
    Context &ctx = *s->ctx;
    int64_t n = numel(*t);
    std::vector<char> buf(n * dtypeSize(t->dtype));
    for (int64_t i = 0; i < n; ++i)
      if (t->dtype == DType::F16)
        reinterpret_cast<__half *>(buf.data())[i] = __float2half(in[i]);
      else
        reinterpret_cast<float *>(buf.data())[i] = in[i];
    if (storedKRSC(*t)) {
      std::vector<char> stored(t->bytes);
      storedFromPublic(*t, dtypeSize(t->dtype), buf.data(), stored.data());
      buf.swap(stored);
    }
    // The arena is only touched by the session's stream: wait for it, then a
    // synchronous copy (the caller's buffer may be reused on return).
    ctx.check(cudaStreamSynchronize(ctx.stream()), "cnnrt_write_state");
    ctx.check(cudaMemcpy(ctx.arena() + t->offset, buf.data(), buf.size(),
                         cudaMemcpyHostToDevice),
              "cnnrt_write_state");
    return 0;
  });
}

int cnnrt_set_scalar_state(cnnrt_session *s, const char *name, float value) {
  return guarded([&] {
    const TensorSpec *t = findState(s, name);
    if (!t)
      return setError(std::string("no state tensor '") + name + "'");
    if ((t->dtype != DType::F32 && t->dtype != DType::F16) || numel(*t) != 1)
      return setError(std::string("state tensor '") + name +
                      "' is not a one-element floating-point tensor");
    launchSetScalar(*s->ctx, *t, value);
    return 0;
  });
}

void cnnrt_set_step_count(cnnrt_session *s, int64_t step) { s->step = step; }

int cnnrt_set_device(int device) {
  return guarded([&] {
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
      return setError(std::string("cnnrt_set_device(") +
                          std::to_string(device) +
                          "): " + cudaGetErrorString(e),
                      ErrorKind::Cuda);
    return 0;
  });
}

int cnnrt_loss(cnnrt_session *s, float *loss) {
  return guarded([&] {
    const TensorSpec *t = findTensor(s->ctx->spec(), Role::Loss);
    if (!t)
      return setError("the model has no Loss tensor");
    *loss = readScalar(*s->ctx, *t);
    return 0;
  });
}

int cnnrt_eval(cnnrt_session *s, const uint8_t *images, float *logits) {
  return guarded([&] {
    Context &ctx = *s->ctx;
    const ModelSpec &spec = ctx.spec();
    const TensorSpec *t = findTensor(spec, Role::Logits);
    if (!spec.evalStep || !t)
      return setError("the model has no evalStep or no Logits tensor");
    setBatch(s, images, nullptr);
    spec.evalStep(ctx);
    const size_t n = (size_t)logitsElements(spec);
    std::vector<char> buf(n * dtypeSize(t->dtype));
    ctx.check(cudaMemcpyAsync(buf.data(), ctx.arena() + t->offset, buf.size(),
                              cudaMemcpyDeviceToHost, ctx.stream()),
              "cnnrt_eval");
    ctx.check(cudaStreamSynchronize(ctx.stream()), "cnnrt_eval");
    for (size_t i = 0; i < n; ++i)
      logits[i] = t->dtype == DType::F16
                      ? __half2float(reinterpret_cast<__half *>(buf.data())[i])
                      : reinterpret_cast<float *>(buf.data())[i];
    return 0;
  });
}

int cnnrt_save(cnnrt_session *s, const char *path) {
  return guarded([&] {
    std::vector<TensorEntry> entries = readStateFromArena(*s->ctx);
    TensorEntry st = TensorEntry::zeros("__step__", DType::I64, {1});
    st.as<int64_t>()[0] = s->step;
    entries.push_back(std::move(st));
    std::string err;
    if (!writeTensorFileAtomic(path, entries, err))
      return setError(err);
    return 0;
  });
}

int64_t cnnrt_step_count(const cnnrt_session *s) { return s->step; }

void cnnrt_destroy(cnnrt_session *s) {
  if (!s)
    return;
  if (s->ctx) // null when cnnrt_create failed before the Context existed
    cudaStreamSynchronize(s->ctx->stream());
  s->runner.reset(); // its graphs, before the Context
  cudaFree(s->dImg);
  cudaFree(s->dLab);
  cudaFree(s->dImgF32);
  cudaFree(s->dLab64);
  cudaFree(s->dLogits);
  if (s->callerReady)
    cudaEventDestroy(s->callerReady);
  if (s->sessionDone)
    cudaEventDestroy(s->sessionDone);
  delete s;
}

} // extern "C"
