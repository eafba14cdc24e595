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
  if (M < 1) {
    module.emitError("cnn-pipeline-schedule: micro_batches ")
        << M << " is not a positive count";
    return signalPassFailure();
  }
  std::vector<func::FuncOp> fwd(S), bwd(S);
  for (int64_t s = 0; s < S; ++s) {
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

    std::vector<SmallVector<Value>> kept(M);
    // The @train_step results this stage makes: index -> (value, attrs).
    std::map<int64_t, std::pair<Value, DictionaryAttr>> results;
    SmallVector<std::pair<Value, DictionaryAttr>> losses;
    for (auto [isForward, m] : scheduleOrder(schedule == "1f1b", s, S, M)) {
      func::FuncOp f = isForward ? fwd[s] : bwd[s];
      IRMapping map;
      for (unsigned i = 0; i < f.getNumArguments(); ++i) {
        if (f.getArgAttr(i, "cnn.pipeline_arg")) {
          map.map(f.getArgument(i), argument(f, i, m));
        } else if (auto k =
                       f.getArgAttrOfType<IntegerAttr>(i, "cnn.pipeline_saved");
                   k && k.getInt() < (int64_t)kept[m].size()) {
          map.map(f.getArgument(i), kept[m][k.getInt()]);
        } else {
          f.emitError("cnn-pipeline-schedule: argument #")
              << i << " has neither cnn.pipeline_arg nor a cnn.pipeline_saved "
              << "that the forward function returns";
          return signalPassFailure();
        }
      }
      for (Operation &op : f.getBody().front().without_terminator())
        ib.clone(op, map);
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
        for (Value v : ret.getOperands().drop_front(n))
          kept[m].push_back(map.lookupOrDefault(v));
      else
        kept[m].clear(); // the activations die with their backward pass
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
  for (int64_t s = 0; s < S; ++s) {
    fwd[s].erase();
    bwd[s].erase();
  }
}
