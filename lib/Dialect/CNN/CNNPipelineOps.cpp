//===- CNNPipelineOps.cpp - verifiers of cnn.send / cnn.recv --------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace cnnc::cnn;

/// The checks both halves of a transfer share: a peer that is a stage, not
/// the op's own (a stage never talks to itself: that value needs no
/// transfer), a non-negative tag, and an element type a stage can hold.
static LogicalResult verifyTransfer(Operation *op, int64_t peer, int64_t tag,
                                    Type type) {
  if (peer < 0)
    return op->emitOpError("'peer' must be >= 0, got ") << peer;
  if (tag < 0)
    return op->emitOpError("'tag' must be >= 0, got ") << tag;
  if (auto f = op->getParentOfType<func::FuncOp>())
    if (auto stage = f->getAttrOfType<IntegerAttr>("cnn.pipeline_stage");
        stage && stage.getInt() == peer)
      return op->emitOpError("'peer' is ")
             << peer << ", the stage of its own function @" << f.getName()
             << " (a value used where it is made needs no transfer)";
  Type elem = cast<RankedTensorType>(type).getElementType();
  if (!elem.isF32() && !elem.isF16() && !elem.isInteger(32))
    return op->emitOpError("transfers ")
           << type << ": only f32, f16 and i32 tensors cross a cut";
  return success();
}

/// An asynchronous transfer (`event` set) has exactly one
/// cnn.transfer_wait of its event, reading `v` (what it sends or received).
static LogicalResult verifyAsync(Operation *op, std::optional<uint64_t> event,
                                 std::optional<uint64_t> link, Value v) {
  if (link && !event)
    return op->emitOpError("has a 'link' but no 'event': only an "
                           "asynchronous transfer runs on a link");
  if (link &&
      (static_cast<int64_t>(*link) < 0 || static_cast<int64_t>(*link) > 2))
    return op->emitOpError("'link' must be 0 (the stage before), 1 (the "
                           "stage after) or 2 (the first and the last "
                           "stage), got ")
           << static_cast<int64_t>(*link);
  if (!event)
    return success();
  auto e = static_cast<int64_t>(*event);
  if (e < 0)
    return op->emitOpError("'event' must be >= 0, got ") << e;
  int waits = 0;
  for (Operation *u : v.getUsers())
    if (auto w = dyn_cast<TransferWaitOp>(u); w && w.getEvent() == *event)
      ++waits;
  if (waits != 1)
    return op->emitOpError("with event ")
           << e << " needs exactly one cnn.transfer_wait of that event, has "
           << waits;
  return success();
}

LogicalResult SendOp::verify() {
  if (failed(verifyTransfer(*this, getPeerAttr().getValue().getSExtValue(),
                            getTagAttr().getValue().getSExtValue(),
                            getInput().getType())))
    return failure();
  return verifyAsync(*this, getEvent(), getLink(), getInput());
}

LogicalResult RecvOp::verify() {
  if (failed(verifyTransfer(*this, getPeerAttr().getValue().getSExtValue(),
                            getTagAttr().getValue().getSExtValue(),
                            getResult().getType())))
    return failure();
  return verifyAsync(*this, getEvent(), getLink(), getResult());
}

LogicalResult TransferWaitOp::verify() {
  auto e = static_cast<int64_t>(getEvent());
  if (e < 0)
    return emitOpError("'event' must be >= 0, got ") << e;
  Operation *transfer = nullptr;
  int count = 0;
  for (Operation &op : *(*this)->getBlock()) {
    std::optional<uint64_t> ev;
    if (auto s = dyn_cast<SendOp>(op))
      ev = s.getEvent();
    else if (auto r = dyn_cast<RecvOp>(op))
      ev = r.getEvent();
    if (ev && static_cast<int64_t>(*ev) == e) {
      transfer = &op;
      ++count;
    }
  }
  if (count != 1)
    return emitOpError("event ")
           << e << " needs exactly one cnn.send or cnn.recv with that event "
           << "in its block, found " << count;
  if (!transfer->isBeforeInBlock(*this))
    return emitOpError("waits for event ")
           << e << " before its transfer is issued";
  if (auto snd = dyn_cast<SendOp>(transfer)) {
    if (getTensor() != snd.getInput())
      return emitOpError("must read the tensor its cnn.send of event ")
             << e << " sends";
    return success();
  }
  auto rcv = cast<RecvOp>(transfer);
  if (getTensor() != rcv.getResult())
    return emitOpError("must read the result of its cnn.recv of event ") << e;
  for (Operation *u : rcv.getResult().getUsers()) {
    Operation *top = (*this)->getBlock()->findAncestorOpInBlock(*u);
    if (u != getOperation() && top && top->isBeforeInBlock(*this))
      return emitOpError("the value received with event ")
             << e << " is read before this wait";
  }
  return success();
}

LogicalResult TransfersOp::verify() {
  if (getSendPeers().size() != getInputs().size() ||
      getSendTags().size() != getInputs().size())
    return emitOpError("needs one send peer and tag per input: ")
           << getInputs().size() << " inputs, " << getSendPeers().size()
           << " peers, " << getSendTags().size() << " tags";
  if (getRecvPeers().size() != getResults().size() ||
      getRecvTags().size() != getResults().size())
    return emitOpError("needs one receive peer and tag per result: ")
           << getResults().size() << " results, " << getRecvPeers().size()
           << " peers, " << getRecvTags().size() << " tags";
  if (getInputs().empty() && getResults().empty())
    return emitOpError("has no transfer");
  for (auto [v, peer, tag] :
       llvm::zip(getInputs(), getSendPeers(), getSendTags()))
    if (failed(verifyTransfer(*this, peer, tag, v.getType())))
      return failure();
  for (auto [v, peer, tag] :
       llvm::zip(getResults(), getRecvPeers(), getRecvTags()))
    if (failed(verifyTransfer(*this, peer, tag, v.getType())))
      return failure();
  return success();
}

LogicalResult MicroBatchOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  int64_t index = getIndexAttr().getInt(), count = getCountAttr().getInt();
  if (count < 1 || index < 0 || index >= count)
    return emitOpError("needs 0 <= index < count, got index ")
           << index << " and count " << count;
  if (in.getRank() < 1 || in.getDimSize(0) % count != 0)
    return emitOpError("the batch of ")
           << in << " does not split into " << count << " micro-batches";
  SmallVector<int64_t> shape(in.getShape());
  shape[0] /= count;
  if (out.getShape() != ArrayRef<int64_t>(shape) ||
      out.getElementType() != in.getElementType())
    return emitOpError("result must be ")
           << RankedTensorType::get(shape, in.getElementType()) << ", got "
           << out;
  return success();
}
