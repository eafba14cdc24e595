//===- PipelineStage.cpp - cnn-pipeline-stage: a stage as a step ----------===//
//
// The CUDA target compiles each pipeline stage as a training step of its
// own (its own arena plan, graph and ModelSpec). This pass turns the module
// cnn-pipeline-schedule made into stage s's: @stage<s>_step becomes
// @train_step, every other function goes (the other stages, and @forward:
// the pipelined step has no evaluation step), the class count goes on the
// function (a stage before the last has no loss to read it from), and the
// last stage's M micro-batch losses become their mean, its one cnn.loss,
// which the runtime prints as the step's loss (docs/pipeline-parallel.md).
//
//===----------------------------------------------------------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Transforms/Passes.h"
#include "cnnc/Transforms/PipelinePlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNPIPELINESTAGE
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {
/// Drops the optimizer updates of every micro-batch but the last. The
/// schedule unrolls the M micro-steps of accumulation, each with its
/// optimizer ops, but micro-batch m runs as micro-step k*M - (M-1-m), a
/// multiple of M only for m = M-1: the M-1 earlier updates are skipped
/// (cnn.accumulation_step's flag 0), and a skipped update returns its
/// parameter and state unchanged. Threading those through instead is exact,
/// saves M-1 update passes per step, and leaves one update per parameter, as
/// the loss scaling of cnn-precision expects (its finite flag is decided
/// before the first update, after every gradient). An update is a
/// micro-batch's earlier one when its new parameter is the parameter of
/// another update (the schedule threads state from one micro-batch's body
/// to the next).
void dropUnappliedUpdates(func::FuncOp fn) {
  SmallVector<Operation *> dead;
  fn.walk([&](Operation *op) {
    if (!isa<SGDUpdateOp, AdamUpdateOp>(op))
      return;
    bool threaded = llvm::any_of(op->getResult(0).getUses(), [](OpOperand &u) {
      return isa<SGDUpdateOp, AdamUpdateOp>(u.getOwner()) &&
             u.getOperandNumber() == 0;
    });
    if (threaded)
      dead.push_back(op);
  });
  for (Operation *op : dead) {
    // Results (new_param, state...) are operands 0 and 2, 3, ... (SGD:
    // momentum buffer; Adam: exp_avg, exp_avg_sq).
    op->getResult(0).replaceAllUsesWith(op->getOperand(0));
    for (unsigned r = 1; r < op->getNumResults(); ++r)
      op->getResult(r).replaceAllUsesWith(op->getOperand(r + 1));
    op->erase();
  }
  // Their accumulation flags (and constants) are left without readers.
  SmallVector<Operation *> unused;
  fn.walk([&](Operation *op) {
    if (isa<AccumulationStepOp, ConstantOp>(op) && op->use_empty())
      unused.push_back(op);
  });
  for (Operation *op : unused)
    op->erase();
}

/// 1F1B on the CUDA target: its transfers run on the compute stream, and a
/// blocking send deadlocks where both neighbours send before they receive
/// (stage s sends micro-batch m+1's activation forward while stage s+1
/// sends micro-batch m's gradient back). Runs of transfers become one
/// cnn.transfers (one NCCL group) each: a run ends only where a receive is
/// followed, after other ops, by a send (the ops between need what was
/// received and make what is sent); sends sink to the run's first receive,
/// later receives rise to it (a send has no result, a receive no operand,
/// so the data dependences hold; the memory plan sees the longer lives).
/// In such groups, the orders of cnn-pipeline-schedule are free of
/// deadlocks for S = 2..8, M = 1..12, one to three tensors per cut,
/// whether a cut's sends are adjacent or not (a simulation of blocking
/// sends and receives with group semantics, docs/pipeline-parallel.md).
/// A send that reads a value made after the run's first receive (by it, or
/// by an op in between) starts a new run, and so does a transfer of a kind
/// and peer the run already holds, after other ops: each group then holds
/// one micro-batch's transfers per neighbour, mirrored on that neighbour
/// (what NCCL needs: see below; S = 2 and 4 ran on 4 H200s, session 26).
void groupTransfers(func::FuncOp fn) {
  Block &body = fn.getBody().front();
  SmallVector<SmallVector<Operation *>> runs;
  SmallVector<Operation *> cur;
  Operation *anchor = nullptr; // the run's first receive
  bool lastWasRecv = false, opsBetween = false;
  for (Operation &op : body) {
    if (!isa<SendOp, RecvOp>(op)) {
      opsBetween = true;
      continue;
    }
    bool isSend = isa<SendOp>(op);
    bool cut = !cur.empty() && isSend && lastWasRecv && opsBetween;
    // NCCL splits a group's transfers to one peer by what else the group
    // holds for that peer, so both neighbours must group them alike
    // (unlike groups failed on 4 H200s: "Message truncated: received 4096
    // bytes instead of 2048"). A transfer of the same kind with the same
    // peer as one in the run, after other ops (another micro-batch's,
    // where a cut's several tensors are adjacent), starts a new run: the
    // groups are then per micro-batch on both sides, as Megatron pairs
    // send-forward-recv-backward with send-backward-recv-forward.
    if (!cut && opsBetween) {
      int64_t peer =
          isSend ? cast<SendOp>(op).getPeerAttr().getValue().getSExtValue()
                 : cast<RecvOp>(op).getPeerAttr().getValue().getSExtValue();
      cut = llvm::any_of(cur, [&](Operation *o) {
        if (isSend != isa<SendOp>(o))
          return false;
        int64_t p =
            isSend ? cast<SendOp>(o).getPeerAttr().getValue().getSExtValue()
                   : cast<RecvOp>(o).getPeerAttr().getValue().getSExtValue();
        return p == peer;
      });
    }
    if (!cut && isSend && anchor) {
      Operation *d = cast<SendOp>(op).getInput().getDefiningOp();
      cut = d && d->getBlock() == &body &&
            (d == anchor || !d->isBeforeInBlock(anchor));
    }
    if (cut) {
      runs.push_back(std::move(cur));
      cur.clear();
      anchor = nullptr;
    }
    cur.push_back(&op);
    if (!isSend && !anchor)
      anchor = &op;
    lastWasRecv = !isSend;
    opsBetween = false;
  }
  if (!cur.empty())
    runs.push_back(std::move(cur));
  for (ArrayRef<Operation *> run : runs) {
    if (run.size() < 2)
      continue;
    Operation *at = nullptr;
    SmallVector<Value> inputs;
    SmallVector<int64_t> sendPeers, sendTags, recvPeers, recvTags;
    SmallVector<Type> types;
    SmallVector<RecvOp> recvs;
    for (Operation *op : run) {
      if (auto snd = dyn_cast<SendOp>(op)) {
        inputs.push_back(snd.getInput());
        sendPeers.push_back(snd.getPeerAttr().getValue().getSExtValue());
        sendTags.push_back(snd.getTagAttr().getValue().getSExtValue());
        continue;
      }
      auto rcv = cast<RecvOp>(op);
      at = at ? at : op;
      recvs.push_back(rcv);
      types.push_back(rcv.getType());
      recvPeers.push_back(rcv.getPeerAttr().getValue().getSExtValue());
      recvTags.push_back(rcv.getTagAttr().getValue().getSExtValue());
    }
    OpBuilder b(at ? at : run.back());
    auto group = TransfersOp::create(
        b, run.front()->getLoc(), types, inputs,
        b.getDenseI64ArrayAttr(sendPeers), b.getDenseI64ArrayAttr(sendTags),
        b.getDenseI64ArrayAttr(recvPeers), b.getDenseI64ArrayAttr(recvTags));
    for (auto [k, rcv] : llvm::enumerate(recvs))
      rcv.getResult().replaceAllUsesWith(group.getResult(k));
    for (Operation *op : run)
      op->erase();
  }
}

struct StagePass : public cnnc::impl::CNNPipelineStageBase<StagePass> {
  using CNNPipelineStageBase::CNNPipelineStageBase;
  void runOnOperation() override;
};
} // namespace

void StagePass::runOnOperation() {
  ModuleOp module = getOperation();
  auto plan = module->getAttrOfType<DictionaryAttr>(kPipelineAttr);
  auto stagesAttr =
      plan ? dyn_cast_or_null<IntegerAttr>(plan.get("stages")) : IntegerAttr();
  if (!stagesAttr) {
    module.emitError("cnn-pipeline-stage: the module has no cnn.pipeline "
                     "plan (run cnn-pipeline-partition, cnn-pipeline-split "
                     "and cnn-pipeline-schedule first)");
    return signalPassFailure();
  }
  int64_t stages = stagesAttr.getInt(), s = stage;
  if (s < 0 || s >= stages) {
    module.emitError("cnn-pipeline-stage: stage ")
        << s << " is not one of the plan's " << stages << " stages";
    return signalPassFailure();
  }
  std::string name = "stage" + std::to_string(s) + "_step";
  auto fn = module.lookupSymbol<func::FuncOp>(name);
  if (!fn) {
    module.emitError("cnn-pipeline-stage: the module has no @")
        << name << " (run cnn-pipeline-schedule first)";
    return signalPassFailure();
  }
  // The class count: the logits' channels of the last stage's loss.
  int64_t classes = 0;
  module.walk([&](SoftmaxCrossEntropyOp op) {
    classes = op.getLogits().getType().getDimSize(1);
  });
  if (classes == 0) {
    module.emitError("cnn-pipeline-stage: no stage has a "
                     "softmax_cross_entropy loss");
    return signalPassFailure();
  }
  for (auto other : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (other != fn)
      other.erase();
  if (module.lookupSymbol("train_step")) {
    module.emitError("cnn-pipeline-stage: the module still has a "
                     "@train_step that is not a stage's");
    return signalPassFailure();
  }
  OpBuilder b(fn);
  fn.setSymName("train_step");
  fn->setAttr("cnn.num_classes", b.getI64IntegerAttr(classes));
  fn->setAttr("cnn.pipeline_stages", b.getI64IntegerAttr(stages));
  // The runtime joins a stage with its neighbours (and, interleaved, the
  // first with the last stage). cnn-pipeline-split relays a tensor that
  // skips stages (a U-Net's long skip connection across several cuts)
  // through the stages between, so this holds for every split it makes; a
  // step written otherwise has no link for such a transfer, and on the
  // compute stream its blocking send can meet the receiver waiting for
  // another stage (test_pipeline.py's blocking model deadlocked on such
  // steps before the relays). Checked here, for the CUDA target only: the
  // reference interpreter's mailbox takes any pair.
  auto chunksAttr = fn->getAttrOfType<IntegerAttr>("cnn.pipeline_chunks");
  const bool chunked = chunksAttr && chunksAttr.getInt() > 1;
  WalkResult skips = fn.walk([&](Operation *op) -> WalkResult {
    if (!isa<SendOp, RecvOp>(op))
      return WalkResult::advance();
    int64_t peer = transferPeer(op), tag = transferTag(op);
    bool wrap = chunked && stages >= 3 &&
                ((s == 0 && peer == stages - 1) ||
                 (s == stages - 1 && peer == 0));
    if (peer == s - 1 || peer == s + 1 || wrap)
      return WalkResult::advance();
    op->emitError("cnn-pipeline-stage: tag ")
        << tag << " crosses between stages " << std::min(s, peer) << " and "
        << std::max(s, peer)
        << ", which are not neighbours (a tensor that skips stages, such as "
           "a long skip connection across several cuts): the CUDA target's "
           "pipeline transfers join neighbouring stages only (cnn-pipeline-"
           "split relays such tensors through the stages between)";
    return WalkResult::interrupt();
  });
  if (skips.wasInterrupted())
    return signalPassFailure();
  dropUnappliedUpdates(fn);
  // Interleaved stages: a chunk's update comes with its last backward pass,
  // before the next chunk's gradients, but cnn-precision's finite check
  // needs every gradient of the step before the first update. The updates
  // left (one per parameter) feed only the step's results: they move to
  // its end, in their order.
  if (auto chunks = fn->getAttrOfType<IntegerAttr>("cnn.pipeline_chunks");
      chunks && chunks.getInt() > 1) {
    // An interleaved step needs its link streams to run beside the compute
    // stream (it posts every receive ahead; with a GPU's streams serialized
    // it deadlocks, test_pipeline.py's blocking model), which a CUDA graph's
    // replay does not promise: ResNet-50 f16 at S=2 x 2 and S=4 x 2 hung in
    // its replays on H200s (session 35; ResNet-18 f32 replayed), and ran
    // through uncaptured. The runtime reads this and runs every step
    // uncaptured (ModelSpec::uncapturedWhy).
    fn->setAttr(
        "cnn.step_uncaptured",
        b.getStringAttr("interleaved pipeline stages (--pipeline-chunks " +
                        std::to_string(chunks.getInt()) +
                        ") need their transfers to run beside the step's "
                        "kernels, which a CUDA graph's replay does not promise "
                        "(ResNet-50 hung in it); uncaptured, each step's "
                        "launches cost host time (ResNet-50 f16 S=2: 2.8x "
                        "slower than --pipeline-chunks 1)"));
    Operation *ret = fn.getBody().front().getTerminator();
    SmallVector<Operation *> updates;
    fn.walk([&](Operation *op) {
      if (isa<SGDUpdateOp, AdamUpdateOp>(op) &&
          llvm::all_of(op->getUsers(),
                       [&](Operation *u) { return u == ret; }))
        updates.push_back(op);
    });
    for (Operation *op : updates)
      op->moveBefore(ret);
  }
  if (auto sched = fn->getAttrOfType<StringAttr>("cnn.pipeline_schedule");
      sched && sched.getValue() == "1f1b") {
    // A relayed tensor (cnn-pipeline-split: a skip across several cuts,
    // received and sent on unchanged) puts a receive and a send to the
    // other neighbour in one run, which the neighbours do not mirror: the
    // blocking model of the grouped transfers deadlocks on every such step
    // (DeepBN, U-Nets at S = 3, 4; test_pipeline.py). Not built: GPipe's
    // schedule runs them.
    WalkResult relayed = fn.walk([&](SendOp snd) -> WalkResult {
      auto rcv = snd.getInput().getDefiningOp<RecvOp>();
      if (!rcv)
        return WalkResult::advance();
      snd.emitError("cnn-pipeline-stage: stage ")
          << s << " relays a tensor from stage " << transferPeer(rcv)
          << " to stage " << transferPeer(snd) << " (tag " << transferTag(rcv)
          << " to tag " << transferTag(snd)
          << ": a tensor that skips stages, such as a long skip connection "
             "across several cuts); the 1f1b schedule's grouped transfers "
             "do not relay on the CUDA target: use --pipeline-schedule gpipe";
      return WalkResult::interrupt();
    });
    if (relayed.wasInterrupted())
      return signalPassFailure();
    groupTransfers(fn);
  }

  // The M losses (cnn.loss on results, micro-batch order) become their mean:
  // summed in micro-batch order, then scaled by 1/M, one result in place of
  // the first.
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  SmallVector<unsigned> lossResults;
  for (unsigned r = 0; r < fn.getNumResults(); ++r)
    if (fn.getResultAttr(r, kLossAttr))
      lossResults.push_back(r);
  if (lossResults.size() <= 1)
    return;
  b.setInsertionPoint(ret);
  Location loc = ret.getLoc();
  Value sum = ret.getOperand(lossResults[0]);
  for (unsigned k = 1; k < lossResults.size(); ++k)
    sum = AddOp::create(b, loc, sum.getType(), sum,
                        ret.getOperand(lossResults[k]));
  Value mean = ScaleOp::create(
      b, loc, sum.getType(), sum,
      b.getF32FloatAttr(1.0f / static_cast<float>(lossResults.size())));
  ret.setOperand(lossResults[0], mean);
  fn.setResultAttrs(lossResults[0], b.getDictionaryAttr(b.getNamedAttr(
                                        kLossAttr, b.getUnitAttr())));
  llvm::BitVector drop(fn.getNumResults());
  for (unsigned k = 1; k < lossResults.size(); ++k)
    drop.set(lossResults[k]);
  ret->eraseOperands(drop);
  if (failed(fn.eraseResults(drop))) {
    fn.emitError("cnn-pipeline-stage: cannot drop the micro-batch losses");
    return signalPassFailure();
  }
}
