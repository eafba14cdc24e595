//===- BufferPlan.cpp - arena plan of a train step -----------------------===//
#include "BufferPlan.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

static constexpr size_t kAlign = 256;
static size_t alignUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

size_t cnnc::bytesOf(RankedTensorType t) {
  size_t elem = (t.getElementTypeBitWidth() + 7) / 8;
  return std::max<size_t>(elem * t.getNumElements(), elem);
}

static const char *roleName(BufferRole r) {
  switch (r) {
  case BufferRole::Param:
    return "param";
  case BufferRole::Buffer:
    return "buffer";
  case BufferRole::OptState:
    return "opt-state";
  case BufferRole::InputImage:
    return "input";
  case BufferRole::InputLabel:
    return "labels";
  case BufferRole::Loss:
    return "loss";
  case BufferRole::Logits:
    return "logits";
  case BufferRole::ScalarLR:
    return "lr";
  case BufferRole::ScalarStep:
    return "step";
  case BufferRole::LossScale:
    return "loss-scale";
  case BufferRole::Temp:
    return "temp";
  }
  return "?";
}

static std::string attrName(DictionaryAttr d, StringRef key) {
  if (!d)
    return "";
  if (auto s = dyn_cast_or_null<StringAttr>(d.get(key)))
    return s.str();
  return "";
}

/// Values that are a view of their operand's buffer.
static bool isView(Operation *op) { return isa<ReshapeOp, FlattenOp>(op); }

namespace {
/// First-fit packing of temporaries by live range.
struct TempPacker {
  struct Placed {
    size_t offset, bytes;
    int first, last;
  };
  std::vector<Placed> placed;
  size_t peak = 0;
  size_t place(size_t bytes, int first, int last) {
    bytes = alignUp(bytes);
    std::vector<std::pair<size_t, size_t>> busy;
    for (const Placed &p : placed)
      if (!(p.last < first || last < p.first))
        busy.push_back({p.offset, p.offset + p.bytes});
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (auto [b, e] : busy) {
      if (offset + bytes <= b)
        break;
      offset = std::max(offset, e);
    }
    placed.push_back({offset, bytes, first, last});
    peak = std::max(peak, offset + bytes);
    return offset;
  }
};
} // namespace

/// Plans the temporaries of `func` (whose persistent values are already in
/// `plan.bufferOf`), returning the size of its temp region.
static size_t planTemps(func::FuncOp func, BufferPlan &plan,
                        std::vector<int> &tempIndices) {
  Block &body = func.getBody().front();
  DenseMap<Operation *, int> index;
  int i = 0;
  for (Operation &op : body)
    index[&op] = i++;
  // Last use of each buffer, following views.
  DenseMap<Value, Value> root;
  auto rootOf = [&](Value v) {
    while (root.count(v))
      v = root.lookup(v);
    return v;
  };
  for (Operation &op : body)
    if (isView(&op))
      root[op.getResult(0)] = op.getOperand(0);
  DenseMap<Value, int> lastUse;
  for (Operation &op : body)
    for (Value v : op.getOperands())
      lastUse[rootOf(v)] = std::max(lastUse.lookup(rootOf(v)), index[&op]);

  TempPacker packer;
  for (Operation &op : body) {
    for (Value r : op.getResults()) {
      if (plan.bufferOf.count(r))
        continue;
      if (isView(&op)) {
        plan.bufferOf[r] = plan.bufferOf.lookup(op.getOperand(0));
        continue;
      }
      auto t = cast<RankedTensorType>(r.getType());
      PlannedBuffer b;
      b.name = "%" + std::to_string(plan.buffers.size());
      b.type = t;
      b.bytes = bytesOf(t);
      b.firstUse = index[&op];
      b.lastUse = std::max(b.firstUse, lastUse.lookup(r));
      b.defOp = op.getName().getStringRef().str();
      if (auto nl = dyn_cast<NameLoc>(op.getLoc()))
        b.defOp += " @" + nl.getName().str();
      b.offset = packer.place(b.bytes, b.firstUse, b.lastUse);
      plan.sumTempBytes += alignUp(b.bytes);
      plan.bufferOf[r] = plan.buffers.size();
      tempIndices.push_back(plan.buffers.size());
      plan.buffers.push_back(b);
    }
  }
  return packer.peak;
}

FailureOr<BufferPlan> cnnc::planBuffers(func::FuncOp step,
                                        func::FuncOp forward) {
  BufferPlan plan;
  size_t cursor = 0;
  llvm::StringMap<int> byName;
  auto addPersistent = [&](std::string name, BufferRole role,
                           RankedTensorType t) {
    PlannedBuffer b;
    b.name = std::move(name);
    b.role = role;
    b.type = t;
    b.bytes = bytesOf(t);
    b.offset = cursor;
    cursor = alignUp(cursor + b.bytes);
    byName[b.name] = plan.buffers.size();
    plan.buffers.push_back(b);
    return (int)plan.buffers.size() - 1;
  };

  // Persistent arguments of the train step.
  for (BlockArgument arg : step.getArguments()) {
    DictionaryAttr d = step.getArgAttrDict(arg.getArgNumber());
    auto t = cast<RankedTensorType>(arg.getType());
    std::string name;
    BufferRole role;
    if (!(name = attrName(d, kParamAttr)).empty())
      role = BufferRole::Param;
    else if (!(name = attrName(d, kBufferAttr)).empty())
      role = BufferRole::Buffer;
    else if (!(name = attrName(d, kStateAttr)).empty())
      role = d.get("cnn.loss_scale") ? BufferRole::LossScale
                                     : BufferRole::OptState;
    else if (d && d.get(kLabelsAttr))
      role = BufferRole::InputLabel, name = "labels";
    else if (d && d.get(kLRAttr))
      role = BufferRole::ScalarLR, name = "lr";
    else if (d && d.get(kStepAttr))
      role = BufferRole::ScalarStep, name = "step";
    else if (d && d.get(kInputAttr))
      role = BufferRole::InputImage, name = "input";
    else
      return step.emitError("buffer plan: argument #")
             << arg.getArgNumber() << " of @train_step has no role attribute";
    if (byName.count(name))
      return step.emitError("buffer plan: two arguments named '")
             << name << "'";
    plan.bufferOf[arg] = addPersistent(name, role, t);
  }

  // Results: the loss, and updated persistent tensors written in place.
  Block &body = step.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  DenseMap<Operation *, int> index;
  int i = 0;
  for (Operation &op : body)
    index[&op] = i++;
  for (auto [r, v] : llvm::enumerate(ret.getOperands())) {
    DictionaryAttr d = step.getResultAttrDict(r);
    if (d && d.get(kLossAttr)) {
      if (plan.bufferOf.count(v))
        return step.emitError(
            "buffer plan: the loss must be computed by the step");
      plan.bufferOf[v] = addPersistent("loss", BufferRole::Loss,
                                       cast<RankedTensorType>(v.getType()));
      continue;
    }
    std::string name = attrName(d, kParamAttr);
    if (name.empty())
      name = attrName(d, kBufferAttr);
    if (name.empty())
      name = attrName(d, kStateAttr);
    if (name.empty() || !byName.count(name))
      return step.emitError("buffer plan: result #")
             << r << " does not name a persistent argument";
    int dest = byName[name];
    Value arg = [&]() -> Value {
      for (auto [val, idx] : plan.bufferOf)
        if (idx == dest && isa<BlockArgument>(val))
          return val;
      return {};
    }();
    if (v == arg)
      continue; // unchanged (e.g. a BN statistic of a frozen layer)
    Operation *def = v.getDefiningOp();
    bool inPlace = def && !plan.bufferOf.count(v) &&
                   isa<SGDUpdateOp, AdamUpdateOp, BatchNormTrainOp>(def) &&
                   llvm::all_of(arg.getUsers(), [&](Operation *u) {
                     return u == def || index[u] < index[def];
                   });
    if (inPlace)
      plan.bufferOf[v] = dest;
    else
      plan.copiesAtEnd.push_back({(unsigned)r, dest});
  }
  plan.persistentBytes = cursor;

  // The evaluation step shares parameters, statistics and the input buffer.
  std::vector<int> trainTemps, evalTemps;
  if (forward) {
    for (BlockArgument arg : forward.getArguments()) {
      DictionaryAttr d = forward.getArgAttrDict(arg.getArgNumber());
      std::string name = attrName(d, kParamAttr);
      if (name.empty())
        name = attrName(d, kBufferAttr);
      if (name.empty())
        name = "input";
      if (!byName.count(name))
        return forward.emitError("buffer plan: argument '")
               << name << "' of @forward is not an argument of @train_step";
      if (plan.buffers[byName[name]].type != arg.getType())
        return forward.emitError("buffer plan: argument '")
               << name << "' of @forward has type " << arg.getType() << " but "
               << plan.buffers[byName[name]].type << " in @train_step";
      plan.bufferOf[arg] = byName[name];
    }
    auto fret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    Value logits = fret.getOperand(0);
    if (!plan.bufferOf.count(logits))
      plan.bufferOf[logits] =
          addPersistent("logits", BufferRole::Logits,
                        cast<RankedTensorType>(logits.getType()));
    plan.persistentBytes = cursor;
  }
  plan.trainTempBytes = planTemps(step, plan, trainTemps);
  if (forward)
    plan.evalTempBytes = planTemps(forward, plan, evalTemps);
  for (int t : trainTemps)
    plan.buffers[t].offset += plan.persistentBytes;
  for (int t : evalTemps)
    plan.buffers[t].offset += plan.persistentBytes;
  plan.arenaBytes =
      plan.persistentBytes + std::max(plan.trainTempBytes, plan.evalTempBytes);
  plan.arenaBytes = std::max<size_t>(plan.arenaBytes, kAlign);
  return plan;
}

void BufferPlan::print(llvm::raw_ostream &os) const {
  os << "# buffer plan ("
     << (fromPass ? "cnn-memory-plan, " + strategy : std::string("first-fit"))
     << "): name, role, bytes, offset, live range (op indices), defining op\n";
  for (const PlannedBuffer &b : buffers) {
    os << b.name << "\t" << roleName(b.role) << "\t" << b.bytes << "\t"
       << b.offset;
    if (b.role == BufferRole::Temp) {
      os << "\t[" << b.firstUse << ", " << b.lastUse << "]\t" << b.defOp;
      if (b.numInPlace)
        os << " (+" << b.numInPlace << " in place)";
    }
    os << "\n";
  }
  auto mib = [](size_t b) {
    std::string s;
    llvm::raw_string_ostream(s) << llvm::format(" (%.1f MiB)", b / 1048576.0);
    return s;
  };
  os << "persistent bytes: " << persistentBytes << mib(persistentBytes) << "\n";
  if (fromPass)
    os << "workspace bytes: " << workspaceBytes << mib(workspaceBytes)
       << " at offset " << workspaceOffset << "\n"
       << "temporaries start at: " << tempOffset << "\n";
  os << "train temporaries peak: " << trainTempBytes << mib(trainTempBytes);
  if (fromPass)
    os << ", lower bound " << trainLowerBound << mib(trainLowerBound);
  os << "\n"
     << "eval temporaries peak: " << evalTempBytes << mib(evalTempBytes);
  if (fromPass)
    os << ", lower bound " << evalLowerBound << mib(evalLowerBound);
  os << "\n"
     << "sum of all temporaries: " << sumTempBytes << mib(sumTempBytes) << "\n"
     << "sum of all buffers: " << persistentBytes + sumTempBytes
     << mib(persistentBytes + sumTempBytes) << "\n";
  if (fromPass)
    os << "results written in place: " << numInPlace << "\n";
  os << "arena bytes: " << arenaBytes << mib(arenaBytes)
     << (fromPass && workspaceBytes ? ", workspace included" : "") << "\n";
  if (fromPass)
    os << "arena bytes with the first-fit planner: " << firstFitArenaBytes
       << mib(firstFitArenaBytes) << ", workspace allocated separately\n";
}
