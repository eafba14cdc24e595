//===- MemoryPlanReader.cpp - the arena plan recorded by cnn-memory-plan -===//
//
// Reads the offsets cnn-memory-plan recorded in the IR into a BufferPlan
// (names and roles of the persistent tensors as planBuffers gives them) and
// checks it before the emitter trusts it: every value has an offset, views
// and in-place results sit on their source, temporaries live at the same
// time never overlap and stay inside the arena. It is the only plan: a module
// without it is an error (the cnnc driver runs the pass first).
//
//===----------------------------------------------------------------------===//
#include "BufferPlan.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Transforms/MemoryPlan.h"
#include "cnnc/Transforms/MemoryPlanner.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

constexpr size_t kAlign = 256;

struct Reader {
  ModuleOp module;
  BufferPlan plan;
  bool failedRead = false;

  InFlightDiagnostic stale(Operation *op) {
    failedRead = true;
    return op->emitError("memory plan: ");
  }

  std::optional<uint64_t> offsetOf(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      if (auto a = f ? f.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                       kOffsetAttr)
                     : IntegerAttr())
        return (uint64_t)a.getInt();
      return std::nullopt;
    }
    auto r = cast<OpResult>(v);
    auto a = r.getOwner()->getAttrOfType<DenseI64ArrayAttr>(kOffsetAttr);
    if (!a || (size_t)a.size() != r.getOwner()->getNumResults())
      return std::nullopt;
    return (uint64_t)a[r.getResultNumber()];
  }

  LogicalResult readModuleAttr(const char *name, size_t &out) {
    auto a = module->getAttrOfType<IntegerAttr>(name);
    if (!a || a.getInt() < 0)
      return module.emitError("memory plan: module attribute ")
             << name << " is missing or not a non-negative integer";
    out = (size_t)a.getInt();
    return success();
  }

  LogicalResult readFunction(func::FuncOp f,
                             DenseMap<uint64_t, int> &persistentAt);
};

LogicalResult Reader::readFunction(func::FuncOp f,
                                   DenseMap<uint64_t, int> &persistentAt) {
  auto isPersistent = [&](Value v) {
    auto off = offsetOf(v);
    return off && *off < plan.tempOffset;
  };
  // Every value needs an offset.
  for (BlockArgument arg : f.getArguments())
    if (!offsetOf(arg))
      return f.emitError("memory plan: argument #")
             << arg.getArgNumber() << " has no " << kOffsetAttr
             << " (run cnn-memory-plan after every other pass)";
  for (Operation &op : f.getBody().front())
    for (Value r : op.getResults())
      if (!offsetOf(r))
        return op.emitError("memory plan: result #")
               << cast<OpResult>(r).getResultNumber() << " has no "
               << kOffsetAttr
               << " (run cnn-memory-plan after every other pass)";

  auto liveness =
      analyzeBufferLiveness(f, isPersistent, InPlaceMode::FromAttributes);
  if (failed(liveness))
    return failure();

  // Temporaries: one buffer per root, at the root's offset.
  size_t firstTemp = plan.buffers.size();
  std::vector<memplan::Interval> intervals;
  std::vector<uint64_t> offsets;
  for (const BufferLiveness::Buffer &lb : liveness->buffers) {
    PlannedBuffer b;
    b.name = "%" + std::to_string(plan.buffers.size());
    b.role = BufferRole::Temp;
    b.type = cast<RankedTensorType>(lb.root.getType());
    b.bytes = lb.bytes;
    b.offset = *offsetOf(lb.root);
    b.firstUse = lb.first;
    b.lastUse = lb.last;
    b.numInPlace = lb.numInPlace;
    Operation *def = lb.root.getDefiningOp();
    b.defOp = def->getName().getStringRef().str();
    if (auto nl = dyn_cast<NameLoc>(def->getLoc()))
      b.defOp += " @" + nl.getName().str();
    if (b.offset < plan.tempOffset || b.offset + b.bytes > plan.arenaBytes)
      return def->emitError("memory plan: temporary [")
             << b.offset << ", " << b.offset + b.bytes
             << ") is outside the temporary region [" << plan.tempOffset << ", "
             << plan.arenaBytes << ")";
    memplan::Interval iv;
    iv.size = b.bytes;
    iv.alignment = 1;
    iv.first = b.firstUse;
    iv.last = b.lastUse;
    intervals.push_back(iv);
    offsets.push_back(b.offset - plan.tempOffset);
    plan.sumTempBytes += (b.bytes + kAlign - 1) / kAlign * kAlign;
    plan.buffers.push_back(b);
  }
  std::string err =
      memplan::verify(intervals, offsets, plan.arenaBytes - plan.tempOffset);
  if (!err.empty())
    return f.emitError("memory plan: ") << err;

  auto place = [&](Value v, Operation *at) -> LogicalResult {
    uint64_t off = *offsetOf(v);
    if (liveness->bufferOf.count(v)) {
      int b = firstTemp + liveness->bufferOf.lookup(v);
      if (plan.buffers[b].offset != off)
        return at->emitError("memory plan: a value at offset ")
               << off << " shares the buffer at " << plan.buffers[b].offset;
      plan.bufferOf[v] = b;
      return success();
    }
    auto it = persistentAt.find(off);
    if (it == persistentAt.end())
      return at->emitError("memory plan: offset ")
             << off << " is neither a persistent tensor nor a temporary";
    if (plan.buffers[it->second].bytes != tensorBytes(v.getType()))
      return at->emitError("memory plan: a value of ")
             << tensorBytes(v.getType())
             << " bytes sits on the persistent tensor '"
             << plan.buffers[it->second].name << "' of "
             << plan.buffers[it->second].bytes << " bytes";
    plan.bufferOf[v] = it->second;
    return success();
  };
  for (BlockArgument arg : f.getArguments())
    if (failed(place(arg, f)))
      return failure();
  for (Operation &op : f.getBody().front())
    for (Value r : op.getResults())
      if (failed(place(r, &op)))
        return failure();
  plan.numInPlace += liveness->numInPlace;
  return success();
}

} // namespace

FailureOr<BufferPlan> cnnc::getBufferPlan(func::FuncOp step,
                                          func::FuncOp forward) {
  auto module = step->getParentOfType<ModuleOp>();
  if (!module || !module->hasAttr(kArenaBytesAttr))
    return step.emitError("memory plan: the module has no arena plan (run "
                          "cnn-memory-plan after every other pass)");
  forward = evaluatedForward(forward);
  // Names and roles of the persistent tensors.
  auto persistent = persistentBuffers(step, forward);
  if (failed(persistent))
    return failure();
  Reader R;
  R.module = module;
  BufferPlan &plan = R.plan;
  if (failed(R.readModuleAttr(kArenaBytesAttr, plan.arenaBytes)) ||
      failed(R.readModuleAttr(kPersistentBytesAttr, plan.persistentBytes)) ||
      failed(R.readModuleAttr(kWorkspaceOffsetAttr, plan.workspaceOffset)) ||
      failed(R.readModuleAttr(kWorkspaceBytesAttr, plan.workspaceBytes)) ||
      failed(R.readModuleAttr(kTempOffsetAttr, plan.tempOffset)) ||
      failed(R.readModuleAttr(kTrainPeakAttr, plan.trainTempBytes)) ||
      failed(R.readModuleAttr(kTrainLowerBoundAttr, plan.trainLowerBound)) ||
      failed(R.readModuleAttr(kEvalPeakAttr, plan.evalTempBytes)) ||
      failed(R.readModuleAttr(kEvalLowerBoundAttr, plan.evalLowerBound)))
    return failure();
  if (auto s = module->getAttrOfType<StringAttr>(kPlanStrategyAttr))
    plan.strategy = s.str();
  plan.workspaceIsCap = module->hasAttr(kWorkspaceIsCapAttr);
  if (plan.persistentBytes > plan.workspaceOffset ||
      plan.workspaceOffset + plan.workspaceBytes > plan.tempOffset ||
      plan.tempOffset > plan.arenaBytes ||
      plan.tempOffset + std::max(plan.trainTempBytes, plan.evalTempBytes) >
          plan.arenaBytes)
    return module.emitError("memory plan: inconsistent regions (persistent ")
           << plan.persistentBytes << ", workspace at " << plan.workspaceOffset
           << " of " << plan.workspaceBytes << ", temporaries at "
           << plan.tempOffset << ", arena " << plan.arenaBytes << ")";

  // Persistent tensors: arguments, loss, logits, at their recorded offsets.
  DenseMap<uint64_t, int> persistentAt;
  for (auto [v, idx] : persistent->bufferOf) {
    const PlannedBuffer &fb = persistent->buffers[idx];
    if (fb.role == BufferRole::Temp)
      continue;
    bool own =
        isa<BlockArgument>(v)
            ? cast<BlockArgument>(v).getOwner() == &step.getBody().front()
            : (fb.role == BufferRole::Loss || fb.role == BufferRole::Logits);
    if (!own)
      continue;
    auto off = R.offsetOf(v);
    if (!off)
      return step.emitError("memory plan: tensor '")
             << fb.name << "' has no " << kOffsetAttr
             << " (run cnn-memory-plan after every other pass)";
    if (*off + fb.bytes > plan.persistentBytes)
      return step.emitError("memory plan: tensor '")
             << fb.name << "' at " << *off
             << " is outside the persistent region";
    if (persistentAt.count(*off))
      return step.emitError("memory plan: tensors '")
             << fb.name << "' and '" << plan.buffers[persistentAt[*off]].name
             << "' share offset " << *off;
    PlannedBuffer b = fb;
    b.offset = *off;
    persistentAt[*off] = plan.buffers.size();
    plan.buffers.push_back(b);
  }
  // Persistent tensors in offset order, as printed and tabulated.
  std::sort(plan.buffers.begin(), plan.buffers.end(),
            [](const PlannedBuffer &a, const PlannedBuffer &b) {
              return a.offset < b.offset;
            });
  for (auto [i, b] : llvm::enumerate(plan.buffers))
    persistentAt[b.offset] = i;

  if (failed(R.readFunction(step, persistentAt)))
    return failure();
  plan.evalTempBytes = forward ? plan.evalTempBytes : 0;
  if (forward && failed(R.readFunction(forward, persistentAt)))
    return failure();

  // Updated persistent tensors not written in place are copied at the end.
  auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
  for (auto [r, v] : llvm::enumerate(ret.getOperands())) {
    DictionaryAttr d = step.getResultAttrDict(r);
    if (d && d.get(kLossAttr))
      continue;
    std::string name;
    for (const char *key : {kParamAttr, kBufferAttr, kStateAttr})
      if (auto s = d ? dyn_cast_or_null<StringAttr>(d.get(key)) : nullptr)
        name = s.str();
    int dest = -1;
    for (auto [i, b] : llvm::enumerate(plan.buffers))
      if (b.role != BufferRole::Temp && b.name == name)
        dest = i;
    if (dest < 0)
      return step.emitError("memory plan: result #")
             << r << " does not name a persistent argument";
    if (plan.offsetOf(v) != plan.buffers[dest].offset)
      plan.copiesAtEnd.push_back({(unsigned)r, dest});
    else if (plan.bufferOf.lookup(v) != dest)
      return step.emitError("memory plan: result #") << r << " is misplaced";
  }
  return std::move(plan);
}
