//===- CudnnGraph.cu - convolutions through cuDNN's graph (backend) API ---===//

#include "CudnnGraph.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace cnnrt::cudnn_graph {

Desc::Desc(cudnnBackendDescriptorType_t type) {
  if (cudnnBackendCreateDescriptor(type, &d_) != CUDNN_STATUS_SUCCESS)
    d_ = nullptr;
}

Desc &Desc::operator=(Desc &&o) noexcept {
  std::swap(d_, o.d_);
  return *this;
}

Desc::~Desc() {
  if (d_)
    cudnnBackendDestroyDescriptor(d_);
}

namespace {

enum : int64_t {
  kX = 1, kW, kY, kSum, kSumSq, kScale, kShift,
  kAddend, kReluOut, // BwdDataAddRelu's epilogue inputs (8, 9)
  kBnIn,             // BwdDataStats' BatchNorm input (10)
  kScaled = 100, kShifted, kRelu, // the prologue's virtual tensors
  kDgrad, kDgradSum, // BwdDataAddRelu's virtual tensors (103, 104)
  kMaskScaled, kMaskShifted, kDz, kDzBnIn // BwdDataStats' (105-108)
};

std::string lastError() {
  char buf[512] = {0};
  cudnnGetLastErrorString(buf, sizeof(buf));
  return buf;
}

} // namespace

/// Builds one graph; each step records the first failure in `why`.
struct Builder {
  cudnnHandle_t h;
  const ConvGeometry &g;
  Dir dir;
  std::string *why;
  std::deque<Desc> keep;
  Desc graph;
  bool failed = false;

  bool check(cudnnStatus_t s, const char *what) {
    if (s == CUDNN_STATUS_SUCCESS)
      return true;
    if (!failed && why)
      *why = std::string(what) + ": " + cudnnGetErrorString(s) + " (" +
             lastError() + ")";
    failed = true;
    return false;
  }
  Desc &make(cudnnBackendDescriptorType_t t) {
    keep.emplace_back(t);
    if (!keep.back())
      check(CUDNN_STATUS_ALLOC_FAILED, "create descriptor");
    return keep.back();
  }
  template <typename T>
  void set(Desc &d, cudnnBackendAttributeName_t a,
           cudnnBackendAttributeType_t t, int64_t n, const T *v) {
    if (!failed)
      check(cudnnBackendSetAttribute(d.get(), a, t, n, (const void *)v),
            "set attribute");
  }
  void setDesc(Desc &d, cudnnBackendAttributeName_t a, const Desc &v) {
    cudnnBackendDescriptor_t p = v.get();
    set(d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p);
  }
  void finalize(Desc &d, const char *what) {
    if (!failed)
      check(cudnnBackendFinalize(d.get()), what);
  }

  Desc &tensor(int64_t uid, int64_t n, int64_t c, int64_t hh, int64_t ww) {
    return tensorOf(uid, n, c, hh, ww, g.dtype);
  }
  Desc &tensorOf(int64_t uid, int64_t n, int64_t c, int64_t hh, int64_t ww,
                 cudnnDataType_t t, bool isVirtual = false) {
    Desc &d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &isVirtual);
    int64_t dims[4] = {n, c, hh, ww};
    int64_t nchw[4] = {c * hh * ww, hh * ww, ww, 1};
    int64_t nhwc[4] = {hh * ww * c, 1, ww * c, c};
    int64_t align = 16;
    set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t);
    set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4,
        g.nhwc ? nhwc : nchw);
    set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    finalize(d, "tensor");
    return d;
  }

  /// The finalized pointwise descriptor of `mode` with f32 math.
  Desc &pointwiseMode(cudnnPointwiseMode_t mode) {
    Desc &pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    finalize(pw, "pointwise");
    return pw;
  }

  /// A pointwise op out = mode(a[, b]) (f32 math), appended to `ops`.
  void pointwise(cudnnPointwiseMode_t mode, Desc &a, Desc *b, Desc &out,
                 std::vector<cudnnBackendDescriptor_t> &ops) {
    Desc &pw = pointwiseMode(mode);
    Desc &op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, a);
    if (b)
      setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, out);
    finalize(op, "pointwise operation");
    ops.push_back(op.get());
  }

  /// A backward pointwise op dx = mode'(dy, x) (f32 math), appended to
  /// `ops`: backward modes name their tensors DXDESC / DYDESC / XDESC
  /// (x: the forward activation's input), not XDESC / BDESC / YDESC.
  void pointwiseBwd(cudnnPointwiseMode_t mode, Desc &dy, Desc &x, Desc &dx,
                    std::vector<cudnnBackendDescriptor_t> &ops) {
    // RELU_BWD: dx = x > lower clip ? dy : 0 with cuDNN's default lower
    // clip 0, the unfused relu_grad's mask (ops_check's reluOut has exact
    // zeros). Not set: its value type follows the math precision, and a
    // mismatch would refuse the whole graph.
    Desc &pw = pointwiseMode(mode);
    Desc &op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, dy);
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, dx);
    finalize(op, "pointwise backward operation");
    ops.push_back(op.get());
  }

  /// out[1, C, 1, 1] = sum of in over N, H, W (f32), appended to `ops`.
  void reduceSum(Desc &in, Desc &out,
                 std::vector<cudnnBackendDescriptor_t> &ops) {
    Desc &red = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnReduceTensorOp_t mode = CUDNN_REDUCE_TENSOR_ADD;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    set(red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE,
        1, &mode);
    set(red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    finalize(red, "reduction");
    Desc &op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    setDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, in);
    setDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, out);
    setDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, red);
    finalize(op, "reduction operation");
    ops.push_back(op.get());
  }

  /// `in * scale + shift` per channel (uids kScale, kShift, in the data
  /// type), through the virtual f32 tensors `scaledUid` and `shiftedUid`:
  /// the BatchNorm apply of the conv prologues and of BwdDataStats' mask.
  Desc &scaleShift(Desc &in, int64_t scaledUid, int64_t shiftedUid,
                   std::vector<cudnnBackendDescriptor_t> &ops) {
    Desc &scale = tensorOf(kScale, 1, g.C, 1, 1, g.dtype);
    Desc &shift = tensorOf(kShift, 1, g.C, 1, 1, g.dtype);
    Desc &scaled =
        tensorOf(scaledUid, g.N, g.C, g.H, g.W, CUDNN_DATA_FLOAT, true);
    Desc &shifted =
        tensorOf(shiftedUid, g.N, g.C, g.H, g.W, CUDNN_DATA_FLOAT, true);
    pointwise(CUDNN_POINTWISE_MUL, in, &scale, scaled, ops);
    pointwise(CUDNN_POINTWISE_ADD, scaled, &shift, shifted, ops);
    return shifted;
  }

  /// BwdDataStats' epilogue on the dgrad's virtual f32 output `dgrad`:
  /// [+ addend], the ReLU backward against the mask into the virtual dz,
  /// dz rounded into dx, and the two per-channel sums of dz and dz * bnIn.
  void statsEpilogue(Desc &dgrad, std::vector<cudnnBackendDescriptor_t> &ops) {
    auto full = [&](int64_t uid) {
      return &tensorOf(uid, g.N, g.C, g.H, g.W, CUDNN_DATA_FLOAT, true);
    };
    Desc *cur = &dgrad;
    if (g.addend) {
      Desc &addend = tensor(kAddend, g.N, g.C, g.H, g.W);
      Desc *sum = full(kDgradSum);
      pointwise(CUDNN_POINTWISE_ADD, *cur, &addend, *sum, ops);
      cur = sum;
    }
    Desc &bnIn = tensor(kBnIn, g.N, g.C, g.H, g.W);
    Desc *mask = g.maskFromBnIn ? &scaleShift(bnIn, kMaskScaled, kMaskShifted, ops)
                                : &tensor(kReluOut, g.N, g.C, g.H, g.W);
    Desc *dz = full(kDz);
    pointwiseBwd(CUDNN_POINTWISE_RELU_BWD, *cur, *mask, *dz, ops);
    Desc &dx = tensor(kX, g.N, g.C, g.H, g.W);
    pointwise(CUDNN_POINTWISE_IDENTITY, *dz, nullptr, dx, ops);
    Desc &sumDz = tensorOf(kSum, 1, g.C, 1, 1, CUDNN_DATA_FLOAT);
    Desc &sumDzX = tensorOf(kSumSq, 1, g.C, 1, 1, CUDNN_DATA_FLOAT);
    reduceSum(*dz, sumDz, ops);
    Desc *dzX = full(kDzBnIn);
    pointwise(CUDNN_POINTWISE_MUL, *dz, &bnIn, *dzX, ops);
    reduceSum(*dzX, sumDzX, ops);
  }

  bool build() {
    std::vector<cudnnBackendDescriptor_t> ops;
    bool stats = dir == Dir::BwdDataStats;
    bool epilogue = dir == Dir::BwdDataAddRelu || stats;
    // With the epilogue the dgrad writes a virtual f32 tensor the pointwise
    // ops read on chip; the real dx (uid kX) is the ReLU backward's output.
    Desc *xIn =
        epilogue ? &tensorOf(kDgrad, g.N, g.C, g.H, g.W, CUDNN_DATA_FLOAT, true)
                 : &tensor(kX, g.N, g.C, g.H, g.W);
    if ((dir == Dir::FwdStats || dir == Dir::BwdFilter) && g.prologue) {
      // relu(x * scale + shift): f32 math, the ReLU's output rounded to the
      // data type as the unfused normalization stored it. For the wgrad it
      // is the convolution's X as for the forward one; DW stays real (kW).
      // scale and shift in the data type: with f32 ones cuDNN 9.14 falls
      // back to engines 2-5x slower on the H100 (docs/benchmarks.md).
      Desc &t2 = scaleShift(*xIn, kScaled, kShifted, ops);
      Desc &t3 = tensorOf(kRelu, g.N, g.C, g.H, g.W, g.dtype, true);
      pointwise(CUDNN_POINTWISE_RELU_FWD, t2, nullptr, t3, ops);
      xIn = &t3;
    }
    Desc &x = *xIn;
    Desc &w = tensor(kW, g.K, g.C / g.groups, g.R, g.S);
    Desc &y = tensor(kY, g.N, g.K, g.P, g.Q);
    Desc &conv = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    int64_t dims = 2, dil[2] = {g.dilH, g.dilW},
            stride[2] = {g.strideH, g.strideW}, pad[2] = {g.padH, g.padW};
    set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1,
        &mode);
    set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
    set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
    set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2,
        stride);
    set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
    set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
    finalize(conv, "convolution");
    float alpha = 1.f, beta = 0.f;
    Desc *op = nullptr;
    Desc *genStats = nullptr;
    if (dir == Dir::Fwd || dir == Dir::FwdStats) {
      op = &make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
      setDesc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
      setDesc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
      setDesc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
      setDesc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
      set(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT,
          1, &alpha);
      set(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT,
          1, &beta);
    } else if (dir == Dir::BwdData || epilogue) {
      op = &make(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
      setDesc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, x);
      setDesc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, w);
      setDesc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, y);
      setDesc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, conv);
      set(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
          CUDNN_TYPE_FLOAT, 1, &alpha);
      set(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT,
          1, &beta);
    } else {
      op = &make(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
      setDesc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, x);
      setDesc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, w);
      setDesc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, y);
      setDesc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, conv);
      set(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
          CUDNN_TYPE_FLOAT, 1, &alpha);
      set(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
          CUDNN_TYPE_FLOAT, 1, &beta);
    }
    finalize(*op, "convolution operation");
    if (dir == Dir::FwdStats) {
      // GenStats reads y as the convolution writes it: sum and sum of
      // squares per output channel, [1, K, 1, 1] f32.
      Desc &sum = tensorOf(kSum, 1, g.K, 1, 1, CUDNN_DATA_FLOAT);
      Desc &sq = tensorOf(kSumSq, 1, g.K, 1, 1, CUDNN_DATA_FLOAT);
      genStats = &make(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
      cudnnGenStatsMode_t gm = CUDNN_GENSTATS_SUM_SQSUM;
      cudnnDataType_t prec = CUDNN_DATA_FLOAT;
      set(*genStats, CUDNN_ATTR_OPERATION_GENSTATS_MODE,
          CUDNN_TYPE_GENSTATS_MODE, 1, &gm);
      set(*genStats, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC,
          CUDNN_TYPE_DATA_TYPE, 1, &prec);
      setDesc(*genStats, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, y);
      setDesc(*genStats, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum);
      setDesc(*genStats, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, sq);
      finalize(*genStats, "genstats operation");
    }
    // The residual-gradient epilogue, after the convolution in the op list:
    // sum = dgrad + addend, dx = reluOut > 0 ? sum : 0.
    std::vector<cudnnBackendDescriptor_t> after;
    if (stats) {
      statsEpilogue(x, after);
    } else if (epilogue) {
      Desc &addend = tensor(kAddend, g.N, g.C, g.H, g.W);
      Desc &sum =
          tensorOf(kDgradSum, g.N, g.C, g.H, g.W, CUDNN_DATA_FLOAT, true);
      Desc &reluOut = tensor(kReluOut, g.N, g.C, g.H, g.W);
      Desc &dx = tensor(kX, g.N, g.C, g.H, g.W);
      pointwise(CUDNN_POINTWISE_ADD, x, &addend, sum, after);
      pointwiseBwd(CUDNN_POINTWISE_RELU_BWD, sum, reluOut, dx, after);
    }
    graph = Desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (!graph)
      return check(CUDNN_STATUS_ALLOC_FAILED, "create graph");
    ops.push_back(op->get());
    if (genStats)
      ops.push_back(genStats->get());
    ops.insert(ops.end(), after.begin(), after.end());
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
        (int64_t)ops.size(), ops.data());
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    finalize(graph, "operation graph");
    return !failed;
  }

  /// The heuristics' engine configs (mode A), at most `limit`.
  std::vector<Desc> configs(int limit) {
    std::vector<Desc> out;
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    setDesc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    finalize(heur, "heuristics");
    if (failed)
      return out;
    int64_t count = 0;
    if (!check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                        &count, nullptr),
               "heuristics count"))
      return out;
    count = std::min<int64_t>(count, limit);
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      out.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(out.back().get());
    }
    int64_t got = 0;
    if (count == 0 ||
        !check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                        &got, raw.data()),
               "heuristics results"))
      return {};
    out.resize(got);
    return out;
  }

  static bool nondeterministic(const Desc &cfg) {
    Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    cudnnBackendDescriptor_t e = engine.get();
    int64_t n = 0;
    if (cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                 &e) != CUDNN_STATUS_SUCCESS)
      return true;
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                 CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n,
                                 notes) != CUDNN_STATUS_SUCCESS)
      return true;
    return std::find(notes, notes + n, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) !=
           notes + n;
  }

  /// See ConvPlan::engineTag.
  static std::string engineTag(const Desc &cfg) {
    Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    cudnnBackendDescriptor_t e = engine.get();
    int64_t n = 0, global = -1;
    if (!e ||
        cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                 &e) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                 CUDNN_TYPE_INT64, 1, &n,
                                 &global) != CUDNN_STATUS_SUCCESS)
      return "";
    std::string tag = "e" + std::to_string(global);
    // The knob choices, as cudnn-frontend reads them: into descriptors
    // created beforehand, at most one per knob type.
    std::vector<Desc> knobs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
      knobs.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
      if (!knobs.back())
        return "";
      raw.push_back(knobs.back().get());
    }
    int64_t count = 0;
    if (cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 (int64_t)raw.size(), &count,
                                 raw.data()) != CUDNN_STATUS_SUCCESS)
      return ""; // the engine alone may not identify the config
    // By knob type: the same config gives the same tag whatever order
    // cuDNN lists its choices in.
    std::vector<std::pair<int, int64_t>> choices;
    for (int64_t i = 0; i < count && i < (int64_t)raw.size(); ++i) {
      cudnnBackendKnobType_t type;
      int64_t value = 0;
      if (cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                   CUDNN_TYPE_KNOB_TYPE, 1, &n,
                                   &type) != CUDNN_STATUS_SUCCESS ||
          cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                   CUDNN_TYPE_INT64, 1, &n,
                                   &value) != CUDNN_STATUS_SUCCESS)
        return ""; // a partial tag would not identify the config
      choices.emplace_back(static_cast<int>(type), value);
    }
    std::sort(choices.begin(), choices.end());
    for (auto &[type, value] : choices)
      tag += ".k" + std::to_string(type) + "=" + std::to_string(value);
    return tag;
  }

  /// Finalizes `cfg` into a plan (null if this engine cannot run the
  /// graph; the first such reason goes to `why`).
  std::unique_ptr<ConvPlan> plan(Desc cfg, int index,
                                 const std::shared_ptr<std::deque<Desc>> &own) {
    auto p = std::make_unique<ConvPlan>();
    p->plan_ = Desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    cudnnBackendDescriptor_t c = cfg.get();
    if (!p->plan_ ||
        cudnnBackendSetAttribute(p->plan_.get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                 CUDNN_TYPE_HANDLE, 1, &h) ||
        cudnnBackendSetAttribute(p->plan_.get(),
                                 CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c))
      return nullptr;
    cudnnStatus_t s = cudnnBackendFinalize(p->plan_.get());
    if (s != CUDNN_STATUS_SUCCESS) {
      if (why && why->empty())
        *why = std::string("execution plan: ") + cudnnGetErrorString(s) +
               " (" + lastError() + ")";
      return nullptr;
    }
    int64_t ws = 0, n = 0;
    if (cudnnBackendGetAttribute(p->plan_.get(),
                                 CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                 CUDNN_TYPE_INT64, 1, &n,
                                 &ws) != CUDNN_STATUS_SUCCESS)
      return nullptr;
    p->workspace_ = static_cast<size_t>(ws);
    p->index_ = index;
    p->engineTag_ = engineTag(cfg);
    p->config_ = std::move(cfg);
    p->graph_ = own;
    return p;
  }
};

namespace {
/// Runs `plan` on the tensors `ptrs` of uids `uids` (n each; the variant
/// pack names exactly the graph's non-virtual tensors: cuDNN refuses extra
/// uids).
cudnnStatus_t executePlan(cudnnHandle_t h, const Desc &plan,
                          const int64_t *uids, void **ptrs, int n,
                          void *workspace) {
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  if (!pack)
    return CUDNN_STATUS_ALLOC_FAILED;
  cudnnStatus_t s;
  if ((s = cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                    CUDNN_TYPE_INT64, n, uids)) ||
      (s = cudnnBackendSetAttribute(pack.get(),
                                    CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                    CUDNN_TYPE_VOID_PTR, n, ptrs)) ||
      (s = cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                    CUDNN_TYPE_VOID_PTR, 1, &workspace)) ||
      (s = cudnnBackendFinalize(pack.get())))
    return s;
  return cudnnBackendExecute(h, plan.get(), pack.get());
}
} // namespace

cudnnStatus_t ConvPlan::execute(cudnnHandle_t h, const void *x, const void *w,
                                const void *y, void *workspace) const {
  const int64_t uids[3] = {kX, kW, kY};
  void *ptrs[3] = {const_cast<void *>(x), const_cast<void *>(w),
                   const_cast<void *>(y)};
  return executePlan(h, plan_, uids, ptrs, 3, workspace);
}

cudnnStatus_t ConvPlan::executeStats(cudnnHandle_t h, const void *x,
                                     const void *w, void *y, float *sum,
                                     float *sumSq, const void *scale,
                                     const void *shift,
                                     void *workspace) const {
  const int64_t uids[7] = {kX, kW, kY, kSum, kSumSq, kScale, kShift};
  void *ptrs[7] = {const_cast<void *>(x), const_cast<void *>(w), y, sum,
                   sumSq,  const_cast<void *>(scale),
                   const_cast<void *>(shift)};
  return executePlan(h, plan_, uids, ptrs, scale ? 7 : 5, workspace);
}

cudnnStatus_t ConvPlan::executeDgradAddRelu(cudnnHandle_t h, const void *dy,
                                            const void *w, const void *addend,
                                            const void *reluOut, void *dx,
                                            void *workspace) const {
  // The dgrad's output and the sum are virtual: not in the pack.
  const int64_t uids[5] = {kX, kW, kY, kAddend, kReluOut};
  void *ptrs[5] = {dx, const_cast<void *>(w), const_cast<void *>(dy),
                   const_cast<void *>(addend), const_cast<void *>(reluOut)};
  return executePlan(h, plan_, uids, ptrs, 5, workspace);
}

cudnnStatus_t ConvPlan::executeDgradStats(
    cudnnHandle_t h, const void *dy, const void *w, const void *addend,
    const void *reluOut, const void *bnIn, const void *scale,
    const void *shift, void *dx, float *sumDx, float *sumDxBnIn,
    void *workspace) const {
  // Exactly the graph's real tensors: the optional ones only when given.
  int64_t uids[10] = {kX, kW, kY, kBnIn, kSum, kSumSq};
  void *ptrs[10] = {dx,
                    const_cast<void *>(w),
                    const_cast<void *>(dy),
                    const_cast<void *>(bnIn),
                    sumDx,
                    sumDxBnIn};
  int n = 6;
  auto opt = [&](int64_t uid, const void *p) {
    if (p) {
      uids[n] = uid;
      ptrs[n++] = const_cast<void *>(p);
    }
  };
  opt(kAddend, addend);
  opt(kReluOut, reluOut);
  opt(kScale, scale);
  opt(kShift, shift);
  return executePlan(h, plan_, uids, ptrs, n, workspace);
}

cudnnStatus_t ConvPlan::executeWgradPrologue(cudnnHandle_t h, const void *x,
                                             const void *dy, void *dw,
                                             const void *scale,
                                             const void *shift,
                                             void *workspace) const {
  // The prologue's intermediates are virtual: not in the pack.
  const int64_t uids[5] = {kX, kW, kY, kScale, kShift};
  void *ptrs[5] = {const_cast<void *>(x), dw, const_cast<void *>(dy),
                   const_cast<void *>(scale), const_cast<void *>(shift)};
  return executePlan(h, plan_, uids, ptrs, 5, workspace);
}

namespace {

std::vector<std::unique_ptr<ConvPlan>> plansFrom(cudnnHandle_t h,
                                                 const ConvGeometry &g, Dir dir,
                                                 int first, int limit,
                                                 bool deterministic,
                                                 size_t maxWorkspace,
                                                 size_t minWorkspace,
                                                 bool onlyFirst,
                                                 std::string *why) {
  std::vector<std::unique_ptr<ConvPlan>> out;
  Builder b{h, g, dir, why};
  if (!b.build())
    return out;
  // Every configuration the heuristics rank, not the first `limit`: the
  // limit counts plans that can run here. For ResNeSt's grouped 3x3
  // weight gradient (32x128x56x56, 2 groups, f16 NHWC) none of the first
  // four was usable, and the legacy algorithm left took 201 ms per launch
  // (timm resnest14d at 271 ms per step, session 30's profile).
  std::vector<Desc> cfgs =
      b.configs(onlyFirst ? first + 1 : std::numeric_limits<int>::max());
  if ((int)cfgs.size() <= first && why && why->empty())
    *why = "the heuristics offer no engine";
  auto own = std::make_shared<std::deque<Desc>>(std::move(b.keep));
  own->push_back(std::move(b.graph));
  int skippedNondeterministic = 0, skippedWorkspace = 0;
  for (int i = first; i < (int)cfgs.size() && (int)out.size() < limit; ++i) {
    if (deterministic && Builder::nondeterministic(cfgs[i])) {
      ++skippedNondeterministic;
      continue;
    }
    if (auto p = b.plan(std::move(cfgs[i]), i, own)) {
      if (p->workspaceBytes() > maxWorkspace ||
          p->workspaceBytes() < minWorkspace) {
        ++skippedWorkspace;
        continue;
      }
      out.push_back(std::move(p));
    }
    if (onlyFirst)
      break;
  }
  if (out.empty() && why && why->empty() && (int)cfgs.size() > first)
    *why = "of " + std::to_string(cfgs.size() - first) + " engines, " +
           std::to_string(skippedNondeterministic) +
           " not deterministic, " + std::to_string(skippedWorkspace) +
           (minWorkspace > 0 ? " outside the workspace range"
                             : " over the workspace") +
           ", the rest not supported";
  return out;
}

} // namespace

std::vector<std::unique_ptr<ConvPlan>>
convPlans(cudnnHandle_t h, const ConvGeometry &g, Dir dir, int maxPlans,
          bool deterministic, std::string *why, size_t maxWorkspace,
          size_t minWorkspace) {
  return plansFrom(h, g, dir, 0, maxPlans, deterministic, maxWorkspace,
                   minWorkspace, /*onlyFirst=*/false, why);
}

std::unique_ptr<ConvPlan> convPlanAt(cudnnHandle_t h, const ConvGeometry &g,
                                     Dir dir, int index, std::string *why) {
  auto v = plansFrom(h, g, dir, index, 1, false, SIZE_MAX, 0,
                     /*onlyFirst=*/true, why);
  if (v.empty() || v.front()->index() != index)
    return nullptr;
  return std::move(v.front());
}

} // namespace cnnrt::cudnn_graph
