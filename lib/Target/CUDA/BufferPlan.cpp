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

FailureOr<BufferPlan> cnnc::persistentBuffers(func::FuncOp step,
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
    if (auto pub = d ? d.getAs<DenseI64ArrayAttr>("cnn.public_shape")
                     : DenseI64ArrayAttr())
      plan.buffers.back().publicShape.assign(pub.asArrayRef().begin(),
                                             pub.asArrayRef().end());
  }

  // Results: the loss has a place of its own (updated tensors are written
  // into their argument's, as cnn-memory-plan decided).
  auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
  for (auto [r, v] : llvm::enumerate(ret.getOperands())) {
    DictionaryAttr d = step.getResultAttrDict(r);
    if (!d || !d.get(kLossAttr))
      continue;
    if (plan.bufferOf.count(v))
      return step.emitError(
          "buffer plan: the loss must be computed by the step");
    plan.bufferOf[v] = addPersistent("loss", BufferRole::Loss,
                                     cast<RankedTensorType>(v.getType()));
  }
  plan.persistentBytes = cursor;

  // The evaluation step shares parameters, statistics and the input buffer.
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
  return plan;
}

void BufferPlan::print(llvm::raw_ostream &os) const {
  os << "# buffer plan ("
     << "cnn-memory-plan, " << strategy
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
  os << "workspace bytes: " << workspaceBytes << mib(workspaceBytes)
     << " at offset " << workspaceOffset << "\n"
     << "temporaries start at: " << tempOffset << "\n";
  os << "train temporaries peak: " << trainTempBytes << mib(trainTempBytes)
     << ", lower bound " << trainLowerBound << mib(trainLowerBound);
  os << "\n"
     << "eval temporaries peak: " << evalTempBytes << mib(evalTempBytes)
     << ", lower bound " << evalLowerBound << mib(evalLowerBound);
  os << "\n"
     << "sum of all temporaries: " << sumTempBytes << mib(sumTempBytes) << "\n"
     << "sum of all buffers: " << persistentBytes + sumTempBytes
     << mib(persistentBytes + sumTempBytes) << "\n";
  os << "results written in place: " << numInPlace << "\n";
  os << "arena bytes: " << arenaBytes << mib(arenaBytes)
     << (workspaceBytes ? ", workspace included" : "") << "\n";
}
