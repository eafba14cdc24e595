//===- Session.cu - input conversion, scalars, state load/save ------------===//

#include "Session.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace cnnrt {

namespace {

template <typename T, typename S>
__global__ void convertImagesKernel(const S *__restrict__ src,
                                    T *__restrict__ dst, int64_t total, int C,
                                    int H, int W, bool nhwc, int Cs,
                                    InputFormat format) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t s = i;
    int c;
    if (nhwc) { // dst is N,H,W,Cs (channels C..Cs-1 zero); src is N,C,H,W
      c = static_cast<int>(i % Cs);
      if (c >= C) {
        dst[i] = T(0.0f);
        continue;
      }
      int64_t x = (i / Cs) % W, y = (i / Cs / W) % H, n = i / Cs / W / H;
      s = ((n * C + c) * H + y) * W + x;
    } else {
      c = static_cast<int>((i / ((int64_t)H * W)) % C);
    }
    float v = sizeof(S) == 1 ? static_cast<float>(src[s]) / 255.0f
                             : static_cast<float>(src[s]);
    // A true division, as the CPU's normalizeBatch (bit-identical inputs).
    if (format.numNorm)
      v = (v - format.mean[c]) / format.std[c];
    dst[i] = T(v);
  }
}

template <typename T>
__global__ void convertImagesF32Kernel(const float *__restrict__ src,
                                       T *__restrict__ dst, int64_t total,
                                       int C, int H, int W, bool nhwc, int Cs) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t s = i;
    if (nhwc) { // dst is N,H,W,Cs (channels C..Cs-1 zero); src is N,C,H,W
      int64_t c = i % Cs, x = (i / Cs) % W, y = (i / Cs / W) % H,
              n = i / Cs / W / H;
      if (c >= C) {
        dst[i] = T(0.0f);
        continue;
      }
      s = ((n * C + c) * H + y) * W + x;
    }
    dst[i] = T(src[s]);
  }
}

__global__ void halfToFloatKernel(const __half *__restrict__ src,
                                  float *__restrict__ dst, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = __half2float(src[i]);
}

// The labels (int32 from the loader, int64 from the C API's f32 entry) in
// the label tensor's type: kind is its DType, I64 (3) or I32.
template <typename L>
__global__ void convertLabelsKernel(const L *__restrict__ src,
                                    void *__restrict__ dst, int n, int kind) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  if (kind == static_cast<int>(DType::I64))
    static_cast<int64_t *>(dst)[i] = src[i];
  else
    static_cast<int32_t *>(dst)[i] = static_cast<int32_t>(src[i]);
}

__global__ void setScalarsKernel(void *lr, int lrKind, float lrValue,
                                 void *step, int stepKind, int64_t stepValue) {
  auto put = [](void *p, int kind, double v) {
    switch (kind) {
    case 0:
      *static_cast<float *>(p) = static_cast<float>(v);
      break;
    case 1:
      *static_cast<__half *>(p) = __float2half(static_cast<float>(v));
      break;
    case 2:
      *static_cast<int32_t *>(p) = static_cast<int32_t>(v);
      break;
    case 3:
      *static_cast<int64_t *>(p) = static_cast<int64_t>(v);
      break;
    }
  };
  if (lr)
    put(lr, lrKind, lrValue);
  if (step)
    put(step, stepKind, static_cast<double>(stepValue));
}

std::string shapeStr(const int64_t *d, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i)
    s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

} // namespace

/// The channels the input tensor holds: the images' own, or in NHWC the
/// padded count the first convolution reads (cnn-input-format; the
/// channels past the images' are written as zeros).
static int storedChannels(const ModelSpec &spec, const TensorSpec &img) {
  if (img.layout == Layout::NHWC && img.rank == 4 && img.dims[3] >= spec.imageC)
    return static_cast<int>(img.dims[3]);
  return spec.imageC;
}

void storedFromPublic(const TensorSpec &t, size_t es, const char *pub,
                      char *stored) {
  convertFilterLayout(t.dims, t.storedC, es, pub, stored, /*toStored=*/true);
}

void publicFromStored(const TensorSpec &t, size_t es, const char *stored,
                      char *pub) {
  convertFilterLayout(t.dims, t.storedC, es, stored, pub, /*toStored=*/false);
}

bool persistent(Role r) {
  return r == Role::Param || r == Role::Buffer || r == Role::OptState ||
         r == Role::LossScale;
}

void launchInputConvert(Context &ctx, const void *dImages,
                        const int32_t *dLabels, const InputFormat &format) {
  const ModelSpec &spec = ctx.spec();
  if (const TensorSpec *img = findTensor(spec, Role::InputImage)) {
    bool nhwc = img->layout == Layout::NHWC;
    int Cs = storedChannels(spec, *img);
    int64_t total = (int64_t)spec.batch * Cs * spec.imageH * spec.imageW;
    unsigned g = std::min<unsigned>(gridFor(total), 65535u * 8);
    auto launch = [&](auto *dst) {
      if (format.f32)
        convertImagesKernel<<<g, 256, 0, ctx.stream()>>>(
            static_cast<const float *>(dImages), dst, total, spec.imageC,
            spec.imageH, spec.imageW, nhwc, Cs, format);
      else
        convertImagesKernel<<<g, 256, 0, ctx.stream()>>>(
            static_cast<const uint8_t *>(dImages), dst, total, spec.imageC,
            spec.imageH, spec.imageW, nhwc, Cs, format);
    };
    if (img->dtype == DType::F16)
      launch(ctx.at<__half>(img->offset));
    else
      launch(ctx.at<float>(img->offset));
    ctx.checkLaunch("input image conversion");
  }
  if (const TensorSpec *lab = findTensor(spec, Role::InputLabel)) {
    // One label per image, or N x H x W per-pixel labels.
    const int n = static_cast<int>(labelCount(*lab));
    convertLabelsKernel<<<gridFor(n), 256, 0, ctx.stream()>>>(
        dLabels, ctx.arena() + lab->offset, n, static_cast<int>(lab->dtype));
    ctx.checkLaunch("input label conversion");
  }
}

void launchInputConvertF32(Context &ctx, const float *dImages,
                           const int64_t *dLabels) {
  const ModelSpec &spec = ctx.spec();
  if (const TensorSpec *img = findTensor(spec, Role::InputImage);
      img && dImages) {
    bool nhwc = img->layout == Layout::NHWC;
    int Cs = storedChannels(spec, *img);
    int64_t total = (int64_t)spec.batch * Cs * spec.imageH * spec.imageW;
    unsigned g = std::min<unsigned>(gridFor(total), 65535u * 8);
    if (img->dtype == DType::F16)
      convertImagesF32Kernel<__half><<<g, 256, 0, ctx.stream()>>>(
          dImages, ctx.at<__half>(img->offset), total, spec.imageC, spec.imageH,
          spec.imageW, nhwc, Cs);
    else
      convertImagesF32Kernel<float><<<g, 256, 0, ctx.stream()>>>(
          dImages, ctx.at<float>(img->offset), total, spec.imageC, spec.imageH,
          spec.imageW, nhwc, Cs);
    ctx.checkLaunch("input image conversion (f32)");
  }
  if (const TensorSpec *lab = findTensor(spec, Role::InputLabel);
      lab && dLabels) {
    const int n = static_cast<int>(labelCount(*lab));
    convertLabelsKernel<<<gridFor(n), 256, 0, ctx.stream()>>>(
        dLabels, ctx.arena() + lab->offset, n, static_cast<int>(lab->dtype));
    ctx.checkLaunch("input label conversion (i64)");
  }
}

void launchToF32(Context &ctx, const TensorSpec &t, float *dst, int64_t n) {
  if (t.dtype == DType::F32) {
    ctx.check(cudaMemcpyAsync(dst, ctx.arena() + t.offset, n * sizeof(float),
                              cudaMemcpyDeviceToDevice, ctx.stream()),
              t.name);
    return;
  }
  halfToFloatKernel<<<std::min<unsigned>(gridFor(n), 65535u), 256, 0,
                      ctx.stream()>>>(ctx.at<__half>(t.offset), dst, n);
  ctx.checkLaunch(t.name);
}

void launchSetScalar(Context &ctx, const TensorSpec &t, float value) {
  setScalarsKernel<<<1, 1, 0, ctx.stream()>>>(ctx.arena() + t.offset,
                                               (int)t.dtype, value, nullptr, 0,
                                               0);
  ctx.checkLaunch("scalar state update");
}

void launchSetScalars(Context &ctx, float lr, int64_t step) {
  const TensorSpec *l = findTensor(ctx.spec(), Role::ScalarLR);
  const TensorSpec *s = findTensor(ctx.spec(), Role::ScalarStep);
  if (!l && !s)
    return;
  setScalarsKernel<<<1, 1, 0, ctx.stream()>>>(
      l ? ctx.arena() + l->offset : nullptr, l ? (int)l->dtype : 0, lr,
      s ? ctx.arena() + s->offset : nullptr, s ? (int)s->dtype : 0, step);
  ctx.checkLaunch("scalar update (lr, step)");
}

bool loadStateIntoArena(Context &ctx, const std::vector<TensorEntry> &entries,
                        const std::string &source, std::string &err) {
  const ModelSpec &spec = ctx.spec();
  std::vector<std::string> missing;
  for (int i = 0; i < spec.numTensors; ++i) {
    const TensorSpec &t = spec.tensors[i];
    if (!persistent(t.role))
      continue;
    const TensorEntry *e = findEntry(entries, t.name);
    if (!e) {
      if (t.role == Role::Param || t.role == Role::Buffer) {
        missing.push_back(t.name);
      } else if (t.role == Role::OptState) {
        ctx.check(
            cudaMemsetAsync(ctx.arena() + t.offset, 0, t.bytes, ctx.stream()),
            "loading state");
      } else if (t.role == Role::LossScale) {
        float v = 65536.0f;
        if (t.dtype != DType::F32) {
          err = "LossScale tensor '" + std::string(t.name) + "' must be f32";
          return false;
        }
        ctx.check(
            cudaMemcpy(ctx.arena() + t.offset, &v, 4, cudaMemcpyHostToDevice),
            "loading state");
      }
      continue;
    }
    int64_t numel = 1;
    for (int r = 0; r < t.rank; ++r)
      numel *= t.dims[r];
    if (e->numel() != numel) {
      err = "tensor '" + std::string(t.name) + "' in " + source +
            " has shape " + shapeStr(e->shape.data(), e->shape.size()) +
            " but the model expects " + shapeStr(t.dims, t.rank);
      return false;
    }
    std::vector<char> buf;
    const char *src = e->data.data();
    size_t es = dtypeSize(t.dtype);
    if (e->dtype != t.dtype) {
      buf.resize(numel * es);
      if (e->dtype == DType::F32 && t.dtype == DType::F16) {
        for (int64_t k = 0; k < numel; ++k)
          reinterpret_cast<__half *>(buf.data())[k] =
              __float2half(e->as<float>()[k]);
      } else if (e->dtype == DType::F16 && t.dtype == DType::F32) {
        for (int64_t k = 0; k < numel; ++k)
          reinterpret_cast<float *>(buf.data())[k] =
              __half2float(e->as<__half>()[k]);
      } else {
        err = "tensor '" + std::string(t.name) + "' in " + source + " is " +
              dtypeName(e->dtype) + " but the model expects " +
              dtypeName(t.dtype);
        return false;
      }
      src = buf.data();
    }
    size_t bytes = static_cast<size_t>(numel) * es;
    std::vector<char> storedBuf;
    if (storedKRSC(t)) {
      storedBuf.resize(std::max<int64_t>(t.storedC, t.dims[1]) * t.dims[0] *
                       t.dims[2] * t.dims[3] * es);
      storedFromPublic(t, es, src, storedBuf.data());
      src = storedBuf.data();
      bytes = storedBuf.size();
    }
    if (bytes > t.bytes) {
      err = "tensor '" + std::string(t.name) + "' needs " +
            std::to_string(bytes) + " bytes but the spec gives it " +
            std::to_string(t.bytes);
      return false;
    }
    ctx.check(
        cudaMemcpy(ctx.arena() + t.offset, src, bytes, cudaMemcpyHostToDevice),
        "loading state");
  }
  if (!missing.empty()) {
    err = source + " has no entry for " + std::to_string(missing.size()) +
          " parameter/buffer tensor(s): ";
    for (size_t i = 0; i < missing.size() && i < 8; ++i)
      err += (i ? ", " : "") + missing[i];
    if (missing.size() > 8)
      err += ", ...";
    return false;
  }
  ctx.check(cudaDeviceSynchronize(), "loading state");
  return true;
}

std::vector<TensorEntry> readStateFromArena(Context &ctx) {
  const ModelSpec &spec = ctx.spec();
  ctx.check(cudaStreamSynchronize(ctx.stream()), "reading state");
  std::vector<TensorEntry> out;
  for (int i = 0; i < spec.numTensors; ++i) {
    const TensorSpec &t = spec.tensors[i];
    if (!persistent(t.role))
      continue;
    TensorEntry e = TensorEntry::zeros(
        t.name, t.dtype, std::vector<int64_t>(t.dims, t.dims + t.rank));
    if (storedKRSC(t)) {
      std::vector<char> stored(t.bytes);
      ctx.check(cudaMemcpy(stored.data(), ctx.arena() + t.offset, t.bytes,
                           cudaMemcpyDeviceToHost),
                "reading state");
      publicFromStored(t, dtypeSize(t.dtype), stored.data(), e.data.data());
      out.push_back(std::move(e));
      continue;
    }
    ctx.check(cudaMemcpy(e.data.data(), ctx.arena() + t.offset, e.data.size(),
                         cudaMemcpyDeviceToHost),
              "reading state");
    out.push_back(std::move(e));
  }
  return out;
}

float readScalar(Context &ctx, const TensorSpec &t) {
  ctx.check(cudaStreamSynchronize(ctx.stream()), "reading a scalar");
  char buf[8] = {};
  ctx.check(cudaMemcpy(buf, ctx.arena() + t.offset, dtypeSize(t.dtype),
                       cudaMemcpyDeviceToHost),
            t.name);
  switch (t.dtype) {
  case DType::F32: {
    float f;
    std::memcpy(&f, buf, 4);
    return f;
  }
  case DType::F16: {
    __half h;
    std::memcpy(&h, buf, 2);
    return __half2float(h);
  }
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, buf, 4);
    return static_cast<float>(v);
  }
  case DType::I64: {
    int64_t v;
    std::memcpy(&v, buf, 8);
    return static_cast<float>(v);
  }
  }
  return 0.f;
}

void captureStep(Context &ctx, const ModelSpec &spec) {
  try {
    spec.trainStep(ctx);
  } catch (...) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(ctx.stream(), &partial);
    if (partial)
      cudaGraphDestroy(partial);
    cudaGetLastError(); // the invalidated capture's error is not the news
    throw;
  }
}

bool segmentedStep(const Context &ctx, const ModelSpec &spec) {
  return spec.uncapturedWhy && ctx.options().segmentedCapture && spec.dist &&
         spec.dist->captureSegments && spec.dist->replaySegments;
}

void noteUncapturedStep(const Context &ctx, const ModelSpec &spec) {
  if (!spec.uncapturedWhy)
    return;
  if (segmentedStep(ctx, spec))
    std::fprintf(stderr,
                 "cnnrt: the step is captured in segments between its "
                 "pipeline transfers (CNNRT_SEGMENTED_CAPTURE=0: uncaptured), "
                 "not whole: "
                 "%s\n",
                 spec.uncapturedWhy);
  else
    std::fprintf(stderr, "cnnrt: every step runs uncaptured: %s\n",
                 spec.uncapturedWhy);
}

StepRunner::~StepRunner() {
  // A stuck device (a peer died, NCCL aborted): nothing may wait for it,
  // and the process is on its way out.
  if (deviceStuck())
    return;
  // Before the communicators go (dist::shutdown, at exit): NCCL keeps a
  // captured collective's resources until its graph is destroyed.
  if (exec)
    cudaGraphExecDestroy(exec);
  if (graph)
    cudaGraphDestroy(graph);
}

void StepRunner::enqueue(Context &ctx, const ModelSpec &spec,
                         int64_t captureAt) {
  ++stepsRun;
  if (stepsRun == 1)
    runStageAlone(ctx, spec);
  const bool captureNow = useGraph && stepsRun == captureAt;
  if (captureNow && !segments && segmentedStep(ctx, spec))
    segments = spec.dist->captureSegments(ctx, spec);
  if (captureNow && !spec.uncapturedWhy && !exec) {
    ctx.check(
        cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeRelaxed),
        "CUDA graph capture");
    captureStep(ctx, spec);
    ctx.check(cudaStreamEndCapture(ctx.stream(), &graph),
              "CUDA graph capture");
    ctx.check(cudaGraphInstantiate(&exec, graph, 0), "CUDA graph instantiate");
  }
  if (exec)
    ctx.check(cudaGraphLaunch(exec, ctx.stream()), "CUDA graph launch");
  else if (segments)
    spec.dist->replaySegments(ctx);
  else
    spec.trainStep(ctx);
}

void runStageAlone(Context &ctx, const ModelSpec &spec) {
  if (!spec.dist || !spec.dist->stageAlone || !spec.dist->stageAlone(ctx, true))
    return;
  struct On { // transfers back on, also when the step throws
    Context &ctx;
    const ModelSpec &spec;
    ~On() { spec.dist->stageAlone(ctx, false); }
  } on{ctx, spec};
  std::vector<std::vector<char>> kept(spec.numTensors);
  ctx.check(cudaStreamSynchronize(ctx.stream()), "the stage's step alone");
  for (int i = 0; i < spec.numTensors; ++i) {
    const TensorSpec &t = spec.tensors[i];
    if (t.role == Role::Temp)
      continue;
    kept[i].resize(t.bytes);
    ctx.check(cudaMemcpyAsync(kept[i].data(), ctx.arena() + t.offset, t.bytes,
                              cudaMemcpyDeviceToHost, ctx.stream()),
              "the stage's step alone: keeping the state");
  }
  spec.trainStep(ctx);
  for (int i = 0; i < spec.numTensors; ++i)
    if (!kept[i].empty())
      ctx.check(cudaMemcpyAsync(ctx.arena() + spec.tensors[i].offset,
                                kept[i].data(), kept[i].size(),
                                cudaMemcpyHostToDevice, ctx.stream()),
                "the stage's step alone: restoring the state");
  ctx.check(cudaStreamSynchronize(ctx.stream()), "the stage's step alone");
}

} // namespace cnnrt
