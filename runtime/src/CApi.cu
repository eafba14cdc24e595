//===- CApi.cu - C API for embedding a generated model --------------------===//

#include "Session.h"
#include "cnnrt/cnnrt_c.h"

#include <cmath>
#include <cstring>
#include <memory>

using namespace cnnrt;

struct cnnrt_session {
  std::unique_ptr<Context> ctx;
  bool useGraph = true;
  int64_t step = 0;
  int64_t stepsHere = 0;
  uint8_t *dImg = nullptr;
  int32_t *dLab = nullptr;
  size_t imgBytes = 0;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

static thread_local std::string gLastError;

static int setError(const std::string &e) {
  gLastError = e;
  return -1;
}

extern "C" {

const char *cnnrt_last_error(void) { return gLastError.c_str(); }

cnnrt_session *cnnrt_create(const void *model_spec, const char *weights_path,
                            int use_graph) {
  gLastError.clear();
  if (!model_spec) {
    setError("cnnrt_create: null model spec");
    return nullptr;
  }
  const ModelSpec &spec = *static_cast<const ModelSpec *>(model_spec);
  std::unique_ptr<cnnrt_session> s(new cnnrt_session);
  s->ctx.reset(new Context(spec));
  s->useGraph = use_graph != 0;
  if (spec.prepare)
    spec.prepare(*s->ctx);
  s->ctx->finishPrepare();
  s->imgBytes = (size_t)spec.batch * spec.imageC * spec.imageH * spec.imageW;
  if (cudaMalloc(&s->dImg, s->imgBytes) != cudaSuccess ||
      cudaMalloc(&s->dLab, spec.batch * sizeof(int32_t)) != cudaSuccess) {
    setError("cnnrt_create: out of GPU memory for the input staging buffers");
    return nullptr;
  }
  if (weights_path && cnnrt_load(s.get(), weights_path) != 0)
    return nullptr;
  return s.release();
}

int cnnrt_load(cnnrt_session *s, const char *path) {
  std::vector<TensorEntry> entries;
  std::string err;
  if (!readTensorFile(path, entries, err) ||
      !loadStateIntoArena(*s->ctx, entries, path, err))
    return setError(err);
  if (const TensorEntry *st = findEntry(entries, "__step__"))
    if (st->dtype == DType::I64 && st->numel() == 1)
      s->step = st->as<int64_t>()[0];
  return 0;
}

int cnnrt_set_batch(cnnrt_session *s, const uint8_t *images,
                    const int32_t *labels) {
  Context &ctx = *s->ctx;
  int batch = ctx.spec().batch;
  // Stream-ordered: the previous step has consumed the staging buffers
  // (launchInputConvert already ran) before these copies execute.
  ctx.check(cudaMemcpyAsync(s->dImg, images, s->imgBytes,
                            cudaMemcpyHostToDevice, ctx.stream()),
            "cnnrt_set_batch");
  if (labels)
    ctx.check(cudaMemcpyAsync(s->dLab, labels, batch * sizeof(int32_t),
                              cudaMemcpyHostToDevice, ctx.stream()),
              "cnnrt_set_batch");
  launchInputConvert(ctx, s->dImg, s->dLab);
  // Pageable host memory: make sure the caller may reuse its buffers.
  ctx.check(cudaStreamSynchronize(ctx.stream()), "cnnrt_set_batch");
  return 0;
}

int cnnrt_step(cnnrt_session *s, float lr) {
  Context &ctx = *s->ctx;
  const ModelSpec &spec = ctx.spec();
  ++s->step;
  ++s->stepsHere;
  launchSetScalars(ctx, lr, s->step);
  if (s->useGraph && s->stepsHere == 3 && !s->exec) {
    ctx.check(
        cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeRelaxed),
        "CUDA graph capture");
    spec.trainStep(ctx);
    ctx.check(cudaStreamEndCapture(ctx.stream(), &s->graph),
              "CUDA graph capture");
    ctx.check(cudaGraphInstantiate(&s->exec, s->graph, 0),
              "CUDA graph instantiate");
  }
  if (s->exec)
    ctx.check(cudaGraphLaunch(s->exec, ctx.stream()), "CUDA graph launch");
  else
    spec.trainStep(ctx);
  return 0;
}

int cnnrt_loss(cnnrt_session *s, float *loss) {
  const TensorSpec *t = findTensor(s->ctx->spec(), Role::Loss);
  if (!t)
    return setError("the model has no Loss tensor");
  *loss = readScalar(*s->ctx, *t);
  return 0;
}

int cnnrt_eval(cnnrt_session *s, const uint8_t *images, float *logits) {
  Context &ctx = *s->ctx;
  const ModelSpec &spec = ctx.spec();
  const TensorSpec *t = findTensor(spec, Role::Logits);
  if (!spec.evalStep || !t)
    return setError("the model has no evalStep or no Logits tensor");
  cnnrt_set_batch(s, images, nullptr);
  spec.evalStep(ctx);
  size_t n = (size_t)spec.batch * spec.numClasses;
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
}

int cnnrt_save(cnnrt_session *s, const char *path) {
  std::vector<TensorEntry> entries = readStateFromArena(*s->ctx);
  TensorEntry st = TensorEntry::zeros("__step__", DType::I64, {1});
  st.as<int64_t>()[0] = s->step;
  entries.push_back(std::move(st));
  std::string err;
  if (!writeTensorFileAtomic(path, entries, err))
    return setError(err);
  return 0;
}

int64_t cnnrt_step_count(const cnnrt_session *s) { return s->step; }

void cnnrt_destroy(cnnrt_session *s) {
  if (!s)
    return;
  cudaStreamSynchronize(s->ctx->stream());
  if (s->exec)
    cudaGraphExecDestroy(s->exec);
  if (s->graph)
    cudaGraphDestroy(s->graph);
  cudaFree(s->dImg);
  cudaFree(s->dLab);
  delete s;
}

} // extern "C"
