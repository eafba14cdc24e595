//===- CNNDialect.cpp - cnn dialect registration ----------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringSwitch.h"

#include <limits>

using namespace mlir;
using namespace cnnc::cnn;

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include "cnnc/Dialect/CNN/CNNOpsDialect.cpp.inc"
#include "cnnc/Dialect/CNN/CNNEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "cnnc/Dialect/CNN/CNNAttrs.cpp.inc"

void CNNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "cnnc/Dialect/CNN/CNNOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "cnnc/Dialect/CNN/CNNAttrs.cpp.inc"
      >();
}

Operation *CNNDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}

//===----------------------------------------------------------------------===//
// Discardable cnn.* attributes
//===----------------------------------------------------------------------===//

namespace {
/// What a discardable cnn.* attribute must hold.
enum class AttrKind {
  Unknown,
  Unit,         // a role marker: cnn.input, cnn.loss, ...
  Name,         // a non-empty string naming a tensor: cnn.param, ...
  String,       // any string: cnn.weights, cnn.plan_strategy
  Float,        // cnn.init
  Bytes,        // a non-negative i64: cnn.arena_bytes, an argument's offset
  Dictionary,   // cnn.fusion_stats (written by older cnnc; now unused)
  ResultBytes,  // cnn.offset on an op: one non-negative i64 per result
  InPlace,      // cnn.in_place: one operand index or -1 per result
  Lowering,     // cnn.lowering on an op: "gemm", "vec8" or "cudnn_bias_act"
  Count,        // cnn.update_group, cnn.cast_group: a non-negative i64
  DataParallel, // cnn.data_parallel on a step: {buckets: i64, bucket_mb:
                // f64, collectives: i64 (all all_reduce ops), sync_bn: bool}
  LayoutEnum,   // cnn.image_layout: a #cnn.layout
  ImageShape,   // cnn.image_shape: array<i64: N, C, H, W>, all positive
  PublicShape,  // cnn.public_shape: array<i64: K, C, R, S>, all positive, on
                // a parameter stored as [K, R, S, C'] with C' >= C
  Target,       // cnn.target on the module: a #cnn.target
  Launch,       // cnn.launch on an op: a #cnn.launch fitting the op
  Indices,      // cnn.pipeline_results: array<i64> of non-negative indices
};

/// Attributes of function arguments and results (a train_step result carries
/// the attributes of the argument it updates, plus cnn.loss / cnn.grad).
AttrKind argOrResultAttrKind(StringRef name) {
  return llvm::StringSwitch<AttrKind>(name)
      .Cases({"cnn.input", "cnn.labels", "cnn.lr", "cnn.step", "cnn.loss",
              "cnn.loss_scale", "cnn.frozen"},
             AttrKind::Unit)
      .Case("cnn.param_options", AttrKind::Dictionary)
      .Cases({"cnn.param", "cnn.buffer", "cnn.state", "cnn.grad"},
             AttrKind::Name)
      .Case("cnn.init", AttrKind::Float)
      .Case("cnn.offset", AttrKind::Bytes)
      .Case("cnn.image_layout", AttrKind::LayoutEnum)
      .Case("cnn.image_shape", AttrKind::ImageShape)
      .Case("cnn.public_shape", AttrKind::PublicShape)
      // cnn-pipeline-split: the @train_step argument a stage function's
      // argument is, or the forward function's kept value it is.
      .Cases({"cnn.pipeline_arg", "cnn.pipeline_saved"}, AttrKind::Bytes)
      // cnn-pipeline-schedule: the micro-batch an image, labels or loss of
      // a @stage<s>_step belongs to.
      .Case("cnn.micro_batch", AttrKind::Bytes)
      .Default(AttrKind::Unknown);
}

/// Attributes of the module (the memory plan's summary, the weights file).
AttrKind moduleAttrKind(StringRef name) {
  return llvm::StringSwitch<AttrKind>(name)
      .Cases({"cnn.arena_bytes", "cnn.persistent_bytes", "cnn.workspace_offset",
              "cnn.workspace_bytes", "cnn.temp_offset", "cnn.train_peak_bytes",
              "cnn.train_lower_bound_bytes", "cnn.eval_peak_bytes",
              "cnn.eval_lower_bound_bytes"},
             AttrKind::Bytes)
      .Cases({"cnn.weights", "cnn.plan_strategy"}, AttrKind::String)
      .Case("cnn.fusion_stats", AttrKind::Dictionary)
      .Case("cnn.pipeline", AttrKind::Dictionary) // cnn-pipeline-partition
      .Case("cnn.target", AttrKind::Target)
      // cnn-memory-plan: the workspace is --workspace-mb's cap, not the
      // planned default the runtime may exceed for a much faster plan.
      .Case("cnn.workspace_is_cap", AttrKind::Unit)
      .Default(AttrKind::Unknown);
}

/// Attributes of a function (what cnn-data-parallel did to the step).
AttrKind funcAttrKind(StringRef name) {
  return llvm::StringSwitch<AttrKind>(name)
      .Case("cnn.data_parallel", AttrKind::DataParallel)
      .Case("cnn.lowering_selected", AttrKind::Unit)
      .Case("cnn.pipeline_stage", AttrKind::Count) // cnn-pipeline-split
      .Case("cnn.pipeline_results", AttrKind::Indices)
      .Case("cnn.pipeline_schedule", AttrKind::String) // cnn-pipeline-schedule
      // cnn-pipeline-schedule: the chunks of an interleaved stage.
      .Case("cnn.pipeline_chunks", AttrKind::Count)
      // cnn-pipeline-stage: a stage's step for the CUDA target.
      .Cases({"cnn.pipeline_stages", "cnn.num_classes"}, AttrKind::Count)
      // cnn-pipeline-stage: why the runtime must not capture the step into
      // a CUDA graph (ModelSpec::uncapturedWhy).
      .Case("cnn.step_uncaptured", AttrKind::String)
      // cnn-pipeline-async-transfers: the events the runtime creates.
      .Case("cnn.transfer_events", AttrKind::Count)
      .Default(AttrKind::Unknown);
}

/// Attributes of other ops (the memory plan's per-op annotations).
AttrKind opAttrKind(StringRef name) {
  return llvm::StringSwitch<AttrKind>(name)
      .Case("cnn.offset", AttrKind::ResultBytes)
      .Case("cnn.in_place", AttrKind::InPlace)
      .Case("cnn.lowering", AttrKind::Lowering)
      .Case("cnn.update_group", AttrKind::Count)
      .Case("cnn.cast_group", AttrKind::Count)
      .Case("cnn.remat", AttrKind::Unit) // a clone made by cnn-remat
      .Case("cnn.launch", AttrKind::Launch)
      .Case("cnn.stage", AttrKind::Count) // cnn-pipeline-partition
      // cnn-precision on a pipeline stage: the all_reduce of the loss-scale
      // flag spans the stages, not the data-parallel replicas.
      .Case("cnn.across_stages", AttrKind::Unit)
      // cnn-layout on a pipeline transfer: its 4-D tensors cross in NHWC.
      .Case("cnn.transfer_layout", AttrKind::LayoutEnum)
      .Default(AttrKind::Unknown);
}

/// Checks `attr` against `kind`; `where` names what carries it, `op` (for
/// per-result kinds) is the op it annotates.
LogicalResult verifyCNNAttr(function_ref<InFlightDiagnostic()> emitError,
                            StringRef where, NamedAttribute attr, AttrKind kind,
                            Operation *op = nullptr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto fail = [&](const Twine &expected) -> LogicalResult {
    return emitError() << "'" << name << "' on " << where << " must be "
                       << expected << ", got " << value;
  };
  auto check = [&](bool ok, const Twine &expected) {
    return ok ? success() : fail(expected);
  };
  switch (kind) {
  case AttrKind::Unknown:
    return emitError() << "unknown cnn dialect attribute '" << name << "' on "
                       << where;
  case AttrKind::Unit:
    return check(isa<UnitAttr>(value), "a unit attribute");
  case AttrKind::Name: {
    auto s = dyn_cast<StringAttr>(value);
    return check(s && !s.getValue().empty(), "a non-empty string");
  }
  case AttrKind::String:
    return check(isa<StringAttr>(value), "a string");
  case AttrKind::Float:
    return check(isa<FloatAttr>(value), "a float");
  case AttrKind::LayoutEnum:
    return check(isa<LayoutAttr>(value), "a #cnn.layout");
  case AttrKind::ImageShape: {
    auto a = dyn_cast<DenseI64ArrayAttr>(value);
    return check(a && a.size() == 4 &&
                     llvm::all_of(a.asArrayRef(),
                                  [](int64_t d) { return d > 0; }),
                 "an array<i64> of four positive sizes (N, C, H, W)");
  }
  case AttrKind::PublicShape: {
    auto a = dyn_cast<DenseI64ArrayAttr>(value);
    return check(a && a.size() == 4 &&
                     llvm::all_of(a.asArrayRef(),
                                  [](int64_t d) { return d > 0; }),
                 "an array<i64> of four positive sizes (K, C, R, S)");
  }
  case AttrKind::Bytes: {
    auto i = dyn_cast<IntegerAttr>(value);
    return check(i && i.getType().isSignlessInteger(64) &&
                     i.getValue().getSExtValue() >= 0,
                 "a non-negative i64");
  }
  case AttrKind::Lowering: {
    auto s = dyn_cast<StringAttr>(value);
    return check(s && llvm::is_contained({StringRef("gemm"), StringRef("vec8"),
                                          StringRef("cudnn_bias_act"),
                                          StringRef("channel_sum"),
                                          StringRef("channel_sum_vec8"),
                                          StringRef("spatial_sum"),
                                          StringRef("tiled")},
                                         s.getValue()),
                 "\"gemm\", \"vec8\", \"cudnn_bias_act\", "
                 "\"channel_sum\", \"channel_sum_vec8\", "
                 "\"spatial_sum\" or \"tiled\"");
  }
  case AttrKind::Count: {
    auto i = dyn_cast<IntegerAttr>(value);
    return check(i && i.getType().isSignlessInteger(64) &&
                     i.getValue().getSExtValue() >= 0,
                 "a non-negative i64");
  }
  case AttrKind::Dictionary:
    return check(isa<DictionaryAttr>(value), "a dictionary");
  case AttrKind::Indices: {
    auto a = dyn_cast<DenseI64ArrayAttr>(value);
    return check(a && llvm::all_of(a.asArrayRef(),
                                   [](int64_t i) { return i >= 0; }),
                 "an array<i64> of non-negative indices");
  }
  case AttrKind::Target:
    return check(isa<TargetAttr>(value), "a #cnn.target");
  case AttrKind::Launch: {
    auto l = dyn_cast<LaunchAttr>(value);
    if (!l)
      return fail("a #cnn.launch");
    // The reduction strategy is a decision of the reductions (and softmax)
    // only, and one they cannot go without.
    bool needs = needsReductionStrategy(op);
    if (needs && !l.getReduction())
      return emitError() << "'" << name << "' on '" << op->getName()
                         << "' needs a reduction strategy (reduction = "
                            "\"block_per_result\" or \"thread_per_result\")";
    if (!needs && l.getReduction())
      return emitError() << "'" << name << "' on '" << op->getName()
                         << "' has a reduction strategy, which only "
                            "reductions and softmax take";
    // The partial-sum block budget likewise: where the op has such kernels.
    bool partial = usesPartialBlocks(op);
    if (partial && !l.getPartialBlocks())
      return emitError() << "'" << name << "' on '" << op->getName()
                         << "' needs partial_blocks (it sums in per-block "
                            "partial sums first)";
    if (!partial && l.getPartialBlocks())
      return emitError() << "'" << name << "' on '" << op->getName()
                         << "' has partial_blocks, which only NHWC "
                            "per-channel sums and softmax_cross_entropy take";
    if (isa<SoftmaxCrossEntropyOp>(op) && l.getPartialBlocks() > kXentMaxBlocks)
      return emitError() << "'" << name << "' on '" << op->getName()
                         << "': partial_blocks must be at most "
                         << kXentMaxBlocks
                         << " (the blocks the prelude's xentScratch holds), "
                            "got "
                         << l.getPartialBlocks();
    // The block size of the one-block reductions: where they run.
    bool reduceBlock = usesReduceBlock(op);
    if (reduceBlock && !l.getReduceBlock())
      return emitError() << "'" << name << "' on '" << op->getName()
                         << "' needs reduce_block (it reduces with a block "
                            "per result)";
    if (!reduceBlock && l.getReduceBlock())
      return emitError() << "'" << name << "' on '" << op->getName()
                         << "' has reduce_block, which only the NCHW "
                            "per-channel sums and softmax_cross_entropy_grad "
                            "take";
    // A block per result: one block per result element, gridDim.x's bound.
    if (needs && l.getReduction().getValue() == "block_per_result" &&
        !isa<SoftmaxOp>(op) &&
        cast<RankedTensorType>(op->getResult(0).getType()).getNumElements() >
            std::numeric_limits<int32_t>::max())
      return emitError() << "'" << name << "' on '" << op->getName()
                         << "': \"block_per_result\" needs at most 2^31 - 1 "
                            "results (one block each)";
    // An op whose lowering is kernel calls describes them under this
    // launch: the description must be one the target can print.
    if (auto calls = dyn_cast<KernelCallOpInterface>(op))
      return verifyKernelCalls(calls, l, [&] {
        return emitError() << "'" << name << "' on '" << op->getName()
                           << "': ";
      });
    return success();
  }
  case AttrKind::DataParallel: {
    auto d = dyn_cast<DictionaryAttr>(value);
    auto buckets = d ? d.getAs<IntegerAttr>("buckets") : IntegerAttr();
    auto mb = d ? d.getAs<FloatAttr>("bucket_mb") : FloatAttr();
    auto collectives = d ? d.getAs<IntegerAttr>("collectives") : IntegerAttr();
    auto syncBN = d ? d.getAs<BoolAttr>("sync_bn") : BoolAttr();
    // The loss's all-reduce comes on top of the buckets, but for a pipeline
    // stage before the last (no loss, cnn-pipeline-stage).
    const int64_t loss = op && op->hasAttr("cnn.pipeline_stages") ? 0 : 1;
    return check(d && d.size() == 4 && buckets &&
                     buckets.getValue().getSExtValue() >= 0 && mb &&
                     mb.getValueAsDouble() >= 0 && collectives &&
                     collectives.getValue().getSExtValue() >=
                         buckets.getValue().getSExtValue() + loss &&
                     syncBN,
                 "{buckets = <non-negative i64>, bucket_mb = <non-negative "
                 "float>, collectives = <i64 above buckets>, sync_bn = "
                 "<bool>}");
  }
  case AttrKind::ResultBytes:
  case AttrKind::InPlace: {
    auto a = dyn_cast<DenseI64ArrayAttr>(value);
    if (!a || a.size() != (int64_t)op->getNumResults())
      return fail("an array<i64> with one entry per result (" +
                  Twine(op->getNumResults()) + ")");
    for (int64_t v : a.asArrayRef()) {
      if (kind == AttrKind::ResultBytes && v < 0)
        return fail("non-negative byte offsets");
      if (kind == AttrKind::InPlace &&
          (v < -1 || v >= (int64_t)op->getNumOperands()))
        return fail("operand indices or -1");
    }
    return success();
  }
  }
  return success();
}
/// cnn.public_shape [K, C, R, S] on a value of type [K, R, S, C'], C' >= C
/// (cnn-param-format: the parameter stored as the NHWC convolution reads
/// it, channels zero-padded to C').
LogicalResult verifyPublicShape(function_ref<InFlightDiagnostic()> emitError,
                                StringRef where, NamedAttribute attr,
                                Type type) {
  ArrayRef<int64_t> pub = cast<DenseI64ArrayAttr>(attr.getValue());
  auto t = dyn_cast<RankedTensorType>(type);
  if (t && t.getRank() == 4 && t.getDimSize(0) == pub[0] &&
      t.getDimSize(1) == pub[2] && t.getDimSize(2) == pub[3] &&
      t.getDimSize(3) >= pub[1])
    return success();
  std::string dims;
  llvm::raw_string_ostream os(dims);
  llvm::interleaveComma(pub, os);
  return emitError() << "'cnn.public_shape' on " << where << " [" << dims
                     << "] (K, C, R, S) needs a tensor of shape K x R x S x "
                        "C' with C' >= C, got "
                     << type;
}
} // namespace

LogicalResult CNNDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  auto emit = [&] { return op->emitError(); };
  StringRef name = attr.getName().getValue();
  if (isa<ModuleOp>(op))
    return verifyCNNAttr(emit, "a module", attr, moduleAttrKind(name), op);
  if (isa<FunctionOpInterface>(op) &&
      funcAttrKind(name) != AttrKind::Unknown)
    return verifyCNNAttr(emit, "a function", attr, funcAttrKind(name), op);
  return verifyCNNAttr(emit, "an operation", attr, opAttrKind(name), op);
}

/// A function argument's or result's cnn.* attribute; `type` is the value's
/// (cnn.public_shape is checked against it).
static LogicalResult verifyValueAttr(Operation *op, const std::string &where,
                                     NamedAttribute attr, Type type) {
  auto emit = [&] { return op->emitError(); };
  AttrKind kind = argOrResultAttrKind(attr.getName().getValue());
  if (failed(verifyCNNAttr(emit, where, attr, kind)))
    return failure();
  if (kind == AttrKind::PublicShape && type)
    return verifyPublicShape(emit, where, attr, type);
  return success();
}

LogicalResult CNNDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                   unsigned argIndex,
                                                   NamedAttribute attr) {
  auto f = dyn_cast<FunctionOpInterface>(op);
  return verifyValueAttr(op, "argument " + std::to_string(argIndex), attr,
                         f ? f.getArgumentTypes()[argIndex] : Type());
}

LogicalResult CNNDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                      unsigned resultIndex,
                                                      NamedAttribute attr) {
  auto f = dyn_cast<FunctionOpInterface>(op);
  return verifyValueAttr(op, "result " + std::to_string(resultIndex), attr,
                         f ? f.getResultTypes()[resultIndex] : Type());
}

//===----------------------------------------------------------------------===//
// The shape rule (CNN_BoundedResults)
//===----------------------------------------------------------------------===//

/// Bytes per element as the runtime stores it (i1 and ui8 take one byte).
static int64_t elementBytes(Type t) {
  if (t.isIntOrFloat())
    return std::max<int64_t>(1, (t.getIntOrFloatBitWidth() + 7) / 8);
  return 8;
}

FailureOr<int64_t> cnnc::cnn::checkBoundedType(std::optional<Location> loc,
                                               MLIRContext *ctx,
                                               const Twine &what, Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return int64_t(0);
  int64_t ceiling = kDefaultMaxTensorElements;
  if (auto *d = ctx->getLoadedDialect<CNNDialect>())
    ceiling = d->getMaxTensorElements();
  if (!t.hasStaticShape())
    return emitOptionalError(loc, what, " ", type,
                             " has a dynamic dimension; cnn tensors are "
                             "statically shaped");
  auto n =
      boundedNumel(t.getShape(), elementBytes(t.getElementType()), ceiling);
  if (!n)
    return emitOptionalError(
        loc, what, " ", type,
        " is too large: its element count must be at most ", ceiling,
        " and its size in bytes must fit in int64");
  return *n;
}

LogicalResult cnnc::cnn::verifyBoundedResults(Operation *op) {
  for (auto [i, r] : llvm::enumerate(op->getResults()))
    if (failed(checkBoundedType(op->getLoc(), op->getContext(),
                                "'" + op->getName().getStringRef() +
                                    "' op result #" + Twine(i),
                                r.getType())))
      return failure();
  return success();
}
