//===- Interpreter.cpp - CPU reference interpreter for cnn ----------------===//
//
// Walks the body of a func.func in order, keeping one Tensor per SSA value
// (freed after its last use), and asks each op to evaluate itself
// (ReferenceEvalOpInterface). Each op's evaluation is one `exec` member below
// (on kernels in Kernels.h), attached to the op as an external model by
// `attachEvaluations`: to support a new op, write its `exec` and add the op
// to that list.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Reference/Interpreter.h"

#include "Kernels.h"
#include "llvm/ADT/TypeSwitch.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "cnnc/Reference/Communicator.h"
#include "cnnc/Reference/Pipeline.h"

#include "FusedOps.h"
#include "llvm/Support/raw_ostream.h"

#include "cnnc/Support/ShapeLimits.h"
#include "cnnrt/FilterLayout.h"
#include "llvm/Support/FormatVariadic.h"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <limits>

#include <mutex>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

using namespace mlir;
namespace cnn = cnnc::cnn;
namespace kn = cnnc::reference::kernels;

namespace cnnc::reference {

static std::atomic<bool> outOfMemory{false};

bool ranOutOfMemory() { return outOfMemory.load(); }

static std::atomic<uint64_t> memoryCeiling{0};

void setHostMemoryLimit(uint64_t bytes) { memoryCeiling = bytes; }

uint64_t hostMemoryLimit() {
  uint64_t limit = std::numeric_limits<uint64_t>::max();
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0)
    limit = uint64_t(pages) * uint64_t(pageSize);
  if (uint64_t ceiling = memoryCeiling.load())
    limit = std::min(limit, ceiling);
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit rl;
    if (getrlimit(resource, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      limit = std::min<uint64_t>(limit, rl.rlim_cur);
  }
  return limit;
}

//===----------------------------------------------------------------------===//
// Helpers (the Tensor type itself is cnnc/Support/Tensor.h's)
//===----------------------------------------------------------------------===//

/// The interpreter's state as ReferenceEvalOpInterface sees it: opaque; the
/// models below know it is an Executor.
class Evaluator {};

namespace {

struct ValueHash {
  size_t operator()(Value v) const { return hash_value(v); }
};
using ValueTensorMap = std::unordered_map<Value, Tensor, ValueHash>;

const char *kindName(ElemKind k) {
  switch (k) {
  case ElemKind::F32:
    return "f32";
  case ElemKind::F16:
    return "f16";
  case ElemKind::I32:
    return "i32";
  case ElemKind::I64:
    return "i64";
  }
  return "?";
}

std::string describe(const Tensor &t) {
  std::string s = "tensor<";
  for (int64_t d : t.shape)
    s += std::to_string(d) + "x";
  s += kindName(t.kind) + std::string(">");
  if (static_cast<int64_t>(t.data.size()) != t.numel())
    s += " holding " + std::to_string(t.data.size()) + " values";
  return s;
}

std::string describe(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

std::vector<int64_t> shapeOf(Value v) {
  auto s = cast<RankedTensorType>(v.getType()).getShape();
  return {s.begin(), s.end()};
}

float f32(const APFloat &v) { return v.convertToFloat(); }

kn::ConvParams convParams(ArrayRef<int64_t> in, ArrayRef<int64_t> filter,
                          ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
                          ArrayRef<int64_t> dilations, int64_t groups) {
  kn::ConvParams p;
  p.n = in[0];
  p.c = in[1];
  p.h = in[2];
  p.w = in[3];
  p.f = filter[0];
  p.kh = filter[2];
  p.kw = filter[3];
  p.strideH = strides[0];
  p.strideW = strides[1];
  p.padT = padding[0];
  p.padL = padding[1];
  p.padB = padding[2];
  p.padR = padding[3];
  p.dilH = dilations[0];
  p.dilW = dilations[1];
  p.groups = groups;
  return p;
}

kn::PoolParams poolParams(ArrayRef<int64_t> in, ArrayRef<int64_t> kernel,
                          ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
                          bool ceilMode, bool countIncludePad) {
  kn::PoolParams p;
  p.planes = in[0] * in[1];
  p.h = in[2];
  p.w = in[3];
  p.kh = kernel[0];
  p.kw = kernel[1];
  p.strideH = strides[0];
  p.strideW = strides[1];
  p.padT = padding[0];
  p.padL = padding[1];
  p.padB = padding[2];
  p.padR = padding[3];
  p.ceilMode = ceilMode;
  p.countIncludePad = countIncludePad;
  return p;
}

/// (n, c, inner) of a batch_norm input of rank 2 or 4.
struct NCI {
  int64_t n, c, inner;
};
NCI nciOf(ArrayRef<int64_t> s) {
  int64_t inner = 1;
  for (size_t d = 2; d < s.size(); ++d)
    inner *= s[d];
  return {s[0], s[1], inner};
}

//===----------------------------------------------------------------------===//
// Executor
//===----------------------------------------------------------------------===//

template <typename OpT> struct EvalModel;

class Executor : public Evaluator {
public:
  explicit Executor(func::FuncOp func) : func(func) {}

  FailureOr<std::vector<Tensor>> run(ArrayRef<Tensor> args);

private:
  LogicalResult execute(Operation *op);
  LogicalResult checkMemory(Operation *op);
  /// Runs an op with `layout = "NHWC"` on the NCHW kernels.
  LogicalResult executeNHWC(Operation *op);

  const Tensor &get(Value v) {
    auto it = env.find(v);
    assert(it != env.end() && "value used before definition or after free");
    return it->second;
  }
  const float *ptr(Value v) { return get(v).data.data(); }
  float scalar(Value v) { return get(v).data[0]; }
  /// Creates the (zero-filled) tensor of result `v`.
  Tensor &def(Value v) {
    Tensor &t = env[v];
    t = Tensor::zeros(cast<RankedTensorType>(v.getType()));
    return t;
  }
  float *out(Value v) { return def(v).data.data(); }

  // Forward ops.
  LogicalResult exec(cnn::ConstantOp op);
  LogicalResult exec(cnn::Conv2DOp op);
  LogicalResult exec(cnn::BiasAddOp op);
  LogicalResult exec(cnn::BatchNormOp op);
  LogicalResult exec(cnn::BatchNormTrainOp op);
  LogicalResult exec(cnn::MaxPool2DOp op);
  LogicalResult exec(cnn::AvgPool2DOp op);
  LogicalResult exec(cnn::GlobalAvgPoolOp op);
  LogicalResult exec(cnn::MatmulOp op);
  LogicalResult exec(cnn::ConcatOp op);
  LogicalResult exec(cnn::SliceOp op);
  LogicalResult exec(cnn::PadOp op);
  LogicalResult exec(cnn::PadGradOp op);
  LogicalResult exec(cnn::ResizeOp op);
  LogicalResult exec(cnn::ResizeGradOp op);
  LogicalResult exec(cnn::FusedResizeConcatOp op);
  LogicalResult exec(cnn::TransposeOp op);
  LogicalResult exec(cnn::DropoutMaskOp op);
  LogicalResult exec(cnn::SoftmaxOp op);
  LogicalResult exec(cnn::SoftmaxCrossEntropyOp op);
  LogicalResult exec(cnn::NLLLossOp op);
  LogicalResult exec(cnn::ArgMaxOp op) { return execArgExtreme(op, true); }
  LogicalResult exec(cnn::ArgMinOp op) { return execArgExtreme(op, false); }
  LogicalResult exec(cnn::GatherElementsOp op);
  // Backward ops.
  LogicalResult exec(cnn::Conv2DBwdDataOp op);
  LogicalResult exec(cnn::Conv2DBwdFilterOp op);
  LogicalResult exec(cnn::BiasGradOp op);
  LogicalResult exec(cnn::MaxPool2DGradOp op);
  LogicalResult exec(cnn::AvgPool2DGradOp op);
  LogicalResult exec(cnn::GlobalAvgPoolGradOp op);
  LogicalResult exec(cnn::BatchNormGradOp op);
  LogicalResult exec(cnn::SoftmaxCrossEntropyGradOp op);
  LogicalResult exec(cnn::NLLLossGradOp op);
  LogicalResult exec(cnn::GatherElementsGradOp op);
  // Optimizer ops.
  LogicalResult exec(cnn::SGDUpdateOp op);
  LogicalResult exec(cnn::AdamUpdateOp op);
  // Loss scaling (cnn-precision).
  LogicalResult exec(cnn::AllFiniteOp op);
  LogicalResult exec(cnn::LossScaleUpdateOp op);
  LogicalResult exec(cnn::ClipDivisorOp op);
  LogicalResult exec(cnn::AccumulateGradOp op);
  LogicalResult exec(cnn::AccumulationStepOp op);
  LogicalResult exec(cnn::UnscaleOp op);
  // Data parallelism (cnn-data-parallel).
  LogicalResult exec(cnn::AllReduceOp op);
  LogicalResult exec(cnn::SendOp op);
  LogicalResult exec(cnn::RecvOp op);
  LogicalResult exec(cnn::MicroBatchOp op);
  /// The mailbox's receive already blocked until the tensor arrived.
  LogicalResult exec(cnn::TransferWaitOp) { return success(); }
  /// The gradient operand of an optimizer update divided by its grad_scale
  /// (or the gradient itself without loss scaling).
  const float *unscaledGrad(Value grad, Value scale, std::vector<float> &tmp);
  /// flatten, reshape, dropout (inference), cast: element copy; the f16
  /// rounding after every op performs the f32 -> f16 conversion of cast.
  LogicalResult execCopy(Operation *op);
  /// Every elementwise op: its own scalar body (ElementwiseOpInterface), run
  /// as the one-op fused_elementwise that cnn-fuse would make of it.
  LogicalResult execElementwise(cnn::ElementwiseOpInterface op);
  /// reduce_sum / reduce_mean / reduce_max / reduce_prod over the op's `axes`
  /// (keepdims), in double.
  LogicalResult execReduce(Operation *op);
  /// Every label in [0, classes) or equal to `ignoreIndex`.
  LogicalResult checkLabels(Operation *op, Value labels, int64_t classes,
                            int64_t ignoreIndex);
  /// nll_loss's per-position class weights (1 without a `weight`), whether
  /// each position's label is the ignore_index (it reads nothing then), and
  /// the weight sum of the others, the mean's divisor; fails on a label
  /// outside [0, C) that is not the ignore_index.
  template <typename OpT>
  LogicalResult nllPositionWeights(OpT op, int64_t classes,
                                   std::vector<double> &weights,
                                   std::vector<char> &ignored, double &sum);
  /// For gather_elements (forward and gradient): the flat input offset of
  /// each element of `indices`, whose shape is `indexShape`, along `axis` of
  /// an input of shape `inputShape`; fails on an index outside [-s, s).
  LogicalResult gatherOffsets(Operation *op, Value indices,
                              ArrayRef<int64_t> inputShape, int64_t axis,
                              std::vector<int64_t> &offsets);
  /// arg_max (`max`) or arg_min along the op's axis.
  template <typename OpT> LogicalResult execArgExtreme(OpT op, bool max);

  // Reduction ops share one kernel; flatten and reshape are copies.
  LogicalResult exec(cnn::ReduceSumOp op) { return execReduce(op); }
  LogicalResult exec(cnn::ReduceMeanOp op) { return execReduce(op); }
  LogicalResult exec(cnn::ReduceMaxOp op) { return execReduce(op); }
  LogicalResult exec(cnn::ReduceProdOp op) { return execReduce(op); }
  LogicalResult exec(cnn::FlattenOp op) { return execCopy(op); }
  LogicalResult exec(cnn::ReshapeOp op) { return execCopy(op); }
  template <typename OpT> friend struct EvalModel;

  func::FuncOp func;
  /// Node-based on purpose: kernels hold `get()` references to operands
  /// while `def()` inserts their results, and a DenseMap would move every
  /// tensor when that insertion grows or rehashes the table (when it does
  /// depends on pointer hashes, so the failure came and went with ASLR).
  ValueTensorMap env;
  std::vector<Tensor> results;
};

static void attachEvaluations(MLIRContext *ctx);

FailureOr<std::vector<Tensor>> Executor::run(ArrayRef<Tensor> args) {
  attachEvaluations(func->getContext());
  if (args.size() != func.getNumArguments())
    return func.emitError("reference interpreter: expected ")
           << func.getNumArguments() << " arguments, got " << args.size();
  Block &body = func.getBody().front();
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return func.emitError("reference interpreter: argument #")
             << i << " has unsupported type " << arg.getType();
    if (!args[i].matches(type))
      return func.emitError("reference interpreter: argument #")
             << i << " is " << describe(args[i]) << " but the function expects "
             << describe(type);
    Tensor t = args[i];
    if (t.kind == ElemKind::F16)
      for (float &v : t.data)
        v = roundToHalf(v);
    env[arg] = std::move(t);
  }

  // The index of the last top-level op using each value (uses inside nested
  // regions count for the op that holds them).
  std::vector<Operation *> ops;
  llvm::DenseMap<Value, size_t> lastUse;
  for (Operation &op : body) {
    size_t idx = ops.size();
    ops.push_back(&op);
    op.walk([&](Operation *nested) {
      for (Value v : nested->getOperands())
        lastUse[v] = idx;
    });
  }
  std::vector<SmallVector<Value, 4>> freeAfter(ops.size());
  for (auto &[v, idx] : lastUse)
    freeAfter[idx].push_back(v);

  // CNNC_REPORT_NONFINITE=1: a debugging aid for f16 loss-scale skips. The
  // first op of each run whose result (after the f16 rounding) holds an inf
  // or NaN that none of its operands held is reported on stderr, with its
  // location: where a step's overflow starts, not where it ends up.
  static const bool reportNonFinite = [] {
    const char *e = std::getenv("CNNC_REPORT_NONFINITE");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  bool reported = false;
  auto nonFinite = [](const Tensor &t) {
    return llvm::any_of(t.data, [](float v) { return !std::isfinite(v); });
  };
  for (auto [idx, op] : llvm::enumerate(ops)) {
    if (failed(execute(op)))
      return failure();
    for (Value r : op->getResults()) {
      if (r.use_empty()) {
        env.erase(r);
        continue;
      }
      auto type = cast<RankedTensorType>(r.getType());
      if (type.getElementType().isF16())
        for (float &v : env[r].data)
          v = roundToHalf(v);
      if (reportNonFinite && !reported && nonFinite(env[r]) &&
          llvm::none_of(op->getOperands(), [&](Value v) {
            auto it = env.find(v);
            return it != env.end() && nonFinite(it->second);
          })) {
        reported = true;
        std::string text;
        llvm::raw_string_ostream os(text);
        os << "reference interpreter: first non-finite value in @"
           << func.getName() << ": result #"
           << cast<OpResult>(r).getResultNumber() << " of ";
        op->print(os,
                  OpPrintingFlags().skipRegions().elideLargeElementsAttrs());
        os << " at " << op->getLoc() << "\n";
        llvm::errs() << os.str();
      }
    }
    for (Value v : freeAfter[idx])
      env.erase(v);
  }
  return std::move(results);
}

namespace {
/// What sizes a convolution's scratch buffers: the filter (F first in both
/// layouts), the output it produces or reads (N x F x OH x OW in some
/// order), the image count and the groups.
struct ConvShapes {
  Value filter, output;
  int64_t n, groups;
};

int64_t dim0(Value v) { return cast<RankedTensorType>(v.getType()).getDimSize(0); }

std::optional<ConvShapes> convShapes(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<ConvShapes>>(op)
      .Case<cnn::Conv2DOp, cnn::FusedConv2DOp, cnn::FusedConv2DStatsOp>(
          [](auto c) {
            return ConvShapes{c.getFilter(), c->getResult(0),
                              dim0(c.getInput()), int64_t(c.getGroups())};
          })
      .Case<cnn::Conv2DBwdDataOp, cnn::FusedConv2DBwdDataOp>([](auto c) {
        return ConvShapes{c.getFilter(), c.getGradOutput(),
                          dim0(c->getResult(0)), int64_t(c.getGroups())};
      })
      .Case<cnn::Conv2DBwdFilterOp, cnn::FusedConv2DBwdFilterOp>([](auto c) {
        return ConvShapes{c->getResult(0), c.getGradOutput(),
                          dim0(c.getInput()), int64_t(c.getGroups())};
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// The bytes of `op`'s kernel scratch buffers (0 for an op without large
/// ones); nullopt when they cannot be counted in int64.
std::optional<int64_t> scratchBytes(Operation *op) {
  std::optional<ConvShapes> conv = convShapes(op);
  if (!conv)
    return 0;
  auto filter = cast<RankedTensorType>(conv->filter.getType());
  auto output = cast<RankedTensorType>(conv->output.getType());
  if (!filter.hasStaticShape() || !output.hasStaticShape() ||
      filter.getRank() < 1)
    return 0;
  int64_t f = filter.getDimSize(0);
  if (f <= 0 || conv->n <= 0)
    return 0;
  int64_t positions = output.getNumElements() / conv->n / f;
  std::optional<int64_t> floats = kn::convScratchFloats(
      conv->n, f, conv->groups, filter.getNumElements() / f, positions);
  if (!floats || *floats > std::numeric_limits<int64_t>::max() / 4)
    return std::nullopt;
  return *floats * int64_t(sizeof(float));
}
} // namespace

/// Checks that `op`'s results fit beside the live tensors before anything
/// is allocated: an absurd result would otherwise end in std::length_error,
/// std::bad_alloc or the kernel of a wrapped size. The interpreter keeps
/// every element as a float, whatever the element type.
LogicalResult Executor::checkMemory(Operation *op) {
  uint64_t live = 0;
  for (auto &entry : env)
    live += uint64_t(entry.second.data.capacity()) * sizeof(float);
  uint64_t limit = hostMemoryLimit();
  uint64_t left = limit > live ? limit - live : 0;
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    auto type = cast<RankedTensorType>(r.getType());
    std::optional<int64_t> bytes;
    if (type.hasStaticShape())
      bytes = boundedNumel(type.getShape(), sizeof(float),
                           std::numeric_limits<int64_t>::max());
    if (bytes)
      *bytes *= sizeof(float);
    if (!bytes || uint64_t(*bytes) > left) {
      outOfMemory = true;
      std::string requested =
          bytes ? llvm::formatv("{0} bytes ({1:F1} MiB)", *bytes,
                                *bytes / 1048576.0)
                      .str()
                : std::string("more bytes than int64 can count");
      return op->emitError("reference interpreter: out of host memory "
                           "allocating result #")
             << i << " " << type << " of '" << op->getName() << "': requested "
             << requested << "; the host has "
             << llvm::formatv("{0:F1} MiB free of {1:F1} MiB", left / 1048576.0,
                              limit / 1048576.0);
    }
    left -= uint64_t(*bytes);
  }
  // A convolution's im2col buffers grow with kernel x output positions and
  // can dwarf its result (a 30 x 30 kernel over a 2048 x 2048 output needs
  // 15 GB for a 16 MB result): they count too.
  std::optional<int64_t> scratch = scratchBytes(op);
  if (!scratch || uint64_t(*scratch) > left) {
    outOfMemory = true;
    std::string requested =
        scratch ? llvm::formatv("{0} bytes ({1:F1} MiB)", *scratch,
                                *scratch / 1048576.0)
                      .str()
                : std::string("more bytes than int64 can count");
    return op->emitError("reference interpreter: out of host memory "
                         "allocating the scratch buffers of '")
           << op->getName() << "' (im2col): requested " << requested
           << "; the host has "
           << llvm::formatv("{0:F1} MiB free of {1:F1} MiB", left / 1048576.0,
                            limit / 1048576.0);
  }
  return success();
}

LogicalResult Executor::execute(Operation *op) {
  for (Value r : op->getResults())
    if (!isa<RankedTensorType>(r.getType()))
      return op->emitError("reference interpreter: result type ")
             << r.getType() << " is not a ranked tensor";
  if (failed(checkMemory(op)))
    return failure();
  // Ops made by cnn-fuse handle both layouts themselves.
  if (isFusedOp(op))
    return executeFused(
        op, [&](Value v) -> const Tensor & { return get(v); },
        [&](Value v) -> Tensor & { return def(v); });
  if (cnn::isNHWC(op))
    return executeNHWC(op);
  if (auto eval = dyn_cast<cnn::ReferenceEvalOpInterface>(op))
    return eval.evaluate(*this);
  if (auto elementwise = dyn_cast<cnn::ElementwiseOpInterface>(op))
    return execElementwise(elementwise);
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    results.clear();
    for (Value v : ret.getOperands())
      results.push_back(get(v));
    return success();
  }
  return op->emitError("reference interpreter: no implementation of '")
         << op->getName() << "'";
}

/// ReferenceEvalOpInterface's external model: the op's `exec` member.
template <typename OpT>
struct EvalModel
    : cnn::ReferenceEvalOpInterface::ExternalModel<EvalModel<OpT>, OpT> {
  LogicalResult evaluate(Operation *op, Evaluator &evaluator) const {
    return static_cast<Executor &>(evaluator).exec(cast<OpT>(op));
  }
};

template <typename... OpTs> static void attach(MLIRContext *ctx) {
  (OpTs::template attachInterface<EvalModel<OpTs>>(*ctx), ...);
}

/// Attaches every op's evaluation to `ctx`'s cnn ops, once per context (the
/// first run in a context; runs on several threads, as the data-parallel
/// reference does, serialize here).
static void attachEvaluations(MLIRContext *ctx) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  auto probe =
      RegisteredOperationName::lookup(cnn::ConstantOp::getOperationName(), ctx);
  if (!probe || probe->hasInterface<cnn::ReferenceEvalOpInterface>())
    return;
  attach<cnn::ConstantOp, cnn::Conv2DOp, cnn::BiasAddOp, cnn::BatchNormOp,
         cnn::BatchNormTrainOp, cnn::MaxPool2DOp, cnn::AvgPool2DOp,
         cnn::GlobalAvgPoolOp, cnn::MatmulOp, cnn::ConcatOp, cnn::SliceOp,
         cnn::PadOp, cnn::PadGradOp, cnn::TransposeOp, cnn::DropoutMaskOp,
         cnn::SoftmaxOp, cnn::SoftmaxCrossEntropyOp, cnn::FlattenOp,
         cnn::ReshapeOp, cnn::ReduceSumOp, cnn::ReduceMeanOp,
         cnn::ReduceMaxOp>(ctx);
  attach<cnn::NLLLossOp, cnn::NLLLossGradOp, cnn::ArgMaxOp, cnn::ArgMinOp,
         cnn::ReduceProdOp, cnn::GatherElementsOp, cnn::GatherElementsGradOp>(
      ctx);
  attach<cnn::Conv2DBwdDataOp, cnn::Conv2DBwdFilterOp, cnn::BiasGradOp,
         cnn::MaxPool2DGradOp, cnn::AvgPool2DGradOp, cnn::GlobalAvgPoolGradOp,
         cnn::BatchNormGradOp, cnn::SoftmaxCrossEntropyGradOp>(ctx);
  attach<cnn::SGDUpdateOp, cnn::AdamUpdateOp, cnn::AllFiniteOp,
         cnn::LossScaleUpdateOp, cnn::UnscaleOp, cnn::AllReduceOp>(ctx);
  attach<cnn::SendOp, cnn::RecvOp, cnn::MicroBatchOp, cnn::TransferWaitOp>(
      ctx);
  attach<cnn::ClipDivisorOp, cnn::AccumulateGradOp, cnn::AccumulationStepOp>(
      ctx);
  attach<cnn::ResizeOp, cnn::ResizeGradOp, cnn::FusedResizeConcatOp>(ctx);
}

/// NHWC support, written for clarity: a scratch NCHW twin of the op reads
/// transposed copies of its operands, and its 4-D results are transposed
/// back. Every 4-D operand or result of a layout-sensitive op is either an
/// activation (NHWC <-> NCHW) or a filter (KRSC <-> FCHW): one permutation.
LogicalResult Executor::executeNHWC(Operation *op) {
  const kn::Shape toNCHW{0, 3, 1, 2}, toNHWC{0, 2, 3, 1};
  auto permuted = [](Type type, const kn::Shape &perm) -> Type {
    auto t = cast<RankedTensorType>(type);
    if (t.getRank() != 4)
      return t;
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(t.getDimSize(p));
    return RankedTensorType::get(shape, t.getElementType());
  };
  Block scratch;
  OperationState state(op->getLoc(), op->getName());
  for (Value v : op->getOperands()) {
    Value arg =
        scratch.addArgument(permuted(v.getType(), toNCHW), op->getLoc());
    Tensor t = get(v);
    if (t.shape.size() == 4) {
      t = Tensor::zeros(cast<RankedTensorType>(arg.getType()));
      kn::transpose(ptr(v), shapeOf(v), toNCHW, t.data.data());
    }
    env[arg] = std::move(t);
    state.addOperands(arg);
  }
  for (Type t : op->getResultTypes())
    state.addTypes(permuted(t, toNCHW));
  NamedAttrList attrs(op->getAttrDictionary());
  attrs.set("layout", cnn::LayoutAttr::get(op->getContext(), cnn::Layout::NCHW));
  state.addAttributes(attrs);
  Operation *nchw = Operation::create(state); // detached, destroyed below
  LogicalResult result = execute(nchw);
  for (auto [r, twin] : llvm::zip(op->getResults(), nchw->getResults())) {
    if (failed(result))
      break;
    Tensor t = get(twin);
    if (t.shape.size() == 4) {
      t = Tensor::zeros(cast<RankedTensorType>(r.getType()));
      kn::transpose(ptr(twin), shapeOf(twin), toNHWC, t.data.data());
    }
    env[r] = std::move(t);
  }
  for (Value v :
       llvm::concat<Value>(scratch.getArguments(), nchw->getResults()))
    env.erase(v);
  nchw->destroy();
  return result;
}

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

LogicalResult Executor::exec(cnn::ConstantOp op) {
  ElementsAttr value = op.getValue();
  Tensor &t = def(op.getResult());
  Type et = value.getElementType();
  size_t i = 0;
  if (isa<FloatType>(et)) {
    auto values = value.tryGetValues<APFloat>();
    if (!values)
      return op.emitError("reference interpreter: cannot read the elements of ")
             << value;
    for (APFloat v : *values) {
      bool lost;
      v.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
      t.data[i++] = v.convertToFloat();
    }
  } else if (isa<IntegerType, IndexType>(et)) {
    auto values = value.tryGetValues<APInt>();
    if (!values)
      return op.emitError("reference interpreter: cannot read the elements of ")
             << value;
    for (const APInt &v : *values)
      t.data[i++] = static_cast<float>(v.getSExtValue());
  } else {
    return op.emitError("reference interpreter: unsupported constant element "
                        "type ")
           << et;
  }
  return success();
}

LogicalResult Executor::exec(cnn::Conv2DOp op) {
  auto p = convParams(shapeOf(op.getInput()), shapeOf(op.getFilter()),
                      op.getStrides(), op.getPadding(), op.getDilations(),
                      op.getGroups());
  kn::conv2d(ptr(op.getInput()), ptr(op.getFilter()), out(op.getResult()), p);
  return success();
}

LogicalResult Executor::exec(cnn::BiasAddOp op) {
  auto s = shapeOf(op.getInput());
  NCI d = nciOf(s);
  kn::biasAdd(ptr(op.getInput()), ptr(op.getBias()), out(op.getResult()), d.n,
              d.c, d.inner);
  return success();
}

// Building the detached fused op adds uses to the operands' use lists, and
// erasing it removes them: IR mutation that is not thread-safe. Data-parallel
// reference training runs one interpreter per rank on the same function, so
// both are serialized (the evaluation in between only reads).
static std::mutex fusedWrapMutex;

LogicalResult Executor::execElementwise(cnn::ElementwiseOpInterface op) {
  cnn::FusedElementwiseOp fused;
  {
    std::lock_guard<std::mutex> lock(fusedWrapMutex);
    OpBuilder b(op->getContext());
    fused = cnn::wrapElementwise(b, op);
  }
  LogicalResult result = executeFused(
      fused, [&](Value v) -> const Tensor & { return get(v); },
      [&](Value v) -> Tensor & {
        return def(op->getResult(cast<OpResult>(v).getResultNumber()));
      });
  {
    std::lock_guard<std::mutex> lock(fusedWrapMutex);
    fused->erase();
  }
  return result;
}

LogicalResult Executor::execReduce(Operation *op) {
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
  const Tensor &in = get(op->getOperand(0));
  auto shape = cast<RankedTensorType>(op->getOperand(0).getType()).getShape();
  auto outShape = cast<RankedTensorType>(op->getResult(0).getType()).getShape();
  int64_t outCount = 1, count = 1;
  for (int64_t d : outShape)
    outCount *= d;
  for (int64_t a : axes)
    count *= shape[a];
  bool isMax = isa<cnn::ReduceMaxOp>(op), isProd = isa<cnn::ReduceProdOp>(op);
  std::vector<double> acc(outCount,
                          isMax    ? -std::numeric_limits<double>::infinity()
                          : isProd ? 1.0
                                   : 0.0);
  int64_t rank = shape.size();
  for (int64_t i = 0, n = in.data.size(); i < n; ++i) {
    int64_t rest = i, o = 0, stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t idx = rest % shape[d];
      rest /= shape[d];
      o += (outShape[d] == 1 ? 0 : idx) * stride;
      stride *= outShape[d];
    }
    if (isProd)
      acc[o] *= in.data[i];
    else if (!isMax)
      acc[o] += in.data[i];
    else if (std::isnan(in.data[i]) || in.data[i] > acc[o])
      acc[o] = in.data[i];
  }
  float *y = out(op->getResult(0));
  bool mean = isa<cnn::ReduceMeanOp>(op);
  for (int64_t j = 0; j < outCount; ++j)
    y[j] = (float)(mean ? acc[j] / count : acc[j]);
  return success();
}

LogicalResult Executor::exec(cnn::BatchNormOp op) {
  NCI d = nciOf(shapeOf(op.getInput()));
  kn::batchNormInference(ptr(op.getInput()), ptr(op.getScale()),
                         ptr(op.getBias()), ptr(op.getMean()), ptr(op.getVar()),
                         out(op.getResult()), d.n, d.c, d.inner,
                         f32(op.getEpsilon()));
  return success();
}

LogicalResult Executor::exec(cnn::BatchNormTrainOp op) {
  NCI d = nciOf(shapeOf(op.getInput()));
  float *y = out(op->getResult(0)), *mean = out(op->getResult(1)),
        *invstd = out(op->getResult(2)), *rm = out(op->getResult(3)),
        *rv = out(op->getResult(4));
  kn::batchNormTrain(ptr(op.getInput()), ptr(op.getScale()), ptr(op.getBias()),
                     ptr(op.getRunningMean()), ptr(op.getRunningVar()), y, mean,
                     invstd, rm, rv, d.n, d.c, d.inner, f32(op.getEpsilon()),
                     f32(op.getMomentum()));
  return success();
}

LogicalResult Executor::exec(cnn::MaxPool2DOp op) {
  auto p = poolParams(shapeOf(op.getInput()), op.getKernel(), op.getStrides(),
                      op.getPadding(), op.getCeilMode(), false);
  kn::maxPool2d(ptr(op.getInput()), out(op.getResult()), p);
  return success();
}

LogicalResult Executor::exec(cnn::AvgPool2DOp op) {
  auto p =
      poolParams(shapeOf(op.getInput()), op.getKernel(), op.getStrides(),
                 op.getPadding(), op.getCeilMode(), op.getCountIncludePad());
  kn::avgPool2d(ptr(op.getInput()), out(op.getResult()), p);
  return success();
}

LogicalResult Executor::exec(cnn::GlobalAvgPoolOp op) {
  auto s = shapeOf(op.getInput());
  kn::globalAvgPool(ptr(op.getInput()), out(op.getResult()), s[0] * s[1],
                    s[2] * s[3]);
  return success();
}

LogicalResult Executor::exec(cnn::MatmulOp op) {
  auto l = shapeOf(op.getLhs()), r = shapeOf(op.getRhs());
  bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();
  size_t row = l.size() - 2, col = l.size() - 1;
  int64_t m = tl ? l[col] : l[row], k = tl ? l[row] : l[col],
          n = tr ? r[row] : r[col];
  // One product per index of the leading (batch) dimensions.
  int64_t batch = 1;
  for (size_t d = 0; d < row; ++d)
    batch *= l[d];
  const float *a = ptr(op.getLhs()), *bm = ptr(op.getRhs());
  float *c = out(op.getResult());
  for (int64_t i = 0; i < batch; ++i)
    kn::gemm(m, n, k, a + i * m * k, tl, bm + i * k * n, tr, c + i * m * n);
  return success();
}

LogicalResult Executor::exec(cnn::ConcatOp op) {
  std::vector<const float *> inputs;
  std::vector<kn::Shape> shapes;
  for (Value v : op.getInputs()) {
    inputs.push_back(ptr(v));
    shapes.push_back(shapeOf(v));
  }
  kn::concat(inputs, shapes, op.getAxis(), out(op.getResult()));
  return success();
}

LogicalResult Executor::exec(cnn::SliceOp op) {
  kn::slice(ptr(op.getInput()), shapeOf(op.getInput()),
            kn::Shape(op.getOffsets().begin(), op.getOffsets().end()),
            kn::Shape(op.getSizes().begin(), op.getSizes().end()),
            out(op.getResult()));
  return success();
}

static kn::PadMode padMode(StringRef mode) {
  return mode == "reflect" ? kn::PadMode::Reflect
         : mode == "edge"  ? kn::PadMode::Edge
                           : kn::PadMode::Constant;
}

LogicalResult Executor::exec(cnn::PadOp op) {
  kn::pad(ptr(op.getInput()), shapeOf(op.getInput()),
          kn::Shape(op.getPads().begin(), op.getPads().end()),
          padMode(op.getMode()), f32(op.getValue()), out(op.getResult()));
  return success();
}

LogicalResult Executor::exec(cnn::PadGradOp op) {
  kn::padGrad(ptr(op.getGradOutput()), shapeOf(op.getResult()),
              kn::Shape(op.getPads().begin(), op.getPads().end()),
              padMode(op.getMode()), out(op.getResult()));
  return success();
}

/// The taps along H and W of resize / resize_grad `op` between the NCHW
/// shapes `in` (the resize input) and `resized` (cnnc/Support/Resize.h).
template <typename ResizeLikeOp>
static std::pair<std::vector<ResizeTap>, std::vector<ResizeTap>>
resizeTapsOf(ResizeLikeOp op, ArrayRef<int64_t> in, ArrayRef<int64_t> resized) {
  std::optional<ArrayRef<double>> scales;
  if (auto s = op.getScalesAttr())
    scales = s.asArrayRef();
  auto taps = [&](int d) {
    return resizeTaps(in[2 + d], resized[2 + d], op.getMode(),
                      op.getCoordinateTransformationMode(), op.getNearestMode(),
                      scales ? (*scales)[d] : 0.0);
  };
  return {taps(0), taps(1)};
}

LogicalResult Executor::exec(cnn::ResizeOp op) {
  auto in = shapeOf(op.getInput()), resized = shapeOf(op.getResult());
  auto [th, tw] = resizeTapsOf(op, in, resized);
  kn::resize(ptr(op.getInput()), out(op.getResult()), in[0] * in[1], in[2],
             in[3], th, tw, op.getMode() == "linear");
  return success();
}

LogicalResult Executor::exec(cnn::ResizeGradOp op) {
  auto in = shapeOf(op.getResult()), resized = shapeOf(op.getGradOutput());
  auto [th, tw] = resizeTapsOf(op, in, resized);
  const float *dy = ptr(op.getGradOutput());
  // With a channel offset, the resize's channels of the wider gradient
  // (NCHW here: the channel range is contiguous per image).
  std::vector<float> sliced;
  if (std::optional<int64_t> offset = op.getChannelOffset()) {
    kn::Shape sizes{resized[0], in[1], resized[2], resized[3]};
    sliced.resize(sizes[0] * sizes[1] * sizes[2] * sizes[3]);
    kn::slice(dy, resized, kn::Shape{0, *offset, 0, 0}, sizes, sliced.data());
    dy = sliced.data();
  }
  kn::resizeGrad(dy, out(op.getResult()), in[0] * in[1], in[2], in[3], th, tw,
                 op.getMode() == "linear");
  return success();
}

/// resize, then concat along the channels (NCHW here), as the two ops it
/// replaces compute them.
LogicalResult Executor::exec(cnn::FusedResizeConcatOp op) {
  auto in = shapeOf(op.getInput()), other = shapeOf(op.getOther());
  kn::Shape resized{in[0], in[1], other[2], other[3]};
  auto [th, tw] = resizeTapsOf(op, in, resized);
  std::vector<float> r(resized[0] * resized[1] * resized[2] * resized[3]);
  kn::resize(ptr(op.getInput()), r.data(), in[0] * in[1], in[2], in[3], th, tw,
             op.getMode() == "linear");
  std::vector<const float *> inputs{r.data(), ptr(op.getOther())};
  std::vector<kn::Shape> shapes{resized, other};
  if (!op.getResizedFirst()) {
    std::swap(inputs[0], inputs[1]);
    std::swap(shapes[0], shapes[1]);
  }
  kn::concat(inputs, shapes, 1, out(op.getResult()));
  return success();
}

LogicalResult Executor::exec(cnn::TransposeOp op) {
  kn::transpose(
      ptr(op.getInput()), shapeOf(op.getInput()),
      kn::Shape(op.getPermutation().begin(), op.getPermutation().end()),
      out(op.getResult()));
  return success();
}

LogicalResult Executor::exec(cnn::DropoutMaskOp op) {
  float step = scalar(op.getStep());
  if (!(step >= 0))
    return op.emitError("reference interpreter: dropout step must be >= 0, "
                        "got ")
           << step;
  Tensor &t = def(op.getResult());
  kn::dropoutMask(t.data.data(), t.numel(), f32(op.getRatio()), op.getSeed(),
                  static_cast<uint64_t>(step));
  return success();
}

LogicalResult Executor::exec(cnn::SoftmaxOp op) {
  auto s = shapeOf(op.getInput());
  int64_t axis = op.getAxis(), outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= s[d];
  for (size_t d = axis + 1; d < s.size(); ++d)
    inner *= s[d];
  kn::softmax(ptr(op.getInput()), out(op.getResult()), outer, s[axis], inner);
  return success();
}

LogicalResult Executor::checkLabels(Operation *op, Value labels,
                                    int64_t classes, int64_t ignoreIndex) {
  for (auto [i, l] : llvm::enumerate(get(labels).data))
    if (!(l >= 0 && l < classes) && l != static_cast<float>(ignoreIndex))
      return op->emitError("reference interpreter: label #")
             << i << " is " << static_cast<int64_t>(l) << ", outside [0, "
             << classes << ") and not the ignore_index " << ignoreIndex;
  return success();
}

LogicalResult Executor::exec(cnn::SoftmaxCrossEntropyOp op) {
  auto s = shapeOf(op.getLogits());
  if (failed(checkLabels(op, op.getLabels(), s[1], op.getIgnoreIndex())))
    return failure();
  float loss = kn::softmaxCrossEntropy(ptr(op.getLogits()), ptr(op.getLabels()),
                                       s[0], s[1], f32(op.getLabelSmoothing()),
                                       op.getIgnoreIndex());
  out(op.getResult())[0] = loss;
  return success();
}

template <typename OpT>
LogicalResult Executor::nllPositionWeights(OpT op, int64_t classes,
                                           std::vector<double> &weights,
                                           std::vector<char> &ignored,
                                           double &sum) {
  const Tensor &labels = get(op.getLabels());
  const float *classWeight = op.getWeight() ? ptr(op.getWeight()) : nullptr;
  std::optional<int64_t> ignore = op.getIgnoreIndex();
  weights.assign(labels.data.size(), 0.0);
  ignored.assign(labels.data.size(), 0);
  sum = 0;
  for (auto [i, l] : llvm::enumerate(labels.data)) {
    auto y = static_cast<int64_t>(l);
    if (ignore && y == *ignore) {
      ignored[i] = 1;
      continue;
    }
    if (!(y >= 0 && y < classes)) {
      InFlightDiagnostic d = op.emitError("reference interpreter: label #")
                             << i << " is " << y << ", outside [0, "
                             << classes << ")";
      if (ignore)
        d << " and not the ignore_index " << *ignore;
      return d;
    }
    weights[i] = classWeight ? classWeight[y] : 1.0;
    sum += weights[i];
  }
  return success();
}

// l[n, d] = -w[y] x[n, y, d], summed and divided in double.
LogicalResult Executor::exec(cnn::NLLLossOp op) {
  auto s = shapeOf(op.getInput());
  int64_t n = s[0], classes = s[1], inner = 1;
  for (size_t d = 2; d < s.size(); ++d)
    inner *= s[d];
  std::vector<double> weights;
  std::vector<char> ignored;
  double weightSum;
  if (failed(nllPositionWeights(op, classes, weights, ignored, weightSum)))
    return failure();
  const float *x = ptr(op.getInput()), *labels = ptr(op.getLabels());
  float *loss = out(op.getResult());
  double total = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < inner; ++d) {
      int64_t pos = i * inner + d;
      if (ignored[pos])
        continue; // exactly 0, whatever the input holds there
      auto y = static_cast<int64_t>(labels[pos]);
      double l = -weights[pos] * x[(i * classes + y) * inner + d];
      if (op.getReduction() == cnn::LossReduction::None)
        loss[pos] = static_cast<float>(l);
      total += l;
    }
  if (op.getReduction() == cnn::LossReduction::Sum)
    loss[0] = static_cast<float>(total);
  else if (op.getReduction() == cnn::LossReduction::Mean)
    loss[0] = static_cast<float>(total / weightSum); // NaN when 0 / 0
  return success();
}

LogicalResult Executor::gatherOffsets(Operation *op, Value indices,
                                     ArrayRef<int64_t> inputShape,
                                     int64_t axis,
                                     std::vector<int64_t> &offsets) {
  auto indexShape = shapeOf(indices);
  int64_t rank = inputShape.size(), size = inputShape[axis];
  const Tensor &index = get(indices);
  offsets.resize(index.data.size());
  for (size_t i = 0; i < index.data.size(); ++i) {
    auto k = static_cast<int64_t>(index.data[i]);
    if (k < -size || k >= size)
      return op->emitError("reference interpreter: index #")
             << i << " is " << k << ", outside [" << -size << ", " << size
             << ") along axis " << axis;
    if (k < 0)
      k += size;
    // The input offset of the index's position with its `axis` coordinate
    // replaced by k (row-major in both shapes).
    int64_t rest = i, offset = 0, stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t coord = rest % indexShape[d];
      rest /= indexShape[d];
      offset += (d == axis ? k : coord) * stride;
      stride *= inputShape[d];
    }
    offsets[i] = offset;
  }
  return success();
}

LogicalResult Executor::exec(cnn::GatherElementsOp op) {
  std::vector<int64_t> offsets;
  if (failed(gatherOffsets(op, op.getIndices(), shapeOf(op.getInput()),
                           op.getAxis(), offsets)))
    return failure();
  const float *x = ptr(op.getInput());
  float *y = out(op.getResult());
  for (size_t i = 0; i < offsets.size(); ++i)
    y[i] = x[offsets[i]];
  return success();
}

template <typename OpT>
LogicalResult Executor::execArgExtreme(OpT op, bool max) {
  auto s = shapeOf(op.getInput());
  int64_t axis = op.getAxis(), outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= s[d];
  for (size_t d = axis + 1; d < s.size(); ++d)
    inner *= s[d];
  int64_t n = s[axis];
  bool last = op.getSelectLastIndex();
  const float *x = ptr(op.getInput());
  float *index = out(op.getResult());
  // `v` replaces the best so far: a NaN wins over numbers (numpy), the first
  // NaN over later ones; equal values keep the first unless `last`.
  auto better = [&](float v, float best) {
    if (std::isnan(best))
      return last && std::isnan(v);
    if (std::isnan(v))
      return true;
    return max ? (v > best || (last && v == best))
               : (v < best || (last && v == best));
  };
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float *row = x + o * n * inner + i;
      int64_t best = 0;
      for (int64_t k = 1; k < n; ++k)
        if (better(row[k * inner], row[best * inner]))
          best = k;
      index[o * inner + i] = static_cast<float>(best);
    }
  return success();
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

LogicalResult Executor::exec(cnn::Conv2DBwdDataOp op) {
  auto p = convParams(shapeOf(op.getResult()), shapeOf(op.getFilter()),
                      op.getStrides(), op.getPadding(), op.getDilations(),
                      op.getGroups());
  kn::conv2dBwdData(ptr(op.getGradOutput()), ptr(op.getFilter()),
                    out(op.getResult()), p);
  return success();
}

LogicalResult Executor::exec(cnn::Conv2DBwdFilterOp op) {
  auto p = convParams(shapeOf(op.getInput()), shapeOf(op.getResult()),
                      op.getStrides(), op.getPadding(), op.getDilations(),
                      op.getGroups());
  kn::conv2dBwdFilter(ptr(op.getInput()), ptr(op.getGradOutput()),
                      out(op.getResult()), p);
  return success();
}

LogicalResult Executor::exec(cnn::BiasGradOp op) {
  NCI d = nciOf(shapeOf(op.getGradOutput()));
  kn::biasGrad(ptr(op.getGradOutput()), out(op.getResult()), d.n, d.c, d.inner);
  return success();
}

LogicalResult Executor::exec(cnn::MaxPool2DGradOp op) {
  auto p = poolParams(shapeOf(op.getInput()), op.getKernel(), op.getStrides(),
                      op.getPadding(), op.getCeilMode(), false);
  kn::maxPool2dGrad(ptr(op.getGradOutput()), ptr(op.getInput()),
                    out(op.getResult()), p);
  return success();
}

LogicalResult Executor::exec(cnn::AvgPool2DGradOp op) {
  auto p =
      poolParams(shapeOf(op.getResult()), op.getKernel(), op.getStrides(),
                 op.getPadding(), op.getCeilMode(), op.getCountIncludePad());
  kn::avgPool2dGrad(ptr(op.getGradOutput()), out(op.getResult()), p);
  return success();
}

LogicalResult Executor::exec(cnn::GlobalAvgPoolGradOp op) {
  auto s = shapeOf(op.getResult());
  kn::globalAvgPoolGrad(ptr(op.getGradOutput()), out(op.getResult()),
                        s[0] * s[1], s[2] * s[3]);
  return success();
}

LogicalResult Executor::exec(cnn::BatchNormGradOp op) {
  NCI d = nciOf(shapeOf(op.getInput()));
  float *dx = out(op->getResult(0)), *dscale = out(op->getResult(1)),
        *dbias = out(op->getResult(2));
  kn::batchNormGrad(ptr(op.getGradOutput()), ptr(op.getInput()),
                    ptr(op.getScale()), ptr(op.getSavedMean()),
                    ptr(op.getSavedInvstd()), dx, dscale, dbias, d.n, d.c,
                    d.inner);
  return success();
}

LogicalResult Executor::exec(cnn::SoftmaxCrossEntropyGradOp op) {
  auto s = shapeOf(op.getLogits());
  if (failed(checkLabels(op, op.getLabels(), s[1], op.getIgnoreIndex())))
    return failure();
  kn::softmaxCrossEntropyGrad(ptr(op.getLogits()), ptr(op.getLabels()),
                              scalar(op.getGradLoss()), out(op.getResult()),
                              s[0], s[1], f32(op.getLabelSmoothing()),
                              op.getIgnoreIndex());
  return success();
}

// The scatter-add of gather_elements' reads, summed in double.
LogicalResult Executor::exec(cnn::GatherElementsGradOp op) {
  std::vector<int64_t> offsets;
  if (failed(gatherOffsets(op, op.getIndices(), shapeOf(op.getResult()),
                           op.getAxis(), offsets)))
    return failure();
  const float *dy = ptr(op.getGradOutput());
  Tensor &dx = def(op.getResult());
  std::vector<double> sum(dx.data.size(), 0.0);
  for (size_t i = 0; i < offsets.size(); ++i)
    sum[offsets[i]] += dy[i];
  for (size_t j = 0; j < sum.size(); ++j)
    dx.data[j] = static_cast<float>(sum[j]);
  return success();
}

// -w[y] g / D at (n, y, d), 0 elsewhere: the scatter of nll_loss's reads.
LogicalResult Executor::exec(cnn::NLLLossGradOp op) {
  auto s = shapeOf(op.getResult());
  int64_t n = s[0], classes = s[1], inner = 1;
  for (size_t d = 2; d < s.size(); ++d)
    inner *= s[d];
  std::vector<double> weights;
  std::vector<char> ignored;
  double weightSum;
  if (failed(nllPositionWeights(op, classes, weights, ignored, weightSum)))
    return failure();
  const float *labels = ptr(op.getLabels()), *g = ptr(op.getGradLoss());
  bool perPosition = op.getReduction() == cnn::LossReduction::None;
  double divisor =
      op.getReduction() == cnn::LossReduction::Mean ? weightSum : 1.0;
  float *dx = out(op.getResult());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < inner; ++d) {
      int64_t pos = i * inner + d;
      if (ignored[pos])
        continue;
      auto y = static_cast<int64_t>(labels[pos]);
      dx[(i * classes + y) * inner + d] = static_cast<float>(
          -weights[pos] * (perPosition ? g[pos] : g[0]) / divisor);
    }
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer ops
//===----------------------------------------------------------------------===//

const float *Executor::unscaledGrad(Value grad, Value scale,
                                    std::vector<float> &tmp) {
  if (!scale)
    return ptr(grad);
  const Tensor &g = get(grad);
  float s = scalar(scale);
  tmp.resize(g.data.size());
  for (size_t i = 0; i < tmp.size(); ++i)
    tmp[i] = g.data[i] / s;
  return tmp.data();
}

/// Loss scaling: a non-finite step leaves every input of the update unchanged.
static bool skipUpdate(Operation *op, Value finite, ValueTensorMap &env) {
  if (!finite || env.find(finite)->second.data[0] != 0.0f)
    return false;
  for (unsigned r = 0; r < op->getNumResults(); ++r) {
    // Results are (new_param, new_state...) for operands (param, grad,
    // state...).
    Value src = op->getOperand(r == 0 ? 0 : r + 1);
    Tensor copy = env.find(src)->second;
    env[op->getResult(r)] = std::move(copy);
  }
  return true;
}

LogicalResult Executor::exec(cnn::SGDUpdateOp op) {
  if (skipUpdate(op, op.getFinite(), env))
    return success();
  std::vector<float> tmp;
  const float *grad = unscaledGrad(op.getGrad(), op.getGradScale(), tmp);
  float *p = out(op->getResult(0)), *buf = out(op->getResult(1));
  kn::sgdUpdate(ptr(op.getParam()), grad, ptr(op.getMomentumBuffer()), p, buf,
                get(op.getParam()).numel(), scalar(op.getLr()),
                scalar(op.getStep()), f32(op.getMomentum()),
                f32(op.getDampening()), f32(op.getWeightDecay()),
                op.getNesterov());
  return success();
}

LogicalResult Executor::exec(cnn::AdamUpdateOp op) {
  // A skipped update (loss scaling) leaves everything as it was: its step
  // number (the applied steps so far, possibly 0) is not used.
  if (skipUpdate(op, op.getFinite(), env))
    return success();
  float step = scalar(op.getStep());
  if (!(step >= 1))
    return op.emitError("reference interpreter: adam step must be >= 1 (it is "
                        "1-based), got ")
           << step;
  std::vector<float> tmp;
  const float *grad = unscaledGrad(op.getGrad(), op.getGradScale(), tmp);
  float *p = out(op->getResult(0)), *m = out(op->getResult(1)),
        *v = out(op->getResult(2));
  kn::adamUpdate(ptr(op.getParam()), grad, ptr(op.getExpAvg()),
                 ptr(op.getExpAvgSq()), p, m, v, get(op.getParam()).numel(),
                 scalar(op.getLr()), step, f32(op.getBeta1()),
                 f32(op.getBeta2()), f32(op.getEpsilon()),
                 f32(op.getWeightDecay()), op.getDecoupled());
  return success();
}

LogicalResult Executor::exec(cnn::ClipDivisorOp op) {
  // torch.nn.utils.clip_grad_norm_: the norm (accumulated in double here,
  // torch's f32 norm of norms agrees to rounding) of the unscaled gradients.
  double sum = 0;
  for (Value g : op.getGrads())
    for (float v : get(g).data)
      sum += static_cast<double>(v) * v;
  float scale = scalar(op.getScale());
  float norm = static_cast<float>(std::sqrt(sum)) / scale;
  float coef = std::min(1.0f, f32(op.getMaxNorm()) / (norm + 1e-6f));
  out(op.getDivisor())[0] = scale / coef;
  return success();
}

LogicalResult Executor::exec(cnn::AccumulateGradOp op) {
  const Tensor &acc = get(op.getAcc()), &g = get(op.getGrad());
  float step = scalar(op.getStep());
  float every = static_cast<float>(op.getEvery());
  bool last = std::fmod(step, every) == 0.0f;
  float *sum = out(op.getSum()), *next = out(op.getNewAcc());
  for (size_t i = 0; i < acc.data.size(); ++i) {
    sum[i] = acc.data[i] + g.data[i] / every;
    next[i] = last ? 0.0f : sum[i];
  }
  return success();
}

LogicalResult Executor::exec(cnn::AccumulationStepOp op) {
  float step = scalar(op.getStep());
  float every = static_cast<float>(op.getEvery());
  out(op.getApply())[0] = std::fmod(step, every) == 0.0f ? 1.0f : 0.0f;
  out(op.getOptimizerStep())[0] = std::ceil(step / every);
  return success();
}

LogicalResult Executor::exec(cnn::AllFiniteOp op) {
  float ok = 1.0f;
  for (Value v : op.getInputs())
    for (float x : get(v).data)
      if (!std::isfinite(x))
        ok = 0.0f;
  out(op.getResult())[0] = ok;
  return success();
}

LogicalResult Executor::exec(cnn::LossScaleUpdateOp op) {
  // torch's _amp_update_scale_ (aten/src/ATen/native/cuda/AmpKernels.cu).
  float scale = scalar(op.getScale()), tracker = scalar(op.getGrowthTracker());
  if (scalar(op.getFinite()) == 0.0f) {
    scale *= f32(op.getBackoffFactor());
    tracker = 0;
  } else {
    float successful = tracker + 1;
    if (successful == (float)op.getGrowthInterval()) {
      float grown = scale * f32(op.getGrowthFactor());
      if (std::isfinite(grown))
        scale = grown;
      tracker = 0;
    } else {
      tracker = successful;
    }
  }
  out(op.getNewScale())[0] = scale;
  out(op.getNewGrowthTracker())[0] = tracker;
  return success();
}

LogicalResult Executor::exec(cnn::UnscaleOp op) {
  const Tensor &in = get(op.getInput());
  float s = scalar(op.getScale());
  float *o = out(op.getResult());
  for (size_t i = 0; i < in.data.size(); ++i)
    o[i] = in.data[i] / s;
  return success();
}

/// One collective over the whole bucket, through the thread's communicator
/// (none: a single rank, the identity).
LogicalResult Executor::exec(cnn::AllReduceOp op) {
  std::vector<float> flat;
  for (Value v : op.getInputs()) {
    const Tensor &t = get(v);
    flat.insert(flat.end(), t.data.begin(), t.data.end());
  }
  if (Communicator *comm = currentCommunicator();
      comm && comm->size() > 1) {
    ReduceKind kind;
    if (!parseReduceKind(op.getReduction().str(), kind))
      return op.emitOpError("unknown reduction '") << op.getReduction() << "'";
    bool f16 = cast<RankedTensorType>(op.getInputs().front().getType())
                   .getElementType()
                   .isF16();
    std::string err;
    if (!comm->allReduce(flat.data(), flat.size(), kind, f16, err))
      return op.emitError("rank ")
             << comm->rank() << " of " << comm->size() << ": " << err;
  }
  size_t at = 0;
  for (Value r : op.getResults()) {
    Tensor &t = def(r);
    std::copy(flat.begin() + at, flat.begin() + at + t.data.size(),
              t.data.begin());
    at += t.data.size();
  }
  return success();
}

// Pipeline stages (lib/Reference/Pipeline.cpp): the stage is the enclosing
// function's cnn.pipeline_stage.
static int64_t stageOfOp(Operation *op) {
  auto f = op->getParentOfType<func::FuncOp>();
  auto a = f ? f->getAttrOfType<IntegerAttr>("cnn.pipeline_stage") : nullptr;
  return a ? a.getInt() : -1;
}

// A micro-batch: a contiguous range of rows (the batch is the outer
// dimension).
LogicalResult Executor::exec(cnn::MicroBatchOp op) {
  const Tensor &in = get(op.getInput());
  Tensor out = Tensor::zeros(op.getResult().getType());
  out.kind = in.kind;
  size_t n = out.data.size();
  std::copy(in.data.begin() + op.getIndexAttr().getInt() * n,
            in.data.begin() + (op.getIndexAttr().getInt() + 1) * n,
            out.data.begin());
  def(op.getResult()) = std::move(out);
  return success();
}

LogicalResult Executor::exec(cnn::SendOp op) {
  PipelineMailbox *box = currentMailbox();
  if (!box)
    return op.emitError("reference interpreter: cnn.send outside a pipeline "
                        "step (run the stages with runPipelineStep)");
  box->send(stageOfOp(op), op.getPeerAttr().getInt(), op.getTagAttr().getInt(),
            get(op.getInput()));
  return success();
}

LogicalResult Executor::exec(cnn::RecvOp op) {
  PipelineMailbox *box = currentMailbox();
  if (!box)
    return op.emitError("reference interpreter: cnn.recv outside a pipeline "
                        "step (run the stages with runPipelineStep)");
  Tensor t;
  std::string err;
  if (!box->recv(op.getPeerAttr().getInt(), stageOfOp(op),
                 op.getTagAttr().getInt(), t, err))
    return op.emitError("reference interpreter: ") << err;
  auto type = cast<RankedTensorType>(op.getResult().getType());
  if (!t.matches(type))
    return op.emitError("reference interpreter: tag ")
           << op.getTagAttr().getInt() << " carries " << describe(t)
           << " but the recv expects " << describe(type);
  def(op.getResult()) = std::move(t);
  return success();
}

LogicalResult Executor::execCopy(Operation *op) {
  const Tensor &in = get(op->getOperand(0));
  Tensor &t = def(op->getResult(0));
  if (t.numel() != in.numel())
    return op->emitError("reference interpreter: element count mismatch");
  kn::copy(in.data.data(), t.data.data(), in.numel());
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

FailureOr<std::vector<Tensor>> run(func::FuncOp func, ArrayRef<Tensor> args) {
  if (func.isExternal())
    return func.emitError("reference interpreter: function has no body");
  return Executor(func).run(args);
}

Tensor toStoredForm(const Tensor &pub, RankedTensorType stored) {
  Tensor t = Tensor::zeros(stored);
  t.kind = pub.kind;
  cnnrt::convertFilterLayout(
      pub.shape.data(), stored.getDimSize(3), sizeof(float),
      reinterpret_cast<const char *>(pub.data.data()),
      reinterpret_cast<char *>(t.data.data()), /*toStored=*/true);
  return t;
}

Tensor toPublicForm(const Tensor &stored, ArrayRef<int64_t> publicShape) {
  Tensor t(stored.kind, std::vector<int64_t>(publicShape.begin(),
                                             publicShape.end()));
  cnnrt::convertFilterLayout(
      publicShape.data(), stored.shape[3], sizeof(float),
      reinterpret_cast<const char *>(stored.data.data()),
      reinterpret_cast<char *>(t.data.data()), /*toStored=*/false);
  return t;
}

FailureOr<std::vector<Tensor>> bindArguments(func::FuncOp func,
                                             const TensorMap &named,
                                             ArrayRef<Tensor> positional) {
  static constexpr const char *kStateAttr = "cnn.state";
  std::vector<Tensor> args;
  size_t next = 0;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[i]);
    if (!type)
      return func.emitError("argument #")
             << i << " has unsupported type " << func.getArgumentTypes()[i];
    StringAttr name;
    const char *role = nullptr;
    for (const char *attr : {cnn::kParamAttr, cnn::kBufferAttr, kStateAttr})
      if (auto s = func.getArgAttrOfType<StringAttr>(i, attr)) {
        name = s;
        role = attr;
        break;
      }
    if (!name) {
      if (next >= positional.size())
        return func.emitError("argument #")
               << i << " " << describe(type) << " has no value: only "
               << positional.size() << " positional tensors were given";
      if (!positional[next].matches(type))
        return func.emitError("argument #")
               << i << " expects " << describe(type)
               << " but positional tensor #" << next << " is "
               << describe(positional[next]);
      args.push_back(positional[next++]);
      continue;
    }
    auto it = named.find(name.str());
    if (it == named.end()) {
      if (role == kStateAttr) {
        // cnn.init: the initial value of a state (the loss scale).
        auto init = func.getArgAttrOfType<FloatAttr>(i, "cnn.init");
        args.push_back(
            Tensor::zeros(type, init ? (float)init.getValueAsDouble() : 0.0f));
        continue;
      }
      return func.emitError("argument #")
             << i << " (" << role << " = \"" << name.getValue()
             << "\") is missing from the named tensors";
    }
    auto pub = func.getArgAttrOfType<DenseI64ArrayAttr>(i, "cnn.public_shape");
    if (pub && ArrayRef<int64_t>(it->second.shape) == pub.asArrayRef()) {
      args.push_back(toStoredForm(it->second, type));
      continue;
    }
    if (!it->second.matches(type))
      return func.emitError("argument #")
             << i << " (" << role << " = \"" << name.getValue()
             << "\") expects " << describe(type) << " but the named tensor is "
             << describe(it->second);
    args.push_back(it->second);
  }
  if (next != positional.size())
    return func.emitError("expected ")
           << next << " positional tensors, got " << positional.size();
  return args;
}

} // namespace cnnc::reference
