//===- PipelineSplit.cpp - cnn-pipeline-split: one function per stage -----===//
//
// Replaces @train_step by @stage<s>_forward and @stage<s>_backward (s < S)
// from the cnn.stage attributes cnn-pipeline-partition recorded: values that
// cross a cut travel through cnn.send / cnn.recv pairs, activations the
// backward pass reads are returned by the forward function and passed to
// the backward one. See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"
#include "cnnc/Transforms/PipelinePlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNPIPELINESPLIT
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

struct SplitPass : public cnnc::impl::CNNPipelineSplitBase<SplitPass> {
  using CNNPipelineSplitBase::CNNPipelineSplitBase;
  void runOnOperation() override;
};

/// One stage function being built.
struct StageFn {
  func::FuncOp fn;
  Block *block = nullptr;
  IRMapping map;
  SmallVector<DictionaryAttr> argAttrs;
  SmallVector<Value> results;         // values of this function to return
  SmallVector<int64_t> resultIndices; // their @train_step result numbers
  // Backward: the forward values it takes from its forward function, in
  // argument order.
  llvm::MapVector<Value, BlockArgument> saved;
};

/// sends-first: moves the ops `block`'s cnn.send ops need (transitively,
/// within the block) ahead of the others, both groups keeping their order.
/// Receives stay in their order too: a needed receive takes every earlier
/// receive with it (peers pair transfers by their order). Returns how many
/// ops moved.
int64_t hoistSendSlices(Block *block) {
  llvm::SmallPtrSet<Operation *, 32> needed;
  SmallVector<Operation *> work;
  for (Operation &op : *block)
    if (isa<SendOp>(op))
      work.push_back(&op);
  auto take = [&](Operation *op) {
    op->walk([&](Operation *inner) {
      for (Value v : inner->getOperands())
        if (Operation *d = v.getDefiningOp(); d && d->getBlock() == block)
          work.push_back(d);
    });
  };
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (needed.insert(op).second)
      take(op);
  }
  // Receives: the prefix up to the last needed one.
  Operation *lastRecv = nullptr;
  for (Operation &op : *block)
    if (isa<RecvOp>(op) && needed.count(&op))
      lastRecv = &op;
  if (lastRecv)
    for (Operation &op : *block) {
      if (isa<RecvOp>(op))
        needed.insert(&op);
      if (&op == lastRecv)
        break;
    }
  // The first op no send needs is the anchor; every needed op after it
  // moves just before it, in order.
  Operation *anchor = nullptr;
  int64_t moved = 0;
  for (Operation &op : llvm::make_early_inc_range(*block)) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      break;
    if (!needed.count(&op)) {
      if (!anchor)
        anchor = &op;
      continue;
    }
    if (anchor) {
      op.moveBefore(anchor);
      ++moved;
    }
  }
  return moved;
}

} // namespace

int64_t cnnc::transferPeer(Operation *sendOrRecv) {
  if (auto s = dyn_cast<SendOp>(sendOrRecv))
    return s.getPeerAttr().getValue().getSExtValue();
  return cast<RecvOp>(sendOrRecv).getPeerAttr().getValue().getSExtValue();
}

int64_t cnnc::transferTag(Operation *sendOrRecv) {
  if (auto s = dyn_cast<SendOp>(sendOrRecv))
    return s.getTagAttr().getValue().getSExtValue();
  return cast<RecvOp>(sendOrRecv).getTagAttr().getValue().getSExtValue();
}

void SplitPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  auto plan = module->getAttrOfType<DictionaryAttr>(kPipelineAttr);
  if (!step || !plan || !plan.getAs<IntegerAttr>("stages")) {
    module.emitError("cnn-pipeline-split: needs @train_step and the "
                     "cnn.pipeline plan of cnn-pipeline-partition");
    return signalPassFailure();
  }
  // Interleaved plans: one function pair per virtual stage; peers are
  // virtual stages until cnn-pipeline-schedule places them.
  const int64_t S = pipelineVirtualStages(plan);
  Block &body = step.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // Forward ops: those the loss depends on (as cnn-pipeline-partition).
  Value loss;
  for (unsigned i = 0; i < step.getNumResults(); ++i)
    if (step.getResultAttr(i, kLossAttr))
      loss = ret.getOperand(i);
  llvm::DenseSet<Operation *> forward;
  SmallVector<Operation *> work;
  if (loss && loss.getDefiningOp())
    work.push_back(loss.getDefiningOp());
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *d = v.getDefiningOp())
        work.push_back(d);
  }
  auto stageOf = [&](Operation *op) -> int64_t {
    auto a = op->getAttrOfType<IntegerAttr>(kStageAttr);
    return a ? a.getInt() : -1;
  };
  for (Operation &op : body.without_terminator()) {
    int64_t s = stageOf(&op);
    if (s >= S || (s < 0 && op.hasAttr(kStageAttr))) {
      op.emitError("cnn-pipeline-split: cnn.stage out of range [0, ")
          << S << ")";
      return signalPassFailure();
    }
    // An op without a stage is copied where it is read: only ops reading
    // nothing but arguments and other such ops may lack one.
    if (s < 0)
      for (Value v : op.getOperands())
        if (Operation *d = v.getDefiningOp(); d && stageOf(d) >= 0) {
          op.emitError("cnn-pipeline-split: this op has no cnn.stage but "
                       "reads a value of stage ")
              << stageOf(d) << " (run cnn-pipeline-partition)";
          return signalPassFailure();
        }
  }

  // Which function of stage b first reads a value made elsewhere: the
  // forward one if a forward op of b reads it (the backward one then gets
  // it as a saved value), else the backward one.
  auto readInForward = [&](Value v, int64_t b) {
    return llvm::any_of(v.getUsers(), [&](Operation *u) {
      return stageOf(u) == b && forward.count(u);
    });
  };
  // Transfers join adjacent stages only (the runtime links neighbouring
  // GPUs, and interleaved, adjacent virtual stages): a value made on stage a
  // and read k > 1 stages away (a U-Net's long skip connection across
  // several cuts) is relayed, each stage between receiving it from the
  // stage before and sending it on. `span[r]`: the lowest and the highest
  // stage that read r (or make it); every stage of the span but r's maker
  // receives it, with one tag per (value, receiving stage), numbered in
  // schedule order. A receiver takes r from its neighbour towards the
  // maker (`sourceOf`).
  llvm::DenseMap<std::pair<Value, int64_t>, int64_t> tags;
  llvm::DenseMap<Value, std::pair<int64_t, int64_t>> span; // lo, hi stage
  int64_t nextTag = 0;
  for (Operation &op : body.without_terminator()) {
    int64_t a = stageOf(&op);
    if (a < 0)
      continue;
    for (Value r : op.getResults()) {
      int64_t lo = a, hi = a;
      for (Operation *u : r.getUsers())
        if (int64_t b = stageOf(u); b >= 0) {
          lo = std::min(lo, b);
          hi = std::max(hi, b);
        }
      if (lo == hi)
        continue;
      span[r] = {lo, hi};
      for (int64_t m = lo; m <= hi; ++m)
        if (m != a)
          tags[{r, m}] = nextTag++;
    }
  }
  auto sourceOf = [&](Value r, int64_t m) {
    return m > stageOf(r.getDefiningOp()) ? m - 1 : m + 1;
  };
  // Whether stage m (a receiver of r) receives it in its forward function:
  // when a forward op of m or of a stage beyond m (away from r's stage)
  // reads it, since m's relay then runs in the forward pass too.
  auto recvInForward = [&](Value r, int64_t m) {
    auto it = span.find(r);
    if (it == span.end())
      return false;
    int64_t a = stageOf(r.getDefiningOp());
    int64_t from = m, to = m > a ? it->second.second : it->second.first;
    for (int64_t b = std::min(from, to); b <= std::max(from, to); ++b)
      if (readInForward(r, b))
        return true;
    return false;
  };

  OpBuilder mb(ctx);
  mb.setInsertionPoint(step);
  std::vector<StageFn> fwdFns(S), bwdFns(S);
  auto make = [&](StageFn &sf, int64_t s, bool isForward) {
    std::string name =
        ("stage" + Twine(s) + (isForward ? "_forward" : "_backward")).str();
    sf.fn = func::FuncOp::create(mb, step.getLoc(), name,
                                 FunctionType::get(ctx, {}, {}));
    sf.fn->setAttr(kPipelineStageAttr, mb.getI64IntegerAttr(s));
    sf.block = sf.fn.addEntryBlock();
  };
  for (int64_t s = 0; s < S; ++s) {
    make(fwdFns[s], s, true);
    make(bwdFns[s], s, false);
  }

  // The value `v` of @train_step inside `sf` (stage s), materialized at the
  // end of its block: an argument, a copy of a replicated op, a value of
  // the function itself, one saved by the forward function, or a recv.
  std::function<FailureOr<Value>(StageFn &, int64_t, bool, Value)> get =
      [&](StageFn &sf, int64_t s, bool isForward, Value v) -> FailureOr<Value> {
    if (Value m = sf.map.lookupOrNull(v))
      return m;
    OpBuilder b = OpBuilder::atBlockEnd(sf.block);
    if (auto a = dyn_cast<BlockArgument>(v)) {
      BlockArgument na = sf.block->addArgument(a.getType(), a.getLoc());
      NamedAttrList attrs(step.getArgAttrDict(a.getArgNumber()));
      attrs.set("cnn.pipeline_arg", b.getI64IntegerAttr(a.getArgNumber()));
      sf.argAttrs.push_back(attrs.getDictionary(ctx));
      sf.map.map(v, na);
      return Value(na);
    }
    Operation *d = v.getDefiningOp();
    int64_t a = stageOf(d);
    if (a < 0) {
      // Replicated: copy it (and what it reads) here.
      for (Value o : d->getOperands())
        if (failed(get(sf, s, isForward, o)))
          return failure();
      b.setInsertionPointToEnd(sf.block);
      b.clone(*d, sf.map);
      return sf.map.lookup(v);
    }
    if (a == s) {
      if (isForward || !forward.count(d))
        return d->emitError("cnn-pipeline-split: a value is read before "
                            "its definition in the stage's schedule"),
               failure();
      // Kept by the forward function for the backward one.
      BlockArgument na = sf.block->addArgument(v.getType(), v.getLoc());
      sf.argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          "cnn.pipeline_saved", b.getI64IntegerAttr(sf.saved.size()))));
      sf.saved.insert({v, na});
      sf.map.map(v, na);
      return Value(na);
    }
    // Made on stage a: received, in the forward function if a forward op
    // of this stage (or of one it relays v to) reads it (the backward
    // function then takes it from the forward one).
    if (!isForward && recvInForward(v, s)) {
      BlockArgument na = sf.block->addArgument(v.getType(), v.getLoc());
      sf.argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          "cnn.pipeline_saved", b.getI64IntegerAttr(sf.saved.size()))));
      sf.saved.insert({v, na});
      sf.map.map(v, na);
      return Value(na);
    }
    auto it = tags.find({v, s});
    if (it == tags.end())
      return d->emitError("cnn-pipeline-split: no transfer of this value to "
                          "stage ")
                 << s,
             failure();
    Value r = RecvOp::create(b, v.getLoc(), v.getType(),
                             b.getI64IntegerAttr(sourceOf(v, s)),
                             b.getI64IntegerAttr(it->second),
                             /*event=*/IntegerAttr(), /*link=*/IntegerAttr());
    sf.map.map(v, r);
    return r;
  };

  // The sends of r from stage s (its maker or a relay): to the receivers
  // next to s that take it from s, in tag order.
  auto sendOn = [&](OpBuilder &b, Location loc, Value r, Value here,
                    int64_t s) {
    SmallVector<std::pair<int64_t, int64_t>> sends; // (tag, peer)
    for (int64_t peer : {s - 1, s + 1})
      if (auto it = tags.find({r, peer});
          it != tags.end() && sourceOf(r, peer) == s)
        sends.push_back({it->second, peer});
    llvm::sort(sends);
    for (auto [tag, peer] : sends)
      SendOp::create(b, loc, here, b.getI64IntegerAttr(peer),
                     b.getI64IntegerAttr(tag), /*event=*/IntegerAttr(),
                     /*link=*/IntegerAttr());
  };

  // Stage m passes r on: receives it from the stage before (towards r's
  // maker) and sends it to the next one.
  auto relay = [&](Value r, int64_t m, bool isForward) -> LogicalResult {
    StageFn &sf = isForward ? fwdFns[m] : bwdFns[m];
    FailureOr<Value> here = get(sf, m, isForward, r);
    if (failed(here))
      return failure();
    OpBuilder b = OpBuilder::atBlockEnd(sf.block);
    sendOn(b, r.getLoc(), r, *here, m);
    ++numRelayed;
    return success();
  };

  // The ops, in @train_step's order: forward ops into the forward
  // functions, the others into the backward ones; a send after each value
  // another stage reads; where a value is made, the relays that pass it on
  // (a receive and a send on each stage between, in the pass that stage
  // receives it in).
  for (bool isForward : {true, false}) {
    for (Operation &op : body.without_terminator()) {
      int64_t s = stageOf(&op);
      if (s < 0)
        continue;
      if ((forward.count(&op) != 0) == isForward) {
        StageFn &sf = isForward ? fwdFns[s] : bwdFns[s];
        for (Value v : op.getOperands())
          if (failed(get(sf, s, isForward, v)))
            return signalPassFailure();
        OpBuilder b = OpBuilder::atBlockEnd(sf.block);
        Operation *c = b.clone(op, sf.map);
        c->removeAttr(kStageAttr);
        for (Value r : op.getResults())
          sendOn(b, op.getLoc(), r, sf.map.lookup(r), s);
      }
      for (Value r : op.getResults()) {
        auto it = span.find(r);
        if (it == span.end())
          continue;
        auto [lo, hi] = it->second;
        for (int64_t m = s + 1; m < hi; ++m)
          if (recvInForward(r, m) == isForward && failed(relay(r, m, isForward)))
            return signalPassFailure();
        for (int64_t m = s - 1; m > lo; --m)
          if (recvInForward(r, m) == isForward && failed(relay(r, m, isForward)))
            return signalPassFailure();
      }
    }
  }

  // @train_step's results: each returned by the function that makes it
  // (arguments and replicated values passed through by stage 0's backward).
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    Operation *d = v.getDefiningOp();
    int64_t s = d ? stageOf(d) : -1;
    bool isForward = d && s >= 0 && forward.count(d);
    StageFn &sf = s < 0 ? bwdFns[0] : isForward ? fwdFns[s] : bwdFns[s];
    FailureOr<Value> m = get(sf, std::max<int64_t>(s, 0), isForward, v);
    if (failed(m))
      return signalPassFailure();
    sf.results.push_back(*m);
    sf.resultIndices.push_back(i);
  }
  // Forward functions return what their backward functions kept.
  for (int64_t s = 0; s < S; ++s)
    for (auto &[v, arg] : bwdFns[s].saved)
      fwdFns[s].results.push_back(fwdFns[s].map.lookup(v));

  Builder b(ctx);
  for (std::vector<StageFn> *fns : {&fwdFns, &bwdFns})
    for (StageFn &sf : *fns) {
      OpBuilder rb = OpBuilder::atBlockEnd(sf.block);
      func::ReturnOp::create(rb, step.getLoc(), sf.results);
      sf.fn.setType(FunctionType::get(ctx, sf.block->getArgumentTypes(),
                                      ValueRange(sf.results).getTypes()));
      sf.fn.setAllArgAttrs(sf.argAttrs);
      SmallVector<DictionaryAttr> resAttrs;
      for (int64_t i : sf.resultIndices)
        resAttrs.push_back(step.getResultAttrDict(i) ? step.getResultAttrDict(i)
                                                     : b.getDictionaryAttr({}));
      while (resAttrs.size() < sf.results.size())
        resAttrs.push_back(b.getDictionaryAttr({}));
      sf.fn.setAllResultAttrs(resAttrs);
      sf.fn->setAttr("cnn.pipeline_results",
                     b.getDenseI64ArrayAttr(sf.resultIndices));
    }
  numTransfers = nextTag;
  if (sendsFirst)
    for (std::vector<StageFn> *fns : {&fwdFns, &bwdFns})
      for (StageFn &sf : *fns)
        numHoisted += hoistSendSlices(sf.block);
  step.erase();
}

FailureOr<OwningOpRef<ModuleOp>>
cnnc::splitIntoPipelineStages(ModuleOp module,
                              const CNNPipelinePartitionOptions &po,
                              raw_ostream *plan, StringRef schedule,
                              const CNNPipelineSplitOptions &splitOptions) {
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  PassManager pm(module.getContext());
  pm.addPass(createCNNPipelinePartition(po));
  pm.addPass(createCNNPipelineSplit(splitOptions));
  if (!schedule.empty()) {
    CNNPipelineScheduleOptions so;
    so.schedule = schedule.str();
    pm.addPass(createCNNPipelineSchedule(so));
  }
  if (failed(pm.run(*copy)))
    return failure();
  if (plan)
    (void)printPipelinePlan(*copy, *plan);
  return copy;
}
