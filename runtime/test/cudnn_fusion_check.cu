// Probe for issue 13's cuDNN graph (backend) API fusions, run on the GPU
// machine before the compiler relies on them: for ResNet-50's convolution
// shapes (NHWC, f16, batch 128) it builds
//   "conv"         : conv fprop alone through the graph API,
//   "conv+stats"   : conv fprop with the BatchNorm statistics (per-channel
//                    sum and sum of squares, f32) computed in its epilogue
//                    (GenStats, and pointwise + reduction as a second form),
//   "sbr+conv+stats": the MLPerf form, the previous BatchNorm's apply + ReLU
//                    (x * scale + bias, max 0) in the conv's prologue,
// asks cuDNN's heuristics for engines, keeps the fastest plan that
// finalizes, checks its output against the legacy API
// (cudnnConvolutionForward + a reference statistics kernel) and prints the
// times side by side. Exit code: 0 when every plan that ran matched, 1 on a
// numeric mismatch, 3 without a GPU (ctest's SKIPPED).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "GpuCheck.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <deque>
#include <tuple>
#include <utility>
#include <vector>

using namespace gpucheck;

namespace {

bool gFailed = false;

std::string lastError() {
  char buf[1024] = {0};
  cudnnGetLastErrorString(buf, sizeof(buf));
  return buf;
}

// A backend call that may fail for a graph cuDNN does not support: returns
// false and says why (once per call site kind), instead of exiting.
bool ok(cudnnStatus_t s, const char *what, std::string *why) {
  if (s == CUDNN_STATUS_SUCCESS)
    return true;
  if (why && why->empty())
    *why = std::string(what) + ": " + cudnnGetErrorString(s) + " (" +
           lastError() + ")";
  return false;
}

struct Desc {
  cudnnBackendDescriptor_t d = nullptr;
  Desc() = default;
  explicit Desc(cudnnBackendDescriptorType_t t) {
    if (cudnnBackendCreateDescriptor(t, &d) != CUDNN_STATUS_SUCCESS) {
      std::fprintf(stderr, "cudnnBackendCreateDescriptor(%d) failed\n", (int)t);
      std::exit(2);
    }
  }
  Desc(const Desc &) = delete;
  Desc(Desc &&o) noexcept : d(o.d) { o.d = nullptr; }
  Desc &operator=(Desc &&o) noexcept {
    std::swap(d, o.d);
    return *this;
  }
  ~Desc() {
    if (d)
      cudnnBackendDestroyDescriptor(d);
  }
  template <typename T>
  Desc &set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t,
            int64_t n, const T *v) {
    cudnnStatus_t s = cudnnBackendSetAttribute(d, a, t, n, (const void *)v);
    if (s != CUDNN_STATUS_SUCCESS) {
      std::fprintf(stderr, "cudnnBackendSetAttribute(%d): %s (%s)\n", (int)a,
                   cudnnGetErrorString(s), lastError().c_str());
      std::exit(2);
    }
    return *this;
  }
  Desc &set(cudnnBackendAttributeName_t a, cudnnBackendDescriptor_t v) {
    return set(a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
  }
  Desc &setI(cudnnBackendAttributeName_t a, std::vector<int64_t> v) {
    return set(a, CUDNN_TYPE_INT64, (int64_t)v.size(), v.data());
  }
  Desc &setType(cudnnBackendAttributeName_t a, cudnnDataType_t t) {
    return set(a, CUDNN_TYPE_DATA_TYPE, 1, &t);
  }
  cudnnStatus_t finalize() { return cudnnBackendFinalize(d); }
};

// dims in cuDNN's logical order [N, C, H, W]; NHWC strides.
Desc tensor(int64_t uid, std::vector<int64_t> dims, cudnnDataType_t t,
            bool isVirtual) {
  int64_t n = dims[0], c = dims[1], h = dims[2], w = dims[3];
  (void)n;
  Desc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.setType(CUDNN_ATTR_TENSOR_DATA_TYPE, t);
  d.setI(CUDNN_ATTR_TENSOR_DIMENSIONS, dims);
  d.setI(CUDNN_ATTR_TENSOR_STRIDES, {h * w * c, 1, w * c, c});
  d.setI(CUDNN_ATTR_TENSOR_UNIQUE_ID, {uid});
  d.setI(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, {16});
  bool v = isVirtual;
  d.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
  if (d.finalize() != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "tensor %lld: %s\n", (long long)uid,
                 lastError().c_str());
    std::exit(2);
  }
  return d;
}

struct Shape {
  const char *name;
  int n, c, h, w, k, r, stride, pad;
  int p() const { return (h + 2 * pad - r) / stride + 1; }
  int q() const { return (w + 2 * pad - r) / stride + 1; }
  double flops() const { return 2.0 * n * k * p() * q() * c * r * r; }
};

enum Uid : int64_t {
  X = 1, W, Y, SUM, SQSUM, SCALE, BIAS,
  V_SCALED = 100, V_BIASED, V_RELU, V_CONV, V_SQ,
};

enum class Variant { Conv, ConvGenStats, ConvReduce, SbrConvGenStats };
const char *variantName(Variant v) {
  switch (v) {
  case Variant::Conv: return "conv";
  case Variant::ConvGenStats: return "conv+genstats";
  case Variant::ConvReduce: return "conv+reduce";
  case Variant::SbrConvGenStats: return "sbr+conv+genstats";
  }
  return "?";
}

Desc pointwise(cudnnPointwiseMode_t mode) {
  Desc d(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  d.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  d.setType(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_DATA_FLOAT);
  d.finalize();
  return d;
}

Desc pointwiseOp(const Desc &pw, const Desc &x, const Desc *b, const Desc &y) {
  Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw.d);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x.d);
  if (b)
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b->d);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y.d);
  return op;
}

struct Graph {
  std::deque<Desc> keep; // every descriptor the graph refers to (stable addresses)
  Desc graph;
  std::string why;
  bool built = false;
};

// Builds the operation graph of one variant; false (with why) when cuDNN
// refuses a piece of it.
bool buildGraph(cudnnHandle_t h, const Shape &s, Variant v, Graph &g) {
  auto &K = g.keep;
  auto add = [&](Desc d) -> Desc & {
    K.push_back(std::move(d));
    return K.back();
  };
  std::vector<int64_t> xd = {s.n, s.c, s.h, s.w};
  std::vector<int64_t> yd = {s.n, s.k, s.p(), s.q()};
  std::vector<int64_t> cd = {1, s.c, 1, 1}, kd = {1, s.k, 1, 1};
  Desc &x = add(tensor(X, xd, CUDNN_DATA_HALF, false));
  Desc &w = add(tensor(W, {s.k, s.c, s.r, s.r}, CUDNN_DATA_HALF, false));
  bool convVirtual = v == Variant::ConvReduce;
  Desc &y = add(tensor(Y, yd, CUDNN_DATA_HALF, false));
  Desc *convOut = &y;
  if (convVirtual)
    convOut = &add(tensor(V_CONV, yd, CUDNN_DATA_FLOAT, true));
  Desc *convIn = &x;
  std::vector<cudnnBackendDescriptor_t> ops;
  if (v == Variant::SbrConvGenStats) {
    Desc &scale = add(tensor(SCALE, cd, CUDNN_DATA_HALF, false));
    Desc &bias = add(tensor(BIAS, cd, CUDNN_DATA_HALF, false));
    Desc &t1 = add(tensor(V_SCALED, xd, CUDNN_DATA_FLOAT, true));
    Desc &t2 = add(tensor(V_BIASED, xd, CUDNN_DATA_FLOAT, true));
    Desc &t3 = add(tensor(V_RELU, xd, CUDNN_DATA_HALF, true));
    Desc &mul = add(pointwise(CUDNN_POINTWISE_MUL));
    Desc &addp = add(pointwise(CUDNN_POINTWISE_ADD));
    Desc &relu = add(pointwise(CUDNN_POINTWISE_RELU_FWD));
    for (auto [pw, a, b, o] :
         {std::tuple<Desc *, Desc *, Desc *, Desc *>{&mul, &x, &scale, &t1},
          {&addp, &t1, &bias, &t2},
          {&relu, &t2, nullptr, &t3}}) {
      Desc &op = add(pointwiseOp(*pw, *a, b, *o));
      if (!ok(op.finalize(), "pointwise op", &g.why))
        return false;
      ops.push_back(op.d);
    }
    convIn = &t3;
  }
  Desc &conv = add(Desc(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  cudnnDataType_t ct = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  conv.setType(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, ct)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1,
           &mode)
      .setI(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, {2})
      .setI(CUDNN_ATTR_CONVOLUTION_DILATIONS, {1, 1})
      .setI(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, {s.stride, s.stride})
      .setI(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, {s.pad, s.pad})
      .setI(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, {s.pad, s.pad});
  if (!ok(conv.finalize(), "convolution", &g.why))
    return false;
  Desc &fwd = add(Desc(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
  float alpha = 1, beta = 0;
  fwd.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, convIn->d)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w.d)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, convOut->d)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv.d)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1,
           &alpha)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1,
           &beta);
  if (!ok(fwd.finalize(), "conv fprop op", &g.why))
    return false;
  ops.push_back(fwd.d);
  if (v == Variant::ConvGenStats || v == Variant::SbrConvGenStats) {
    Desc &sum = add(tensor(SUM, kd, CUDNN_DATA_FLOAT, false));
    Desc &sq = add(tensor(SQSUM, kd, CUDNN_DATA_FLOAT, false));
    Desc &gs = add(Desc(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR));
    cudnnGenStatsMode_t gm = CUDNN_GENSTATS_SUM_SQSUM;
    gs.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &gm)
        .setType(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_DATA_FLOAT)
        .set(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, y.d)
        .set(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum.d)
        .set(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, sq.d);
    if (!ok(gs.finalize(), "genstats op", &g.why))
      return false;
    ops.push_back(gs.d);
  } else if (v == Variant::ConvReduce) {
    // conv (f32, virtual) -> identity -> Y (f16); sum(conv), sum(conv^2).
    Desc &id = add(pointwise(CUDNN_POINTWISE_IDENTITY));
    Desc &cast = add(pointwiseOp(id, *convOut, nullptr, y));
    if (!ok(cast.finalize(), "cast op", &g.why))
      return false;
    ops.push_back(cast.d);
    Desc &sum = add(tensor(SUM, kd, CUDNN_DATA_FLOAT, false));
    Desc &sq = add(tensor(SQSUM, kd, CUDNN_DATA_FLOAT, false));
    Desc &v2 = add(tensor(V_SQ, yd, CUDNN_DATA_FLOAT, true));
    Desc &mul = add(pointwise(CUDNN_POINTWISE_MUL));
    Desc &sqop = add(pointwiseOp(mul, *convOut, convOut, v2));
    if (!ok(sqop.finalize(), "square op", &g.why))
      return false;
    ops.push_back(sqop.d);
    Desc &red = add(Desc(CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
    cudnnReduceTensorOp_t ro = CUDNN_REDUCE_TENSOR_ADD;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1,
            &ro)
        .setType(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT);
    if (!ok(red.finalize(), "reduction", &g.why))
      return false;
    for (auto [in, out] : {std::pair<Desc *, Desc *>{convOut, &sum}, {&v2, &sq}}) {
      Desc &op = add(Desc(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR));
      op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, in->d)
          .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, out->d)
          .set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red.d);
      if (!ok(op.finalize(), "reduction op", &g.why))
        return false;
      ops.push_back(op.d);
    }
  }
  g.graph = Desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  g.graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
              (int64_t)ops.size(), ops.data());
  g.graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  if (!ok(g.graph.finalize(), "operation graph", &g.why))
    return false;
  g.built = true;
  return true;
}

struct Buffers {
  void *x, *w, *y, *sum, *sq, *scale, *bias, *ws;
  size_t wsBytes;
};

// The variant pack names exactly the graph's non-virtual tensors (cuDNN
// refuses extra uids): x, w, y, then the statistics, then scale and bias.
bool execute(cudnnHandle_t h, const Desc &plan, const Buffers &b, int nUids,
             std::string *why) {
  int64_t uids[] = {X, W, Y, SUM, SQSUM, SCALE, BIAS};
  void *ptrs[] = {b.x, b.w, b.y, b.sum, b.sq, b.scale, b.bias};
  Desc vp(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  vp.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, nUids, uids);
  vp.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, nUids,
         ptrs);
  void *ws = b.ws;
  vp.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  if (!ok(vp.finalize(), "variant pack", why))
    return false;
  return ok(cudnnBackendExecute(h, plan.d, vp.d), "execute", why);
}

// The fastest execution plan among the heuristics' engine configs that
// finalize, fit the workspace and run; its time in ms (negative: none).
double bestPlan(cudnnHandle_t h, Graph &g, const Buffers &b, int nUids,
                Desc &best, std::string &engineName, std::string &why) {
  double bestMs = -1;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B}) {
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g.graph.d);
    heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (!ok(heur.finalize(), "heuristics", &why))
      continue;
    int64_t count = 0;
    cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
    count = std::min<int64_t>(count, 16);
    if (count == 0) {
      if (why.empty())
        why = "heuristics: no engine config";
      continue;
    }
    std::vector<Desc> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(cfgs.back().d);
    }
    int64_t got = 0;
    if (!ok(cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                     &got, raw.data()),
            "heuristics results", &why))
      continue;
    for (int64_t i = 0; i < got; ++i) {
      Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, raw[i]);
      if (!ok(plan.finalize(), "execution plan", &why))
        continue;
      int64_t wsz = 0, n = 0;
      cudnnBackendGetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                               CUDNN_TYPE_INT64, 1, &n, &wsz);
      if ((size_t)wsz > b.wsBytes) {
        if (why.empty())
          why = "workspace " + std::to_string(wsz) + " too large";
        continue;
      }
      std::string runWhy;
      if (!execute(h, plan, b, nUids, &runWhy)) { // also warms up (JIT, caches)
        if (why.empty())
          why = runWhy;
        continue;
      }
      float ms = timeMs([&] { execute(h, plan, b, nUids, nullptr); });
      if (bestMs < 0 || ms < bestMs) {
        bestMs = ms;
        best = std::move(plan);
        char json[4096] = {0};
        int64_t jn = 0;
        if (cudnnBackendGetAttribute(
                best.d, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION,
                CUDNN_TYPE_CHAR, sizeof(json) - 1, &jn,
                json) == CUDNN_STATUS_SUCCESS) {
          std::string j(json);
          size_t at = j.find("\"engineId\"");
          engineName = at == std::string::npos ? j.substr(0, 60)
                                               : j.substr(at, 24);
        }
      }
    }
    if (bestMs >= 0)
      break;
  }
  return bestMs;
}

// x * scale + bias, max 0 (NHWC, per channel); the reference prologue.
__global__ void scaleBiasRelu(const __half *x, const __half *s,
                              const __half *b, __half *y, size_t n, int c) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    int ch = (int)(i % c);
    float v = __half2float(x[i]) * __half2float(s[ch]) + __half2float(b[ch]);
    y[i] = __float2half(v > 0 ? v : 0);
  }
}

// Per-channel sum and sum of squares of an NHWC f16 tensor (reference).
__global__ void channelStats(const __half *y, size_t rows, int c, float *sum,
                             float *sq) {
  int ch = blockIdx.y * blockDim.x + threadIdx.x;
  if (ch >= c)
    return;
  float s = 0, q = 0;
  for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float v = __half2float(y[r * c + ch]);
    s += v;
    q += v * v;
  }
  atomicAdd(&sum[ch], s);
  atomicAdd(&sq[ch], q);
}

} // namespace

int main(int argc, char **argv) {
  if (gpucheck::skippedWithoutGpu("cudnn_fusion_check"))
    return 3;
  int batch = argc > 1 ? std::atoi(argv[1]) : 128;
  cudnnHandle_t h;
  if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cudnnCreate failed\n");
    return 2;
  }
  std::printf("cudnn_fusion_check: cuDNN %zu (headers %d.%d.%d), batch %d\n",
              cudnnGetVersion(), CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL,
              batch);
  const Shape shapes[] = {
      {"l1.conv1 1x1 256->64 @56", batch, 256, 56, 56, 64, 1, 1, 0},
      {"l1.conv2 3x3 64->64 @56", batch, 64, 56, 56, 64, 3, 1, 1},
      {"l1.conv3 1x1 64->256 @56", batch, 64, 56, 56, 256, 1, 1, 0},
      {"l2.conv2 3x3 128->128 @28", batch, 128, 28, 28, 128, 3, 1, 1},
      {"l3.conv1 1x1 1024->256 @14", batch, 1024, 14, 14, 256, 1, 1, 0},
      {"l3.conv2 3x3 256->256 @14", batch, 256, 14, 14, 256, 3, 1, 1},
      {"l4.conv2 3x3 512->512 @7", batch, 512, 7, 7, 512, 3, 1, 1},
      {"l4.conv3 1x1 512->2048 @7", batch, 512, 7, 7, 2048, 1, 1, 0},
  };
  size_t wsBytes = 256u << 20;
  void *ws;
  CUDA_OK(cudaMalloc(&ws, wsBytes));
  std::printf("%-28s %-18s %9s %9s %9s %8s %8s  %s\n", "shape", "variant",
              "fused ms", "legacy ms", "+stats ms", "y err", "stat err",
              "engine / why not");
  for (const Shape &s : shapes) {
    size_t xn = (size_t)s.n * s.c * s.h * s.w, wn = (size_t)s.k * s.c * s.r * s.r;
    size_t yn = (size_t)s.n * s.k * s.p() * s.q(), rows = yn / s.k;
    __half *x, *w, *y, *yref, *xact, *scale, *bias;
    float *sum, *sq, *sumRef, *sqRef;
    CUDA_OK(cudaMalloc(&x, xn * 2));
    CUDA_OK(cudaMalloc(&xact, xn * 2));
    CUDA_OK(cudaMalloc(&w, wn * 2));
    CUDA_OK(cudaMalloc(&y, yn * 2));
    CUDA_OK(cudaMalloc(&yref, yn * 2));
    CUDA_OK(cudaMalloc(&scale, s.c * 2));
    CUDA_OK(cudaMalloc(&bias, s.c * 2));
    CUDA_OK(cudaMalloc(&sum, s.k * 4));
    CUDA_OK(cudaMalloc(&sq, s.k * 4));
    CUDA_OK(cudaMalloc(&sumRef, s.k * 4));
    CUDA_OK(cudaMalloc(&sqRef, s.k * 4));
    fillHalf<<<1024, 256>>>(x, xn, 1, 4.0f, 0.0f);
    fillHalf<<<1024, 256>>>(w, wn, 2, 2.0f / std::sqrt((float)s.c * s.r * s.r), 0.0f);
    fillHalf<<<16, 256>>>(scale, s.c, 3, 2.0f, 0.0f);
    fillHalf<<<16, 256>>>(bias, s.c, 4, 1.0f, 0.0f);
    CUDA_OK(cudaDeviceSynchronize());

    // Legacy reference: cudnnConvolutionForward with the best found algo.
    cudnnTensorDescriptor_t xdL, ydL;
    cudnnFilterDescriptor_t wdL;
    cudnnConvolutionDescriptor_t cdL;
    cudnnCreateTensorDescriptor(&xdL);
    cudnnCreateTensorDescriptor(&ydL);
    cudnnCreateFilterDescriptor(&wdL);
    cudnnCreateConvolutionDescriptor(&cdL);
    cudnnSetTensor4dDescriptor(xdL, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, s.n, s.c,
                               s.h, s.w);
    cudnnSetTensor4dDescriptor(ydL, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, s.n, s.k,
                               s.p(), s.q());
    cudnnSetFilter4dDescriptor(wdL, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, s.k, s.c,
                               s.r, s.r);
    cudnnSetConvolution2dDescriptor(cdL, s.pad, s.pad, s.stride, s.stride, 1, 1,
                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    cudnnSetConvolutionMathType(cdL, CUDNN_TENSOR_OP_MATH);
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int np = 0;
    cudnnFindConvolutionForwardAlgorithmEx(h, xdL, xact, wdL, w, cdL, ydL, yref,
                                           8, &np, perf, ws, wsBytes);
    cudnnConvolutionFwdAlgo_t algo = perf[0].algo;
    float one = 1, zero = 0;
    auto legacy = [&](const __half *in) {
      cudnnConvolutionForward(h, &one, xdL, in, wdL, w, cdL, algo, ws, wsBytes,
                              &zero, ydL, yref);
    };
    auto stats = [&]() {
      cudaMemsetAsync(sumRef, 0, s.k * 4);
      cudaMemsetAsync(sqRef, 0, s.k * 4);
      dim3 grid(std::min<size_t>(rows, 256), (s.k + 127) / 128);
      channelStats<<<grid, 128>>>(yref, rows, s.k, sumRef, sqRef);
    };
    double legacyMs = timeMs([&] { legacy(x); });
    double statsMs = timeMs(stats);

    for (Variant v : {Variant::Conv, Variant::ConvGenStats, Variant::ConvReduce,
                      Variant::SbrConvGenStats}) {
      bool sbr = v == Variant::SbrConvGenStats;
      const __half *in = x;
      if (sbr) {
        scaleBiasRelu<<<1024, 256>>>(x, scale, bias, xact, xn, s.c);
        in = xact;
      }
      legacy(in);
      stats();
      CUDA_OK(cudaDeviceSynchronize());
      Graph g;
      Desc plan;
      std::string engine, why;
      double ms = -1;
      Buffers b{x, w, y, sum, sq, scale, bias, ws, wsBytes};
      int nUids = v == Variant::Conv ? 3 : sbr ? 7 : 5;
      if (buildGraph(h, s, v, g)) {
        CUDA_OK(cudaMemset(sum, 0, s.k * 4));
        CUDA_OK(cudaMemset(sq, 0, s.k * 4));
        ms = bestPlan(h, g, b, nUids, plan, engine, why);
      }
      if (ms < 0) {
        std::printf("%-28s %-18s %9s %9.3f %9.3f %8s %8s  unsupported: %s\n",
                    s.name, variantName(v), "-", legacyMs, statsMs, "-", "-",
                    why.c_str());
        continue;
      }
      // Numerics of the chosen plan, run once more from zeroed outputs.
      CUDA_OK(cudaMemset(y, 0, yn * 2));
      CUDA_OK(cudaMemset(sum, 0, s.k * 4));
      CUDA_OK(cudaMemset(sq, 0, s.k * 4));
      std::string runWhy;
      execute(h, plan, b, nUids, &runWhy);
      CUDA_OK(cudaDeviceSynchronize());
      double yErr = relErr(toHost(y, yn, true), toHost(yref, yn, true));
      double sErr = 0;
      if (v != Variant::Conv)
        sErr = std::max(relErr(toHost(sum, s.k, false), toHost(sumRef, s.k, false)),
                        relErr(toHost(sq, s.k, false), toHost(sqRef, s.k, false)));
      bool good = yErr < 2e-2 && sErr < 2e-2;
      if (!good)
        gFailed = true;
      std::printf("%-28s %-18s %9.3f %9.3f %9.3f %8.1e %8.1e  %s%s (%.0f TFLOP/s)\n",
                  s.name, variantName(v), ms, legacyMs, statsMs, yErr, sErr,
                  good ? "" : "MISMATCH ", engine.c_str(), s.flops() / ms / 1e9);
    }
    for (void *p : {(void *)x, (void *)xact, (void *)w, (void *)y, (void *)yref,
                    (void *)scale, (void *)bias, (void *)sum, (void *)sq,
                    (void *)sumRef, (void *)sqRef})
      cudaFree(p);
    cudnnDestroyTensorDescriptor(xdL);
    cudnnDestroyTensorDescriptor(ydL);
    cudnnDestroyFilterDescriptor(wdL);
    cudnnDestroyConvolutionDescriptor(cdL);
  }
  cudaFree(ws);
  cudnnDestroy(h);
  std::printf("cudnn_fusion_check: %s\n", gFailed ? "MISMATCH" : "ok");
  return gFailed ? 1 : 0;
}
