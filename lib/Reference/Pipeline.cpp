//===- Pipeline.cpp - pipeline stages on the reference interpreter --------===//
#include "cnnc/Reference/Pipeline.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace cnnc::reference {

namespace {
thread_local PipelineMailbox *mailbox = nullptr;
} // namespace

PipelineMailbox *currentMailbox() { return mailbox; }
void setCurrentMailbox(PipelineMailbox *m) { mailbox = m; }

void PipelineMailbox::send(int64_t from, int64_t to, int64_t tag, Tensor t) {
  fifo_[{from, to, tag}].push_back(std::move(t));
}

bool PipelineMailbox::recv(int64_t from, int64_t to, int64_t tag, Tensor &out,
                           std::string &err) {
  auto it = fifo_.find({from, to, tag});
  if (it == fifo_.end() || it->second.empty()) {
    err = llvm::formatv("stage {0} waits for tag {1} from stage {2}, which "
                        "has not sent it (the schedule runs every send "
                        "before its recv: the split is broken)",
                        to, tag, from)
              .str();
    return false;
  }
  out = std::move(it->second.front());
  it->second.pop_front();
  return true;
}

size_t PipelineMailbox::pending() const {
  size_t n = 0;
  for (auto &[key, q] : fifo_)
    n += q.size();
  return n;
}

namespace {

/// The argument list of stage function `f` for one micro-batch: its
/// @train_step arguments from `args`, then what its forward function kept.
FailureOr<std::vector<Tensor>> stageArgs(func::FuncOp f,
                                         const std::vector<Tensor> &args,
                                         const std::vector<Tensor> &saved) {
  std::vector<Tensor> out;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    if (auto a = f.getArgAttrOfType<IntegerAttr>(i, "cnn.pipeline_arg")) {
      if (a.getInt() >= (int64_t)args.size())
        return f.emitError("pipeline: argument #")
                   << i << " is @train_step's #" << a.getInt() << " of "
                   << args.size(),
               failure();
      out.push_back(args[a.getInt()]);
    } else if (auto s =
                   f.getArgAttrOfType<IntegerAttr>(i, "cnn.pipeline_saved")) {
      if (s.getInt() >= (int64_t)saved.size())
        return f.emitError("pipeline: argument #")
                   << i << " is kept value #" << s.getInt()
                   << " but the forward "
                   << "function returned " << saved.size(),
               failure();
      out.push_back(saved[s.getInt()]);
    } else {
      return f.emitError("pipeline: argument #")
                 << i << " has neither cnn.pipeline_arg nor cnn.pipeline_saved",
             failure();
    }
  }
  return out;
}

} // namespace

FailureOr<std::vector<Tensor>>
runPipelineStep(ModuleOp module, ArrayRef<std::vector<Tensor>> microArgs,
                std::vector<float> *losses) {
  auto plan = module->getAttrOfType<DictionaryAttr>("cnn.pipeline");
  auto stagesAttr = plan ? plan.getAs<IntegerAttr>("stages") : IntegerAttr();
  if (!stagesAttr)
    return module.emitError("pipeline: the module has no cnn.pipeline plan"),
           failure();
  const int64_t S = stagesAttr.getInt();
  const size_t M = microArgs.size();
  std::vector<func::FuncOp> fwd(S), bwd(S);
  for (int64_t s = 0; s < S; ++s) {
    fwd[s] = module.lookupSymbol<func::FuncOp>(
        ("stage" + llvm::Twine(s) + "_forward").str());
    bwd[s] = module.lookupSymbol<func::FuncOp>(
        ("stage" + llvm::Twine(s) + "_backward").str());
    if (!fwd[s] || !bwd[s])
      return module.emitError("pipeline: stage ")
                 << s << " has no forward or backward function (run "
                 << "cnn-pipeline-split)",
             failure();
  }
  if (M == 0)
    return module.emitError("pipeline: no micro-batch"), failure();
  // Which @train_step argument each result updates: the argument with the
  // same cnn.param / cnn.buffer / cnn.state name (stage functions keep the
  // attributes of both).
  std::map<std::string, int64_t> argOfName;
  int64_t numResults = 0;
  for (func::FuncOp f : llvm::concat<func::FuncOp>(fwd, bwd)) {
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (auto a = f.getArgAttrOfType<IntegerAttr>(i, "cnn.pipeline_arg"))
        for (const char *key :
             {cnn::kParamAttr, cnn::kBufferAttr, cnn::kStateAttr})
          if (auto n = f.getArgAttrOfType<StringAttr>(i, key))
            argOfName[n.str()] = a.getInt();
    if (auto r = f->getAttrOfType<DenseI64ArrayAttr>("cnn.pipeline_results"))
      for (int64_t i : r.asArrayRef())
        numResults = std::max(numResults, i + 1);
  }
  std::vector<Tensor> results(numResults);
  // The persistent arguments as the micro-batches update them.
  std::vector<Tensor> state = microArgs.front();
  auto absorb = [&](func::FuncOp f, std::vector<Tensor> &out,
                    size_t m) -> std::vector<Tensor> {
    auto idx = f->getAttrOfType<DenseI64ArrayAttr>("cnn.pipeline_results");
    size_t k = 0;
    for (; idx && k < (size_t)idx.size(); ++k) {
      results[idx[k]] = out[k];
      DictionaryAttr d = f.getResultAttrDict(k);
      if (d && d.get(cnn::kLossAttr) && losses)
        (*losses)[m] = out[k].data.empty() ? 0.0f : out[k].data[0];
      for (const char *key :
           {cnn::kParamAttr, cnn::kBufferAttr, cnn::kStateAttr})
        if (auto n = d ? dyn_cast_or_null<StringAttr>(d.get(key)) : nullptr)
          if (auto it = argOfName.find(n.str()); it != argOfName.end())
            state[it->second] = out[k];
    }
    return std::vector<Tensor>(out.begin() + k, out.end());
  };
  auto argsFor = [&](size_t m) {
    // Micro-batch m's own arguments (image, labels, step, lr); the
    // persistent ones as they stand now.
    std::vector<Tensor> a = microArgs[m];
    for (auto &[name, i] : argOfName)
      a[i] = state[i];
    return a;
  };
  if (losses)
    losses->assign(M, 0.0f);
  PipelineMailbox box;
  PipelineMailbox *outer = currentMailbox();
  setCurrentMailbox(&box);
  struct Restore {
    PipelineMailbox *m;
    ~Restore() { setCurrentMailbox(m); }
  } restore{outer};
  // GPipe: every forward, then every backward. The parameters do not change
  // until the last micro-batch's backward (accumulation applies the update
  // there), so the forwards all read the step's weights, as the
  // unpartitioned micro-steps do.
  std::vector<std::vector<std::vector<Tensor>>> kept(
      M, std::vector<std::vector<Tensor>>(S));
  for (size_t m = 0; m < M; ++m)
    for (int64_t s = 0; s < S; ++s) {
      auto a = stageArgs(fwd[s], argsFor(m), {});
      if (failed(a))
        return failure();
      auto out = run(fwd[s], *a);
      if (failed(out))
        return failure();
      kept[m][s] = absorb(fwd[s], *out, m);
    }
  for (size_t m = 0; m < M; ++m)
    for (int64_t s = S - 1; s >= 0; --s) {
      auto a = stageArgs(bwd[s], argsFor(m), kept[m][s]);
      if (failed(a))
        return failure();
      kept[m][s].clear(); // the activations die with their backward pass
      auto out = run(bwd[s], *a);
      if (failed(out))
        return failure();
      absorb(bwd[s], *out, m);
    }
  if (size_t n = box.pending())
    return module.emitError("pipeline: ")
               << n << " tensor(s) sent but never received in the step",
           failure();
  return results;
}

} // namespace cnnc::reference
