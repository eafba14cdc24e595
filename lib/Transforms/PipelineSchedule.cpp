//===- PipelineSchedule.cpp - cnn-pipeline-schedule: one function per stage
//===//
//
// Replaces cnn-pipeline-split's @stage<s>_forward / @stage<s>_backward by one
// @stage<s>_step per stage that runs the plan's M micro-batches in the
// schedule's order (GPipe or 1F1B), so that a stage is a single training
// step a GPU target can plan and capture as one graph, with its sends and
// receives in the order its peers expect. See the pass description in
// Passes.td and docs/pipeline-parallel.md.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Transforms/Passes.h"
#include "cnnc/Transforms/PipelinePlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <deque>
#include <map>

namespace cnnc {
#define GEN_PASS_DEF_CNNPIPELINESCHEDULE
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

struct SchedulePass : public cnnc::impl::CNNPipelineScheduleBase<SchedulePass> {
  using CNNPipelineScheduleBase::CNNPipelineScheduleBase;
  void runOnOperation() override;
};

/// The name under which a value persists from one micro-batch to the next
/// (a parameter, BN buffer or optimizer state), or "" for none.
std::string persistentName(DictionaryAttr d) {
  if (!d)
    return "";
  for (const char *key : {kParamAttr, kBufferAttr, kStateAttr})
    if (auto n = dyn_cast_or_null<StringAttr>(d.get(key)))
      return (Twine(key) + ":" + n.getValue()).str();
  return "";
}

} // namespace

/// One body of a stage's step: the forward or backward pass of chunk
/// `chunk` (virtual stage s + chunk x S) for micro-batch `micro`.
struct ScheduledBody {
  bool isForward;
  int64_t chunk, micro;
};

/// The order of stage `s`'s micro-batch bodies: (is forward, micro-batch).
static std::vector<std::pair<bool, int64_t>>
scheduleOrder(bool oneFOneB, int64_t s, int64_t S, int64_t M) {
  std::vector<std::pair<bool, int64_t>> order;
  if (!oneFOneB) {
    for (int64_t m = 0; m < M; ++m)
      order.push_back({true, m});
    for (int64_t m = 0; m < M; ++m)
      order.push_back({false, m});
    return order;
  }
  // 1F1B: stage s keeps at most S - s micro-batches in flight.
  int64_t warm = std::min(S - s, M), f = 0, b = 0;
  for (; f < warm; ++f)
    order.push_back({true, f});
  while (b < M) {
    order.push_back({false, b++});
    if (f < M)
      order.push_back({true, f++});
  }
  return order;
}

/// Stage `s`'s bodies over its `V` chunks. V = 1: scheduleOrder. V > 1
/// (interleaved GPipe, the breadth-first order): every micro-batch's
/// forward pass through chunk 0, then chunk 1, ..., then the backward
/// passes from the last chunk to the first, micro-batches in order within
/// each. Chunk c + 1's first forward on stage 0 needs micro-batch 0 through
/// the S virtual stages before it, which M >= S micro-batches of chunk c
/// cover, so a stage idles S - 1 virtual-stage slots per phase: the bubble
/// is (S-1)/(V*M+S-1). With S >= 3 every link carries one direction per
/// phase; with S = 2 the runtime gives each direction between the two GPUs
/// a link of its own. Both ends order a link's tensors by (phase, chunk,
/// micro-batch).
static std::vector<ScheduledBody> stageBodies(bool oneFOneB, int64_t s,
                                              int64_t S, int64_t V,
                                              int64_t M) {
  std::vector<ScheduledBody> bodies;
  if (V == 1) {
    for (auto [fwd, m] : scheduleOrder(oneFOneB, s, S, M))
      bodies.push_back({fwd, 0, m});
    return bodies;
  }
  for (int64_t c = 0; c < V; ++c)
    for (int64_t m = 0; m < M; ++m)
      bodies.push_back({true, c, m});
  for (int64_t c = V - 1; c >= 0; --c)
    for (int64_t m = 0; m < M; ++m)
      bodies.push_back({false, c, m});
  return bodies;
}

/// A stage receives from a peer in the order the peer sends. The split
/// receives a tensor where the receiving stage first needs it, which may be
/// later than another tensor the peer sends after it: a forward value that
/// only a backward pass reads (a BatchNorm's or ReLU's saved input beyond a
/// cut) is sent in the sender's forward pass and was received in the
/// receiver's backward pass, after the next micro-batch's activation, so
/// NCCL (which pairs by order, not by tag) would have delivered one into
/// the other. Receives take no operands, so each may rise: walking the
/// peer's send order backwards, a receive after the one of the next tensor
/// moves just before it. Where the original order waited for a later
/// tensor, the peer had sent the earlier one first, so no receive waits
/// longer than before.
static void matchReceiveOrder(MutableArrayRef<func::FuncOp> steps) {
  // (from, to) -> the tags `from` sends, in order.
  std::map<std::pair<int64_t, int64_t>, SmallVector<int64_t>> sent;
  for (auto [s, fn] : llvm::enumerate(steps))
    fn.walk([&](SendOp snd) {
      sent[{(int64_t)s, (int64_t)snd.getPeer()}].push_back(
          (int64_t)snd.getTag());
    });
  for (auto [s, fn] : llvm::enumerate(steps)) {
    // Per peer and tag, this stage's receives in block order.
    std::map<int64_t, std::map<int64_t, std::deque<RecvOp>>> recvs;
    fn.walk([&](RecvOp rcv) {
      recvs[(int64_t)rcv.getPeer()][(int64_t)rcv.getTag()].push_back(rcv);
    });
    for (auto &[peer, byTag] : recvs) {
      auto it = sent.find({peer, (int64_t)s});
      if (it == sent.end())
        continue;
      // The receives in the peer's send order (a tag's k-th send meets its
      // k-th receive); a count mismatch is checkTransferOrder's error.
      SmallVector<RecvOp> order;
      for (int64_t tag : it->second) {
        std::deque<RecvOp> &q = byTag[tag];
        if (q.empty())
          return;
        order.push_back(q.front());
        q.pop_front();
      }
      for (int64_t k = (int64_t)order.size() - 2; k >= 0; --k)
        if (order[k + 1]->isBeforeInBlock(order[k]))
          order[k]->moveBefore(order[k + 1]);
    }
  }
}

/// NCCL pairs the transfers of two stages by their order: the tags stage a
/// sends to stage b, in a's block order, must be the tags b receives from a
/// in b's. The schedules are built to hold this; the check makes a
/// schedule that does not an error here instead of a hang or a wrong
/// tensor on the GPUs.
static LogicalResult checkTransferOrder(MutableArrayRef<func::FuncOp> steps) {
  std::map<std::pair<int64_t, int64_t>, SmallVector<int64_t>> sent, received;
  for (auto [s, fn] : llvm::enumerate(steps))
    fn.walk([&](Operation *op) {
      if (auto snd = dyn_cast<SendOp>(op))
        sent[{(int64_t)s, (int64_t)snd.getPeer()}].push_back(
            (int64_t)snd.getTag());
      else if (auto rcv = dyn_cast<RecvOp>(op))
        received[{(int64_t)rcv.getPeer(), (int64_t)s}].push_back(
            (int64_t)rcv.getTag());
    });
  for (auto &[link, tags] : sent) {
    auto it = received.find(link);
    if (it == received.end() || it->second != tags)
      return steps[link.first].emitError("cnn-pipeline-schedule: stage ")
             << link.first << " sends " << tags.size() << " tensor(s) to stage "
             << link.second << " in an order its receives do not follow";
  }
  for (auto &[link, tags] : received)
    if (!sent.count(link))
      return steps[link.second].emitError("cnn-pipeline-schedule: stage ")
             << link.second << " receives from stage " << link.first
             << ", which sends it nothing";
  return success();
}

void SchedulePass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  auto plan = module->getAttrOfType<DictionaryAttr>(kPipelineAttr);
  auto stagesAttr = plan ? plan.getAs<IntegerAttr>("stages") : IntegerAttr();
  auto microAttr =
      plan ? plan.getAs<IntegerAttr>("micro_batches") : IntegerAttr();
  if (!stagesAttr || !microAttr) {
    module.emitError("cnn-pipeline-schedule: needs the cnn.pipeline plan "
                     "(stages, micro_batches) of cnn-pipeline-partition");
    return signalPassFailure();
  }
  if (schedule != "gpipe" && schedule != "1f1b") {
    module.emitError("cnn-pipeline-schedule: schedule '")
        << schedule << "' is not one of gpipe, 1f1b";
    return signalPassFailure();
  }
  const int64_t S = stagesAttr.getInt(), M = microAttr.getInt();
  const int64_t V = pipelineChunks(plan);
  if (M < 1) {
    module.emitError("cnn-pipeline-schedule: micro_batches ")
        << M << " is not a positive count";
    return signalPassFailure();
  }
  if (V > 1 && schedule != "gpipe") {
    module.emitError("cnn-pipeline-schedule: interleaved stages (chunks ")
        << V << ") run the gpipe schedule only, not '" << schedule << "'";
    return signalPassFailure();
  }
  // The virtual stages' functions (the stages' unless interleaved).
  std::vector<func::FuncOp> fwd(S * V), bwd(S * V);
  for (int64_t s = 0; s < S * V; ++s) {
    fwd[s] = module.lookupSymbol<func::FuncOp>(
        ("stage" + Twine(s) + "_forward").str());
    bwd[s] = module.lookupSymbol<func::FuncOp>(
        ("stage" + Twine(s) + "_backward").str());
    if (!fwd[s] || !bwd[s]) {
      module.emitError("cnn-pipeline-schedule: stage ")
          << s << " has no @stage" << s << "_forward or @stage" << s
          << "_backward (run cnn-pipeline-split first)";
      return signalPassFailure();
    }
  }

  OpBuilder mb(ctx);
  mb.setInsertionPoint(fwd[0]);
  Builder b(ctx);
  SmallVector<func::FuncOp> steps;
  // The data arguments (image, labels) of any stage, by @train_step
  // argument: every stage takes them, batched over the M micro-batches,
  // whether it reads them or not, so each stage reads the same batch
  // stream (the runtime's loader contract: one image and one label tensor).
  std::map<int64_t, std::pair<RankedTensorType, DictionaryAttr>> data;
  for (func::FuncOp f : llvm::concat<func::FuncOp>(fwd, bwd))
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      DictionaryAttr d = f.getArgAttrDict(i);
      auto index = f.getArgAttrOfType<IntegerAttr>(i, "cnn.pipeline_arg");
      if (!index || !d || !(d.get(kInputAttr) || d.get(kLabelsAttr)))
        continue;
      auto t = dyn_cast<RankedTensorType>(f.getArgument(i).getType());
      if (!t || t.getRank() < 1 || ShapedType::isDynamic(t.getDimSize(0))) {
        f.emitError("cnn-pipeline-schedule: the data argument #")
            << i << " has no static batch dimension";
        return signalPassFailure();
      }
      SmallVector<int64_t> shape(t.getShape());
      shape[0] *= M;
      data[index.getInt()] = {
          RankedTensorType::get(shape, t.getElementType(), t.getEncoding()), d};
    }
  for (int64_t s = 0; s < S; ++s) {
    Location loc = fwd[s].getLoc();
    auto fn =
        func::FuncOp::create(mb, loc, ("stage" + Twine(s) + "_step").str(),
                             FunctionType::get(ctx, {}, {}));
    fn->setAttr(kPipelineStageAttr, b.getI64IntegerAttr(s));
    fn->setAttr("cnn.pipeline_schedule", b.getStringAttr(schedule));
    if (V > 1)
      fn->setAttr("cnn.pipeline_chunks", b.getI64IntegerAttr(V));
    steps.push_back(fn);
    Block *block = fn.addEntryBlock();
    OpBuilder ib = OpBuilder::atBlockEnd(block);
    SmallVector<DictionaryAttr> argAttrs;

    // @train_step argument `index` for micro-batch `m` (-1: shared).
    std::map<std::pair<int64_t, int64_t>, Value> args;
    std::map<int64_t, Value> batched;
    for (auto &[index, td] : data) {
      batched[index] = block->addArgument(td.first, loc);
      argAttrs.push_back(td.second);
    }
    // The current value of each persistent name.
    std::map<std::string, Value> current;
    Value stepK, stepKM;
    std::map<int64_t, Value> microStep;
    auto argument = [&](func::FuncOp f, unsigned i, int64_t m) -> Value {
      DictionaryAttr d = f.getArgAttrDict(i);
      int64_t index =
          f.getArgAttrOfType<IntegerAttr>(i, "cnn.pipeline_arg").getInt();
      std::string name = persistentName(d);
      if (!name.empty())
        if (auto it = current.find(name); it != current.end())
          return it->second;
      bool perMicro = d.get(kInputAttr) || d.get(kLabelsAttr);
      auto key = std::make_pair(index, perMicro ? m : int64_t(-1));
      if (d.get(kStepAttr)) {
        // The function takes the pipeline step k; micro-batch m is
        // accumulation's micro-step k * M - (M - 1 - m).
        if (!stepK) {
          stepK = block->addArgument(f.getArgument(i).getType(), loc);
          argAttrs.push_back(d);
          OpBuilder::InsertionGuard g(ib);
          ib.setInsertionPointToStart(block);
          stepKM = ScaleOp::create(ib, loc, stepK.getType(), stepK,
                                   b.getF32FloatAttr(float(M)));
        }
        Value &v = microStep[m];
        if (!v) {
          if (m == M - 1) {
            v = stepKM;
          } else {
            auto t = cast<RankedTensorType>(stepK.getType());
            Value c = ConstantOp::create(
                ib, loc, t, DenseElementsAttr::get(t, float(M - 1 - m)));
            v = SubOp::create(ib, loc, stepKM, c);
          }
        }
        return v;
      }
      Value &v = args[key];
      if (!v && perMicro) {
        // Micro-batch m of the batched image or labels.
        v = MicroBatchOp::create(ib, loc, f.getArgument(i).getType(),
                                 batched.at(index), b.getI64IntegerAttr(m),
                                 b.getI64IntegerAttr(M));
      } else if (!v) {
        v = block->addArgument(f.getArgument(i).getType(), loc);
        argAttrs.push_back(d);
      }
      if (!name.empty())
        current[name] = v;
      return v;
    };

    // The activations each (chunk, micro-batch)'s backward pass reads.
    std::vector<SmallVector<Value>> kept(M * V);
    // The @train_step results this stage makes: index -> (value, attrs).
    std::map<int64_t, std::pair<Value, DictionaryAttr>> results;
    SmallVector<std::pair<Value, DictionaryAttr>> losses;
    for (auto [isForward, c, m] :
         stageBodies(schedule == "1f1b", s, S, V, M)) {
      const int64_t v = s + c * S; // the virtual stage
      func::FuncOp f = isForward ? fwd[v] : bwd[v];
      SmallVector<Value> &keptHere = kept[c * M + m];
      IRMapping map;
      for (unsigned i = 0; i < f.getNumArguments(); ++i) {
        if (f.getArgAttr(i, "cnn.pipeline_arg")) {
          map.map(f.getArgument(i), argument(f, i, m));
        } else if (auto k =
                       f.getArgAttrOfType<IntegerAttr>(i, "cnn.pipeline_saved");
                   k && k.getInt() < (int64_t)keptHere.size()) {
          map.map(f.getArgument(i), keptHere[k.getInt()]);
        } else {
          f.emitError("cnn-pipeline-schedule: argument #")
              << i << " has neither cnn.pipeline_arg nor a cnn.pipeline_saved "
              << "that the forward function returns";
          return signalPassFailure();
        }
      }
      for (Operation &op : f.getBody().front().without_terminator()) {
        // Interleaved: a tensor between virtual stages that are not
        // adjacent would share a link with the chunk transitions in both
        // directions of a phase, or join two chunks of one stage; neither
        // is built (the link-stream model of the emitted transfers,
        // test_pipeline.py, deadlocked on such steps). cnn-pipeline-split
        // relays a skip across cuts through the virtual stages between, so
        // only a hand-written split gets here.
        if (V > 1 && isa<SendOp, RecvOp>(op)) {
          int64_t peer = transferPeer(&op);
          if (peer != v - 1 && peer != v + 1) {
            op.emitError("cnn-pipeline-schedule: interleaved stages pass "
                         "tensors between adjacent virtual stages only; this "
                         "one crosses from virtual stage ")
                << std::min(v, peer) << " to " << std::max(v, peer)
                << " (a tensor that skips stages; cnn-pipeline-split relays "
                   "such tensors through the virtual stages between)";
            return signalPassFailure();
          }
        }
        Operation *copy = ib.clone(op, map);
        if (auto snd = dyn_cast<SendOp>(copy))
          snd.setPeer(int64_t(snd.getPeer()) % S);
        else if (auto rcv = dyn_cast<RecvOp>(copy))
          rcv.setPeer(int64_t(rcv.getPeer()) % S);
      }
      auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
      auto idx = f->getAttrOfType<DenseI64ArrayAttr>("cnn.pipeline_results");
      size_t n = idx ? idx.size() : 0;
      if (n > ret.getNumOperands()) {
        f.emitError("cnn-pipeline-schedule: cnn.pipeline_results lists ")
            << n << " results of " << ret.getNumOperands();
        return signalPassFailure();
      }
      for (size_t k = 0; k < n; ++k) {
        Value v = map.lookupOrDefault(ret.getOperand(k));
        DictionaryAttr d = f.getResultAttrDict(k);
        if (d && d.get(kLossAttr)) {
          NamedAttrList attrs(d);
          attrs.set("cnn.micro_batch", b.getI64IntegerAttr(m));
          losses.push_back({v, attrs.getDictionary(ctx)});
          continue;
        }
        results[idx[k]] = {v, d ? d : b.getDictionaryAttr({})};
        std::string name = persistentName(d);
        if (!name.empty())
          current[name] = v;
      }
      if (isForward)
        for (Value r : ret.getOperands().drop_front(n))
          keptHere.push_back(map.lookupOrDefault(r));
      else
        keptHere.clear(); // the activations die with their backward pass
    }

    SmallVector<Value> outs;
    SmallVector<DictionaryAttr> resAttrs;
    SmallVector<int64_t> resIdx;
    for (auto &[v, d] : losses) {
      outs.push_back(v);
      resAttrs.push_back(d);
    }
    for (auto &[i, vd] : results) {
      outs.push_back(vd.first);
      resAttrs.push_back(vd.second);
      resIdx.push_back(i);
    }
    func::ReturnOp::create(ib, loc, outs);
    fn.setType(FunctionType::get(ctx, block->getArgumentTypes(),
                                 ValueRange(outs).getTypes()));
    fn.setAllArgAttrs(argAttrs);
    fn.setAllResultAttrs(resAttrs);
    fn->setAttr("cnn.pipeline_results", b.getDenseI64ArrayAttr(resIdx));
  }
  for (int64_t s = 0; s < S * V; ++s) {
    fwd[s].erase();
    bwd[s].erase();
  }
  matchReceiveOrder(steps);
  if (failed(checkTransferOrder(steps)))
    return signalPassFailure();
}
