//===- MemoryPlan.cpp - cnn-memory-plan: one arena for the train step ----===//
//
// Plans every tensor of @train_step and @forward (the evaluation step) into
// one device arena and records the plan as attributes (see MemoryPlan.h):
//
//   [ persistent tensors | cuDNN/cuBLASLt workspace | temporaries ]
//
// Persistent tensors (parameters, BN statistics, optimizer state, inputs,
// loss, logits) are laid out in argument order. Optimizer updates and BN
// running statistics are written in place into their persistent buffers when
// nothing reads the old value afterwards. Temporaries of each function are
// packed by the best-fit-decreasing planner (MemoryPlanner.h) from their live
// ranges over the function's schedule (its op order); the two functions never
// run at once and share the temporary region. Views (reshape, flatten) share
// their source's buffer and extend its live range; an elementwise op may
// write its result into an operand's buffer when that operand dies there.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/MemoryPlan.h"
#include "cnnc/Support/ShapeLimits.h"
#include "cnnc/Transforms/MemoryPlanner.h"
#include "cnnc/Transforms/Passes.h"

#include <limits>

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNMEMORYPLAN
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

//===----------------------------------------------------------------------===//
// Shared liveness analysis
//===----------------------------------------------------------------------===//

uint64_t cnnc::tensorBytes(Type type) {
  auto t = cast<ShapedType>(type);
  uint64_t elem = (t.getElementTypeBitWidth() + 7) / 8;
  // The cnn verifiers bound every shape (CNN_BoundedResults); a type that
  // slipped past them saturates instead of wrapping to a small size.
  auto n = boundedNumel(t.getShape(), int64_t(elem),
                        std::numeric_limits<int64_t>::max());
  if (!n)
    return std::numeric_limits<uint64_t>::max();
  return std::max<uint64_t>(elem * uint64_t(*n), elem);
}

func::FuncOp cnnc::evaluatedForward(func::FuncOp forward) {
  if (!forward || forward.getBlocks().size() != 1 ||
      forward.getNumResults() != 1)
    return nullptr;
  auto logits = dyn_cast<RankedTensorType>(forward.getResultTypes()[0]);
  if (!logits || (logits.getRank() != 2 && logits.getRank() != 4))
    return nullptr;
  return forward;
}

bool cnnc::isBufferView(Operation *op) { return isa<ReshapeOp, FlattenOp>(op); }

SmallVector<unsigned> cnnc::inPlaceCandidates(Operation *op) {
  SmallVector<unsigned> all;
  // An elementwise op may overwrite an operand of the result's size.
  if (isa<ElementwiseOpInterface>(op)) {
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (op->getOperand(i).getType() == op->getResult(0).getType())
        all.push_back(i);
    return all;
  }
  if (isa<BiasAddOp>(op))
    return {0};
  // NCCL reduces a bucket in place: result i into operand i (below).
  if (isa<AllReduceOp>(op)) {
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      all.push_back(i);
    return all;
  }
  // Made by cnn-fuse: an operand that is not broadcast may share its buffer.
  if (isa<FusedElementwiseOp>(op)) {
    auto bc = op->getAttrOfType<DenseI64ArrayAttr>("broadcast");
    if (!bc || (size_t)bc.size() != op->getNumOperands())
      return {};
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (bc[i] == 0)
        all.push_back(i);
  }
  return all;
}

FailureOr<BufferLiveness>
cnnc::analyzeBufferLiveness(func::FuncOp func,
                            llvm::function_ref<bool(Value)> isPersistentFn,
                            InPlaceMode mode) {
  if (func.getBlocks().size() != 1)
    return func.emitError("memory plan: functions must have one block");
  Block &body = func.getBody().front();
  DenseMap<Operation *, int64_t> index;
  int64_t n = 0;
  for (Operation &op : body)
    index[&op] = n++;
  auto lastUseOf = [&](Value v) {
    int64_t last = -1;
    for (Operation *u : v.getUsers()) {
      Operation *top = body.findAncestorOpInBlock(*u);
      if (top)
        last = std::max(last, index.lookup(top));
    }
    return last;
  };

  BufferLiveness L;
  DenseSet<Value> persistent;
  auto isPersistent = [&](Value v) {
    return isa<BlockArgument>(v) || persistent.contains(v);
  };
  for (Operation &op : body) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      break;
    int64_t at = index[&op];
    bool view = isBufferView(&op);
    SmallVector<unsigned> candidates;
    if (!view && mode == InPlaceMode::Decide)
      candidates = inPlaceCandidates(&op);
    SmallVector<int64_t> recorded;
    if (!view && mode == InPlaceMode::FromAttributes)
      if (auto a = op.getAttrOfType<DenseI64ArrayAttr>(kInPlaceAttr))
        recorded.assign(a.asArrayRef().begin(), a.asArrayRef().end());
    if (!recorded.empty() && recorded.size() != op.getNumResults())
      return op.emitError("memory plan: ")
             << kInPlaceAttr << " needs one entry per result";
    SmallVector<int64_t> reuse(op.getNumResults(), -1);
    DenseSet<int> claimed;
    for (OpResult r : op.getResults()) {
      if (!isa<RankedTensorType>(r.getType()))
        return op.emitError("memory plan: result #")
               << r.getResultNumber() << " is not a ranked tensor";
      if (isPersistentFn(r)) {
        persistent.insert(r);
        continue;
      }
      if (view) {
        Value src = op.getOperand(0);
        if (isPersistent(src)) {
          persistent.insert(r);
          continue;
        }
        int b = L.bufferOf.lookup(src);
        L.bufferOf[r] = b;
        L.buffers[b].last = std::max(L.buffers[b].last, lastUseOf(r));
        continue;
      }
      // In place: operand k's buffer dies here and has the result's size.
      auto canReuse = [&](unsigned k) -> int {
        Value src = op.getOperand(k);
        if (isPersistent(src) || !L.bufferOf.count(src))
          return -1;
        int b = L.bufferOf.lookup(src);
        const BufferLiveness::Buffer &buf = L.buffers[b];
        if (claimed.contains(b) || buf.last != at ||
            buf.bytes != tensorBytes(r.getType()))
          return -1;
        // Every operand of this op in the same buffer must be read
        // elementwise (a per-channel read of it would see new values).
        SmallVector<unsigned> ok = inPlaceCandidates(&op);
        for (OpOperand &o : op.getOpOperands())
          if (!isPersistent(o.get()) && L.bufferOf.lookup(o.get()) == b &&
              L.bufferOf.count(o.get()) &&
              !llvm::is_contained(ok, o.getOperandNumber()))
            return -1;
        return b;
      };
      int reused = -1;
      if (mode == InPlaceMode::Decide) {
        for (unsigned k : candidates)
          if ((!isa<AllReduceOp>(op) || k == r.getResultNumber()) &&
              (reused = canReuse(k)) >= 0) {
            reuse[r.getResultNumber()] = k;
            break;
          }
      } else if (!recorded.empty() && recorded[r.getResultNumber()] >= 0) {
        int64_t k = recorded[r.getResultNumber()];
        if (k >= op.getNumOperands() || (reused = canReuse(k)) < 0)
          return op.emitError("memory plan: result #")
                 << r.getResultNumber()
                 << " cannot be written in place into operand #" << k;
        reuse[r.getResultNumber()] = k;
      }
      if (reused >= 0) {
        claimed.insert(reused);
        L.bufferOf[r] = reused;
        L.buffers[reused].last = std::max(L.buffers[reused].last, lastUseOf(r));
        ++L.buffers[reused].numInPlace;
        ++L.numInPlace;
        continue;
      }
      BufferLiveness::Buffer buf;
      buf.root = r;
      buf.first = at;
      buf.last = std::max(at, lastUseOf(r));
      buf.bytes = tensorBytes(r.getType());
      L.bufferOf[r] = L.buffers.size();
      claimed.insert(L.buffers.size());
      L.buffers.push_back(buf);
    }
    if (llvm::any_of(reuse, [](int64_t k) { return k >= 0; }))
      L.inPlace[&op] = reuse;
  }
  return L;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

std::string roleName(func::FuncOp f, unsigned arg) {
  DictionaryAttr d = f.getArgAttrDict(arg);
  if (!d)
    return "";
  for (const char *key : {kParamAttr, kBufferAttr, kStateAttr})
    if (auto s = dyn_cast_or_null<StringAttr>(d.get(key)))
      return s.str();
  if (d.get(kLabelsAttr))
    return "labels";
  if (d.get(kLRAttr))
    return "lr";
  if (d.get(kStepAttr))
    return "step";
  if (d.get(kInputAttr))
    return "input";
  return "";
}

std::string resultName(func::FuncOp f, unsigned r) {
  DictionaryAttr d = f.getResultAttrDict(r);
  if (!d)
    return "";
  for (const char *key : {kParamAttr, kBufferAttr, kStateAttr})
    if (auto s = dyn_cast_or_null<StringAttr>(d.get(key)))
      return s.str();
  return "";
}

/// The workspace when none is asked for: the largest tensor a convolution
/// reads or writes (what the fast cuDNN algorithms need, roughly), at least
/// 4 MiB (cuBLASLt) and at most 64 MiB; none without convolutions/matmuls.
/// (ResNet-50 at batch 128 on the H100: 21.30 ms/step with 196 MiB, 21.32
/// with 64, 21.33 with 32: its fast plans need little; `--workspace-mb`
/// gives more.) An f32 convolution takes twice its largest tensor, up to
/// 2 GiB: cuDNN's fast f32 backward-data algorithms (FFT/Winograd tiles)
/// need workspace of the order of the tensors, and without it the f32
/// ResNet-50 step at batch 128 ran at 143 img/s (57-74 ms per 3x3 or
/// strided backward-data launch) against 982 with 2 GiB on an H200.
uint64_t autoWorkspaceBytes(func::FuncOp step, func::FuncOp forward) {
  uint64_t most = 0, mostF32 = 0;
  bool any = false;
  for (func::FuncOp f : {step, forward}) {
    if (!f)
      continue;
    f.walk([&](Operation *op) {
      bool conv =
          isa<Conv2DOp, Conv2DBwdDataOp, Conv2DBwdFilterOp, FusedConv2DOp,
              FusedConv2DStatsOp, FusedConv2DBwdDataOp,
              FusedConv2DBwdFilterOp>(op);
      if (!conv && !isa<MatmulOp>(op))
        return;
      any = true;
      if (!conv)
        return;
      for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
        if (auto t = dyn_cast<RankedTensorType>(v.getType())) {
          most = std::max(most, tensorBytes(t));
          if (t.getElementType().isF32())
            mostF32 = std::max(mostF32, tensorBytes(t));
        }
    });
  }
  if (!any)
    return 0;
  uint64_t bytes = std::clamp<uint64_t>(memplan::alignTo(most, 1 << 20),
                                        4 << 20, 64 << 20);
  if (mostF32)
    bytes = std::max(bytes, std::min<uint64_t>(
                                memplan::alignTo(2 * mostF32, 1 << 20),
                                uint64_t(2) << 30));
  return bytes;
}

/// Ops that may write an updated persistent tensor over the old one.
bool updatesInPlace(Operation *op) {
  return isa<SGDUpdateOp, AdamUpdateOp, BatchNormTrainOp, BatchNormStatsOp,
             BatchNormFinalizeOp>(op);
}

struct MemoryPlanPass : public cnnc::impl::CNNMemoryPlanBase<MemoryPlanPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(plan()))
      signalPassFailure();
  }

  LogicalResult plan();
  /// Plans the temporaries of `f` at `base`; returns peak and lower bound.
  FailureOr<memplan::Plan> planTemps(func::FuncOp f,
                                     const DenseMap<Value, uint64_t> &fixed,
                                     uint64_t base);
};

LogicalResult MemoryPlanPass::plan() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = module.getContext();
  Builder b(ctx);
  uint64_t align = alignment < 1 ? 1 : (uint64_t)alignment;
  if (align & (align - 1))
    return module.emitError(
        "cnn-memory-plan: alignment must be a power of two");
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return module.emitError("cnn-memory-plan: the module has no @train_step "
                            "(run cnn-autodiff first)");
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  forward = evaluatedForward(forward);
  if (step.getBlocks().size() != 1)
    return step.emitError("cnn-memory-plan: functions must have one block");

  // Persistent tensors, in argument order.
  DenseMap<Value, uint64_t> fixed; // value -> arena offset
  llvm::StringMap<BlockArgument> byName;
  // Every offset and size of the plan must fit in the int64 attributes the
  // CUDA target reads; a sum that would not is an error, not a wrapped (and
  // far too small) arena.
  constexpr uint64_t kMaxBytes = uint64_t(std::numeric_limits<int64_t>::max());
  bool overflow = false;
  auto add = [&](uint64_t a, uint64_t b) {
    if (a > kMaxBytes || b > kMaxBytes - a || a + b > kMaxBytes - align) {
      overflow = true;
      return uint64_t(0);
    }
    return memplan::alignTo(a + b, align);
  };
  auto tooLarge = [&]() {
    return module.emitError("cnn-memory-plan: the arena would need more than "
                            "2^63 bytes");
  };
  uint64_t cursor = 0;
  auto place = [&](Value v) {
    fixed[v] = cursor;
    cursor = add(cursor, tensorBytes(v.getType()));
  };
  for (BlockArgument arg : step.getArguments()) {
    std::string name = roleName(step, arg.getArgNumber());
    if (name.empty())
      return step.emitError("cnn-memory-plan: argument #")
             << arg.getArgNumber() << " of @train_step has no role attribute";
    if (!byName.try_emplace(name, arg).second)
      return step.emitError("cnn-memory-plan: two arguments named '")
             << name << "'";
    if (!isa<RankedTensorType>(arg.getType()))
      return step.emitError("cnn-memory-plan: argument #")
             << arg.getArgNumber() << " is not a ranked tensor";
    place(arg);
  }
  // Results: the loss gets a slot; updated tensors go in place where safe.
  Block &body = step.getBody().front();
  DenseMap<Operation *, int64_t> index;
  int64_t i = 0;
  for (Operation &op : body)
    index[&op] = i++;
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [r, v] : llvm::enumerate(ret.getOperands())) {
    DictionaryAttr d = step.getResultAttrDict(r);
    if (d && d.get(kLossAttr)) {
      if (fixed.count(v) || !v.getDefiningOp())
        return step.emitError(
            "cnn-memory-plan: the loss must be computed by the step");
      place(v);
      continue;
    }
    std::string name = resultName(step, r);
    if (name.empty() || !byName.count(name))
      return step.emitError("cnn-memory-plan: result #")
             << r << " does not name a persistent argument";
    BlockArgument arg = byName[name];
    Operation *def = v.getDefiningOp();
    if (v == arg || !def || fixed.count(v) || !updatesInPlace(def) ||
        arg.getType() != v.getType())
      continue; // unchanged, or copied at the end of the step
    // Nothing may read the old value (directly or through a view) later.
    bool safe = true;
    SmallVector<Value> work{arg};
    while (!work.empty() && safe) {
      Value cur = work.pop_back_val();
      for (Operation *u : cur.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*u);
        if (!top || (top != def && index[top] >= index[def]))
          safe = false;
        if (top && isBufferView(top))
          work.push_back(top->getResult(0));
      }
    }
    if (safe)
      fixed[v] = fixed[arg];
  }
  if (forward) {
    for (BlockArgument arg : forward.getArguments()) {
      DictionaryAttr d = forward.getArgAttrDict(arg.getArgNumber());
      std::string name;
      for (const char *key : {kParamAttr, kBufferAttr})
        if (auto s = d ? dyn_cast_or_null<StringAttr>(d.get(key)) : nullptr)
          name = s.str();
      if (name.empty())
        name = "input";
      if (!byName.count(name))
        return forward.emitError("cnn-memory-plan: argument '")
               << name << "' of @forward is not an argument of @train_step";
      if (byName[name].getType() != arg.getType())
        return forward.emitError("cnn-memory-plan: argument '")
               << name << "' of @forward has type " << arg.getType() << " but "
               << byName[name].getType() << " in @train_step";
      fixed[arg] = fixed[byName[name]];
    }
    Value logits = forward.getBody().front().getTerminator()->getOperand(0);
    if (!fixed.count(logits) && !isa<BlockArgument>(logits))
      place(logits);
  }
  uint64_t persistentBytes = cursor;
  if (overflow)
    return tooLarge();

  // The library workspace, then the temporaries.
  uint64_t wsOffset = add(persistentBytes, 0);
  if (workspaceMB > int64_t(kMaxBytes >> 20))
    return module.emitError("cnn-memory-plan: workspace-mb ")
           << workspaceMB << " is more than 2^63 bytes";
  uint64_t wsBytes = workspaceMB >= 0 ? (uint64_t)workspaceMB << 20
                                      : autoWorkspaceBytes(step, forward);
  uint64_t tempBase = add(wsOffset, wsBytes);
  if (overflow)
    return tooLarge();

  auto trainPlan = planTemps(step, fixed, tempBase);
  if (failed(trainPlan))
    return failure();
  memplan::Plan evalPlan;
  if (forward) {
    auto p = planTemps(forward, fixed, tempBase);
    if (failed(p))
      return failure();
    evalPlan = std::move(*p);
  }
  uint64_t arena = std::max<uint64_t>(
      add(tempBase, std::max(trainPlan->peak, evalPlan.peak)), align);
  if (overflow)
    return tooLarge();

  auto i64 = [&](uint64_t v) { return b.getI64IntegerAttr((int64_t)v); };
  module->setAttr(kArenaBytesAttr, i64(arena));
  module->setAttr(kPersistentBytesAttr, i64(persistentBytes));
  module->setAttr(kWorkspaceOffsetAttr, i64(wsOffset));
  module->setAttr(kWorkspaceBytesAttr, i64(wsBytes));
  if (workspaceMB >= 0)
    module->setAttr(kWorkspaceIsCapAttr, b.getUnitAttr());
  else
    module->removeAttr(kWorkspaceIsCapAttr);
  module->setAttr(kTempOffsetAttr, i64(tempBase));
  module->setAttr(kTrainPeakAttr, i64(trainPlan->peak));
  module->setAttr(kTrainLowerBoundAttr, i64(trainPlan->lowerBound));
  module->setAttr(kEvalPeakAttr, i64(evalPlan.peak));
  module->setAttr(kEvalLowerBoundAttr, i64(evalPlan.lowerBound));
  module->setAttr(kPlanStrategyAttr, b.getStringAttr(trainPlan->strategy));
  return success();
}

FailureOr<memplan::Plan> MemoryPlanPass::planTemps(
    func::FuncOp f, const DenseMap<Value, uint64_t> &fixed, uint64_t base) {
  Builder b(f.getContext());
  auto liveness = analyzeBufferLiveness(
      f, [&](Value v) { return fixed.count(v) > 0; },
      inPlace && reuse ? InPlaceMode::Decide : InPlaceMode::None);
  if (failed(liveness))
    return failure();
  std::vector<memplan::Interval> intervals;
  for (const BufferLiveness::Buffer &buf : liveness->buffers) {
    memplan::Interval iv;
    iv.size = buf.bytes;
    iv.alignment = alignment < 1 ? 1 : (uint64_t)alignment;
    iv.first = buf.first;
    iv.last = buf.last;
    if (!reuse) { // every temporary live for the whole step: no sharing
      iv.first = 0;
      iv.last = std::numeric_limits<int64_t>::max() / 2;
    }
    intervals.push_back(iv);
  }
  memplan::Plan p = memplan::plan(intervals);
  std::string err = memplan::verify(intervals, p.offsets, p.peak);
  if (!err.empty())
    return f.emitError("cnn-memory-plan: internal error: ") << err;

  // Offsets of arguments, then of every op result.
  for (BlockArgument arg : f.getArguments())
    f.setArgAttr(arg.getArgNumber(), kOffsetAttr,
                 b.getI64IntegerAttr((int64_t)fixed.lookup(arg)));
  for (Operation &op : f.getBody().front()) {
    if (op.getNumResults() == 0)
      continue;
    SmallVector<int64_t> offsets;
    for (Value r : op.getResults()) {
      Value v = r;
      // Views of persistent tensors: follow to the source.
      while (!fixed.count(v) && !liveness->bufferOf.count(v) &&
             v.getDefiningOp() && isBufferView(v.getDefiningOp()))
        v = v.getDefiningOp()->getOperand(0);
      if (fixed.count(v))
        offsets.push_back((int64_t)fixed.lookup(v));
      else if (liveness->bufferOf.count(v))
        offsets.push_back(
            (int64_t)(base + p.offsets[liveness->bufferOf.lookup(v)]));
      else
        return op.emitError(
            "cnn-memory-plan: internal error: no buffer for a result");
    }
    op.setAttr(kOffsetAttr, b.getDenseI64ArrayAttr(offsets));
    auto it = liveness->inPlace.find(&op);
    if (it != liveness->inPlace.end())
      op.setAttr(kInPlaceAttr, b.getDenseI64ArrayAttr(it->second));
    else
      op.removeAttr(kInPlaceAttr);
  }
  return p;
}

} // namespace
