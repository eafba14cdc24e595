//===- Pipeline.cpp - pipeline stages on the reference interpreter --------===//
#include "cnnc/Reference/Pipeline.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <set>
#include <thread>

using namespace mlir;

namespace cnnc::reference {

namespace {
thread_local PipelineMailbox *mailbox = nullptr;
} // namespace

PipelineMailbox *currentMailbox() { return mailbox; }
void setCurrentMailbox(PipelineMailbox *m) { mailbox = m; }

void PipelineMailbox::send(int64_t from, int64_t to, int64_t tag, Tensor t) {
  std::lock_guard<std::mutex> lock(mu_);
  fifo_[{from, to, tag}].push_back(std::move(t));
  cv_.notify_all();
}

void PipelineMailbox::setThreads(int threads) {
  std::lock_guard<std::mutex> lock(mu_);
  threads_ = threads;
}

void PipelineMailbox::threadDone() {
  std::lock_guard<std::mutex> lock(mu_);
  --threads_;
  cv_.notify_all();
}

bool PipelineMailbox::recv(int64_t from, int64_t to, int64_t tag, Tensor &out,
                           std::string &err) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&](const std::tuple<int64_t, int64_t, int64_t> &key) {
    auto it = fifo_.find(key);
    return it != fifo_.end() && !it->second.empty();
  };
  const std::tuple<int64_t, int64_t, int64_t> key{from, to, tag};
  // Stages on threads: wait while another stage may still send, that is
  // while one runs or one that waits has its tensor (it wakes and runs on).
  while (threads_ > 0 && !ready(key) &&
         (waiting_ + 1 < threads_ ||
          llvm::any_of(waitingFor_, [&](auto &k) { return ready(k); }))) {
    ++waiting_;
    waitingFor_.insert(key);
    cv_.wait(lock);
    waitingFor_.erase(waitingFor_.find(key));
    --waiting_;
  }
  if (threads_ > 0 && !ready(key)) {
    cv_.notify_all(); // the others wait in vain too
    err = llvm::formatv("stage {0} waits for tag {1} from stage {2}, but "
                        "every other stage is waiting or done (a stage "
                        "failed, or the schedule deadlocks)",
                        to, tag, from)
              .str();
    return false;
  }
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
  std::lock_guard<std::mutex> lock(mu_);
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

/// The stage count of the module's cnn.pipeline plan (cnn-pipeline-partition),
/// or an error on the module when it has none.
FailureOr<int64_t> pipelineStages(ModuleOp module) {
  auto plan = module->getAttrOfType<DictionaryAttr>("cnn.pipeline");
  auto stagesAttr = plan ? plan.getAs<IntegerAttr>("stages") : IntegerAttr();
  if (!stagesAttr)
    return module.emitError("pipeline: the module has no cnn.pipeline plan"),
           failure();
  return stagesAttr.getInt();
}

} // namespace

FailureOr<std::vector<Tensor>>
runPipelineStep(ModuleOp module, ArrayRef<std::vector<Tensor>> microArgs,
                std::vector<float> *losses) {
  FailureOr<int64_t> stages = pipelineStages(module);
  if (failed(stages))
    return failure();
  // The split's functions: one pair per virtual stage (interleaved plans).
  auto chunks = module->getAttrOfType<DictionaryAttr>("cnn.pipeline")
                    .getAs<IntegerAttr>("chunks");
  const int64_t S = *stages * (chunks ? chunks.getInt() : 1);
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

FailureOr<std::vector<Tensor>>
runScheduledPipelineStep(ModuleOp module,
                         ArrayRef<std::vector<Tensor>> microArgs,
                         std::vector<float> *losses) {
  FailureOr<int64_t> stages = pipelineStages(module);
  if (failed(stages))
    return failure();
  const int64_t S = *stages;
  const int64_t M = microArgs.size();
  if (M == 0)
    return module.emitError("pipeline: no micro-batch"), failure();
  std::vector<func::FuncOp> fns(S);
  std::vector<std::vector<Tensor>> ins(S);
  int64_t numResults = 0;
  for (int64_t s = 0; s < S; ++s) {
    fns[s] = module.lookupSymbol<func::FuncOp>(
        ("stage" + llvm::Twine(s) + "_step").str());
    if (!fns[s])
      return module.emitError("pipeline: stage ")
                 << s << " has no @stage" << s
                 << "_step (run cnn-pipeline-schedule)",
             failure();
    func::FuncOp f = fns[s];
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      auto a = f.getArgAttrOfType<IntegerAttr>(i, "cnn.pipeline_arg");
      if (!a || a.getInt() >= (int64_t)microArgs.front().size())
        return f.emitError("pipeline: argument #")
                   << i << " is no @train_step argument",
               failure();
      Tensor t = microArgs.front()[a.getInt()];
      // The image and labels: the M micro-batches' one after the other.
      if (f.getArgAttr(i, cnn::kInputAttr) ||
          f.getArgAttr(i, cnn::kLabelsAttr)) {
        for (int64_t m = 1; m < M; ++m) {
          const Tensor &more = microArgs[m][a.getInt()];
          t.data.insert(t.data.end(), more.data.begin(), more.data.end());
        }
        if (!t.shape.empty())
          t.shape[0] *= M;
      }
      // The step function takes the pipeline step k; the last micro-batch
      // is micro-step k * M.
      if (f.getArgAttr(i, cnn::kStepAttr)) {
        t = microArgs.back()[a.getInt()];
        for (float &v : t.data)
          v /= float(M);
      }
      ins[s].push_back(std::move(t));
    }
    if (auto r = f->getAttrOfType<DenseI64ArrayAttr>("cnn.pipeline_results"))
      for (int64_t i : r.asArrayRef())
        numResults = std::max(numResults, i + 1);
  }
  PipelineMailbox box;
  box.setThreads(S);
  std::vector<FailureOr<std::vector<Tensor>>> outs(S, failure());
  {
    std::vector<std::thread> threads;
    for (int64_t s = 0; s < S; ++s)
      threads.emplace_back([&, s] {
        setCurrentMailbox(&box);
        outs[s] = run(fns[s], ins[s]);
        setCurrentMailbox(nullptr);
        box.threadDone();
      });
    for (std::thread &t : threads)
      t.join();
  }
  for (int64_t s = 0; s < S; ++s)
    if (failed(outs[s]))
      return failure();
  if (size_t n = box.pending())
    return module.emitError("pipeline: ")
               << n << " tensor(s) sent but never received in the step",
           failure();
  std::vector<Tensor> results(numResults);
  if (losses)
    losses->assign(M, 0.0f);
  for (int64_t s = 0; s < S; ++s) {
    auto idx = fns[s]->getAttrOfType<DenseI64ArrayAttr>("cnn.pipeline_results");
    size_t k = 0;
    for (unsigned r = 0; r < fns[s].getNumResults(); ++r) {
      Tensor &t = (*outs[s])[r];
      if (fns[s].getResultAttr(r, cnn::kLossAttr)) {
        auto m = fns[s].getResultAttrOfType<IntegerAttr>(r, "cnn.micro_batch");
        if (losses && m && m.getInt() < M)
          (*losses)[m.getInt()] = t.data.empty() ? 0.0f : t.data[0];
        if (m && m.getInt() == M - 1)
          results[0] = t;
        continue;
      }
      if (idx && k < (size_t)idx.size())
        results[idx[k++]] = std::move(t);
    }
  }
  return results;
}

} // namespace cnnc::reference
