//===- PipelineAsync.cpp - cnn-pipeline-async-transfers -------------------===//
//
// A pipeline stage's sends and receives as asynchronous transfers on the
// streams of its links (CUDA target, GPipe). On one compute stream a
// transfer and the stage's kernels never overlap, and a blocking send waits
// for the neighbour to reach its receive: on 4 H200s ResNet-50's f16 stages
// ran at 0.40 of S x the one-GPU rate (session 27). Here each cnn.send and
// cnn.recv gets an `event` (issued on its link's stream once the compute
// stream reaches it) and a cnn.transfer_wait of that event (where the
// compute stream waits for it):
//
//  - a receive rises to just after the wait of the previous receive of its
//    tag (the same tensor one micro-batch earlier), the previous send to
//    its peer or the previous receive from it, whichever is latest, or to
//    the top of the step: micro-batch
//    m+1's activation arrives while micro-batch m computes; its wait stays
//    where the receive was, before every reader;
//  - a send's wait goes just before the next send of its tag (the same
//    tensor one micro-batch later), or at the end of the step: the sent
//    tensor lives (in the memory plan) until NCCL has read it, while the
//    compute stream goes on.
//
// A link's transfers keep their order (NCCL pairs sends and receives by
// their order on each side), and every wait stands where the synchronous
// form already waited or later, so the schedule's deadlock freedom carries
// over. 1F1B's grouped transfers (cnn.transfers) stay synchronous.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Transforms/Passes.h"
#include "cnnc/Transforms/PipelinePlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNPIPELINEASYNCTRANSFERS
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

struct AsyncTransfersPass
    : public cnnc::impl::CNNPipelineAsyncTransfersBase<AsyncTransfersPass> {
  using CNNPipelineAsyncTransfersBase::CNNPipelineAsyncTransfersBase;
  void runOnOperation() override;
};

} // namespace

void AsyncTransfersPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto fn = module.lookupSymbol<func::FuncOp>("train_step");
  if (!fn || !fn->hasAttr("cnn.pipeline_stages"))
    return;
  Block &body = fn.getBody().front();
  SmallVector<Operation *> transfers;
  for (Operation &op : body) {
    if (isa<TransfersOp>(op))
      return; // 1F1B's NCCL groups: synchronous (see the header)
    if (isa<SendOp, RecvOp>(op))
      transfers.push_back(&op);
  }
  if (transfers.empty())
    return;
  auto chunksAttr = fn->getAttrOfType<IntegerAttr>("cnn.pipeline_chunks");
  const bool chunked = chunksAttr && chunksAttr.getInt() > 1;
  auto stagesAttr = fn->getAttrOfType<IntegerAttr>("cnn.pipeline_stages");
  auto stageAttr = fn->getAttrOfType<IntegerAttr>("cnn.pipeline_stage");
  if (!stagesAttr || !stageAttr) {
    fn.emitError("cnn-pipeline-async-transfers: a stage's step needs "
                 "cnn.pipeline_stages and cnn.pipeline_stage");
    return signalPassFailure();
  }
  const int64_t stages = stagesAttr.getInt(), stage = stageAttr.getInt();
  // Each transfer's link (the `link` attribute the runtime issues it on):
  // 0 to the stage before, 1 to the stage after, 2 between the first and
  // the last stage (interleaved: chunk c of the last stage feeds chunk c + 1
  // of the first). Two interleaved stages are each other's neighbours both
  // ways: the pair's link carries 0 to 1 and link 2 carries 1 to 0, a link
  // per direction (with one link for both and receives posted ahead, the
  // link-stream model deadlocks, test_pipeline.py).
  auto linkOf = [&](Operation *op) -> int64_t {
    const int64_t peer = transferPeer(op);
    const bool toLower = isa<SendOp>(op) ? peer < stage : peer > stage;
    const bool wrap =
        chunked && (stages == 2 ? toLower
                                : (stage == 0 && peer == stages - 1) ||
                                      (stage == stages - 1 && peer == 0));
    return wrap ? 2 : peer < stage ? 0 : 1;
  };
  OpBuilder b(fn.getContext());
  Operation *terminator = body.getTerminator();
  // Per link, the transfers in their (kept) order.
  llvm::DenseMap<int64_t, SmallVector<Operation *>> byLink;
  for (Operation *op : transfers)
    byLink[linkOf(op)].push_back(op);
  int64_t event = 0;
  llvm::DenseMap<Operation *, int64_t> eventOf;
  for (Operation *op : transfers)
    eventOf[op] = event++;
  // Waits first (at the positions the synchronous form had), then the
  // receives rise.
  llvm::DenseMap<Operation *, Operation *> waitOf;
  for (auto &[link, ops] : byLink) {
    for (auto [k, op] : llvm::enumerate(ops)) {
      if (auto rcv = dyn_cast<RecvOp>(op)) {
        rcv.setEventAttr(b.getI64IntegerAttr(eventOf[op]));
        rcv.setLinkAttr(b.getI64IntegerAttr(link));
        b.setInsertionPointAfter(op);
        waitOf[op] = TransferWaitOp::create(b, op->getLoc(), rcv.getResult(),
                                            eventOf[op]);
        continue;
      }
      auto snd = cast<SendOp>(op);
      snd.setEventAttr(b.getI64IntegerAttr(eventOf[op]));
      snd.setLinkAttr(b.getI64IntegerAttr(link));
      // Before the next send of the same tag (the same tensor one
      // micro-batch later, which the memory plan may put in the same
      // bytes), not the next send: with two tensors crossing a cut the
      // first's wait stood before the second's send, one op later, and the
      // compute stream waited for every send (ResNet-50's interleaved
      // stages at micro-batch 32: 32 such waits a chunk on stage 0).
      Operation *next = terminator;
      const int64_t tag = transferTag(snd);
      for (Operation *later : ArrayRef<Operation *>(ops).drop_front(k + 1))
        if (auto s = dyn_cast<SendOp>(later); s && transferTag(s) == tag) {
          next = later;
          break;
        }
      b.setInsertionPoint(next);
      waitOf[op] = TransferWaitOp::create(b, op->getLoc(), snd.getInput(),
                                          eventOf[op]);
    }
  }
  // Each receive's anchor: the wait of the previous receive of its tag (one
  // micro-batch earlier) or the previous send to its peer, whichever is
  // later; none: the top of the step. Receives with one anchor keep their
  // order after it.
  //
  // Interleaved stages (cnn.pipeline_chunks): the link between the first and
  // the last stage carries chunk c's outputs into chunk c + 1 (forward) and
  // their gradients back, which the receiving stage takes only after all M
  // micro-batches of the chunk before. With one receive posted at a time
  // the sender's next send waits for that (its wait stands before it), and
  // the loop of stages deadlocks (4 H200s, session 33). A chunked step
  // posts all its receives ahead, in order (a link-stream model of the
  // emitted transfers, test_pipeline.py, finds no deadlock then). With a
  // link per direction (two stages) a receive has no send on its link to
  // wait behind: all rise to the top, in order.
  Operation *top = &body.front();
  llvm::DenseMap<Operation *, Operation *> lastAfter;
  Operation *lastAtTop = nullptr;
  for (auto &[link, ops] : byLink) {
    llvm::DenseMap<int64_t, Operation *> prevOfTag;
    Operation *prevSend = nullptr, *prevRecv = nullptr;
    for (Operation *op : ops) {
      auto rcv = dyn_cast<RecvOp>(op);
      if (!rcv) {
        prevSend = op;
        continue;
      }
      int64_t tag = transferTag(rcv);
      Operation *anchor = prevSend;
      if (Operation *p = prevOfTag.lookup(tag); p && !chunked)
        if (!anchor || anchor->isBeforeInBlock(waitOf[p]))
          anchor = waitOf[p];
      // Never above the previous receive from the peer (already in its
      // place): interleaved stages receive a later chunk's first tensor,
      // whose tag has no earlier receive, after the earlier chunk's.
      if (prevRecv && (!anchor || anchor->isBeforeInBlock(prevRecv)))
        anchor = prevRecv;
      prevOfTag[tag] = op;
      prevRecv = op;
      if (!anchor) {
        if (lastAtTop)
          op->moveAfter(lastAtTop);
        else if (op != top)
          op->moveBefore(top);
        lastAtTop = op;
        continue;
      }
      Operation *&last = lastAfter[anchor];
      op->moveAfter(last ? last : anchor);
      last = op;
    }
  }
  // NCCL pairs a link's transfers by their order: it must not have changed.
  for (auto &[link, ops] : byLink)
    for (size_t k = 1; k < ops.size(); ++k)
      if (!ops[k - 1]->isBeforeInBlock(ops[k])) {
        ops[k]->emitError("cnn-pipeline-async-transfers: moving the "
                          "receives reordered the transfers with stage ")
            << transferPeer(ops[k]);
        return signalPassFailure();
      }
  fn->setAttr("cnn.transfer_events", b.getI64IntegerAttr(event));
  numAsync += event;
}
