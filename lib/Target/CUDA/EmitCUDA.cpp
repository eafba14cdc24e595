//===- EmitCUDA.cpp - cnn train step -> CUDA C++ -------------------------===//
//
// Lowers @train_step (and @forward as the evaluation step) to one .cu file:
// a buffer plan in one arena, one generated kernel per elementwise op
// (specialized to its shape), shape-generic prelude kernels for reductions,
// pooling and the loss, cuDNN convolutions and cuBLASLt matmuls through
// libcnnrt, the tensor table and main() (or the C API's model accessor).
//
//===----------------------------------------------------------------------===//
#include "cnnc/Target/CUDA/EmitCUDA.h"

#include "BufferPlan.h"
#include "NhwcTileLayout.h"
#include "PipelineEmit.h"
#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Support/LocationName.h"
#include "cnnc/Transforms/LoweringLimits.h"
#include "cnnc/Transforms/MemoryPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <set>

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

static const char kPrelude[] = {
#include "KernelPrelude.inc" // kernels/*.cuh, by EmbedPrelude.cmake
};

static std::string tensorTable(const BufferPlan &plan, bool inputNHWC);

namespace {

std::string ctype(Type t) {
  if (t.isF32())
    return "float";
  if (t.isF16())
    return "__half";
  if (t.isInteger(32))
    return "int32_t";
  if (t.isInteger(8))
    return "uint8_t"; // fused_max_pool2d's window index
  return "int64_t";
}
std::string dtype(Type t) {
  if (t.isF32())
    return "cnnrt::DType::F32";
  if (t.isF16())
    return "cnnrt::DType::F16";
  if (t.isInteger(32))
    return "cnnrt::DType::I32";
  return "cnnrt::DType::I64";
}
RankedTensorType ttype(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The channel of flat element index `i` of an activation: `expr` in terms
/// of i, from `channels` and, for NCHW, `inner` (elements per channel plane;
/// 0 for NHWC, where the channel is i % channels).
struct Channel {
  std::string expr;
  int64_t channels, inner;
};

/// The channel of an activation of type `t` (a tensor of rank < 2 has one).
Channel chanIndex(RankedTensorType t, bool nhwc) {
  if (nhwc) {
    int64_t c = t.getDimSize(t.getRank() - 1);
    return {fmt::format("i % {}ll", c), c, 0};
  }
  int64_t inner = 1;
  for (int64_t d = 2; d < t.getRank(); ++d)
    inner *= t.getDimSize(d);
  int64_t c = t.getRank() >= 2 ? t.getDimSize(1) : 1;
  return {fmt::format("(i / {}ll) % {}ll", inner, c), c, inner};
}

/// The element of a numpy-broadcast input of type `in` (the rank of `out`,
/// size-1 dimensions repeated) read at flat element `i` of `out`.
std::string broadcastIndex(RankedTensorType in, RankedTensorType out) {
  std::vector<std::string> terms;
  int64_t outStride = 1, inStride = 1;
  for (int64_t d = out.getRank() - 1; d >= 0; --d) {
    int64_t size = out.getDimSize(d);
    if (in.getDimSize(d) != 1)
      terms.push_back(
          fmt::format("(i / {}ll) % {}ll * {}ll", outStride, size, inStride));
    outStride *= size;
    inStride *= in.getDimSize(d);
  }
  return terms.empty() ? "0" : "(" + llvm::join(terms, " + ") + ")";
}


std::string escape(const std::string &s) {
  std::string o;
  for (char c : s)
    o += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return o;
}

std::string floatLit(double v) {
  if (std::isinf(v))
    return v > 0 ? "INFINITY" : "-INFINITY";
  std::string s = fmt::format("{:.9g}", v);
  if (s.find_first_of(".en") == std::string::npos)
    s += ".0";
  return s + "f";
}

/// The shortest decimal that rounds to the f32 attribute `f` (0.999f ->
/// 0.999), so factors derived from hyper-parameters (1 - beta2, ...) are
/// computed as PyTorch computes them from Python floats.
double dec(float f) {
  for (int p = 1; p <= 9; ++p) {
    double d = std::strtod(fmt::format("{:.{}g}", f, p).c_str(), nullptr);
    if ((float)d == f)
      return d;
  }
  return f;
}
double dec(APFloat f) { return dec(f.convertToFloat()); }

/// One input of a generated elementwise kernel.
struct EwIn {
  EwIn(Value v, std::string index = "i") : v(v), index(std::move(index)) {}
  /// A per-channel input.
  EwIn(Value v, const Channel &c) : v(v), index(c.expr), channel(c) {}
  Value v;
  std::string index; // element index expression in terms of i
  std::optional<Channel> channel;
};

class Emitter {
public:
  Emitter(ModuleOp module, BufferPlan plan, const CUDAEmitOptions &options)
      : module(module), plan(std::move(plan)), options(options) {}

  LogicalResult emitFunction(func::FuncOp f, std::string &body);
  LogicalResult write(llvm::raw_ostream &os, func::FuncOp step,
                      func::FuncOp forward, const std::string &trainBody,
                      const std::string &evalBody);

private:
  LogicalResult emitOp(Operation *op, std::string &out);
  /// One op's lowering each (emitOp dispatches by the op's type).
  LogicalResult print(std::string &out, ConstantOp c);
  LogicalResult print(std::string &out, Conv2DOp c);
  LogicalResult print(std::string &out, Conv2DBwdDataOp c);
  LogicalResult print(std::string &out, Conv2DBwdFilterOp c);
  LogicalResult print(std::string &out, MatmulOp m);
  LogicalResult print(std::string &out, BiasAddOp b);
  LogicalResult printReduction(std::string &out, Operation *o);
  LogicalResult print(std::string &out, DropoutMaskOp d);
  LogicalResult print(std::string &out, GlobalAvgPoolGradOp g);
  LogicalResult print(std::string &out, BiasGradOp b);
  LogicalResult print(std::string &out, BatchNormOp b);
  LogicalResult print(std::string &out, BatchNormTrainOp b);
  LogicalResult print(std::string &out, FusedElementwiseOp f);
  LogicalResult print(std::string &out, FusedConv2DOp c);
  LogicalResult print(std::string &out, FusedConv2DStatsOp c);
  LogicalResult print(std::string &out, FusedConv2DBwdFilterOp c);
  LogicalResult print(std::string &out, FusedConv2DBwdDataOp c);
  LogicalResult print(std::string &out, BatchNormStatsOp b);
  LogicalResult print(std::string &out, BatchNormSumsOp b);
  LogicalResult print(std::string &out, BatchNormGradSumsOp b);
  LogicalResult print(std::string &out, FusedBatchNormAffineReluGradSumsOp b);
  LogicalResult print(std::string &out, FusedBatchNormReluGradOp b);
  LogicalResult print(std::string &out, FusedBatchNormAffineReluGradOp b);
  LogicalResult print(std::string &out, FusedDualBatchNormGradOp b);
  LogicalResult print(std::string &out, BatchNormGradOp b);
  LogicalResult print(std::string &out, FusedMaxPool2DBatchNormReluGradOp b);
  LogicalResult print(std::string &out, ConcatOp c);
  LogicalResult printGather(std::string &out, Operation *o);
  LogicalResult print(std::string &out, PadOp p);
  LogicalResult print(std::string &out, PadGradOp p);
  LogicalResult print(std::string &out, SGDUpdateOp u);
  LogicalResult print(std::string &out, AdamUpdateOp u);
  LogicalResult print(std::string &out, AllFiniteOp a);
  LogicalResult print(std::string &out, UnscaleOp u);
  LogicalResult print(std::string &out, AccumulateGradOp a);
  LogicalResult print(std::string &out, AccumulationStepOp a);
  LogicalResult print(std::string &out, AllReduceOp a);
  /// The grid of a grid-stride kernel of the op being printed over `n`
  /// units of work: min(ceil(n / block), its #cnn.launch grid_limit).
  std::string gridFor(int64_t n) const;
  /// The op being printed's #cnn.launch grid_limit.
  int64_t gridLimit() const { return launchOf.getGridLimit(); }
  /// The threads of a block of the op being printed (#cnn.launch's block).
  std::string threads() const { return std::to_string(launchOf.getBlock()); }
  /// The threads of the op's one-block reductions (#cnn.launch's
  /// reduce_block).
  std::string reduceThreads() const {
    return std::to_string(launchOf.getReduceBlock());
  }
  /// The chunk of the op being printed's `k`-th multi-tensor kernel
  /// (#cnn.launch's chunks), or an error on the op.
  FailureOr<int64_t> chunkOf(Operation *op, size_t k);
  std::string ptr(Value v) {
    auto it = ptrOverride.find(v);
    if (it != ptrOverride.end())
      return it->second;
    return fmt::format("P<{}>(A, {})", ctype(ttype(v).getElementType()),
                       plan.offsetOf(v));
  }
  std::string loc(Operation *op) { return escape(locationName(op->getLoc())); }
  /// Emits (or reuses) a kernel with the given signature and body.
  std::string kernel(const std::string &params, const std::string &body);
  /// cnn.pad: a gather, each output element maps back to its source.
  void emitPad(std::string &out, PadOp op);
  /// cnn.pad_grad: each input element sums the output elements copying it.
  void emitPadGrad(std::string &out, PadGradOp op);
  /// Every op with KernelCallOpInterface (pooling, softmax, resize, ...):
  /// the launches it describes, printed as `kernel<targs><<<grid, block, 0,
  /// s>>>(args)`; a call of a device function with constant tables gets a
  /// generated kernel that binds them.
  LogicalResult printKernelCalls(std::string &out, KernelCallOpInterface op);
  /// The launches `calls` of `op` (a KernelCallOpInterface op's, or the
  /// "spatial_sum" reductions' describeSpatialReduction).
  LogicalResult printKernelCalls(std::string &out, Operation *op,
                                 ArrayRef<KernelCall> calls);
  /// Where cnn-select-lowering gave `op` the lowering `value` that
  /// `describe` describes: its launches printed, or one error when the
  /// description no longer fits the op (`needs` says what it wants);
  /// std::nullopt for an op without that lowering.
  using DescribeFn = LogicalResult (*)(Operation *, LaunchAttr,
                                       SmallVectorImpl<KernelCall> &);
  std::optional<LogicalResult> printChosenLowering(std::string &out,
                                                   Operation *op,
                                                   StringRef value,
                                                   DescribeFn describe,
                                                   StringRef needs);
  /// One argument of a kernel call (in a wrapper kernel: buffers by name).
  std::string kernelArg(const KernelArg &a, ArrayRef<std::string> tables,
                        bool inWrapper);
  /// The name of a `__device__` table with the given element type and
  /// initializer list, declared once in `kernels` (equal tables shared).
  std::string deviceTable(const std::string &type, const std::string &init);
  void launch(std::string &out, Operation *op, const std::string &name,
              const std::string &grid, const std::string &block,
              const std::string &args);
  /// The argument that passes a two-pass reduction's partial-sum buffer of
  /// `doubles` doubles (Context::reductionScratch) to its kernels; the
  /// largest is reserved at the top of prepareModel.
  std::string reductionScratch(int64_t doubles);
  void elementwise(std::string &out, Operation *op, ArrayRef<EwIn> ins,
                   ArrayRef<Value> outs, const std::string &expr,
                   int64_t n = -1);
  /// An elementwise op of a multi-tensor group (cnn.update_group: optimizer
  /// updates; cnn.cast_group: parameter casts): collected into its group and
  /// emitted as one kernel over all the group's tensors when the group's
  /// last op is reached; outside a group, a plain elementwise kernel.
  LogicalResult groupedElementwise(std::string &out, Operation *op,
                                   ArrayRef<EwIn> ins, ArrayRef<Value> outs,
                                   const std::string &expr);
  /// cnn.clip_divisor: one multi-tensor kernel sums the squares of every
  /// gradient (f16 or f32, per-tensor type table) into the result, one
  /// thread then turns the sum into the divisor.
  LogicalResult emitClipDivisor(std::string &out, ClipDivisorOp op);
  /// With `vec` 8 (a multi-tensor kernel's "vec8" form): every tensor of
  /// `vs` has a multiple of 8 elements and a 32-byte aligned buffer, or an
  /// error on `op`.
  LogicalResult checkVec8(Operation *op, ArrayRef<Value> vs, int64_t vec);
  /// A multi-tensor kernel over tensors of `sizes` units (elements, or
  /// vectors of 8 in the "vec8" form), cut into chunks of `chunkUnits`
  /// units (cnn-prepare-for-emission's) that never straddle two
  /// tensors: declares (in `kernels`) `<name>_chunk`, each chunk's tensor,
  /// first and end unit, and one `<name>_<suffix>` table of per-tensor
  /// values for each entry of `tables`; returns the chunk count (the
  /// launch's grid, at most grid_limit). kernels/MultiTensor.cuh's
  /// mt::forEachUnit<chunks>(<name>_chunk, ...) walks them (the chunk table
  /// replaces a binary search per unit).
  int64_t multiTensorTables(
      const std::string &name, ArrayRef<int64_t> sizes,
      ArrayRef<std::pair<std::string, std::vector<int64_t>>> tables,
      int64_t chunkUnits);
  /// Finds the multi-tensor groups of `f` (optimizer updates, parameter
  /// casts).
  void groupMultiTensorKernels(func::FuncOp f);
  struct MultiTensorGroup {
    Operation *last = nullptr;
    const char *what = "";
    std::vector<std::pair<SmallVector<EwIn>, SmallVector<Value>>> members;
  };
  std::map<std::string, MultiTensorGroup> multiTensorGroups;
  DenseMap<Operation *, std::string> multiTensorGroupOf;
  /// The id of the registered cuBLASLt matmul C[M,N] = op(A) op(B).
  int matmulId(Operation *op, int64_t M, int64_t N, int64_t K, bool transA,
               bool transB, Type elementType);
  /// `nhwc`: x, y are N x H x W x C and w is K x R x S x C/groups (KRSC).
  int convId(Operation *op, RankedTensorType x, RankedTensorType w,
             RankedTensorType y, ArrayRef<int64_t> strides,
             ArrayRef<int64_t> padding, ArrayRef<int64_t> dilations,
             int64_t groups, bool nhwc = false);
  /// Lowers a layout-sensitive op with layout = "NHWC".
  LogicalResult emitNHWC(Operation *op, std::string &out);
  /// Per-channel reduction of an N x H x W x C tensor into the reduction
  /// scratch (pass 1, nhwcPartial<mode>); returns the number of tiles that
  /// the finishing kernel adds (its scratch: nhwcScratch(mode, tiles, C)).
  /// Batch statistics (saved mean/invstd, running statistics updated) of
  /// `x` for batch_norm_train and batch_norm_stats, in the op's layout.
  void bnStats(std::string &out, Operation *op, Value x, Value mean,
               Value invstd, Value newMean, Value newVar, Value oldMean,
               Value oldVar, APFloat eps, APFloat momentum, Value scale = {},
               Value bias = {}, Value alpha = {}, Value beta = {});
  /// batch_norm_grad, or with `reluOut` fused_batch_norm_relu_grad, in the
  /// given layout: per-channel sums, then dx in one elementwise kernel.
  /// batch_norm_grad, with the ReLU mask from the stored output `reluOut`
  /// or recomputed from x as round(x * alpha + beta) > 0 (`alpha`, `beta`
  /// set: fused_batch_norm_affine_relu_grad), or without a mask.
  void bnGrad(std::string &out, Operation *op, bool nhwc, Value dy,
              Value reluOut, Value x, Value scale, Value mean, Value invstd,
              Value gradScale, Value gradBias, Value gradInput,
              Value alpha = {}, Value beta = {});
  /// batch_norm_grad's first pass: per channel sum(g) into `gradBias` and
  /// sum(g * xhat) into `gradScale` (of C++ type `S`), g = dy masked by the
  /// ReLU output or by round(x * alpha + beta) > 0 where given.
  void bnGradSums(std::string &out, Operation *op, bool nhwc, Value dy,
                  Value reluOut, Value x, Value mean, Value invstd,
                  Value gradScale, Value gradBias, const std::string &S,
                  Value alpha = {}, Value beta = {});
  LogicalResult poolBnGrad(std::string &out,
                           FusedMaxPool2DBatchNormReluGradOp op);
  void dualBnGrad(std::string &out, FusedDualBatchNormGradOp op);
  int64_t nhwcPartial(std::string &out, Operation *op, int mode, Value a,
                      Value b, Value mean, Value invstd, Value mask = {},
                      Value alpha = {}, Value beta = {});
  std::string scaleShiftReluToScratch(Operation *op, RankedTensorType x,
                                      const std::string &T);
  const std::string &hostFunction(std::map<std::string, std::string> &byBody,
                                  const char *prefix, const char *params,
                                  const std::string &body);
  std::string poolParams(RankedTensorType x, RankedTensorType y,
                         ArrayRef<int64_t> k, ArrayRef<int64_t> s,
                         ArrayRef<int64_t> p, bool countIncludePad, bool nhwc);

  ModuleOp module;
  BufferPlan plan;
  const CUDAEmitOptions &options;
  /// cnn-prepare-for-emission's decisions for the op being printed.
  LaunchAttr launchOf;
  /// The largest reductionScratch any launch asked for.
  int64_t reductionScratchDoubles = 0;
  std::string kernels, prepare;
  /// Host functions holding fused convolutions' epilogue launches.
  std::string epilogues;
  std::map<std::string, std::string> epilogueByBody;
  /// fused_conv2d_stats split forms by body (equal shapes share one).
  std::map<std::string, std::string> convStatsByBody;
  int numConvStats = 0;
  /// fused_conv2d_bwd_data split forms by body (equal shapes share one).
  std::map<std::string, std::string> dgradSplitByBody;
  int numDgradEpilogues = 0;
  /// fused_conv2d_bwd_filter split forms by body (equal shapes share one).
  std::map<std::string, std::string> wgradSplitByBody;
  int numWgradPrologues = 0;
  int numFusedConvs = 0;
  /// Pointer expressions replacing arena pointers while emitting code that
  /// takes its buffers as parameters (a fused convolution's epilogue).
  DenseMap<Value, std::string> ptrOverride;
  std::map<std::string, std::string> kernelByText;
  std::map<std::string, std::string> tableByText;
  std::map<std::string, int> convIds, matmulIds;
  int numKernels = 0;
  int64_t numLaunches = 0;
  /// Data parallelism: results of cnn.all_reduce whose bucket the compute
  /// stream has not joined yet (value -> bucket), and the bucket count.
  DenseMap<Value, int64_t> unjoined;
  int64_t numBuckets = 0;
  void joinBucket(std::string &out, int64_t bucket);
  /// A pipeline stage's step (cnn-pipeline-stage) that sends or receives:
  /// its prepareModel creates the stage communicator (PipelineEmit.h).
  bool pipelineTransfers = false;
};

std::string Emitter::kernel(const std::string &params,
                            const std::string &body) {
  std::string key = params + "\n" + body;
  auto it = kernelByText.find(key);
  if (it != kernelByText.end())
    return it->second;
  std::string name = fmt::format("k{}", numKernels++);
  kernels +=
      fmt::format("__global__ void __launch_bounds__(256) {}({}) {{\n{}}}\n\n",
                  name, params, body);
  kernelByText[key] = name;
  return name;
}

std::string Emitter::reductionScratch(int64_t doubles) {
  reductionScratchDoubles = std::max(reductionScratchDoubles, doubles);
  return fmt::format("ctx.reductionScratch({})", doubles);
}

void Emitter::launch(std::string &out, Operation *op, const std::string &name,
                     const std::string &grid, const std::string &block,
                     const std::string &args) {
  // The op and kernel name label the launch in CNNRT_PROFILE's report.
  out += fmt::format("  {}<<<{}, {}, 0, s>>>({});\n  CNNRT_CHECK_KERNEL(ctx, "
                     "\"{}\", \"{} {}\");\n",
                     name, grid, block, args, loc(op),
                     op->getName().getStringRef().str(), name);
  ++numLaunches;
}

/// `expr` (an f32 expression) rounded to the element type `t` and back.
static std::string roundTo(Type t, const std::string &expr) {
  if (t.isF16())
    return "__half2float(__float2half_rn(" + expr + "))";
  return "(" + expr + ")";
}

std::string Emitter::gridFor(int64_t n) const {
  // Grid-stride loops: enough blocks to fill the GPU (cnn-prepare-for-
  // emission's grid_limit), not one per element.
  int64_t block = launchOf.getBlock();
  return std::to_string(std::max<int64_t>(
      1, std::min<int64_t>((n + block - 1) / block, gridLimit())));
}

/// Row-major strides of a static shape.
static SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

void Emitter::emitPad(std::string &out, PadOp op) {
  auto in = ttype(op.getInput()), res = ttype(op.getResult());
  int64_t rank = in.getRank();
  auto pads = op.getPads();
  StringRef mode = op.getMode();
  SmallVector<int64_t> inStrides = rowMajorStrides(in.getShape());
  std::string T = ctype(res.getElementType());
  std::string body = fmt::format(
      "  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < {}ll; "
      "i += (int64_t)gridDim.x * 256) {{\n"
      "    int64_t rem = i, src = 0; bool fill = false;\n",
      res.getNumElements());
  for (int64_t d = rank - 1; d >= 0; --d) {
    int64_t n = in.getDimSize(d), m = res.getDimSize(d), begin = pads[d];
    body += fmt::format("    {{ int64_t k = rem % {}ll - {}ll; rem /= {}ll;\n",
                        m, begin, m);
    if (begin || pads[rank + d]) {
      if (mode == "constant")
        body += fmt::format("      fill |= k < 0 || k >= {}ll;\n", n);
      else if (mode == "reflect")
        body +=
            fmt::format("      k = k < 0 ? -k : k >= {0}ll ? {1}ll - k : k;\n",
                        n, 2 * (n - 1));
      else
        body += fmt::format(
            "      k = k < 0 ? 0 : k >= {0}ll ? {0}ll - 1 : k;\n", n);
    }
    body += fmt::format("      src += k * {}ll; }}\n", inStrides[d]);
  }
  body += fmt::format("    out[i] = fill ? {}({}) : in[src];\n  }}\n", T,
                      floatLit(op.getValue().convertToDouble()));
  launch(out, op,
         kernel(fmt::format("const {} *__restrict__ in, {} *__restrict__ out",
                            T, T),
                body),
         gridFor(res.getNumElements()), threads(),
         fmt::format("{}, {}", ptr(op.getInput()), ptr(op.getResult())));
}

void Emitter::emitPadGrad(std::string &out, PadGradOp op) {
  auto dy = ttype(op.getGradOutput()), res = ttype(op.getResult());
  int64_t rank = res.getRank();
  auto pads = op.getPads();
  StringRef mode = op.getMode();
  SmallVector<int64_t> dyStrides = rowMajorStrides(dy.getShape());
  std::string T = ctype(res.getElementType());
  // Per padded dimension d, the padded indices copying input index k form
  // up to three ranges [lo_d[r], hi_d[r]]; the sum runs over their product.
  std::string body = fmt::format(
      "  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < {}ll; "
      "i += (int64_t)gridDim.x * 256) {{\n"
      "    int64_t rem = i, base = 0;\n",
      res.getNumElements());
  SmallVector<int64_t> padded;
  for (int64_t d = rank - 1; d >= 0; --d) {
    int64_t n = res.getDimSize(d), begin = pads[d], end = pads[rank + d];
    body +=
        fmt::format("    int64_t k{0} = rem % {1}ll; rem /= {1}ll;\n", d, n);
    if (!begin && !end) {
      body += fmt::format("    base += k{} * {}ll;\n", d, dyStrides[d]);
      continue;
    }
    padded.push_back(d);
    body += fmt::format("    int64_t lo{0}[3], hi{0}[3]; int c{0} = 0;\n", d);
    body += fmt::format(
        "    lo{0}[c{0}] = hi{0}[c{0}] = k{0} + {1}ll; ++c{0};\n", d, begin);
    if (mode == "edge") {
      body += fmt::format("    if (k{0} == 0) lo{0}[0] = 0;\n", d);
      body += fmt::format("    if (k{0} == {1}ll) hi{0}[0] = {2}ll;\n", d,
                          n - 1, n - 1 + begin + end);
    } else if (mode == "reflect") {
      // x[-k] = x[k] (k <= begin) and x[2(n-1) - k] = x[k] (k >= n-1-end).
      body +=
          fmt::format("    if (k{0} >= 1 && k{0} <= {1}ll) {{ lo{0}[c{0}] = "
                      "hi{0}[c{0}] = {1}ll - k{0}; ++c{0}; }}\n",
                      d, begin);
      body += fmt::format(
          "    if (k{0} < {1}ll && k{0} >= {2}ll) {{ lo{0}[c{0}] = hi{0}[c{0}] "
          "= {3}ll - k{0}; ++c{0}; }}\n",
          d, n - 1, n - 1 - end, begin + 2 * (n - 1));
    }
  }
  body += "    float acc = 0.f;\n";
  std::string index = "base";
  std::string indent = "    ";
  for (int64_t d : padded) {
    body += fmt::format("{0}for (int r{1} = 0; r{1} < c{1}; ++r{1})\n{0}  for "
                        "(int64_t j{1} = lo{1}[r{1}]; j{1} <= hi{1}[r{1}]; "
                        "++j{1})\n",
                        indent, d);
    indent += "    ";
    index += fmt::format(" + j{} * {}ll", d, dyStrides[d]);
  }
  body += fmt::format("{}acc += (float)dy[{}];\n", indent, index);
  body += fmt::format("    out[i] = {}(acc);\n  }}\n", T);
  launch(out, op,
         kernel(fmt::format("const {} *__restrict__ dy, {} *__restrict__ out",
                            T, T),
                body),
         gridFor(res.getNumElements()), threads(),
         fmt::format("{}, {}", ptr(op.getGradOutput()), ptr(op.getResult())));
}

std::string Emitter::deviceTable(const std::string &type,
                                 const std::string &init) {
  std::string key = type + "\n" + init;
  auto it = tableByText.find(key);
  if (it != tableByText.end())
    return it->second;
  std::string name = fmt::format("tbl{}", tableByText.size());
  kernels +=
      fmt::format("__device__ const {} {}[] = {{{}}};\n\n", type, name, init);
  tableByText[key] = name;
  return name;
}

/// One argument of a kernel call as CUDA: buffers as arena pointers (or, in
/// a wrapper kernel, by their parameter names), tables by their names.
std::string Emitter::kernelArg(const KernelArg &a, ArrayRef<std::string> tables,
                               bool inWrapper) {
  switch (a.kind) {
  case KernelArg::Kind::Buffer:
    return inWrapper ? a.name : ptr(a.value);
  case KernelArg::Kind::Null:
    return "nullptr";
  case KernelArg::Kind::I32:
    return std::to_string(a.integer);
  case KernelArg::Kind::Table:
    return tables[a.integer];
  case KernelArg::Kind::Scratch:
    return reductionScratch(a.integer);
  case KernelArg::Kind::I64:
    return fmt::format("{}ll", a.integer);
  case KernelArg::Kind::F32:
    return floatLit(a.decimal ? dec(static_cast<float>(a.real)) : a.real);
  case KernelArg::Kind::Bool:
    return a.integer ? "true" : "false";
  case KernelArg::Kind::Record: {
    std::vector<std::string> fields;
    for (const KernelArg &f : a.fields)
      fields.push_back(kernelArg(f, tables, inWrapper));
    return a.name + "{" + llvm::join(fields, ", ") + "}";
  }
  }
  llvm_unreachable("unknown kernel argument kind");
}

LogicalResult Emitter::printKernelCalls(std::string &out,
                                        KernelCallOpInterface op) {
  SmallVector<KernelCall, 1> calls;
  op.describeKernelCalls(launchOf, calls);
  return printKernelCalls(out, op, calls);
}

std::optional<LogicalResult>
Emitter::printChosenLowering(std::string &out, Operation *op, StringRef value,
                             DescribeFn describe, StringRef needs) {
  auto l = op->getAttrOfType<StringAttr>("cnn.lowering");
  if (!l || l.getValue() != value)
    return std::nullopt;
  SmallVector<KernelCall, 2> calls;
  if (failed(describe(op, launchOf, calls)))
    return op->emitError("CUDA backend: '")
           << op->getName() << "' has cnn.lowering = \"" << value << "\" but "
           << needs << " (run cnn-select-lowering again)";
  return printKernelCalls(out, op, calls);
}

LogicalResult Emitter::printKernelCalls(std::string &out, Operation *op,
                                        ArrayRef<KernelCall> calls) {
  for (const KernelCall &call : calls) {
    // The dialect verified the description where the op got its
    // #cnn.launch; the printer relies on it, so it checks again.
    if (failed(verifyKernelCall(
            op, call, [&] { return op->emitError("CUDA backend: "); })))
      return failure();
    std::vector<std::string> targs;
    for (const KernelTemplateArg &t : call.templateArgs)
      targs.push_back(t.kind == KernelTemplateArg::Kind::ElementType
                          ? ctype(t.type)
                          : (t.flag ? "true" : "false"));
    std::string name = call.kernel;
    if (!targs.empty())
      name += "<" + llvm::join(targs, ", ") + ">";
    std::vector<std::string> tables;
    for (const KernelTable &t : call.tables) {
      std::string init;
      for (const KernelArg &row : t.rows)
        init += (init.empty() ? "" : ", ") + kernelArg(row, {}, false);
      tables.push_back(deviceTable(t.rowType, init));
    }
    std::vector<std::string> args;
    for (const KernelArg &a : call.args)
      args.push_back(kernelArg(a, tables, call.wrap));
    std::vector<std::string> launchArgs;
    if (call.wrap) {
      // A kernel of its own calls the device function with the constants
      // bound; it takes the buffers.
      std::vector<std::string> params;
      for (const KernelArg &a : call.args)
        if (a.kind == KernelArg::Kind::Buffer) {
          params.push_back(fmt::format(
              "{}{} *__restrict__ {}", a.written ? "" : "const ",
              ctype(ttype(a.value).getElementType()), a.name));
          launchArgs.push_back(ptr(a.value));
        }
      name = kernel(llvm::join(params, ", "),
                    fmt::format("  {}({});\n", name, llvm::join(args, ", ")));
    } else {
      launchArgs = std::move(args);
    }
    std::string grid;
    switch (call.grid.kind) {
    case KernelGrid::Kind::ThreadPerElement:
      grid = gridFor(ttype(call.grid.value).getNumElements() /
                     call.grid.perThread);
      break;
    case KernelGrid::Kind::ThreadPerUnit:
      grid = gridFor(call.grid.units);
      break;
    case KernelGrid::Kind::BlockPerUnit:
      grid = std::to_string(call.grid.units);
      break;
    }
    std::string block;
    switch (call.block) {
    case KernelBlock::Launch:
      block = threads();
      break;
    case KernelBlock::ReduceBlock:
      block = reduceThreads();
      break;
    case KernelBlock::Single:
      block = "1";
      break;
    }
    launch(out, op, name, grid, block, llvm::join(launchArgs, ", "));
  }
  return success();
}

void Emitter::elementwise(std::string &out, Operation *op, ArrayRef<EwIn> ins,
                          ArrayRef<Value> outs, const std::string &expr,
                          int64_t n) {
  if (n < 0)
    n = ttype(outs[0]).getNumElements();
  // Buffers written in place (optimizer updates) alias inputs: no
  // __restrict__ then.
  bool aliased = false;
  for (Value o : outs)
    for (const EwIn &in : ins)
      aliased |= plan.offsetOf(o) == plan.offsetOf(in.v);
  const char *restrict_ = aliased ? "" : " __restrict__";
  std::vector<std::string> paramList, argList, names;
  for (auto [k, in] : llvm::enumerate(ins)) {
    paramList.push_back(fmt::format("const {} *{} in{}",
                                    ctype(ttype(in.v).getElementType()),
                                    restrict_, k));
    argList.push_back(ptr(in.v));
    names.push_back(fmt::format("in{}", k));
  }
  for (auto [k, o] : llvm::enumerate(outs)) {
    paramList.push_back(fmt::format(
        "{} *{} out{}", ctype(ttype(o).getElementType()), restrict_, k));
    argList.push_back(ptr(o));
    names.push_back(fmt::format("out{}", k));
  }
  std::string params = llvm::join(paramList, ", "),
              args = llvm::join(argList, ", ");
  // Eight elements per thread with 16-byte loads and stores where #cnn.launch
  // asks for them (vector = 8) and the operands allow them: every full-size
  // operand 16-byte aligned in the arena, a multiple of 8 elements.
  bool vec = launchOf.getVector() == 8 && n % 8 == 0 && n >= 8;
  auto aligned = [&](Value v) { return plan.offsetOf(v) % 16 == 0; };
  for (const EwIn &in : ins)
    vec &= in.index != "i" ||
           (aligned(in.v) && ttype(in.v).getElementType().isF16()) ||
           (aligned(in.v) && ttype(in.v).getElementType().isF32());
  for (Value o : outs)
    vec &= aligned(o);
  int64_t grid = std::stoll(gridFor(vec ? n / 8 : n));
  // Per-channel inputs in the vector form: the 8 elements' channels are 8
  // consecutive ones (NHWC, C % 8 == 0: one vector load) or one channel
  // (NCHW with H*W % 8 == 0: one load; ew::ChannelsFirst sees that) instead
  // of 8 scalar loads. In NHWC, when the grid's stride (grid * block
  // vectors) is a multiple of C / 8 vectors, a thread sees the same 8
  // channels in every iteration: their loads move out of the loop (the
  // BN-gradient kernels read up to seven per-channel arrays per eight
  // elements; inside the loop those L1 loads, not HBM, bound the kernel).
  // The grid is rounded down to make that so.
  auto perVector = [&](const EwIn &in) {
    return in.channel && in.channel->inner == 0 &&
           in.channel->channels % 8 == 0 && aligned(in.v);
  };
  bool hoist = false;
  if (vec) {
    int64_t period = 1, block = launchOf.getBlock();
    bool anyPerVec = false;
    for (const EwIn &in : ins)
      if (perVector(in)) {
        anyPerVec = true;
        int64_t cv = in.channel->channels / 8;
        period = std::lcm(period, cv / std::gcd(cv, block));
      }
    hoist = anyPerVec && grid >= period && n / 8 > grid * block;
    if (hoist)
      grid -= grid % period;
  }
  // Each operand's kind (kernels/Elementwise.cuh); an input indexed by a
  // model-specific expression is loaded by the functor.
  std::vector<std::string> kinds;
  std::string fn = "[=](const int64_t i, float(&io)[" +
                   std::to_string(ins.size() + outs.size()) + "]) {\n";
  for (auto [k, in] : llvm::enumerate(ins)) {
    std::string T = ctype(ttype(in.v).getElementType());
    if (in.index == "i") {
      kinds.push_back(fmt::format("ew::In<{}>", T));
    } else if (in.channel && in.channel->inner == 0) {
      const char *load = !vec || !perVector(in) ? "Lanes"
                         : hoist                ? "Hoisted"
                                                : "Vector";
      kinds.push_back(fmt::format("ew::ChannelsLast<{}, {}ll, "
                                  "ew::ChannelLoad::{}>",
                                  T, in.channel->channels, load));
    } else if (in.channel) {
      kinds.push_back(fmt::format("ew::ChannelsFirst<{}, {}ll, {}ll>", T,
                                  in.channel->inner, in.channel->channels));
    } else if (in.index == "0") {
      kinds.push_back(fmt::format("ew::Scalar<{}>", T));
    } else {
      kinds.push_back(fmt::format("ew::Gathered<{}>", T));
      fn += fmt::format("    float a{} = ld(in{} + ({}));\n", k, k, in.index);
      continue;
    }
    fn += fmt::format("    float a{0} = io[{0}];\n", k);
  }
  for (Value o : outs)
    kinds.push_back(
        fmt::format("ew::Out<{}>", ctype(ttype(o).getElementType())));
  for (size_t k = 0; k < outs.size(); ++k)
    fn += fmt::format("    float r{};\n", k);
  fn += "    " + expr + "\n";
  for (size_t k = 0; k < outs.size(); ++k)
    fn += fmt::format("    io[{}] = r{};\n", ins.size() + k, k);
  fn += "  }";
  std::string body = fmt::format(
      "  ew::{}<{}ll, {}>(\n  {},\n  {});\n",
      vec ? "elementwiseVec8" : "elementwise", vec ? n / 8 : n,
      llvm::join(kinds, ", "), fn, llvm::join(names, ", "));
  launch(out, op, kernel(params, body), std::to_string(grid), threads(), args);
}

int Emitter::matmulId(Operation *op, int64_t M, int64_t N, int64_t K,
                      bool transA, bool transB, Type elementType) {
  std::string desc = fmt::format("cnnrt::MatmulDesc{{{}, {}, {}, {}, {}, {}}}",
                                 M, N, K, transA ? "true" : "false",
                                 transB ? "true" : "false", dtype(elementType));
  auto it = matmulIds.find(desc);
  if (it != matmulIds.end())
    return it->second;
  int id = matmulIds.size();
  matmulIds[desc] = id;
  prepare +=
      fmt::format("  ctx.registerMatmul({}, {}, \"{}\");\n", id, desc, loc(op));
  return id;
}

/// The lowering cnn-select-lowering chose for `op` ("gemm", "vec8",
/// "cudnn_bias_act"), or "" for the op's default one.
static StringRef loweringOf(Operation *op) {
  auto a = op->getAttrOfType<StringAttr>("cnn.lowering");
  return a ? a.getValue() : StringRef();
}

int Emitter::convId(Operation *op, RankedTensorType x, RankedTensorType w,
                    RankedTensorType y, ArrayRef<int64_t> st,
                    ArrayRef<int64_t> pd, ArrayRef<int64_t> dl, int64_t groups,
                    bool nhwc) {
  auto xs = x.getShape(), ws = w.getShape(), ys = y.getShape();
  // ConvDesc takes N, C, H, W, K, R, S, P, Q in any layout.
  int64_t N = xs[0], C = xs[nhwc ? 3 : 1], H = xs[nhwc ? 1 : 2],
          W = xs[nhwc ? 2 : 3];
  int64_t K = ws[0], R = ws[nhwc ? 1 : 2], S = ws[nhwc ? 2 : 3];
  int64_t P = ys[nhwc ? 1 : 2], Q = ys[nhwc ? 2 : 3];
  std::string desc = fmt::format(
      "cnnrt::ConvDesc{{{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, "
      "{}, {}, "
      "{}, {}, {}, {}, cnnrt::Layout::{}}}",
      N, C, H, W, K, R, S, P, Q, pd[0], pd[1], pd[2], pd[3], st[0], st[1],
      dl[0], dl[1], groups, dtype(x.getElementType()), nhwc ? "NHWC" : "NCHW");
  auto it = convIds.find(desc);
  if (it != convIds.end())
    return it->second;
  int id = convIds.size();
  convIds[desc] = id;
  prepare +=
      fmt::format("  ctx.registerConv({}, {}, \"{}\");\n", id, desc, loc(op));
  return id;
}

std::string Emitter::poolParams(RankedTensorType x, RankedTensorType y,
                                ArrayRef<int64_t> k, ArrayRef<int64_t> s,
                                ArrayRef<int64_t> p, bool cip, bool nhwc) {
  // PoolParams are N, C, H, W, P, Q, ... whatever the memory layout.
  auto xs = x.getShape(), ys = y.getShape();
  int64_t c = nhwc ? xs[3] : xs[1], h = nhwc ? xs[1] : xs[2],
          w = nhwc ? xs[2] : xs[3];
  int64_t ph = nhwc ? ys[1] : ys[2], pw = nhwc ? ys[2] : ys[3];
  return fmt::format("PoolParams{{{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, "
                     "{}, {}, {}, {}}}",
                     xs[0], c, h, w, ph, pw, k[0], k[1], s[0], s[1], p[0], p[1],
                     p[2], p[3], cip ? "true" : "false");
}

static int64_t channelInner(RankedTensorType t) {
  int64_t hw = 1;
  for (int64_t d = 2; d < t.getRank(); ++d)
    hw *= t.getDimSize(d);
  return hw;
}

//===----------------------------------------------------------------------===//
// NHWC (cnn-layout): cuDNN with Layout::NHWC, channel index i % C for the
// per-channel elementwise kernels, the prelude's *NHWC kernels otherwise.
//===----------------------------------------------------------------------===//

/// How nhwcPartial's kernels split M rows of C channels
/// (kernels/NhwcTileLayout.h, which runtime/test/bn_grad_bench.cu launches
/// with too): `lanes` threads across channels (eight channels each when
/// `vec`), `colBlocks` blocks across channels and `tiles` of `rowsPerTile`
/// rows.
struct NhwcTiling : cnnc_kernels::NhwcTileLayout {
  /// The launch: colBlocks x tiles blocks of lanes x (threads / lanes)
  /// threads (#cnn.launch's block).
  int64_t threads;
  std::string grid() const {
    return fmt::format("dim3({}, {})", colBlocks, tiles);
  }
  std::string block() const {
    return fmt::format("dim3({}, {})", lanes, threads / lanes);
  }
};
/// A partial-sum kernel's tiling: enough tiles to fill the GPU (at most
/// `blocks`: #cnn.launch's partial_blocks) within the kNhwcScratchDoubles per
/// sum of nhwcScratch.
static NhwcTiling nhwcTiling(int64_t M, int64_t C, bool vec, int64_t blocks,
                             int64_t threads) {
  return {
      cnnc_kernels::nhwcTileLayout(M, C, vec, blocks, kNhwcScratchDoubles / C),
      threads};
}

/// The scratch of nhwcPartial<mode>'s sums over `tiles` tiles of C channels
/// (MODE 0 writes one sum, the others two), for its finishing kernel.
static int64_t nhwcScratchDoubles(int mode, int64_t tiles, int64_t C) {
  return (mode == 0 ? 1 : 2) * tiles * C;
}

/// The split forms' prologue (fused_conv2d_stats', fused_conv2d_bwd_filter's):
/// relu(x * scale + shift) of their NHWC input x, element type T, into the
/// runtime's scratch buffer, in the body of the split-form function.
std::string Emitter::scaleShiftReluToScratch(Operation *op, RankedTensorType x,
                                             const std::string &T) {
  int64_t n = x.getNumElements();
  // Eight channels a thread with 16-byte accesses where C % 8 == 0: the
  // scalar kernel moves 2 bytes a load and divides a 64-bit index by C per
  // element, and CNNRT_DETERMINISTIC runs every split form.
  bool vec = x.getDimSize(3) % 8 == 0;
  const char *kernel = vec ? "nhwcScaleShiftRelu8" : "nhwcScaleShiftRelu";
  return fmt::format(
      "  {7}<{0}><<<{1}, {6}, 0, s>>>(static_cast<const "
      "{0} *>(x), scale, shift, static_cast<{0} *>(scratch), {2}ll, "
      "{3});\n  CNNRT_CHECK_KERNEL(ctx, \"{4}\", \"{5} "
      "{7}\");\n",
      T, gridFor(vec ? n / 8 : n), n, x.getDimSize(3), loc(op),
      op->getName().getStringRef().str(), threads(), kernel);
}

/// The name of the host function `<prefix><k>(<params>)` whose statements
/// are `body` (a fused convolution's epilogue or split form), printed into
/// `epilogues` the first time `byBody` (the family's table, numbered from 0)
/// sees that body: equal shapes, e.g. the eval step's, share one function.
const std::string &
Emitter::hostFunction(std::map<std::string, std::string> &byBody,
                      const char *prefix, const char *params,
                      const std::string &body) {
  auto [it, isNew] =
      byBody.try_emplace(body, fmt::format("{}{}", prefix, byBody.size()));
  if (isNew)
    epilogues += fmt::format(
        "static void {}({}) {{\n  cudaStream_t s = ctx.stream();\n{}}}\n\n",
        it->second, params, body);
  return it->second;
}

int64_t Emitter::nhwcPartial(std::string &out, Operation *op, int mode, Value a,
                             Value b, Value mean, Value invstd, Value mask,
                             Value alpha, Value beta) {
  auto t = ttype(a);
  int64_t C = t.getDimSize(t.getRank() - 1), M = t.getNumElements() / C;
  // cnn-select-lowering's "vec8" or "channel_sum_vec8"; fused_conv2d_stats'
  // split-form statistics always (the op needs C % 8 == 0 on this target).
  StringRef lowering = loweringOf(op);
  bool vec = lowering == "vec8" || lowering == "channel_sum_vec8" ||
             isa<FusedConv2DStatsOp>(op);
  NhwcTiling tl = nhwcTiling(M, C, vec, launchOf.getPartialBlocks(),
                              launchOf.getBlock());
  std::string T = ctype(t.getElementType());
  // fused_conv2d_stats' split form: the same shifted sums with f32 chunks
  // (nhwcShiftedSums8: same tiling and scratch layout, so the same finish).
  if (mode == 1 && isa<FusedConv2DStatsOp>(op)) {
    launch(out, op, fmt::format("nhwcShiftedSums8<{}>", T), tl.grid(),
           tl.block(),
           fmt::format("{}, {}, {}ll, {}, {}ll",
                       reductionScratch(nhwcScratchDoubles(mode, tl.tiles, C)),
                       ptr(a), M, C, tl.rowsPerTile));
    return tl.tiles;
  }
  auto orNull = [&](Value v, const std::string &type) {
    return v ? ptr(v) : fmt::format("({} *)nullptr", type);
  };
  // batch_norm_grad's sums (modes 2-4) stay nhwcPartial8's: its f32-chunk
  // form (Reductions.cuh's nhwcBnGradSums8 with nhwcBnGradApply8) made
  // ResNet-50 f16 b128's step 2.7 % slower on an H100 (session 32);
  // runtime/test/bn_grad_bench.cu compares the two.
  launch(out, op,
         fmt::format("{}<{}, {}>", tl.vec ? "nhwcPartial8" : "nhwcPartial",
                     mode, T),
         tl.grid(), tl.block(),
         fmt::format("{}, {}, {}, {}, {}, {}, {}, {}, {}ll, {}, {}ll",
                     reductionScratch(nhwcScratchDoubles(mode, tl.tiles, C)),
                     ptr(a), orNull(b, "const " + T),
                     orNull(mask, "const " + T), orNull(mean, "const float"),
                     orNull(invstd, "const float"),
                     orNull(alpha, "const float"), orNull(beta, "const float"),
                     M, C, tl.rowsPerTile));
  return tl.tiles;
}

/// fused_max_pool2d_batch_norm_relu_grad (vec8: NHWC, C % 8 == 0, the only
/// form cnn-max-pool-index makes): fused_batch_norm_affine_relu_grad's two
/// passes with the pooling gradient gathered in each.
LogicalResult Emitter::poolBnGrad(std::string &out,
                                  FusedMaxPool2DBatchNormReluGradOp op) {
  if (loweringOf(op) != "vec8")
    return op.emitOpError("the CUDA target has this op for NHWC tensors of a "
                          "multiple of 8 channels only (cnn-select-lowering's "
                          "'vec8'), got ")
           << op.getInput().getType();
  auto x = op.getInput().getType();
  int64_t C = x.getDimSize(3), M = x.getNumElements() / C;
  NhwcTiling tl = nhwcTiling(M, C, /*vec=*/true, launchOf.getPartialBlocks(),
                              launchOf.getBlock());
  std::string T = ctype(x.getElementType()),
              S = ctype(ttype(op.getScale()).getElementType());
  std::string pp = poolParams(x, op.getGradOutput().getType(), op.getKernel(),
                              op.getStrides(), op.getPadding(), false, true);
  std::string scratch = reductionScratch(nhwcScratchDoubles(4, tl.tiles, C));
  launch(out, op, fmt::format("poolBnGradPartial8<{}>", T), tl.grid(),
         tl.block(),
         fmt::format("{}, {}, {}, {}, {}, {}, {}, {}, {}, {}ll", scratch,
                     ptr(op.getGradOutput()), ptr(op.getWindowIndex()),
                     ptr(op.getInput()), ptr(op.getSavedMean()),
                     ptr(op.getSavedInvstd()), ptr(op.getAlpha()),
                     ptr(op.getBeta()), pp, tl.rowsPerTile));
  launch(out, op, fmt::format("nhwcBnGradFinish<{}>", S), std::to_string(C),
         threads(),
         fmt::format("{}, {}, {}, {}, {}", scratch, ptr(op.getGradScale()),
                     ptr(op.getGradBias()), C, tl.tiles));
  launch(out, op, fmt::format("poolBnGradApply8<{}, {}>", T, S),
         gridFor(x.getNumElements() / 8), threads(),
         fmt::format("{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}",
                     ptr(op.getGradOutput()), ptr(op.getWindowIndex()),
                     ptr(op.getInput()), ptr(op.getSavedMean()),
                     ptr(op.getSavedInvstd()), ptr(op.getScale()),
                     ptr(op.getGradScale()), ptr(op.getGradBias()),
                     ptr(op.getAlpha()), ptr(op.getBeta()),
                     ptr(op.getGradInput()), pp, floatLit((double)M)));
  return success();
}

/// batch_norm_grad's apply pass as an elementwise statement writing r{r}:
/// dx = scale * invstd * (g - sum(g) / m - xhat * sum(g xhat) / m), `g` the
/// (masked) gradient's expression, the input at a{x} and mean, invstd,
/// scale, grad_scale, grad_bias at a{x + 1} ... a{x + 5}.
static std::string bnGradApplyExpr(int r, const std::string &g, int x,
                                   double m) {
  return fmt::format("{{ float xhat = (a{1} - a{2}) * a{3}; r{0} = a{4} * "
                     "a{3} * ({5} - a{7} / {6} - xhat * a{8} / {6}); }}",
                     r, x, x + 1, x + 2, x + 3, g, floatLit(m), x + 5, x + 4);
}

/// fused_dual_batch_norm_grad: with cnn-select-lowering's "vec8" (NHWC,
/// C % 8 == 0) one pass of the three sums (dy read once), then one apply
/// kernel writing both input gradients; otherwise the two batch_norm_grads.
void Emitter::dualBnGrad(std::string &out, FusedDualBatchNormGradOp op) {
  if (loweringOf(op) != "vec8") {
    bnGrad(out, op, op.isNHWC(), op.getGradOutput(), {}, op.getInputA(),
           op.getScaleA(), op.getSavedMeanA(), op.getSavedInvstdA(),
           op.getGradScaleA(), op.getGradBiasA(), op.getGradInputA());
    bnGrad(out, op, op.isNHWC(), op.getGradOutput(), {}, op.getInputB(),
           op.getScaleB(), op.getSavedMeanB(), op.getSavedInvstdB(),
           op.getGradScaleB(), op.getGradBiasB(), op.getGradInputB());
    return;
  }
  auto t = op.getGradOutput().getType();
  int64_t C = t.getDimSize(3), M = t.getNumElements() / C;
  NhwcTiling tl = nhwcTiling(M, C, /*vec=*/true, launchOf.getPartialBlocks(),
                              launchOf.getBlock());
  std::string T = ctype(t.getElementType()),
              S = ctype(ttype(op.getScaleA()).getElementType());
  // Three sums: sum(dy) and sum(dy * xhat) of each half.
  std::string scratch = reductionScratch(3 * tl.tiles * C);
  launch(out, op, fmt::format("dualBnGradPartial8<{}>", T), tl.grid(),
         tl.block(),
         fmt::format("{}, {}, {}, {}, {}, {}, {}, {}, {}ll, {}, {}ll", scratch,
                     ptr(op.getGradOutput()), ptr(op.getInputA()),
                     ptr(op.getInputB()), ptr(op.getSavedMeanA()),
                     ptr(op.getSavedInvstdA()), ptr(op.getSavedMeanB()),
                     ptr(op.getSavedInvstdB()), M, C, tl.rowsPerTile));
  launch(out, op, fmt::format("dualBnGradFinish<{}>", S), std::to_string(C),
         threads(),
         fmt::format("{}, {}, {}, {}, {}, {}, {}", scratch,
                     ptr(op.getGradScaleA()), ptr(op.getGradBiasA()),
                     ptr(op.getGradScaleB()), ptr(op.getGradBiasB()), C,
                     tl.tiles));
  // batch_norm_grad's apply expression for each half, dy loaded once.
  Channel ci = chanIndex(t, true);
  std::vector<EwIn> ins{{op.getGradOutput()},     {op.getInputA()},
                        {op.getSavedMeanA(), ci}, {op.getSavedInvstdA(), ci},
                        {op.getScaleA(), ci},     {op.getGradScaleA(), ci},
                        {op.getGradBiasA(), ci},  {op.getInputB()},
                        {op.getSavedMeanB(), ci}, {op.getSavedInvstdB(), ci},
                        {op.getScaleB(), ci},     {op.getGradScaleB(), ci},
                        {op.getGradBiasB(), ci}};
  elementwise(out, op, ins, {op.getGradInputA(), op.getGradInputB()},
              bnGradApplyExpr(0, "a0", 1, (double)M) +
                  bnGradApplyExpr(1, "a0", 7, (double)M));
}

void Emitter::bnGradSums(std::string &out, Operation *op, bool nhwc,
                         Value dy, Value reluOut, Value x, Value mean,
                         Value invstd, Value gradScale, Value gradBias,
                         const std::string &S, Value alpha, Value beta) {
  bool masked = reluOut || alpha;
  auto t = ttype(x);
  int64_t C = t.getDimSize(nhwc ? t.getRank() - 1 : 1);
  if (nhwc) {
    int mode = alpha ? 4 : reluOut ? 3 : 2;
    int64_t tiles =
        nhwcPartial(out, op, mode, dy, x, mean, invstd, reluOut, alpha, beta);
    launch(out, op, fmt::format("nhwcBnGradFinish<{}>", S), std::to_string(C),
           threads(),
           fmt::format("{}, {}, {}, {}, {}",
                       reductionScratch(nhwcScratchDoubles(mode, tiles, C)),
                       ptr(gradScale), ptr(gradBias), C, tiles));
  } else if (masked) {
    std::string T = ctype(t.getElementType());
    auto orNull = [&](Value v, const std::string &type) {
      return v ? ptr(v) : fmt::format("({} *)nullptr", type);
    };
    launch(out, op, fmt::format("bnReluGradReduce<{}, {}>", T, S),
           std::to_string(C), reduceThreads(),
           fmt::format("{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}ll",
                       ptr(dy), orNull(reluOut, "const " + T), ptr(x),
                       ptr(mean), ptr(invstd), orNull(alpha, "const float"),
                       orNull(beta, "const float"), ptr(gradScale),
                       ptr(gradBias), t.getDimSize(0), C, channelInner(t)));
  } else {
    launch(out, op,
           fmt::format("bnGradReduce<{}, {}>", ctype(t.getElementType()), S),
           std::to_string(C), reduceThreads(),
           fmt::format("{}, {}, {}, {}, {}, {}, {}, {}, {}ll", ptr(dy), ptr(x),
                       ptr(mean), ptr(invstd), ptr(gradScale), ptr(gradBias),
                       t.getDimSize(0), C, channelInner(t)));
  }
}

void Emitter::bnGrad(std::string &out, Operation *op, bool nhwc, Value dy,
                     Value reluOut, Value x, Value scale, Value mean,
                     Value invstd, Value gradScale, Value gradBias,
                     Value gradInput, Value alpha, Value beta) {
  bool masked = reluOut || alpha;
  auto t = ttype(x);
  int64_t C = t.getDimSize(nhwc ? t.getRank() - 1 : 1);
  std::string S = ctype(ttype(scale).getElementType());
  // Pass 1: per-channel sum(g) and sum(g * xhat), g = dy (masked by the ReLU
  // output when fused: the masked gradient is never stored).
  bnGradSums(out, op, nhwc, dy, reluOut, x, mean, invstd, gradScale, gradBias,
             S, alpha, beta);
  // Pass 2: dx = scale * invstd * (g - sum(g) / m - xhat * sum(g xhat) / m).
  Channel ci = chanIndex(t, nhwc);
  double m = (double)t.getNumElements() / C;
  std::vector<EwIn> ins{{dy}};
  if (reluOut)
    ins.push_back({reluOut});
  int o = reluOut ? 1 : 0; // input k is a{k + o}
  ins.insert(ins.end(), {{x},
                         {mean, ci},
                         {invstd, ci},
                         {scale, ci},
                         {gradScale, ci},
                         {gradBias, ci}});
  std::string g = masked ? "g" : "a0";
  std::string expr;
  if (reluOut) {
    expr = "float g = a1 > 0.f ? a0 : 0.f; ";
  } else if (alpha) {
    // The forward's x * alpha + beta (same expression, so the same fma),
    // rounded to the stored type as the ReLU output was.
    ins.insert(ins.end(), {{alpha, ci}, {beta, ci}});
    expr = fmt::format("float g = {} > 0.f ? a0 : 0.f; ",
                       roundTo(t.getElementType(), "a1 * a7 + a8"));
  }
  expr += bnGradApplyExpr(0, g, 1 + o, m);
  elementwise(out, op, ins, {gradInput}, expr);
}

void Emitter::bnStats(std::string &out, Operation *op, Value x, Value mean,
                      Value invstd, Value newMean, Value newVar, Value oldMean,
                      Value oldVar, APFloat eps, APFloat momentum, Value scale,
                      Value bias, Value alpha, Value beta) {
  auto t = ttype(x);
  std::string T = ctype(t.getElementType()),
              S = ctype(ttype(oldMean).getElementType());
  auto orNull = [&](Value v, const std::string &type) {
    return v ? ptr(v) : fmt::format("({} *)nullptr", type);
  };
  std::string affine = fmt::format(
      "{}, {}, {}, {}", orNull(scale, "const " + S), orNull(bias, "const " + S),
      orNull(alpha, "float"), orNull(beta, "float"));
  if (isNHWC(op)) {
    int64_t C = t.getDimSize(t.getRank() - 1);
    int64_t tiles = nhwcPartial(out, op, 1, x, {}, {}, {});
    launch(out, op, fmt::format("nhwcStatsFinish<{}, {}>", T, S),
           std::to_string(C), threads(),
           fmt::format(
               "{}, {}, {}, {}, {}, {}, {}, {}, {}, {}ll, {}, {}, {}, {}",
               reductionScratch(nhwcScratchDoubles(1, tiles, C)), ptr(x),
               ptr(mean), ptr(invstd), ptr(newMean), ptr(newVar), ptr(oldMean),
               ptr(oldVar), affine, t.getNumElements() / C, C, tiles,
               floatLit(eps.convertToFloat()), floatLit(dec(momentum))));
    return;
  }
  launch(out, op, fmt::format("bnStats<{}, {}>", T, S),
         std::to_string(t.getDimSize(1)), reduceThreads(),
         fmt::format("{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}ll, {}, {}",
                     ptr(x), ptr(mean), ptr(invstd), ptr(newMean), ptr(newVar),
                     ptr(oldMean), ptr(oldVar), affine, t.getDimSize(0),
                     t.getDimSize(1), channelInner(t),
                     floatLit(eps.convertToFloat()), floatLit(dec(momentum))));
}

LogicalResult Emitter::emitNHWC(Operation *op, std::string &out) {
  // The finishing kernels of nhwcPartial run one block per channel.
  auto finishGrid = [](int64_t C) { return std::to_string(C); };
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](BiasGradOp b) {
        auto t = b.getGradOutput().getType();
        int64_t C = t.getDimSize(t.getRank() - 1);
        int64_t tiles = nhwcPartial(out, op, 0, b.getGradOutput(), {}, {}, {});
        launch(out, op,
               fmt::format("nhwcSumFinish<{}>",
                           ctype(b.getType().getElementType())),
               finishGrid(C), threads(),
               fmt::format("{}, {}, {}, {}",
                           reductionScratch(nhwcScratchDoubles(0, tiles, C)),
                           ptr(b.getResult()), C, tiles));
        return success();
      })
      .Case([&](GlobalAvgPoolGradOp g) {
        auto t = g.getType();
        int64_t hw = t.getDimSize(1) * t.getDimSize(2), c = t.getDimSize(3);
        // dy is N x 1 x 1 x C: element (n, h, w, c) reads dy[n * C + c].
        elementwise(
            out, op,
            {{g.getGradOutput(),
              fmt::format("(i / {}ll) * {}ll + i % {}ll", hw * c, c, c)}},
            {g.getResult()}, "r0 = a0 / " + floatLit((double)hw) + ";");
        return success();
      })
      .Default([&](Operation *o) {
        return o->emitError("CUDA backend: no NHWC lowering for '")
               << o->getName() << "'";
      });
}

LogicalResult Emitter::print(std::string &out, ConstantOp c) {
  Operation *op = c;
  auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!attr || !attr.isSplat() || !isa<FloatType>(attr.getElementType()))
    return c.emitError("CUDA backend: only splat floating-point constants are "
                       "supported");
  elementwise(
      out, op, {}, {c.getResult()},
      "r0 = " + floatLit(attr.getSplatValue<APFloat>().convertToDouble()) +
          ";");
  return success();
}

LogicalResult Emitter::print(std::string &out, Conv2DOp c) {
  Operation *op = c;
  auto x = c.getInput().getType(), y = c.getType();
  if (loweringOf(op) == "gemm") {
    // Y[NHW, K] = X[NHW, C] W[K, C]^T
    int64_t M = y.getNumElements() / y.getDimSize(3);
    int id = matmulId(op, M, y.getDimSize(3), x.getDimSize(3), false, true,
                      y.getElementType());
    out += fmt::format("  ctx.matmul({}, {}, {}, {});\n", id, ptr(c.getInput()),
                       ptr(c.getFilter()), ptr(c.getResult()));
    ++numLaunches;
    return success();
  }
  int id = convId(op, c.getInput().getType(), c.getFilter().getType(),
                  c.getType(), c.getStrides(), c.getPadding(), c.getDilations(),
                  c.getGroups(), isNHWC(op));
  out += fmt::format("  ctx.convFwd({}, {}, {}, {});\n", id, ptr(c.getInput()),
                     ptr(c.getFilter()), ptr(c.getResult()));
  ++numLaunches;
  return success();
}

LogicalResult Emitter::print(std::string &out, Conv2DBwdDataOp c) {
  Operation *op = c;
  auto dx = c.getType(), dy = c.getGradOutput().getType();
  if (loweringOf(op) == "gemm") {
    // dX[NHW, C] = dY[NHW, K] W[K, C]
    int64_t M = dx.getNumElements() / dx.getDimSize(3);
    int id = matmulId(op, M, dx.getDimSize(3), dy.getDimSize(3), false, false,
                      dx.getElementType());
    out += fmt::format("  ctx.matmul({}, {}, {}, {});\n", id,
                       ptr(c.getGradOutput()), ptr(c.getFilter()),
                       ptr(c.getResult()));
    ++numLaunches;
    return success();
  }
  int id = convId(op, c.getType(), c.getFilter().getType(),
                  c.getGradOutput().getType(), c.getStrides(), c.getPadding(),
                  c.getDilations(), c.getGroups(), isNHWC(op));
  out += fmt::format("  ctx.convBwdData({}, {}, {}, {});\n", id,
                     ptr(c.getGradOutput()), ptr(c.getFilter()),
                     ptr(c.getResult()));
  ++numLaunches;
  return success();
}

LogicalResult Emitter::print(std::string &out, Conv2DBwdFilterOp c) {
  Operation *op = c;
  auto x = c.getInput().getType(), dy = c.getGradOutput().getType();
  if (loweringOf(op) == "gemm") {
    // dW[K, C] = dY[NHW, K]^T X[NHW, C]
    int64_t M = x.getNumElements() / x.getDimSize(3);
    int id = matmulId(op, dy.getDimSize(3), x.getDimSize(3), M, true, false,
                      x.getElementType());
    out += fmt::format("  ctx.matmul({}, {}, {}, {});\n", id,
                       ptr(c.getGradOutput()), ptr(c.getInput()),
                       ptr(c.getResult()));
    ++numLaunches;
    return success();
  }
  int id = convId(op, c.getInput().getType(), c.getType(),
                  c.getGradOutput().getType(), c.getStrides(), c.getPadding(),
                  c.getDilations(), c.getGroups(), isNHWC(op));
  out += fmt::format("  ctx.convBwdFilter({}, {}, {}, {});\n", id,
                     ptr(c.getInput()), ptr(c.getGradOutput()),
                     ptr(c.getResult()));
  ++numLaunches;
  return success();
}

LogicalResult Emitter::print(std::string &out, MatmulOp m) {
  Operation *op = m;
  auto t = m.getType();
  bool ta = m.getTransposeLhs();
  int64_t row = t.getRank() - 2, col = t.getRank() - 1;
  int64_t mm = t.getDimSize(row), n = t.getDimSize(col);
  int64_t k = m.getLhs().getType().getDimSize(ta ? row : col);
  int id = matmulId(op, mm, n, k, ta, m.getTransposeRhs(), t.getElementType());
  // A batched product is one matmul per index of the leading
  // dimensions.
  int64_t batch = 1;
  for (int64_t d : t.getShape().drop_back(2))
    batch *= d;
  if (batch == 1) {
    out += fmt::format("  ctx.matmul({}, {}, {}, {});\n", id, ptr(m.getLhs()),
                       ptr(m.getRhs()), ptr(m.getResult()));
  } else {
    out += fmt::format("  for (int64_t bi = 0; bi < {}ll; ++bi)\n"
                       "    ctx.matmul({}, {} + bi * {}ll, {} + bi * {}ll, "
                       "{} + bi * {}ll);\n",
                       batch, id, ptr(m.getLhs()), mm * k, ptr(m.getRhs()),
                       k * n, ptr(m.getResult()), mm * n);
  }
  numLaunches += batch;
  return success();
}

LogicalResult Emitter::print(std::string &out, BiasAddOp b) {
  Operation *op = b;
  elementwise(
      out, op,
      {{b.getInput()}, {b.getBias(), chanIndex(b.getType(), isNHWC(op))}},
      {b.getResult()}, "r0 = a0 + a1;");
  return success();
}

LogicalResult Emitter::printReduction(std::string &out, Operation *o) {
  Operation *op = o;
  // Sums (or maxima) in f32: one thread per result element, or one
  // block per result (below), as #cnn.launch's reduction says.
  auto in = ttype(o->getOperand(0)), res = ttype(o->getResult(0));
  auto axes = o->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
  // cnn-select-lowering: one run of dimensions summed in global_avg_pool's
  // blocks (kernels/PoolingNHWC.cuh).
  if (auto printed = printChosenLowering(
          out, o, "spatial_sum", describeSpatialReduction,
          "does not sum one run of dimensions as spatialSumTiles can"))
    return *printed;
  if (auto l = o->getAttrOfType<StringAttr>("cnn.lowering");
      l && l.getValue().starts_with("channel_sum")) {
    // cnn-select-lowering: rows of C contiguous channels, summed by
    // bias_grad's two coalesced passes.
    int64_t C = in.getDimSize(in.getRank() - 1);
    int64_t rows = in.getNumElements() / std::max<int64_t>(C, 1);
    int64_t tiles = nhwcPartial(out, o, 0, o->getOperand(0), {}, {}, {});
    launch(out, o,
           fmt::format("nhwcScaledSumFinish<{}>", ctype(res.getElementType())),
           std::to_string(C), threads(),
           fmt::format("{}, {}, {}, {}, {}",
                       reductionScratch(nhwcScratchDoubles(0, tiles, C)),
                       ptr(o->getResult(0)), C, tiles,
                       isa<ReduceMeanOp>(o) ? fmt::format("1.0 / {}.0", rows)
                                            : std::string("1.0")));
    return success();
  }
  std::vector<int64_t> stride(in.getRank());
  int64_t st = 1, count = 1;
  for (int64_t d = in.getRank() - 1; d >= 0; --d) {
    stride[d] = st;
    st *= in.getDimSize(d);
  }
  std::string base, inner;
  int64_t outStride = 1, redStride = 1;
  for (int64_t d = in.getRank() - 1; d >= 0; --d) {
    if (llvm::is_contained(axes, d)) {
      inner += fmt::format(" + (r / {}ll) % {}ll * {}ll", redStride,
                           in.getDimSize(d), stride[d]);
      redStride *= in.getDimSize(d);
      count *= in.getDimSize(d);
    } else {
      base += fmt::format(" + (o / {}ll) % {}ll * {}ll", outStride,
                          res.getDimSize(d), stride[d]);
      outStride *= res.getDimSize(d);
    }
  }
  double factor = isa<ReduceMeanOp>(o) ? 1.0 / (double)count : 1.0;
  bool isMax = isa<ReduceMaxOp>(o);
  int64_t n = res.getNumElements();
  const char *init = isMax ? "-INFINITY" : "0.f";
  // A NaN propagates, as numpy's max does.
  const char *combine =
      isMax ? "acc = (v > acc || v != v) ? v : acc;" : "acc += v;";
  // cnn-prepare-for-emission's strategy.
  if (launchOf.getReduction().getValue() == "block_per_result") {
    // Few results, each of many elements: a block per result, its 256
    // threads striding over the reduced elements, then a fixed-order
    // warp/block reduction (deterministic).
    std::string name = kernel(
        fmt::format("const {} *__restrict__ in0, {} *__restrict__ out0",
                    ctype(in.getElementType()), ctype(res.getElementType())),
        fmt::format("  const int64_t o = blockIdx.x;\n"
                    "  const int64_t b = 0{};\n"
                    "  float acc = {};\n"
                    "  for (int64_t r = threadIdx.x; r < {}ll; r += 256) {{\n"
                    "    const float v = ld(in0 + b{});\n"
                    "    {}\n"
                    "  }}\n"
                    "  __shared__ float part[8];\n"
                    "  for (int off = 16; off > 0; off >>= 1) {{\n"
                    "    const float v = __shfl_down_sync(0xffffffffu, acc, "
                    "off);\n"
                    "    {}\n"
                    "  }}\n"
                    "  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = "
                    "acc;\n"
                    "  __syncthreads();\n"
                    "  if (threadIdx.x < 32) {{\n"
                    "    acc = threadIdx.x < 8 ? part[threadIdx.x] : {};\n"
                    "    for (int off = 16; off > 0; off >>= 1) {{\n"
                    "      const float v = __shfl_down_sync(0xffffffffu, acc, "
                    "off);\n"
                    "      {}\n"
                    "    }}\n"
                    "    if (threadIdx.x == 0) st(out0 + o, acc * {});\n"
                    "  }}\n",
                    base, init, count, inner, combine, combine, init, combine,
                    floatLit(factor)));
    launch(out, op, name, std::to_string(n), threads(),
           fmt::format("{}, {}", ptr(o->getOperand(0)), ptr(o->getResult(0))));
    return success();
  }
  std::string name = kernel(
      fmt::format("const {} *__restrict__ in0, {} *__restrict__ out0",
                  ctype(in.getElementType()), ctype(res.getElementType())),
      fmt::format("  for (int64_t o = blockIdx.x * 256ll + threadIdx.x; "
                  "o < {}ll; "
                  "o += (int64_t)gridDim.x * 256) {{\n"
                  "    const int64_t b = 0{};\n"
                  "    float acc = {};\n"
                  "    for (int64_t r = 0; r < {}ll; ++r) {{\n"
                  "      const float v = ld(in0 + b{});\n"
                  "      {}\n"
                  "    }}\n"
                  "    st(out0 + o, acc * {});\n"
                  "  }}\n",
                  n, base, init, count, inner, combine, floatLit(factor)));
  launch(out, op, name, gridFor(n), threads(),
         fmt::format("{}, {}", ptr(o->getOperand(0)), ptr(o->getResult(0))));
  return success();
}

LogicalResult Emitter::print(std::string &out, DropoutMaskOp d) {
  Operation *op = d;
  double ratio = dec(d.getRatio());
  elementwise(
      out, op, {{d.getStep(), "0"}}, {d.getResult()},
      fmt::format("uint64_t h = splitmix64(splitmix64(splitmix64({}ull) + "
                  "(uint64_t)a0) + (uint64_t)i); float u = (float)(h >> 40) "
                  "* (1.0f / 16777216.0f); r0 = u < {} ? 0.f : {};",
                  d.getSeed(), floatLit(ratio), floatLit(1.0 / (1.0 - ratio))));
  return success();
}

LogicalResult Emitter::print(std::string &out, GlobalAvgPoolGradOp g) {
  Operation *op = g;
  auto t = g.getType();
  int64_t hw = t.getDimSize(2) * t.getDimSize(3);
  elementwise(out, op, {{g.getGradOutput(), fmt::format("i / {}ll", hw)}},
              {g.getResult()}, "r0 = a0 / " + floatLit((double)hw) + ";");
  return success();
}

LogicalResult Emitter::print(std::string &out, BiasGradOp b) {
  Operation *op = b;
  auto t = b.getGradOutput().getType();
  launch(out, op,
         fmt::format("channelSum<{}, {}>", ctype(t.getElementType()),
                     ctype(b.getType().getElementType())),
         std::to_string(t.getDimSize(1)), reduceThreads(),
         fmt::format("{}, {}, {}, {}, {}ll", ptr(b.getGradOutput()),
                     ptr(b.getResult()), t.getDimSize(0), t.getDimSize(1),
                     channelInner(t)));
  return success();
}

LogicalResult Emitter::print(std::string &out, BatchNormOp b) {
  Operation *op = b;
  Channel ci = chanIndex(b.getType(), isNHWC(op));
  elementwise(out, op,
              {{b.getInput()},
               {b.getScale(), ci},
               {b.getBias(), ci},
               {b.getMean(), ci},
               {b.getVar(), ci}},
              {b.getResult()},
              fmt::format("r0 = (a0 - a3) * rsqrtf(a4 + {}) * a1 + a2;",
                          floatLit(b.getEpsilon().convertToFloat())));
  return success();
}

LogicalResult Emitter::print(std::string &out, BatchNormTrainOp b) {
  Operation *op = b;
  auto t = b.getInput().getType();
  bnStats(out, op, b.getInput(), b.getSavedMean(), b.getSavedInvstd(),
          b.getNewRunningMean(), b.getNewRunningVar(), b.getRunningMean(),
          b.getRunningVar(), b.getEpsilon(), b.getMomentum());
  Channel ci = chanIndex(t, isNHWC(op));
  elementwise(out, op,
              {{b.getInput()},
               {b.getSavedMean(), ci},
               {b.getSavedInvstd(), ci},
               {b.getScale(), ci},
               {b.getBias(), ci}},
              {b.getResult()}, "r0 = (a0 - a1) * a2 * a3 + a4;");
  return success();
}

LogicalResult Emitter::print(std::string &out, FusedElementwiseOp f) {
  Operation *op = f;
  // The body becomes straight-line C; inputs are indexed per broadcast.
  auto rt = cast<RankedTensorType>(f.getResult(0).getType());
  bool nhwc = f.isNHWC() && rt.getRank() == 4;
  Channel ch = chanIndex(rt, nhwc);
  std::vector<EwIn> ins;
  for (auto [k, v] : llvm::enumerate(f.getInputs())) {
    int64_t b = f.getBroadcast()[k];
    ins.push_back(b == 0   ? EwIn(v)
                  : b == 1 ? EwIn(v, ch)
                  : b == 3 ? EwIn(v, broadcastIndex(ttype(v), rt))
                           : EwIn(v, "0"));
  }
  Block &body = f.getBody().front();
  DenseMap<Value, std::string> name;
  for (auto [k, a] : llvm::enumerate(body.getArguments()))
    name[a] = fmt::format("a{}", k);
  std::string expr;
  int t = 0;
  for (Operation &o : body.without_terminator()) {
    auto x = [&](unsigned k) { return name.lookup(o.getOperand(k)); };
    std::string v = fmt::format("t{}", t++), e;
    bool isBool = o.getResult(0).getType().isInteger(1);
    if (auto cst = dyn_cast<arith::ConstantOp>(o)) {
      if (auto fa = dyn_cast<FloatAttr>(cst.getValue()))
        e = floatLit(fa.getValueAsDouble());
      else
        e = cast<IntegerAttr>(cst.getValue()).getValue().isZero() ? "false"
                                                                  : "true";
    } else if (isa<arith::AddFOp>(o)) {
      e = x(0) + " + " + x(1);
    } else if (isa<arith::SubFOp>(o)) {
      e = x(0) + " - " + x(1);
    } else if (isa<arith::MulFOp>(o)) {
      e = x(0) + " * " + x(1);
    } else if (isa<arith::DivFOp>(o)) {
      e = x(0) + " / " + x(1);
    } else if (isa<arith::MaximumFOp, arith::MaxNumFOp>(o)) {
      e = "fmaxf(" + x(0) + ", " + x(1) + ")";
    } else if (isa<arith::MinimumFOp, arith::MinNumFOp>(o)) {
      e = "fminf(" + x(0) + ", " + x(1) + ")";
    } else if (auto cmp = dyn_cast<arith::CmpFOp>(o)) {
      using P = arith::CmpFPredicate;
      const char *opStr = nullptr;
      switch (cmp.getPredicate()) {
      case P::OGT:
        opStr = ">";
        break;
      case P::OGE:
        opStr = ">=";
        break;
      case P::OLT:
        opStr = "<";
        break;
      case P::OLE:
        opStr = "<=";
        break;
      case P::OEQ:
        opStr = "==";
        break;
      case P::UNE:
        opStr = "!=";
        break;
      default:
        break;
      }
      if (!opStr)
        return o.emitError(
            "CUDA backend: unsupported comparison in a fused body");
      e = x(0) + " " + opStr + " " + x(1);
    } else if (isa<arith::SelectOp>(o)) {
      e = x(0) + " ? " + x(1) + " : " + x(2);
    } else if (isa<arith::AndIOp>(o)) {
      e = x(0) + " && " + x(1);
    } else if (isa<arith::OrIOp>(o)) {
      e = x(0) + " || " + x(1);
    } else if (isa<arith::NegFOp>(o)) {
      e = "-" + x(0);
    } else if (isa<arith::TruncFOp>(o)) {
      e = "__half2float(__float2half_rn(" + x(0) + "))";
    } else if (isa<arith::ExtFOp>(o)) {
      e = x(0);
    } else if (isa<math::ExpOp>(o)) {
      e = "expf(" + x(0) + ")";
    } else if (isa<math::ExpM1Op>(o)) {
      e = "expm1f(" + x(0) + ")";
    } else if (isa<math::LogOp>(o)) {
      e = "logf(" + x(0) + ")";
    } else if (isa<math::Log1pOp>(o)) {
      e = "log1pf(" + x(0) + ")";
    } else if (isa<math::TanhOp>(o)) {
      e = "tanhf(" + x(0) + ")";
    } else if (isa<math::ErfOp>(o)) {
      e = "erff(" + x(0) + ")";
    } else if (isa<math::SqrtOp>(o)) {
      e = "sqrtf(" + x(0) + ")";
    } else if (isa<math::PowFOp>(o)) {
      e = "powf(" + x(0) + ", " + x(1) + ")";
    } else {
      return o.emitError("CUDA backend: unsupported op in a fused body: '")
             << o.getName() << "'";
    }
    expr += fmt::format("{} {} = {}; ", isBool ? "bool" : "float", v, e);
    name[o.getResult(0)] = v;
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  for (auto [k, y] : llvm::enumerate(yield.getValues()))
    expr += fmt::format("r{} = {}; ", k, name.lookup(y));
  SmallVector<Value> outs(f.getResults());
  // A member of a cnn.cast_group runs in its group's kernel.
  return groupedElementwise(out, op, ins, outs, expr);
}

LogicalResult Emitter::print(std::string &out, FusedConv2DOp c) {
  Operation *op = c;
  bool nhwc = c.isNHWC();
  int id = convId(op, c.getInput().getType(), c.getFilter().getType(),
                  c.getType(), c.getStrides(), c.getPadding(), c.getDilations(),
                  c.getGroups(), nhwc);
  // Epilogue in one kernel, in place on the convolution's output.
  std::vector<EwIn> ins{{c.getResult()}};
  std::string e = "float v = a0;";
  int k = 1;
  if (c.getBias()) {
    ins.push_back({c.getBias(), chanIndex(c.getType(), nhwc)});
    e += fmt::format(" v += a{};", k++);
  }
  if (c.getResidual()) {
    ins.push_back({c.getResidual()});
    e += fmt::format(" v += a{};", k++);
  }
  StringRef act = c.getActivation();
  if (act == "relu")
    e += " v = v > 0.f ? v : 0.f;";
  else if (act == "clip")
    e += fmt::format(" v = fminf(fmaxf(v, {}), {});",
                     floatLit(c.getClipMin().convertToFloat()),
                     floatLit(c.getClipMax().convertToFloat()));
  e += " r0 = v;";
  Type et = c.getType().getElementType();
  // cudnnConvolutionBiasActivationForward computes exactly
  // relu/identity(conv + bias [+ residual]) with the bias in the data
  // type: the runtime times it against conv + this epilogue and runs
  // the faster (its algorithm cache keeps the choice).
  bool cudnnForm = loweringOf(op) == "cudnn_bias_act";
  if (!cudnnForm) {
    out +=
        fmt::format("  ctx.convFwd({}, {}, {}, {});\n", id, ptr(c.getInput()),
                    ptr(c.getFilter()), ptr(c.getResult()));
    ++numLaunches;
    if (k == 1 && act == "none")
      return success();
    elementwise(out, op, ins, {c.getResult()}, e);
    return success();
  }
  int fid = numFusedConvs++;
  std::string T = ctype(et), body;
  ptrOverride[c.getResult()] = fmt::format("static_cast<{} *>(y)", T);
  ptrOverride[c.getBias()] = fmt::format("static_cast<const {} *>(bias)", T);
  if (c.getResidual())
    ptrOverride[c.getResidual()] =
        fmt::format("static_cast<const {} *>(residual)", T);
  elementwise(body, op, ins, {c.getResult()}, e);
  ptrOverride.clear();
  // Identical epilogues (the eval step's, equal shapes) share a function.
  const std::string &fn =
      hostFunction(epilogueByBody, "convEpilogue",
                   "cnnrt::Context &ctx, void *y, const void *bias,\n"
                   "    const void *residual",
                   "  (void)residual;\n" + body);
  prepare += fmt::format("  ctx.registerConvBiasAct({}, {}, "
                         "cnnrt::Activation::{}, {}, {}, \"{}\");\n",
                         fid, id, act == "relu" ? "Relu" : "Identity",
                         c.getResidual() ? "true" : "false", fn, loc(op));
  out += fmt::format("  ctx.convBiasActFwd({}, {}, {}, {}, {}, {});\n", fid,
                     ptr(c.getInput()), ptr(c.getFilter()), ptr(c.getBias()),
                     c.getResidual() ? ptr(c.getResidual()) : "nullptr",
                     ptr(c.getResult()));
  ++numLaunches;
  return success();
}

LogicalResult Emitter::print(std::string &out, FusedConv2DStatsOp c) {
  Operation *op = c;
  auto x = c.getInput().getType(), y = c.getResult().getType();
  if (!c.isNHWC() || !y.getElementType().isF16() || y.getDimSize(3) % 8)
    return c.emitError("CUDA backend: fused_conv2d_stats needs NHWC f16 "
                       "with a multiple of 8 channels (cuDNN's GenStats "
                       "graph and the vectorized split form), got ")
           << y;
  int id = convId(op, x, c.getFilter().getType(), y, c.getStrides(),
                  c.getPadding(), c.getDilations(), c.getGroups(), c.isNHWC());
  // The split form, for shapes cuDNN's conv + GenStats graph refuses
  // (or runs slower): the convolution as cnn-select-lowering chose it,
  // then the two-pass channel sums.
  std::string body;
  std::string T = ctype(y.getElementType());
  bool prologue = c.getScale() != nullptr;
  if (prologue) // the normalized input, read from the scratch buffer
    body += scaleShiftReluToScratch(op, x, T) + "  x = scratch;\n";
  ptrOverride[c.getInput()] = "x";
  ptrOverride[c.getFilter()] = "w";
  ptrOverride[c.getResult()] =
      fmt::format("static_cast<{} *>(y)", ctype(y.getElementType()));
  int64_t launchesBefore = numLaunches;
  if (loweringOf(op) == "gemm") {
    int64_t M = y.getNumElements() / y.getDimSize(3);
    int mid = matmulId(op, M, y.getDimSize(3), x.getDimSize(3), false, true,
                       y.getElementType());
    body += fmt::format("  ctx.matmul({}, x, w, y);\n", mid);
  } else {
    body += fmt::format("  ctx.convFwd({}, x, w, y);\n", id);
  }
  int64_t C = y.getDimSize(3), M = y.getNumElements() / C;
  int64_t tiles = nhwcPartial(body, op, 1, c.getResult(), {}, {}, {});
  launch(body, op, fmt::format("nhwcSumsFinish<{}>", ctype(y.getElementType())),
         std::to_string(C), threads(),
         fmt::format("{}, {}, sum, sumSq, {}ll, {}, {}",
                     reductionScratch(nhwcScratchDoubles(1, tiles, C)),
                     ptr(c.getResult()), M, C, tiles));
  ptrOverride.clear();
  // A step counts the fused graph's one launch (the runtime picks).
  numLaunches = launchesBefore + 1;
  const std::string &fn = hostFunction(
      convStatsByBody, "convStatsSplit",
      "cnnrt::Context &ctx, const void *x, const void *w,\n"
      "    void *y, float *sum, float *sumSq, const float *scale,\n"
      "    const float *shift, void *scratch",
      "  (void)scale; (void)shift; (void)scratch;\n" + body);
  int sid = numConvStats++;
  prepare += fmt::format("  ctx.registerConvStats({}, {}, {}, {}, \"{}\");\n",
                         sid, id, fn, prologue ? "true" : "false", loc(op));
  out += fmt::format("  ctx.convStatsFwd({}, {}, {}, {}, {}, {}, {}, {});\n",
                     sid, ptr(c.getInput()), ptr(c.getFilter()),
                     ptr(c.getResult()), ptr(c.getSum()), ptr(c.getSumSq()),
                     prologue ? ptr(c.getScale()) : "nullptr",
                     prologue ? ptr(c.getShift()) : "nullptr");
  return success();
}

LogicalResult Emitter::print(std::string &out, FusedConv2DBwdFilterOp c) {
  Operation *op = c;
  auto x = c.getInput().getType(), dy = c.getGradOutput().getType();
  if (!c.isNHWC() || !x.getElementType().isF16() || x.getDimSize(3) % 8 ||
      dy.getDimSize(3) % 8)
    return c.emitError("CUDA backend: fused_conv2d_bwd_filter needs "
                       "NHWC f16 with multiples of 8 channels (cuDNN's "
                       "prologue + wgrad graph), got ")
           << x;
  int id = convId(op, x, c.getType(), dy, c.getStrides(), c.getPadding(),
                  c.getDilations(), c.getGroups(), c.isNHWC());
  // The split form, for shapes cuDNN's scale-bias-ReLU + wgrad graph
  // refuses (or runs slower): the normalization into the runtime's
  // scratch buffer, then the convolution as cnn-select-lowering chose
  // it.
  std::string T = ctype(x.getElementType());
  std::string body = scaleShiftReluToScratch(op, x, T);
  if (loweringOf(op) == "gemm") {
    // dW[K, C] = dY[NHW, K]^T X[NHW, C]
    int64_t M = x.getNumElements() / x.getDimSize(3);
    int mid = matmulId(op, dy.getDimSize(3), x.getDimSize(3), M, true, false,
                       x.getElementType());
    body += fmt::format("  ctx.matmul({}, dy, scratch, dw);\n", mid);
  } else {
    body += fmt::format("  ctx.convBwdFilter({}, scratch, dy, dw);\n", id);
  }
  const std::string &fn = hostFunction(
      wgradSplitByBody, "wgradPrologueSplit",
      "cnnrt::Context &ctx, const void *x, const void *dy,\n"
      "    void *dw, const float *scale, const float *shift, void *scratch",
      body);
  int wid = numWgradPrologues++;
  prepare +=
      fmt::format("  ctx.registerConvBwdFilterPrologue({}, {}, {}, \"{}\");\n",
                  wid, id, fn, loc(op));
  out += fmt::format("  ctx.convBwdFilterPrologue({}, {}, {}, {}, {}, {});\n",
                     wid, ptr(c.getInput()), ptr(c.getGradOutput()),
                     ptr(c.getResult()), ptr(c.getScale()), ptr(c.getShift()));
  ++numLaunches;
  return success();
}

LogicalResult Emitter::print(std::string &out, FusedConv2DBwdDataOp c) {
  Operation *op = c;
  auto dx = c.getResult().getType(), dy = c.getGradOutput().getType();
  if (!c.isNHWC() || !dx.getElementType().isF16() || dx.getDimSize(3) % 8 ||
      dy.getDimSize(3) % 8)
    return c.emitError("CUDA backend: fused_conv2d_bwd_data needs NHWC "
                       "f16 with multiples of 8 channels (cuDNN's dgrad "
                       "graph and the vectorized split form), got ")
           << dx;
  int id = convId(op, dx, c.getFilter().getType(), dy, c.getStrides(),
                  c.getPadding(), c.getDilations(), c.getGroups(), c.isNHWC());
  // The split form, for shapes cuDNN's dgrad + add + ReLU-backward
  // graph refuses (or runs slower): the convolution as
  // cnn-select-lowering chose it, then the epilogue in place, rounded
  // as the unfused add and relu_grad store their results.
  std::string T = ctype(dx.getElementType()), body;
  ptrOverride[c.getGradOutput()] = "dy";
  ptrOverride[c.getFilter()] = "w";
  ptrOverride[c.getAddend()] =
      fmt::format("static_cast<const {} *>(addend)", T);
  ptrOverride[c.getReluOutput()] =
      fmt::format("static_cast<const {} *>(reluOut)", T);
  ptrOverride[c.getResult()] = fmt::format("static_cast<{} *>(dx)", T);
  int64_t launchesBefore = numLaunches;
  if (loweringOf(op) == "gemm") {
    // dX[NHW, C] = dY[NHW, K] W[K, C]
    int64_t M = dx.getNumElements() / dx.getDimSize(3);
    int mid = matmulId(op, M, dx.getDimSize(3), dy.getDimSize(3), false, false,
                       dx.getElementType());
    body += fmt::format("  ctx.matmul({}, dy, w, dx);\n", mid);
  } else {
    body += fmt::format("  ctx.convBwdData({}, dy, w, dx);\n", id);
  }
  elementwise(body, op, {{c.getResult()}, {c.getAddend()}, {c.getReluOutput()}},
              {c.getResult()},
              fmt::format("r0 = a2 > 0.f ? {} : 0.f;",
                          roundTo(dx.getElementType(), "a0 + a1")));
  ptrOverride.clear();
  // A step counts the fused graph's one launch (the runtime picks).
  numLaunches = launchesBefore + 1;
  const std::string &fn =
      hostFunction(dgradSplitByBody, "dgradAddReluSplit",
                   "cnnrt::Context &ctx, const void *dy, const void *w,\n"
                   "    const void *addend, const void *reluOut, void *dx",
                   body);
  int did = numDgradEpilogues++;
  prepare +=
      fmt::format("  ctx.registerConvBwdDataAddRelu({}, {}, {}, \"{}\");\n",
                  did, id, fn, loc(op));
  out += fmt::format("  ctx.convBwdDataAddRelu({}, {}, {}, {}, {}, {});\n", did,
                     ptr(c.getGradOutput()), ptr(c.getFilter()),
                     ptr(c.getAddend()), ptr(c.getReluOutput()),
                     ptr(c.getResult()));
  return success();
}

LogicalResult Emitter::print(std::string &out, BatchNormStatsOp b) {
  Operation *op = b;
  bnStats(out, op, b.getInput(), b.getSavedMean(), b.getSavedInvstd(),
          b.getNewRunningMean(), b.getNewRunningVar(), b.getRunningMean(),
          b.getRunningVar(), b.getEpsilon(), b.getMomentum(), b.getScale(),
          b.getBias(), b.getAlpha(), b.getBeta());
  return success();
}

LogicalResult Emitter::print(std::string &out, BatchNormSumsOp b) {
  Operation *op = b;
  auto t = ttype(b.getInput());
  std::string T = ctype(t.getElementType());
  if (isNHWC(op)) {
    // nhwcPartial's shifted sums (MODE 1), then the plain sums.
    int64_t C = t.getDimSize(t.getRank() - 1);
    int64_t tiles = nhwcPartial(out, op, 1, b.getInput(), {}, {}, {});
    launch(out, op, fmt::format("nhwcSumsFinish<{}>", T), std::to_string(C),
           threads(),
           fmt::format("{}, {}, {}, {}, {}ll, {}, {}",
                       reductionScratch(nhwcScratchDoubles(1, tiles, C)),
                       ptr(b.getInput()), ptr(b.getSum()), ptr(b.getSumSq()),
                       t.getNumElements() / C, C, tiles));
    return success();
  }
  launch(out, op, fmt::format("bnSums<{}>", T), std::to_string(t.getDimSize(1)),
         reduceThreads(),
         fmt::format("{}, {}, {}, {}, {}, {}ll", ptr(b.getInput()),
                     ptr(b.getSum()), ptr(b.getSumSq()), t.getDimSize(0),
                     t.getDimSize(1), channelInner(t)));
  return success();
}

LogicalResult Emitter::print(std::string &out, BatchNormGradSumsOp b) {
  Operation *op = b;
  // batch_norm_grad's first pass alone: grad_scale = sum(dy * xhat)
  // into sum_dy_xhat, grad_bias = sum(dy) into sum_dy.
  bnGradSums(out, op, isNHWC(op), b.getGradOutput(), {}, b.getInput(),
             b.getSavedMean(), b.getSavedInvstd(), b.getSumDyXhat(),
             b.getSumDy(), "float");
  return success();
}

LogicalResult Emitter::print(std::string &out,
                             FusedBatchNormAffineReluGradSumsOp b) {
  Operation *op = b;
  // The same first pass, the ReLU mask recomputed from x (as
  // fused_batch_norm_affine_relu_grad's).
  bnGradSums(out, op, isNHWC(op), b.getGradOutput(), {}, b.getInput(),
             b.getSavedMean(), b.getSavedInvstd(), b.getSumDyXhat(),
             b.getSumDy(), "float", b.getAlpha(), b.getBeta());
  return success();
}

LogicalResult Emitter::print(std::string &out, FusedBatchNormReluGradOp b) {
  Operation *op = b;
  bnGrad(out, op, b.isNHWC(), b.getGradOutput(), b.getReluOutput(),
         b.getInput(), b.getScale(), b.getSavedMean(), b.getSavedInvstd(),
         b.getGradScale(), b.getGradBias(), b.getGradInput());
  return success();
}

LogicalResult Emitter::print(std::string &out,
                             FusedBatchNormAffineReluGradOp b) {
  Operation *op = b;
  bnGrad(out, op, b.isNHWC(), b.getGradOutput(), {}, b.getInput(), b.getScale(),
         b.getSavedMean(), b.getSavedInvstd(), b.getGradScale(),
         b.getGradBias(), b.getGradInput(), b.getAlpha(), b.getBeta());
  return success();
}

LogicalResult Emitter::print(std::string &out, FusedDualBatchNormGradOp b) {
  dualBnGrad(out, b);
  return success();
}

LogicalResult Emitter::print(std::string &out, BatchNormGradOp b) {
  Operation *op = b;
  bnGrad(out, op, isNHWC(op), b.getGradOutput(), {}, b.getInput(), b.getScale(),
         b.getSavedMean(), b.getSavedInvstd(), b.getGradScale(),
         b.getGradBias(), b.getGradInput());
  return success();
}

LogicalResult Emitter::print(std::string &out,
                             FusedMaxPool2DBatchNormReluGradOp b) {
  return poolBnGrad(out, b);
}

LogicalResult Emitter::print(std::string &out, ConcatOp c) {
  Operation *op = c;
  auto t = c.getType();
  int64_t axis = c.getAxis(), inner = 1, offset = 0;
  for (int64_t d = axis + 1; d < t.getRank(); ++d)
    inner *= t.getDimSize(d);
  int64_t outAxis = t.getDimSize(axis);
  for (Value in : c.getInputs()) {
    auto it = ttype(in);
    int64_t a = it.getDimSize(axis), n = it.getNumElements();
    std::string T = ctype(t.getElementType());
    std::string body = fmt::format(
        "  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < {}ll; "
        "i += "
        "(int64_t)gridDim.x * 256) {{\n"
        "    int64_t o = i / {}ll, r = i % {}ll;\n"
        "    out[o * {}ll + {}ll + r] = in[i];\n  }}\n",
        n, a * inner, a * inner, outAxis * inner, offset * inner);
    launch(out, op,
           kernel(fmt::format("const {} *__restrict__ in, {} *__restrict__ out",
                              T, T),
                  body),
           gridFor(n), threads(),
           fmt::format("{}, {}", ptr(in), ptr(c.getResult())));
    offset += a;
  }
  return success();
}

LogicalResult Emitter::printGather(std::string &out, Operation *o) {
  Operation *op = o;
  // cnn-select-lowering (tiled-transpose, on by default): a batched 2-D
  // transpose in shared-memory tiles (kernels/Transpose.cuh).
  if (auto printed = printChosenLowering(
          out, o, "tiled", describeTiledTranspose,
          "is not a batched 2-D transpose as batchedTranspose2D takes it"))
    return *printed;
  // Gather: each output element computes its input offset.
  auto in = ttype(o->getOperand(0)), res = ttype(o->getResult(0));
  int64_t rank = in.getRank();
  SmallVector<int64_t> inStrides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * in.getDimSize(d + 1);
  SmallVector<int64_t> srcStride(rank), srcOffset(rank, 0);
  if (auto s = dyn_cast<SliceOp>(o)) {
    for (int64_t d = 0; d < rank; ++d)
      srcStride[d] = inStrides[d], srcOffset[d] = s.getOffsets()[d];
  } else {
    auto perm = cast<TransposeOp>(o).getPermutation();
    for (int64_t d = 0; d < rank; ++d)
      srcStride[d] = inStrides[perm[d]];
  }
  std::string T = ctype(res.getElementType());
  std::string body = fmt::format(
      "  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < {}ll; i "
      "+= "
      "(int64_t)gridDim.x * 256) {{\n    int64_t rem = i, src = 0;\n",
      res.getNumElements());
  for (int64_t d = rank - 1; d >= 0; --d)
    body += fmt::format("    src += (rem % {}ll + {}ll) * {}ll; rem /= {}ll;\n",
                        res.getDimSize(d), srcOffset[d], srcStride[d],
                        res.getDimSize(d));
  body += "    out[i] = in[src];\n  }\n";
  launch(out, op,
         kernel(fmt::format("const {} *__restrict__ in, {} *__restrict__ out",
                            T, T),
                body),
         gridFor(res.getNumElements()), threads(),
         fmt::format("{}, {}", ptr(o->getOperand(0)), ptr(o->getResult(0))));
  return success();
}

LogicalResult Emitter::print(std::string &out, PadOp p) {
  emitPad(out, p);
  return success();
}

LogicalResult Emitter::print(std::string &out, PadGradOp p) {
  emitPadGrad(out, p);
  return success();
}

LogicalResult Emitter::print(std::string &out, SGDUpdateOp u) {
  Operation *op = u;
  double mom = dec(u.getMomentum()), damp = dec(u.getDampening()),
         wd = dec(u.getWeightDecay());
  // Loss scaling: a5 = grad_scale, a6 = finite (skip when 0).
  std::string expr = u.getGradScale() ? "float g = a1 / a5" : "float g = a1";
  if (wd != 0)
    expr += " + " + floatLit(wd) + " * a0";
  expr += ";";
  if (mom != 0) {
    expr += fmt::format(" float buf = a4 == 1.f ? g : {} * a2 + {} * g;",
                        floatLit(mom), floatLit(1.0 - damp));
    expr += u.getNesterov() ? fmt::format(" g = g + {} * buf;", floatLit(mom))
                            : " g = buf;";
    expr += " r1 = buf;";
  } else {
    expr += " r1 = a2;";
  }
  expr += " r0 = a0 - a3 * g;";
  SmallVector<EwIn> ins = {{u.getParam()},
                           {u.getGrad()},
                           {u.getMomentumBuffer()},
                           {u.getLr(), "0"},
                           {u.getStep(), "0"}};
  if (u.getFinite()) {
    ins.append({{u.getGradScale(), "0"}, {u.getFinite(), "0"}});
    expr += " if (a6 == 0.f) { r0 = a0; r1 = a2; }";
  }
  return groupedElementwise(out, op, ins,
                            {u.getNewParam(), u.getNewMomentumBuffer()}, expr);
}

LogicalResult Emitter::print(std::string &out, AdamUpdateOp u) {
  Operation *op = u;
  double b1 = dec(u.getBeta1()), b2 = dec(u.getBeta2()),
         eps = dec(u.getEpsilon()), wd = dec(u.getWeightDecay());
  // Loss scaling: a6 = grad_scale, a7 = finite (skip when 0).
  std::string expr =
      u.getGradScale() ? "float p = a0, g = a1 / a6;" : "float p = a0, g = a1;";
  if (wd != 0)
    expr += u.getDecoupled()
                ? fmt::format(" p = p * (1.f - a4 * {});", floatLit(wd))
                : fmt::format(" g = g + {} * p;", floatLit(wd));
  expr += fmt::format(
      " float m = a2 + {} * (g - a2); float v = {} * a3 + {} * g * g;"
      " float bc1 = 1.f - powf({}, a5), bc2 = 1.f - powf({}, a5);"
      " r0 = p - (a4 / bc1) * m / (sqrtf(v) / sqrtf(bc2) + {}); r1 = m; "
      "r2 = v;",
      floatLit(1.0 - b1), floatLit(b2), floatLit(1.0 - b2), floatLit(b1),
      floatLit(b2), floatLit(eps));
  SmallVector<EwIn> ins = {{u.getParam()},   {u.getGrad()},
                           {u.getExpAvg()},  {u.getExpAvgSq()},
                           {u.getLr(), "0"}, {u.getStep(), "0"}};
  if (u.getFinite()) {
    ins.append({{u.getGradScale(), "0"}, {u.getFinite(), "0"}});
    expr += " if (a7 == 0.f) { r0 = a0; r1 = a2; r2 = a3; }";
  }
  return groupedElementwise(
      out, op, ins, {u.getNewParam(), u.getNewExpAvg(), u.getNewExpAvgSq()},
      expr);
}

// all_finite (loss scaling, cnn-precision): 1, cleared by any non-finite
// element of an input.
LogicalResult Emitter::print(std::string &out, AllFiniteOp a) {
  Operation *op = a;
  // flag = 1, then every input clears it on a non-finite element.
  std::string flag = ptr(a.getResult());
  launch(out, op, "setFlag", "1", "1", flag);
  // One multi-tensor kernel per element type (a table of tensor starts
  // and arena offsets, binary-searched per element), not one per input.
  std::map<std::string, std::vector<Value>> byType;
  for (Value in : a.getInputs())
    byType[ctype(ttype(in).getElementType())].push_back(in);
  size_t multiTensorKernels = 0;
  for (auto &[T, vs] : byType) {
    if (vs.size() == 1) {
      int64_t n = ttype(vs[0]).getNumElements();
      launch(out, op, fmt::format("clearIfNonFinite<{}>", T), gridFor(n), threads(),
             fmt::format("{}, {}ll, {}", ptr(vs[0]), n, flag));
      continue;
    }
    std::string name = fmt::format("af{}", numKernels++);
    // cnn-select-lowering's "vec8": eight elements per thread.
    int64_t vec = loweringOf(op) == "vec8" ? 8 : 1;
    std::vector<int64_t> sizes, offsets;
    for (Value v : vs) {
      sizes.push_back(ttype(v).getNumElements() / vec);
      offsets.push_back(plan.offsetOf(v));
    }
    if (failed(checkVec8(op, vs, vec)))
      return failure();
    FailureOr<int64_t> chunk = chunkOf(op, multiTensorKernels++);
    if (failed(chunk))
      return failure();
    int64_t chunks =
        multiTensorTables(name, sizes, {{"in", offsets}}, *chunk);
    kernels += fmt::format(
        "__global__ void __launch_bounds__(256) {0}(const char *A, float "
        "*flag) {{\n"
        "  mt::allFinite<{1}, {2}, {3}>({0}_chunk, {0}_in, A, flag);\n"
        "}}\n\n",
        name, chunks, T, vec);
    out += fmt::format("  // {} gradients checked in one multi-tensor kernel\n",
                       vs.size());
    launch(out, op, name,
           std::to_string(std::min<int64_t>(chunks, gridLimit())), threads(),
           fmt::format("A, {}", flag));
  }
  return success();
}

LogicalResult Emitter::print(std::string &out, UnscaleOp u) {
  Operation *op = u;
  elementwise(out, op, {{u.getInput()}, {u.getScale(), "0"}}, {u.getResult()},
              "r0 = a0 / a1;");
  return success();
}

// Gradient accumulation: the sum for the update and the next state
// (zero after the micro-step that applies it).
LogicalResult Emitter::print(std::string &out, AccumulateGradOp a) {
  Operation *op = a;
  std::string every = floatLit(static_cast<double>(a.getEvery()));
  elementwise(out, op, {{a.getAcc()}, {a.getGrad()}, {a.getStep(), "0"}},
              {a.getSum(), a.getNewAcc()},
              fmt::format("float s = a0 + a1 / {0}; r0 = s; "
                          "r1 = fmodf(a2, {0}) == 0.f ? 0.f : s;",
                          every));
  return success();
}

LogicalResult Emitter::print(std::string &out, AccumulationStepOp a) {
  Operation *op = a;
  std::string every = floatLit(static_cast<double>(a.getEvery()));
  elementwise(out, op, {{a.getStep(), "0"}},
              {a.getApply(), a.getOptimizerStep()},
              fmt::format("r0 = fmodf(a0, {0}) == 0.f ? 1.f : 0.f; "
                          "r1 = ceilf(a0 / {0});",
                          every),
              1);
  return success();
}

// Data parallelism (cnn-data-parallel): the bucket's tensors are
// reduced in place by NCCL on the communication stream, forked from
// the compute stream here and joined before the first reader of a
// result (emitFunction), so the rest of the backward pass overlaps.
LogicalResult Emitter::print(std::string &out, AllReduceOp a) {
  Operation *op = a;
  int64_t k = a.getBucketAttr().getValue().getSExtValue();
  int red = a.getReduction() == "avg"   ? 0
            : a.getReduction() == "sum" ? 1
            : a.getReduction() == "max" ? 2
                                        : 3;
  // NCCL reduces in place; the memory plan keeps a gradient's buffer
  // alive until its result's last reader. A result it could not put
  // there (the loss, a returned value: persistent) is copied after a
  // join right here, before anything can reuse the operand's buffer.
  int64_t bytes = 0;
  bool inPlace = true;
  for (auto [in, r] : llvm::zip(a.getInputs(), a.getResults())) {
    inPlace &= plan.offsetOf(in) == plan.offsetOf(r);
    bytes += ttype(in).getNumElements() *
             (ttype(in).getElementType().isF16() ? 2 : 4);
  }
  if (numBuckets == 0)
    prepare += "  cnnrt::dist::prepare(ctx, CNNC_NUM_BUCKETS);\n";
  numBuckets = std::max(numBuckets, k + 1);
  out += fmt::format("  // all-reduce bucket {}: {} tensors, {} bytes "
                     "({})\n  cnnrt::dist::begin(ctx, {});\n",
                     k, a.getInputs().size(), bytes, a.getReduction().str(), k);
  // (Pipeline stages: the loss-scale flag is reduced over the stages, the
  // gradients over a stage's data-parallel replicas.)
  const char *fn = op->hasAttr("cnn.across_stages") ? "allReduceAcrossStages"
                                                    : "allReduce";
  for (Value in : a.getInputs())
    out += fmt::format(
        "  cnnrt::dist::{}(ctx, A + {}, {}ull, {}, {}, \"{}\");\n", fn,
        plan.offsetOf(in), ttype(in).getNumElements(),
        ttype(in).getElementType().isF16() ? 1 : 0, red, loc(op));
  out += fmt::format("  cnnrt::dist::end(ctx, {});\n", k);
  ++numLaunches;
  if (!inPlace) {
    out += fmt::format("  cnnrt::dist::join(ctx, {});\n", k);
    for (auto [in, r] : llvm::zip(a.getInputs(), a.getResults()))
      if (plan.offsetOf(in) != plan.offsetOf(r)) {
        out += fmt::format("  ctx.check(cudaMemcpyAsync(A + {}, A + {}, {}, "
                           "cudaMemcpyDeviceToDevice, s), \"{}\");\n",
                           plan.offsetOf(r), plan.offsetOf(in),
                           ttype(in).getNumElements() *
                               (ttype(in).getElementType().isF16() ? 2 : 4),
                           loc(op));
        ++numLaunches;
      }
    return success();
  }
  for (Value r : a.getResults())
    unjoined[r] = k;
  return success();
}

LogicalResult Emitter::emitOp(Operation *op, std::string &out) {
  // cnn-prepare-for-emission decided how the op's kernels launch; the
  // printer does not guess.
  launchOf = op->getAttrOfType<LaunchAttr>(kLaunchAttr);
  if (launchesKernel(op) && !launchOf)
    return op->emitError("CUDA backend: '")
           << op->getName()
           << "' has no cnn.launch: run cnn-prepare-for-emission (the CUDA "
              "target's pipeline, cnn-gpu-pipeline) first";
  if (launchOf && usesPartialBlocks(op) && !launchOf.getPartialBlocks())
    return op->emitError("CUDA backend: '")
           << op->getName() << "' has no partial_blocks in its cnn.launch";
  if (launchOf && usesReduceBlock(op) && !launchOf.getReduceBlock())
    return op->emitError("CUDA backend: '")
           << op->getName() << "' has no reduce_block in its cnn.launch";
  if (launchOf && needsReductionStrategy(op) && !launchOf.getReduction())
    return op->emitError("CUDA backend: '")
           << op->getName() << "' has no reduction strategy in its cnn.launch";
  if (auto calls = dyn_cast<KernelCallOpInterface>(op))
    return printKernelCalls(out, calls);
  if (isNHWC(op) && isa<BiasGradOp, GlobalAvgPoolGradOp>(op))
    return emitNHWC(op, out);
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ConstantOp, Conv2DOp, Conv2DBwdDataOp, Conv2DBwdFilterOp, MatmulOp,
            BiasAddOp, DropoutMaskOp, GlobalAvgPoolGradOp, BiasGradOp,
            BatchNormOp, BatchNormTrainOp, FusedElementwiseOp,
            FusedConv2DOp, FusedConv2DStatsOp, FusedConv2DBwdFilterOp,
            FusedConv2DBwdDataOp, BatchNormStatsOp,
            BatchNormSumsOp, BatchNormGradSumsOp,
            FusedBatchNormAffineReluGradSumsOp, FusedBatchNormReluGradOp,
            FusedBatchNormAffineReluGradOp, FusedDualBatchNormGradOp,
            BatchNormGradOp, FusedMaxPool2DBatchNormReluGradOp,
            ConcatOp, PadOp, PadGradOp, SGDUpdateOp,
            AdamUpdateOp, AllFiniteOp, UnscaleOp,
            AccumulateGradOp, AccumulationStepOp, AllReduceOp>(
          [&](auto x) { return print(out, x); })
      .Case<ReshapeOp, FlattenOp>([&](Operation *) { return success(); })
      .Case<MicroBatchOp, SendOp, RecvOp, TransfersOp, TransferWaitOp>(
          [&](Operation *o) {
        if (isPipelineTransfer(o) && !pipelineTransfers) {
          prepare += "  cnnrt::dist::prepare(ctx, 0); // the stages\n";
          // cnn-pipeline-async-transfers' events: links and their streams.
          // Interleaved stages (cnn.pipeline_chunks) also link the first
          // and the last stage.
          auto step = o->getParentOfType<func::FuncOp>();
          auto chunks =
              step->getAttrOfType<IntegerAttr>("cnn.pipeline_chunks");
          if (auto events =
                  step->getAttrOfType<IntegerAttr>("cnn.transfer_events"))
            prepare += fmt::format(
                "  cnnrt::dist::prepareTransfers(ctx, {}{});\n",
                events.getInt(),
                chunks && chunks.getInt() > 1 ? ", /*wrapLink=*/true" : "");
          pipelineTransfers = true;
        }
        ++numLaunches;
        return printPipelineOp(
            o, [&](Value v) { return plan.offsetOf(v); }, loc(o), out);
      })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(
          [&](Operation *o) { return printReduction(out, o); })
      .Case<SliceOp, TransposeOp>(
          [&](Operation *o) { return printGather(out, o); })
      .Case([&](ClipDivisorOp c) { return emitClipDivisor(out, c); })
      .Default([&](Operation *o) {
        return o->emitError("CUDA backend: no lowering for '")
               << o->getName() << "'";
      });
}

void Emitter::joinBucket(std::string &out, int64_t bucket) {
  out += fmt::format("  cnnrt::dist::join(ctx, {});\n", bucket);
  for (auto it = unjoined.begin(); it != unjoined.end();) {
    auto cur = it++;
    if (cur->second == bucket)
      unjoined.erase(cur);
  }
}

void Emitter::groupMultiTensorKernels(func::FuncOp f) {
  // cnn-select-lowering numbered the groups (cnn.update_group: optimizer
  // updates, cnn.cast_group: parameter casts); a group's kernel runs at its
  // last member.
  multiTensorGroups.clear();
  multiTensorGroupOf.clear();
  for (Operation &op : f.getBody().front()) {
    for (auto [attr, prefix, what] :
         {std::tuple{"cnn.update_group", "u", "optimizer updates"},
          std::tuple{"cnn.cast_group", "c", "parameter casts"}}) {
      auto g = op.getAttrOfType<IntegerAttr>(attr);
      if (!g)
        continue;
      std::string key = prefix + std::to_string(g.getValue().getSExtValue());
      multiTensorGroupOf[&op] = key;
      multiTensorGroups[key].last = &op;
      multiTensorGroups[key].what = what;
    }
  }
}

int64_t Emitter::multiTensorTables(
    const std::string &name, ArrayRef<int64_t> sizes,
    ArrayRef<std::pair<std::string, std::vector<int64_t>>> tables,
    int64_t chunkUnits) {
  auto table = [&](const std::string &type, const std::string &suffix,
                   ArrayRef<int64_t> values) {
    std::vector<std::string> v;
    for (int64_t x : values)
      v.push_back(std::to_string(x) + (type == "int" ? "" : "ll"));
    kernels += fmt::format("__device__ const {} {}_{}[{}] = {{{}}};\n", type,
                           name, suffix, values.size(), llvm::join(v, ", "));
  };
  std::vector<int64_t> chunk;
  for (auto [t, n] : llvm::enumerate(sizes))
    for (int64_t b = 0; b < n; b += chunkUnits)
      llvm::append_range(
          chunk, ArrayRef<int64_t>{(int64_t)t, b, std::min(n, b + chunkUnits)});
  // 32-bit entries unless a tensor has 2^31 units or more.
  bool wide = llvm::any_of(sizes, [](int64_t n) { return n >= INT32_MAX; });
  table(wide ? "int64_t" : "int", "chunk", chunk);
  for (auto &[suffix, values] : tables)
    table("int64_t", suffix, values);
  return chunk.size() / 3;
}

FailureOr<int64_t> Emitter::chunkOf(Operation *op, size_t k) {
  DenseI64ArrayAttr chunks = launchOf.getChunks();
  if (!chunks || k >= (size_t)chunks.size())
    return op->emitError("CUDA backend: no chunk for multi-tensor kernel #")
           << k << " in #cnn.launch (cnn-prepare-for-emission decides them)";
  return chunks[k];
}

LogicalResult Emitter::emitClipDivisor(std::string &out, ClipDivisorOp op) {
  std::string name = fmt::format("clip{}", numKernels++);
  std::vector<int64_t> sizes, offsets, half;
  for (Value g : op.getGrads()) {
    sizes.push_back(ttype(g).getNumElements());
    offsets.push_back(plan.offsetOf(g));
    Type e = ttype(g).getElementType();
    if (!e.isF16() && !e.isF32())
      return op.emitError("CUDA backend: clip_divisor of a ")
             << e << " gradient";
    half.push_back(e.isF16() ? 1 : 0);
  }
  FailureOr<int64_t> chunk = chunkOf(op, 0);
  if (failed(chunk))
    return failure();
  int64_t chunks = multiTensorTables(
      name, sizes, {{"in", offsets}, {"h", half}}, *chunk);
  std::string acc = ptr(op.getDivisor());
  // Each block's sum of squares goes to its own slot of the reduction
  // scratch, added in a fixed order by clipDivisorFinish
  // (kernels/MultiTensor.cuh says why).
  int64_t blocks = std::min<int64_t>(chunks, gridLimit());
  std::string partial = reductionScratch(blocks);
  kernels += fmt::format(
      "__global__ void __launch_bounds__(256) {0}(const char *A, double "
      "*partial) {{\n"
      "  mt::sumSquares<{1}>({0}_chunk, {0}_in, {0}_h, A, partial);\n"
      "}}\n\n",
      name, chunks);
  out += fmt::format("  // global gradient norm of {} tensors (clipping)\n",
                     sizes.size());
  launch(out, op, name, std::to_string(blocks), threads(),
         fmt::format("A, {}", partial));
  launch(out, op, "clipDivisorFinish", "1", threads(),
         fmt::format("{}, {}, {}, {}, {}", partial, blocks, acc,
                     ptr(op.getScale()),
                     floatLit(op.getMaxNorm().convertToFloat())));
  return success();
}

LogicalResult Emitter::checkVec8(Operation *op, ArrayRef<Value> vs,
                                 int64_t vec) {
  if (vec != 8)
    return success();
  for (Value v : vs)
    if (ttype(v).getNumElements() % 8 || plan.offsetOf(v) % 32)
      return op->emitError("CUDA backend: the eight-element multi-tensor "
                           "form (\"vec8\") needs every tensor a multiple of "
                           "8 elements at a 32-byte aligned offset, got ")
             << v.getType() << " at " << plan.offsetOf(v);
  return success();
}

LogicalResult Emitter::groupedElementwise(std::string &out, Operation *op,
                                          ArrayRef<EwIn> ins,
                                          ArrayRef<Value> outs,
                                          const std::string &expr) {
  auto it = multiTensorGroupOf.find(op);
  if (it == multiTensorGroupOf.end()) {
    elementwise(out, op, ins, outs, expr);
    return success();
  }
  MultiTensorGroup &g = multiTensorGroups[it->second];
  g.members.push_back({SmallVector<EwIn>(ins), SmallVector<Value>(outs)});
  if (g.last != op)
    return success();
  if (g.members.size() == 1) {
    elementwise(out, op, ins, outs, expr);
    return success();
  }
  // One kernel over the concatenation of all tensors of the group: a binary
  // search in a constant table of start indices finds each element's tensor.
  std::string name = fmt::format("mt{}", numKernels++);
  auto &first = g.members.front();
  std::vector<int64_t> sizes;
  for (auto &m : g.members)
    sizes.push_back(ttype(m.second[0]).getNumElements());
  std::vector<std::pair<std::string, std::vector<int64_t>>> tables;
  auto offsets = [&](auto valueOf) {
    std::vector<int64_t> v;
    for (auto &m : g.members)
      v.push_back(plan.offsetOf(valueOf(m)));
    return v;
  };
  // A per-tensor input may differ in element type between members (the
  // gradients: f16 from convolutions and matmuls, f32 from BatchNorm): a
  // table gives each tensor's type, and the load picks by it (uniform per
  // tensor, so per warp except at tensor boundaries).
  std::vector<SmallVector<Type>> typesOf(first.first.size());
  for (size_t k = 0; k < first.first.size(); ++k) {
    if (first.first[k].index != "i")
      continue;
    tables.push_back({fmt::format("in{}", k),
                      offsets([&](auto &m) { return m.first[k].v; })});
    std::vector<int64_t> which;
    for (auto &m : g.members) {
      Type t = ttype(m.first[k].v).getElementType();
      auto *at = llvm::find(typesOf[k], t);
      which.push_back(at - typesOf[k].begin());
      if (at == typesOf[k].end())
        typesOf[k].push_back(t);
    }
    if (typesOf[k].size() > 1)
      tables.push_back({fmt::format("ty{}", k), which});
  }
  for (size_t k = 0; k < first.second.size(); ++k)
    tables.push_back({fmt::format("out{}", k),
                      offsets([&](auto &m) { return m.second[k]; })});
  // cnn-select-lowering's "vec8" (every tensor of the group a multiple of 8
  // elements): eight elements per thread, 16/32-byte accesses.
  int64_t vec = loweringOf(op) == "vec8" ? 8 : 1;
  if (vec == 8) {
    SmallVector<Value> full;
    for (auto &m : g.members) {
      for (const EwIn &in : m.first)
        if (in.index == "i")
          full.push_back(in.v);
      llvm::append_range(full, m.second);
    }
    if (failed(checkVec8(op, full, vec)))
      return failure();
    for (int64_t &n : sizes)
      n /= 8;
  }
  // Scalar (per-step) operands once per thread; then, per unit, the
  // per-tensor ones (one element, or eight into slot k of x) through the
  // tables, the rule (a lambda over a slot array as ew:: has it: the
  // per-tensor inputs, then the outputs), the stores.
  std::string body;
  std::vector<size_t> slotOf(first.first.size());
  size_t slots = 0;
  for (auto [k, in] : llvm::enumerate(first.first)) {
    if (in.index == "i") {
      slotOf[k] = slots++;
      continue;
    }
    body += fmt::format("  const float a{} = ld(reinterpret_cast<const {} "
                        "*>(A + {}ll));\n",
                        k, ctype(ttype(in.v).getElementType()),
                        plan.offsetOf(in.v));
  }
  size_t numSlots = slots + first.second.size();
  FailureOr<int64_t> chunk = chunkOf(op, 0);
  if (failed(chunk))
    return failure();
  int64_t chunks = multiTensorTables(name, sizes, tables, *chunk);
  std::string rule =
      fmt::format("[&](const int64_t i, float(&io)[{}]) {{\n", numSlots);
  for (auto [k, in] : llvm::enumerate(first.first))
    if (in.index == "i")
      rule += fmt::format("        float a{} = io[{}];\n", k, slotOf[k]);
  for (size_t k = 0; k < first.second.size(); ++k)
    rule += fmt::format("        float r{};\n", k);
  rule += "        " + expr + "\n";
  for (size_t k = 0; k < first.second.size(); ++k)
    rule += fmt::format("        io[{}] = r{};\n", slots + k, k);
  rule += "      }";
  body += fmt::format("  mt::forEachUnit<{}>({}_chunk, [&](const int lo, "
                      "const int64_t at) {{\n",
                      chunks, name);
  body += vec == 1 ? fmt::format("    float x[{}];\n", numSlots)
                   : fmt::format("    float x[{}][8];\n", numSlots);
  const char *at = vec == 1 ? "at" : "at * 8";
  for (auto [k, in] : llvm::enumerate(first.first)) {
    if (in.index != "i")
      continue;
    std::vector<std::string> types;
    for (Type t : typesOf[k])
      types.push_back(ctype(t));
    std::string which =
        types.size() > 1 ? fmt::format("{}_ty{}[lo]", name, k) : "0";
    std::string from = fmt::format("{}, A + {}_in{}[lo], {}", which, name, k, at);
    body += vec == 1 ? fmt::format("    x[{}] = mt::load<{}>({});\n",
                                   slotOf[k], llvm::join(types, ", "), from)
                     : fmt::format("    mt::load8<{}>({}, x[{}]);\n",
                                   llvm::join(types, ", "), from, slotOf[k]);
  }
  if (vec == 1)
    body += fmt::format("    ({})(at, x);\n", rule);
  else
    body += fmt::format("    mt::eachLane<{}>(at * 8, x, {});\n", numSlots,
                        rule);
  for (auto [k, o] : llvm::enumerate(first.second))
    body += fmt::format("    mt::store{}<{}>(A + {}_out{}[lo], {}, x[{}]);\n",
                        vec == 1 ? "" : "8",
                        ctype(ttype(o).getElementType()), name, k, at,
                        slots + k);
  body += "  });\n";
  kernels += fmt::format(
      "__global__ void __launch_bounds__(256) {}(char *A) {{\n{}}}\n\n", name,
      body);
  out += fmt::format("  // {} {} in one multi-tensor kernel\n",
                     g.members.size(), g.what);
  launch(out, op, name, std::to_string(std::min<int64_t>(chunks, gridLimit())),
         threads(), "A");
  return success();
}

LogicalResult Emitter::emitFunction(func::FuncOp f, std::string &body) {
  // emitCUDA has checked cnn.lowering_selected on every function it emits.
  groupMultiTensorKernels(f);
  for (Operation &op : f.getBody().front()) {
    if (isa<func::ReturnOp>(op))
      break;
    // The compute stream waits for a bucket before the first reader of one
    // of its results.
    std::set<int64_t> joins;
    op.walk([&](Operation *nested) {
      for (Value v : nested->getOperands())
        if (auto it = unjoined.find(v); it != unjoined.end())
          joins.insert(it->second);
    });
    for (int64_t k : joins)
      joinBucket(body, k);
    if (failed(emitOp(&op, body)))
      return failure();
  }
  // Every bucket is joined before the step ends (the graph's end).
  std::set<int64_t> rest;
  for (auto &[v, k] : unjoined)
    rest.insert(k);
  for (int64_t k : rest)
    joinBucket(body, k);
  return success();
}

} // namespace

LogicalResult Emitter::write(llvm::raw_ostream &os, func::FuncOp step,
                             func::FuncOp forward, const std::string &trainBody,
                             const std::string &evalBody) {
  const PlannedBuffer *input = nullptr;
  for (const PlannedBuffer &b : plan.buffers)
    if (b.role == BufferRole::InputImage)
      input = &b;
  if (!input || input->type.getRank() != 4)
    return step.emitError("CUDA backend: @train_step needs one 4-D image input "
                          "(argument tagged cnn.input)");
  int64_t classes = 0;
  step.walk([&](SoftmaxCrossEntropyOp op) {
    classes = op.getLogits().getType().getDimSize(1);
  });
  // A pipeline stage before the last has no loss: cnn-pipeline-stage
  // recorded the class count.
  if (auto n = step->getAttrOfType<IntegerAttr>("cnn.num_classes");
      classes == 0 && n)
    classes = n.getInt();
  if (classes == 0)
    return step.emitError(
        "CUDA backend: @train_step has no softmax_cross_entropy loss");

  std::string copies;
  auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
  for (auto [r, dest] : plan.copiesAtEnd) {
    Value v = ret.getOperand(r);
    copies +=
        fmt::format("  ctx.check(cudaMemcpyAsync(A + {}, A + {}, {}, "
                    "cudaMemcpyDeviceToDevice, s), "
                    "\"{}\");\n",
                    plan.buffers[dest].offset, plan.offsetOf(v),
                    plan.buffers[dest].bytes, escape(plan.buffers[dest].name));
    ++numLaunches;
  }

  os << "// Generated by cnnc from the cnn dialect; do not edit.\n"
     << "// Model '" << options.modelName << "': " << numLaunches
     << " kernel launches and library calls per training step, arena "
     << plan.arenaBytes << " bytes.\n";
  os << kPrelude << "\n";
  if (numBuckets > 0)
    os << "// Data parallel: " << numBuckets
       << " all-reduce bucket(s) through NCCL (cnnrt/Nccl.h).\n"
       << "#include \"cnnrt/Nccl.h\"\n#define CNNC_NUM_BUCKETS " << numBuckets
       << "\n";
  else if (pipelineTransfers)
    os << "// Pipeline stage: sends and receives through NCCL "
          "(cnnrt/Nccl.h).\n#include \"cnnrt/Nccl.h\"\n";
  os << "// ---- generated kernels ----\n" << kernels;
  if (!epilogues.empty())
    os << "// ---- epilogues of fused convolutions (run by the runtime) ----\n"
       << epilogues;
  // The images' N, C, H, W: the input's own shape, or what cnn-input-format
  // recorded when it folded the conversion into the argument.
  SmallVector<int64_t, 4> image(input->type.getShape());
  bool inputNHWC = false;
  for (BlockArgument a : step.getArguments()) {
    if (!step.getArgAttr(a.getArgNumber(), kInputAttr))
      continue;
    if (auto shape = step.getArgAttrOfType<DenseI64ArrayAttr>(
            a.getArgNumber(), "cnn.image_shape"))
      image.assign(shape.asArrayRef().begin(), shape.asArrayRef().end());
    if (auto layout = step.getArgAttrOfType<LayoutAttr>(a.getArgNumber(),
                                                        "cnn.image_layout"))
      inputNHWC = layout.getValue() == Layout::NHWC;
  }
  os << tensorTable(plan, inputNHWC) << "\n";
  os << "static void prepareModel(cnnrt::Context &ctx) {\n";
  // The two-pass reductions' partial sums (one buffer: each pair runs in
  // stream order), allocated before any step is captured.
  if (reductionScratchDoubles > 0)
    os << "  ctx.reductionScratch(" << reductionScratchDoubles << ");\n";
  os << prepare << "}\n\n";
  os << "static void trainStep(cnnrt::Context &ctx) {\n"
     << "  char *A = ctx.arena();\n  cudaStream_t s = ctx.stream();\n  "
        "(void)A; (void)s;\n"
     << trainBody << copies << "}\n\n";
  if (forward)
    os << "static void evalStep(cnnrt::Context &ctx) {\n"
       << "  char *A = ctx.arena();\n  cudaStream_t s = ctx.stream();\n  "
          "(void)A; (void)s;\n"
       << evalBody << "}\n\n";
  ArrayRef<int64_t> in = image;
  // The learning rate is a variable defined on the file's last line, not a
  // literal in kModel: the driver compiles that line as a unit of its own
  // (SplitCUDA.h), so a recompile with another --lr reuses every other
  // compiled object.
  os << "extern const float cnncDefaultLR;\n";
  // The loss's ignore_index, for the runtime's label checks and mIoU
  // (ModelSpec::ignoreIndex; written only when not PyTorch's -100).
  int64_t ignoreIndex = -100;
  step.walk([&](SoftmaxCrossEntropyOp x) {
    ignoreIndex = static_cast<int64_t>(x.getIgnoreIndex());
  });
  // ModelSpec's trailing fields, written up to the last one that is not
  // its default: dist (the training driver's collectives: broadcast, sums
  // over ranks), ignoreIndex (the loss's ignore_index, for the runtime's
  // label checks and mIoU), workspaceIsCap (--workspace-mb), uncapturedWhy
  // (cnn.step_uncaptured, a pass's decision).
  auto uncaptured = step->getAttrOfType<StringAttr>("cnn.step_uncaptured");
  SmallVector<std::string> trailing = {
      numBuckets > 0 || pipelineTransfers ? "&cnnrt::dist::kHooks" : "nullptr",
      fmt::format("{}ll", ignoreIndex), plan.workspaceIsCap ? "true" : "false",
      uncaptured ? "\"" + escape(uncaptured.getValue().str()) + "\""
                 : "nullptr"};
  const SmallVector<std::string> defaults = {"nullptr", "-100ll", "false",
                                             "nullptr"};
  size_t used = trailing.size();
  while (used > 0 && trailing[used - 1] == defaults[used - 1])
    --used;
  std::string tail;
  for (size_t i = 0; i < used; ++i)
    tail += ", " + trailing[i];
  os << fmt::format(
      "static const cnnrt::ModelSpec kModel = {{\"{}\", {}ull, kTensors, "
      "(int)(sizeof(kTensors) / sizeof(kTensors[0])), {}, {}, {}, {}, {}, "
      "prepareModel, "
      "trainStep, {}, cnncDefaultLR, {}, {}ull, {}ull{}}};\n\n",
      escape(options.modelName), plan.arenaBytes, in[0], in[1], in[2], in[3],
      classes, forward ? "evalStep" : "nullptr", options.defaultSteps,
      plan.workspaceOffset, plan.workspaceBytes, tail);
  if (options.library)
    os << "// The model of a shared library: the runtime's C API (cnnrt_c.h)\n"
          "// creates sessions from it.\n"
          "extern \"C\" __attribute__((visibility(\"default\"))) const void *\n"
          "cnnrt_model_spec(void) { return &kModel; }\n";
  else
    os << "int main(int argc, char **argv) { return "
          "cnnrt::trainMain(argc, argv, kModel); }\n";
  os << "const float cnncDefaultLR = " << floatLit(options.defaultLR)
     << ";\n";
  return success();
}

static std::string tensorTable(const BufferPlan &plan, bool inputNHWC) {
  std::string s = "static const cnnrt::TensorSpec kTensors[] = {\n";
  for (const PlannedBuffer &b : plan.buffers) {
    if (b.role == BufferRole::Temp)
      continue;
    // A parameter stored in the convolution's format (cnn-param-format):
    // the table gives its public K, C, R, S, NHWC and the stored channels;
    // the runtime converts at load and save.
    bool stored = b.publicShape.size() == 4;
    std::string dims;
    for (int d = 0; d < 4; ++d)
      dims += fmt::format("{}{}", d ? ", " : "",
                          stored                 ? b.publicShape[d]
                          : d < b.type.getRank() ? b.type.getDimSize(d)
                                                 : 0);
    // The image input is written in NHWC by the runtime (from NCHW batches:
    // cnn-input-format).
    bool nhwc = inputNHWC && b.role == BufferRole::InputImage;
    s += fmt::format(
        "  {{\"{}\", {}, {}, {{{}}}, {}, {}, cnnrt::Role::{}{}}},\n",
        escape(b.name), dtype(b.type.getElementType()), b.type.getRank(), dims,
        b.offset, b.bytes, cnnrt::roleEnumerator(b.role),
        stored ? fmt::format(", cnnrt::Layout::NHWC, {}", b.type.getDimSize(3))
        : nhwc ? std::string(", cnnrt::Layout::NHWC")
               : std::string());
  }
  return s + "};\n";
}

LogicalResult cnnc::dumpBufferPlan(ModuleOp module, llvm::raw_ostream &os) {
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return module.emitError("--dump-plan: the module has no @train_step");
  auto plan = getBufferPlan(step, module.lookupSymbol<func::FuncOp>("forward"));
  if (failed(plan))
    return failure();
  plan->print(os);
  return success();
}

LogicalResult cnnc::emitCUDA(ModuleOp module, llvm::raw_ostream &os,
                             const CUDAEmitOptions &options) {
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return module.emitError("CUDA backend: the module has no @train_step "
                            "(run cnn-autodiff first)");
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  for (auto f : {step, forward})
    if (f && f.getBlocks().size() != 1)
      return f.emitError("CUDA backend: functions must have one block");
  forward = evaluatedForward(forward);
  for (auto arg : step.getArguments())
    if (ttype(arg).getRank() > 4)
      return step.emitError(
          "CUDA backend: tensors of rank > 4 are not supported");
  // What cnn-gpu-pipeline decides, in its order: the lowering choices, the
  // arena plan, then (cnn-prepare-for-emission, as CIRCT's
  // PrepareForEmission before ExportVerilog) the target and the launches.
  for (func::FuncOp f : {step, forward})
    if (f && !f->hasAttr("cnn.lowering_selected"))
      return f.emitError("CUDA backend: @")
             << f.getName()
             << " has no cnn.lowering_selected: run cnn-select-lowering (the "
                "CUDA target's pipeline, cnn-gpu-pipeline) first";
  auto planOr = getBufferPlan(step, forward);
  if (failed(planOr))
    return failure();
  BufferPlan plan = std::move(*planOr);
  if (!module->getAttrOfType<TargetAttr>(kTargetAttr))
    return module.emitError("CUDA backend: the module has no cnn.target: run "
                            "cnn-prepare-for-emission (the CUDA target's "
                            "pipeline, cnn-gpu-pipeline) first");

  Emitter em(module, plan, options);
  std::string trainBody, evalBody;
  if (failed(em.emitFunction(step, trainBody)))
    return failure();
  if (forward && failed(em.emitFunction(forward, evalBody)))
    return failure();
  return em.write(os, step, forward, trainBody, evalBody);
}
