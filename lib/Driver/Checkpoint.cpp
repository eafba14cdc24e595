//===- Checkpoint.cpp - checkpoints and JSON records of the CPU loop ------===//
#include "Checkpoint.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Reference/TensorEntry.h"
#include "cnnrt/TensorFile.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::driver;

namespace {
/// The names of @train_step's persistent arguments, in argument order.
SmallVector<std::string> persistentNames(func::FuncOp step) {
  SmallVector<std::string> names;
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    for (const char *key : {cnn::kParamAttr, cnn::kBufferAttr, cnn::kStateAttr})
      if (auto s = step.getArgAttrOfType<StringAttr>(i, key)) {
        names.push_back(s.str());
        break;
      }
  return names;
}

/// A number of a record; null when not finite (JSON cannot hold NaN or
/// infinity; the executable's records write null too).
llvm::json::Value number(double v) {
  if (!std::isfinite(v))
    return nullptr;
  return v;
}

std::string render(llvm::json::Object o) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::json::Value(std::move(o));
  return os.str();
}
} // namespace

std::string cnnc::driver::checkpointPathAt(std::string pattern, int64_t step) {
  size_t k = pattern.find("{step}");
  if (k != std::string::npos)
    pattern.replace(k, 6, std::to_string(step));
  return pattern;
}

LogicalResult cnnc::driver::readReferenceCheckpoint(Compilation &c,
                                                    const std::string &path,
                                                    func::FuncOp step,
                                                    ReferenceCheckpoint &out) {
  std::vector<cnnrt::TensorEntry> entries;
  std::string err;
  if (!cnnrt::readTensorFile(path, entries, err))
    return fail(c, "cannot resume: " + err);
  const cnnrt::TensorEntry *st = cnnrt::findEntry(entries, "__step__");
  const cnnrt::TensorEntry *ld = cnnrt::findEntry(entries, "__loader__");
  if (!st || st->dtype != cnnrt::DType::I64 || st->numel() != 1 || !ld ||
      ld->dtype != cnnrt::DType::I64 || ld->numel() != 3)
    return fail(c, "cannot resume: " + path +
                       " is not a checkpoint (no __step__/__loader__ entries)");
  out.step = st->as<int64_t>()[0];
  const int64_t *l = ld->as<int64_t>();
  out.loader.seed = static_cast<uint64_t>(l[0]);
  out.loader.epoch = l[1];
  out.loader.cursor = l[2];
  if (out.step < 0 || out.loader.epoch < 0 || out.loader.cursor < 0)
    return fail(c, llvm::formatv("cannot resume: {0} has a negative step or "
                                 "data position (step {1}, epoch {2}, cursor "
                                 "{3})",
                                 path, out.step, out.loader.epoch,
                                 out.loader.cursor)
                       .str());
  for (const cnnrt::TensorEntry &e : entries)
    if (e.name != "__step__" && e.name != "__loader__")
      out.state[e.name] = reference::fromEntry(e);
  // Exactly the state the step carries: a missing optimizer state would
  // silently restart at zero.
  SmallVector<std::string> missing;
  for (const std::string &name : persistentNames(step))
    if (!out.state.count(name))
      missing.push_back(name);
  if (!missing.empty())
    return fail(
        c, "cannot resume: " + path + " lacks " +
               std::to_string(missing.size()) +
               " tensor(s) of this "
               "training step (" +
               llvm::join(ArrayRef<std::string>(missing).take_front(4), ", ") +
               (missing.size() > 4 ? ", ..." : "") +
               "): a checkpoint of another model or optimizer?");
  return success();
}

LogicalResult cnnc::driver::writeReferenceCheckpoint(
    Compilation &c, const std::string &pattern, func::FuncOp step,
    const reference::TensorMap &state, int64_t k,
    const cnnrt::LoaderState &loader) {
  std::vector<cnnrt::TensorEntry> entries;
  for (const std::string &name : persistentNames(step)) {
    auto it = state.find(name);
    if (it == state.end())
      return fail(c, "checkpoint: no value for '" + name + "'");
    entries.push_back(reference::toEntry(name, it->second));
  }
  cnnrt::TensorEntry s =
      cnnrt::TensorEntry::zeros("__step__", cnnrt::DType::I64, {1});
  s.as<int64_t>()[0] = k;
  entries.push_back(std::move(s));
  cnnrt::TensorEntry l =
      cnnrt::TensorEntry::zeros("__loader__", cnnrt::DType::I64, {3});
  l.as<int64_t>()[0] = static_cast<int64_t>(loader.seed);
  l.as<int64_t>()[1] = loader.epoch;
  l.as<int64_t>()[2] = loader.cursor;
  entries.push_back(std::move(l));
  std::string path = checkpointPathAt(pattern, k), err;
  if (!cnnrt::writeTensorFileAtomic(path, entries, err))
    return fail(c, "cannot write the checkpoint '" + path + "': " + err);
  return success();
}

std::string cnnc::driver::progressRecord(const cnnrt::Progress &p) {
  llvm::json::Object o{{"type", "train"},
                       {"step", p.step},
                       {"total_steps", p.totalSteps},
                       {"epoch", number(p.epoch)},
                       {"loss", number(p.loss)},
                       {"lr", number(p.lr)},
                       {"img_per_s", number(p.imagesPerSecond)},
                       {"eta_s", number(p.etaSeconds)}};
  if (p.lossScale >= 0)
    o["loss_scale"] = number(p.lossScale);
  return render(std::move(o));
}

std::string cnnc::driver::evalRecord(const cnnrt::EvalResult &e) {
  double n = std::max<int64_t>(e.total, 1);
  return render(llvm::json::Object{{"type", "eval"},
                                   {"step", e.step},
                                   {"epoch", number(e.epoch)},
                                   {"images", e.total},
                                   {"top1", number(e.top1 / n)},
                                   {"top5", number(e.top5 / n)},
                                   {"top1_correct", e.top1},
                                   {"top5_correct", e.top5}});
}
