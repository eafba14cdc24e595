//===- PipelinePartition.cpp - cnn-pipeline-partition: choose the cuts ----===//
//
// Splits the forward order of @train_step into S contiguous stages from a
// cost model and records the decision as attributes (PipelinePlan.h):
//
//  - per forward op, a time estimate from its FLOPs and bytes (a roofline of
//    one GPU: max(flops / 50 TFLOP/s, bytes / 3 TB/s); with half-precision,
//    the step's f16 form: 400 TFLOP/s of Tensor Cores and half the bytes);
//    plus launch-us per op (its launches: latency and tails the roofline
//    does not see); a stage's time is three times its forward ops' (the
//    backward pass costs about two forwards); or, with `profile`, the measured time of
//    the launches named by each forward op's location (its forward and
//    backward kernels, CNNRT_PROFILE_JSON of the unpartitioned step), which
//    knows what the roofline does not: fusion, cuDNN's efficiency per
//    shape, launch overhead; and its transfers (the activations crossing
//    its cuts and their gradients at link-gbps, 100 GB/s: NCCL send/recv
//    between two GPUs of one NVLink host): added to the compute, or with
//    overlap-transfers (the CUDA target's asynchronous transfers) the
//    larger of the two;
//  - per stage, its peak bytes: the parameters, BN buffers and optimizer
//    state it owns, plus the activations its backward pass reads (values
//    that live from the forward into the backward: the memory plan's
//    lifetimes) times the micro-batches in flight (M: the GPipe schedule
//    keeps every micro-batch's activations until the backward pass; 1F1B
//    keeps min(M, S - s) on stage s), plus
//    the largest single op's working set (operands + results);
//  - per cut, the bytes of the activations crossing it (sent forward; their
//    gradients, of the same size, come back).
// The cuts minimize the slowest stage's time; among the cuts within
// time-slack (10 %) of that, the fewest crossing bytes; every stage within device-memory-bytes.
// Backward and optimizer ops then take the stage of the forward values and
// parameters they read (a gradient only flows to the same or an earlier
// stage); see the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Support/LocationName.h"
#include "cnnc/Transforms/MemoryPlan.h"
#include "cnnc/Transforms/Passes.h"
#include "cnnc/Transforms/PipelinePlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <limits>

namespace cnnc {
#define GEN_PASS_DEF_CNNPIPELINEPARTITION
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

constexpr double kFlopsPerUs = 50e6;      // 50 TFLOP/s (f32, no TF32)
constexpr double kHalfFlopsPerUs = 400e6; // f16 Tensor Cores, sustained
constexpr double kBytesPerUs = 3e6;       // 3 TB/s
constexpr double kInf = std::numeric_limits<double>::infinity();

int64_t bytesOf(Value v) {
  return static_cast<int64_t>(tensorBytes(v.getType()));
}

int64_t numel(Value v) {
  return cast<ShapedType>(v.getType()).getNumElements();
}

/// The forward op's time estimate in microseconds; `half`: the step runs in
/// f16 (half the bytes, Tensor Core FLOPs).
double timeUs(Operation *op, bool half) {
  double bytes = 0;
  for (Value v : op->getOperands())
    if (isa<ShapedType>(v.getType()))
      bytes += bytesOf(v);
  for (Value v : op->getResults())
    if (isa<ShapedType>(v.getType()))
      bytes += bytesOf(v);
  double flops = 0;
  if (auto c = dyn_cast<Conv2DOp>(op)) {
    auto f = cast<ShapedType>(c.getFilter().getType());
    flops = 2.0 * numel(c.getResult()) * (double)f.getNumElements() /
            std::max<int64_t>(f.getDimSize(0), 1);
  } else if (auto m = dyn_cast<MatmulOp>(op)) {
    // M x K times K x N: lhs * rhs / result = K^2.
    flops = 2.0 * std::sqrt((double)numel(m.getLhs()) * numel(m.getRhs()) *
                            numel(m.getResult()));
  } else {
    for (Value v : op->getResults())
      if (isa<ShapedType>(v.getType()))
        flops += 4.0 * numel(v);
  }
  if (half)
    return std::max(flops / kHalfFlopsPerUs, 0.5 * bytes / kBytesPerUs);
  return std::max(flops / kFlopsPerUs, bytes / kBytesPerUs);
}

/// What the search knows of one forward op.
struct FwdOp {
  Operation *op;
  double time;
  int64_t workingSet;           // operands + results
  SmallVector<int64_t> ownArgs; // persistent args whose first use it is
};

struct StageCost {
  double time = 0;
  int64_t param = 0, saved = 0, transient = 0;
  int64_t peak(int64_t inFlight) const {
    return param + inFlight * saved + transient;
  }
};

struct PartitionPass
    : public cnnc::impl::CNNPipelinePartitionBase<PartitionPass> {
  using CNNPipelinePartitionBase::CNNPipelinePartitionBase;
  void runOnOperation() override;
};

/// The name of an argument's persistent tensor ("" for the image, labels,
/// lr and step, which every stage may read).
StringRef persistentName(func::FuncOp f, unsigned i) {
  for (const char *key : {kParamAttr, kBufferAttr, kStateAttr})
    if (auto s = f.getArgAttrOfType<StringAttr>(i, key))
      return s.getValue();
  return "";
}

/// A CNNRT_PROFILE_JSON file (runtime/src/ProfileJson.h): milliseconds by
/// location, in file order.
struct MeasuredStep {
  SmallVector<std::pair<std::string, double>> byLocation;
  double totalMs = 0;
};

FailureOr<MeasuredStep> readProfile(StringRef path, ModuleOp module) {
  auto fail = [&](const Twine &why) {
    module.emitError("cnn-pipeline-partition: profile '")
        << path << "': " << why;
    return failure();
  };
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    return fail(buf.getError().message());
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buf)->getBuffer());
  if (!json)
    return fail("not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *top = json->getAsObject();
  if (!top || top->getString("format") != StringRef("cnnrt-profile") ||
      top->getInteger("version") != 1)
    return fail("not a cnnrt profile (expected \"format\": "
                "\"cnnrt-profile\", \"version\": 1, as CNNRT_PROFILE_JSON "
                "writes)");
  const llvm::json::Object *by = top->getObject("by_location");
  if (!by)
    return fail("no \"by_location\" object");
  MeasuredStep step;
  for (const auto &[key, value] : *by) {
    const llvm::json::Object *entry = value.getAsObject();
    std::optional<double> ms = entry ? entry->getNumber("ms") : std::nullopt;
    if (!ms || !std::isfinite(*ms) || *ms < 0)
      return fail(llvm::formatv("location '{0}': expected {{\"ms\": a "
                                "number >= 0, ...}",
                                key.str()));
    step.byLocation.push_back({key.str(), *ms});
    step.totalMs += *ms;
  }
  // llvm::json::Object is a hash map: a fixed order for the sums below.
  llvm::sort(step.byLocation);
  return step;
}

} // namespace

void PartitionPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto f = module.lookupSymbol<func::FuncOp>("train_step");
  if (!f) {
    module.emitError("cnn-pipeline-partition: no @train_step (run "
                     "cnn-autodiff first)");
    return signalPassFailure();
  }
  if (schedule != "gpipe" && schedule != "1f1b") {
    module.emitError("cnn-pipeline-partition: schedule must be gpipe "
                     "or 1f1b, got '")
        << schedule << "'";
    return signalPassFailure();
  }
  if (stages < 0 || microBatches < 1 || deviceMemoryBytes < 0) {
    module.emitError(llvm::formatv(
        "cnn-pipeline-partition: stages must be >= 0 (0: auto), "
        "micro-batches >= 1 and device-memory-bytes >= 0, got {0}, {1}, {2}",
        (int64_t)stages, (int64_t)microBatches, (int64_t)deviceMemoryBytes));
    return signalPassFailure();
  }
  if (linkGBps < 0) {
    module.emitError(llvm::formatv(
        "cnn-pipeline-partition: link-gbps must be >= 0 (0: transfers cost "
        "nothing), got {0}",
        (double)linkGBps));
    return signalPassFailure();
  }
  if (!(launchUs >= 0)) {
    module.emitError(llvm::formatv(
        "cnn-pipeline-partition: launch-us must be >= 0, got {0}",
        (double)launchUs));
    return signalPassFailure();
  }
  // Interleaved stages (chunks > 1): the virtual stages v and v + S share a
  // GPU, so a GPU with two neighbours of which one is also the wrap's
  // (S = 2) would carry both directions of one phase on one link, and the
  // placement needs the stage count the user chose. 1F1B's interleaved
  // form is not built.
  if (chunks < 1) {
    module.emitError(llvm::formatv(
        "cnn-pipeline-partition: chunks must be >= 1, got {0}",
        (int64_t)chunks));
    return signalPassFailure();
  }
  if (chunks > 1 && stages > std::numeric_limits<int64_t>::max() / chunks) {
    module.emitError(llvm::formatv(
        "cnn-pipeline-partition: {0} stages x {1} chunks overflow a count",
        (int64_t)stages, (int64_t)chunks));
    return signalPassFailure();
  }
  if (chunks > 1 && (stages < 2 || schedule != "gpipe")) {
    module.emitError(llvm::formatv(
        "cnn-pipeline-partition: chunks={0} (interleaved stages) needs an "
        "explicit stages >= 2 and the gpipe schedule, got stages={1}, "
        "schedule={2}",
        (int64_t)chunks, (int64_t)stages, std::string(schedule)));
    return signalPassFailure();
  }
  // The virtual stages the cost model cuts (the stages themselves unless
  // interleaved).
  const int64_t numVirtual = stages * chunks;
  if (!(timeSlack >= 0 && timeSlack <= 10)) {
    module.emitError(llvm::formatv(
        "cnn-pipeline-partition: time-slack must be within [0, 10], got {0}",
        (double)timeSlack));
    return signalPassFailure();
  }
  if (stages == 0 && deviceMemoryBytes == 0) {
    module.emitError("cnn-pipeline-partition: stages=0 (the fewest stages "
                     "that fit) needs device-memory-bytes");
    return signalPassFailure();
  }
  Block &body = f.getBody().front();
  // What a pipeline cannot split: a global gradient norm or loss-scale flag
  // needs every stage's gradients (a collective across the stages that is
  // not built), and data parallelism is not combined with stages yet.
  WalkResult refused = f.walk([&](Operation *op) {
    const char *why = nullptr;
    if (isa<ClipDivisorOp>(op))
      why = "clip-grad-norm (the global norm needs the gradients of every "
            "stage)";
    else if (isa<AllFiniteOp, LossScaleUpdateOp>(op))
      why = "loss scaling (the finite flag needs the gradients of every "
            "stage)";
    else if (isa<AllReduceOp>(op))
      why = "data parallelism here (pipeline stages x data-parallel "
            "replicas run on the CUDA target, where each stage's step is "
            "made data-parallel after the split)";
    if (!why)
      return WalkResult::advance();
    op->emitError("cnn-pipeline-partition: pipeline stages do not support ")
        << why << " yet";
    return WalkResult::interrupt();
  });
  if (refused.wasInterrupted())
    return signalPassFailure();
  // The micro-batches are the micro-steps of gradient accumulation: one
  // optimizer update after M of them.
  int64_t every = 1;
  f.walk([&](AccumulationStepOp a) { every = a.getEvery(); });
  if (every != microBatches) {
    module.emitError(llvm::formatv(
        "cnn-pipeline-partition: micro-batches={0} needs @train_step built "
        "with gradient accumulation over {0} micro-steps (cnn-autodiff "
        "accumulate={0}); it accumulates over {1}",
        (int64_t)microBatches, every));
    return signalPassFailure();
  }

  // Forward ops: those the loss depends on.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss;
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    if (f.getResultAttr(i, kLossAttr))
      loss = ret.getOperand(i);
  if (!loss || !loss.getDefiningOp()) {
    f.emitError("cnn-pipeline-partition: @train_step returns no computed "
                "loss (cnn.loss)");
    return signalPassFailure();
  }
  llvm::DenseSet<Operation *> forward;
  SmallVector<Operation *> work{loss.getDefiningOp()};
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *d = v.getDefiningOp())
        work.push_back(d);
  }
  // Persistent arguments (params, buffers, state) by name; state belongs to
  // the parameter whose name prefixes it ("<param>.momentum_buffer").
  llvm::StringMap<unsigned> argByName;
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    if (StringRef n = persistentName(f, i); !n.empty())
      argByName[n] = i;
  // The image and labels belong to the stages that read them (the first
  // and the last); lr and step, read by no forward op, to none.
  auto ownerArg = [&](unsigned i) -> int64_t {
    StringRef n = persistentName(f, i);
    if (n.empty() || !f.getArgAttr(i, kStateAttr))
      return i;
    for (size_t dot = n.rfind('.'); dot != StringRef::npos;
         dot = n.substr(0, dot).rfind('.'))
      if (auto it = argByName.find(n.substr(0, dot));
          it != argByName.end() && !f.getArgAttr(it->second, kStateAttr))
        return it->second;
    return i;
  };

  std::vector<FwdOp> fwd;
  llvm::DenseMap<Operation *, int64_t> fwdIndex;
  for (Operation &op : body.without_terminator())
    if (forward.count(&op) && op.getNumOperands() > 0) {
      fwdIndex[&op] = fwd.size();
      int64_t ws = 0;
      for (Value v : op.getOperands())
        if (!isa<BlockArgument>(v) && isa<ShapedType>(v.getType()))
          ws += bytesOf(v);
      for (Value v : op.getResults())
        ws += bytesOf(v);
      fwd.push_back({&op, timeUs(&op, halfPrecision), ws, {}});
    }
  const int64_t n = fwd.size();
  if (n == 0) {
    f.emitError("cnn-pipeline-partition: @train_step has no forward op");
    return signalPassFailure();
  }
  // With a measured step, each location's milliseconds replace the
  // roofline of the forward ops named by it (split by their roofline
  // shares; an op whose location launched nothing was fused into another
  // op's launches); time no forward op's location claims (the optimizer,
  // the loss scale) is added after the parameters are known.
  double unclaimedUs = 0, claimedMs = 0;
  std::string timeSource;
  if (!profile.empty()) {
    FailureOr<MeasuredStep> measured = readProfile(profile, module);
    if (failed(measured))
      return signalPassFailure();
    llvm::StringMap<SmallVector<int64_t>> byLoc;
    for (int64_t k = 0; k < n; ++k)
      byLoc[locationName(fwd[k].op->getLoc())].push_back(k);
    std::vector<double> measuredUs(n, 0.0);
    for (const auto &[loc, ms] : measured->byLocation) {
      auto it = byLoc.find(loc);
      if (it == byLoc.end()) {
        // The optimizer's updates (cnnc names them "optimizer.<param>") run
        // once a step, after M micro-batches: per micro-batch, 1/M of the
        // unpartitioned step's.
        unclaimedUs += 1e3 * ms /
                       (StringRef(loc).starts_with("optimizer.") ? microBatches
                                                                 : 1);
        continue;
      }
      claimedMs += ms;
      double roof = 0;
      for (int64_t k : it->second)
        roof += fwd[k].time;
      for (int64_t k : it->second)
        measuredUs[k] += 1e3 * ms *
                         (roof > 0 ? fwd[k].time / roof
                                   : 1.0 / it->second.size());
    }
    if (claimedMs <= 0) {
      module.emitError("cnn-pipeline-partition: profile '")
          << profile << "' names none of @train_step's forward ops ("
          << measured->byLocation.size()
          << " locations; measured on another model, or without locations?)";
      return signalPassFailure();
    }
    // A stage's time is 3 x its forward ops' (below): the measured time
    // already holds the backward pass.
    for (int64_t k = 0; k < n; ++k)
      fwd[k].time = measuredUs[k] / 3.0;
    timeSource = llvm::formatv("profile {0} (the forward ops' locations "
                               "name {1:f3} of its {2:f3} ms)",
                               llvm::sys::path::filename(profile), claimedMs,
                               measured->totalMs)
                     .str();
  } else {
    // The roofline knows FLOPs and bytes only; every op also pays its
    // launches (latency, a partly filled last wave). Without this term the
    // roofline put too little on the later stages of ResNet-50 f16 at
    // micro-batch 32 (many small launches): its cuts (24, 46, 88 at S=4)
    // ran at 0.699 of S x one GPU on 4 H200s against 0.764 on the cuts a
    // measured step gives (24, 58, 108); with 5 us it picks 24, 56, 108.
    for (FwdOp &f : fwd)
      f.time += launchUs;
  }

  // First and last forward use of each persistent argument (a parameter's
  // state, read by the optimizer only, goes with its parameter).
  std::vector<int64_t> firstUse(f.getNumArguments(), -1),
      lastUse(f.getNumArguments(), -1);
  for (int64_t k = 0; k < n; ++k)
    for (Value v : fwd[k].op->getOperands())
      if (auto a = dyn_cast<BlockArgument>(v); a && a.getOwner() == &body) {
        int64_t o = ownerArg(a.getArgNumber());
        if (o < 0)
          continue;
        if (firstUse[o] < 0)
          firstUse[o] = k;
        lastUse[o] = k;
      }
  std::vector<int64_t> argBytes(f.getNumArguments(), 0);
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    int64_t o = ownerArg(i);
    if (o >= 0 && firstUse[o] >= 0 && !persistentName(f, o).empty())
      argBytes[o] += bytesOf(f.getArgument(i));
  }
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    if (firstUse[i] >= 0)
      fwd[firstUse[i]].ownArgs.push_back(i);
  // The measured time of no forward op (the optimizer's updates) goes with
  // the parameters, by their bytes.
  if (unclaimedUs > 0) {
    int64_t total = 0;
    for (int64_t b : argBytes)
      total += b;
    for (int64_t k = 0; total > 0 && k < n; ++k)
      for (int64_t a : fwd[k].ownArgs)
        fwd[k].time += unclaimedUs * argBytes[a] / (3.0 * total);
  }
  // A cut after forward op k is allowed unless a parameter (or buffer) is
  // read on both sides of it (tied weights: one stage owns the update).
  std::vector<char> cutOK(n, 1);
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    for (int64_t k = firstUse[i];
         k >= 0 && k < lastUse[i] && !persistentName(f, i).empty(); ++k)
      cutOK[k] = 0;
  // Values the backward pass reads (kept from the forward pass).
  auto savedForBackward = [&](Value v) {
    return llvm::any_of(v.getUsers(), [&](Operation *u) {
      return !forward.count(u) && !isa<func::ReturnOp>(u);
    });
  };
  // Bytes crossing a cut after forward op k, both ways: the activations
  // sent forward and the gradients sent back. A value read by
  // u forward ops beyond the cut gets u gradients there, and they come back
  // apart (each may be fused into its producer: a residual block's output
  // read by the next block's first convolution and its skip comes back as
  // the convolution's data gradient and the skip's, two tensors where a cut
  // one op earlier, before the ReLU, sends one).
  std::vector<int64_t> crossBytes(n, 0);
  for (int64_t k = 0; k < n; ++k)
    for (Value v : fwd[k].op->getResults()) {
      SmallVector<int64_t> readers;
      for (Operation *u : v.getUsers())
        if (auto it = fwdIndex.find(u); it != fwdIndex.end())
          readers.push_back(it->second);
      llvm::sort(readers);
      readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
      int64_t last = readers.empty() ? k : std::max(k, readers.back());
      for (int64_t c = k; c < last; ++c) {
        int64_t beyond =
            llvm::count_if(readers, [&](int64_t r) { return r > c; });
        crossBytes[c] += bytesOf(v) * (1 + beyond);
      }
    }

  // cost[i][j-i-1]: the stage of forward ops [i, j).
  // Micro-batches whose activations stage `s` of `numStages` keeps at once:
  // all M under GPipe; under 1F1B the S - s warm-up forwards (stage s
  // starts its first backward pass after them).
  const bool oneFOneB = schedule == "1f1b";
  auto inFlightAt = [&](int64_t s, int64_t numStages) -> int64_t {
    return oneFOneB ? std::min<int64_t>(microBatches, numStages - s)
                    : int64_t(microBatches);
  };
  // The fewest any stage keeps: a layer that does not fit alone with it
  // fits nowhere.
  const int64_t leastInFlight = oneFOneB ? 1 : int64_t(microBatches);
  std::vector<std::vector<StageCost>> cost(n);
  for (int64_t i = 0; i < n; ++i) {
    StageCost c;
    llvm::DenseSet<Value> counted;
    for (int64_t j = i; j < n; ++j) {
      Operation *op = fwd[j].op;
      c.time += 3 * fwd[j].time;
      for (int64_t a : fwd[j].ownArgs)
        c.param += argBytes[a];
      c.transient = std::max(c.transient, fwd[j].workingSet);
      for (Value r : op->getResults())
        if (savedForBackward(r) && counted.insert(r).second)
          c.saved += bytesOf(r);
      // A received activation the backward pass reads is kept too.
      for (Value v : op->getOperands())
        if (Operation *d = v.getDefiningOp())
          if (auto it = fwdIndex.find(d);
              it != fwdIndex.end() && it->second < i && savedForBackward(v) &&
              counted.insert(v).second)
            c.saved += bytesOf(v);
      cost[i].push_back(c);
    }
  }
  auto stageCost = [&](int64_t i, int64_t j) -> const StageCost & {
    return cost[i][j - i - 1];
  };
  // The stage of forward ops [i, j): its ops, then the activations crossing
  // its cuts (received, sent) and their gradients (sent, received back).
  const double crossScale = halfPrecision ? 0.5 : 1.0;
  // link-gbps: NCCL send/recv between two GPUs of one host over NVLink
  // (default 100 GB/s). On 4 H200s, session 27's S=4 f16 ResNet-50 plan cut
  // inside layer2's first block (154 MB per micro-batch each way in f32)
  // because transfers cost nothing in the model; its stages ran at 0.40 of
  // S x the one-GPU rate.
  const double linkBytesPerUs = linkGBps * 1e3;
  auto transferUs = [&](int64_t boundary) {
    return linkBytesPerUs > 0 && boundary > 0 && boundary < n
               ? crossScale * crossBytes[boundary - 1] / linkBytesPerUs
               : 0.0;
  };
  auto stageTime = [&](int64_t i, int64_t j) {
    double transfers = transferUs(i) + transferUs(j);
    return overlapTransfers ? std::max(stageCost(i, j).time, transfers)
                            : stageCost(i, j).time + transfers;
  };
  auto fitsWith = [&](int64_t i, int64_t j, int64_t inFlight) {
    return deviceMemoryBytes == 0 ||
           stageCost(i, j).peak(inFlight) <= (int64_t)deviceMemoryBytes;
  };
  // A stage of several owns parameters: its step has an optimizer and
  // gradients (cnn-precision's loss scaling and the runtime need them).
  // Without it, transfer costs can make a stage of parameter-free ops
  // (a pooling and a flatten) the cheapest.
  auto admissible = [&](int64_t i, int64_t j, int64_t stage,
                        int64_t numStages) {
    return fitsWith(i, j, inFlightAt(stage, numStages)) &&
           (numStages == 1 || stageCost(i, j).param > 0);
  };
  // A layer that alone does not fit: no cut helps (every cost grows with
  // the range).
  if (deviceMemoryBytes > 0)
    for (int64_t k = 0; k < n; ++k)
      if (!fitsWith(k, k + 1, leastInFlight)) {
        const StageCost &c = stageCost(k, k + 1);
        fwd[k].op->emitError(llvm::formatv(
            "cnn-pipeline-partition: this layer alone needs {0} bytes on "
            "one stage ({1} of parameters and state, {2} x {3} of "
            "activations kept for the backward pass, {4} working set), over "
            "device-memory-bytes {5}: no cut can fit it",
            c.peak(leastInFlight), c.param, leastInFlight, c.saved,
            c.transient,
            (int64_t)deviceMemoryBytes));
        return signalPassFailure();
      }

  // Best cuts for s stages: first the smallest slowest-stage time T, then
  // the fewest crossing bytes among cuts whose stages stay within
  // (1 + time-slack) T, then (equal bytes) the smallest slowest stage.
  // Returns the stage boundaries (s + 1 of them) or none.
  auto solve = [&](int64_t s,
                   double slack) -> std::optional<SmallVector<int64_t>> {
    if (s > n)
      return std::nullopt;
    // best[k][j]: the smallest max time of k stages over ops [0, j).
    std::vector<std::vector<double>> best(s + 1,
                                          std::vector<double>(n + 1, kInf));
    best[0][0] = 0;
    for (int64_t k = 1; k <= s; ++k)
      for (int64_t j = 1; j <= n; ++j) {
        if (j < n && !cutOK[j - 1])
          continue;
        for (int64_t i = k - 1; i < j; ++i)
          if (best[k - 1][i] < kInf && admissible(i, j, k - 1, s))
            best[k][j] = std::min(
                best[k][j], std::max(best[k - 1][i], stageTime(i, j)));
      }
    if (best[s][n] == kInf)
      return std::nullopt;
    double limit = best[s][n] * (1.0 + slack);
    constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
    std::vector<std::vector<int64_t>> bytes(s + 1,
                                            std::vector<int64_t>(n + 1, kNone));
    std::vector<std::vector<int64_t>> from(s + 1,
                                           std::vector<int64_t>(n + 1, -1));
    // slowest[k][j]: the slowest stage of the cuts bytes[k][j] chose. Among
    // cuts of equal bytes the faster wins: a cut one op later inside a
    // block often crosses the same bytes, and taking the first one found
    // made ResNet-50 f16's S=4 plan at micro-batch 64 slowest at 4,125 us
    // where 3,835 us crossed no more.
    std::vector<std::vector<double>> slowest(s + 1,
                                             std::vector<double>(n + 1, kInf));
    bytes[0][0] = 0;
    slowest[0][0] = 0;
    for (int64_t k = 1; k <= s; ++k)
      for (int64_t j = 1; j <= n; ++j) {
        if (j < n && !cutOK[j - 1])
          continue;
        int64_t cross = j < n ? crossBytes[j - 1] : 0;
        for (int64_t i = k - 1; i < j; ++i) {
          if (bytes[k - 1][i] == kNone || !admissible(i, j, k - 1, s))
            continue;
          double t = stageTime(i, j);
          if (t > limit)
            continue;
          int64_t b = bytes[k - 1][i] + cross;
          double slow = std::max(slowest[k - 1][i], t);
          if (b < bytes[k][j] || (b == bytes[k][j] && slow < slowest[k][j])) {
            bytes[k][j] = b;
            slowest[k][j] = slow;
            from[k][j] = i;
          }
        }
      }
    SmallVector<int64_t> bounds(s + 1, 0);
    bounds[s] = n;
    for (int64_t k = s, j = n; k > 0; --k) {
      j = from[k][j];
      bounds[k - 1] = j;
    }
    return bounds;
  };
  std::optional<SmallVector<int64_t>> bounds;
  // What the errors call the stages the cost model cuts.
  const std::string cutStages =
      chunks > 1 ? llvm::formatv("{0} virtual stages ({1} stages x {2} chunks)",
                                 numVirtual, (int64_t)stages, (int64_t)chunks)
                       .str()
                 : llvm::formatv("{0} stages", (int64_t)stages).str();
  if (stages > 0) {
    if (numVirtual > n) {
      f.emitError(llvm::formatv("cnn-pipeline-partition: {0} but "
                                "@train_step has {1} forward ops",
                                cutStages, n));
      return signalPassFailure();
    }
    int64_t owners = 0;
    for (int64_t k = 0; k < n; ++k)
      owners += stageCost(k, k + 1).param > 0;
    if (numVirtual > 1 && numVirtual > owners) {
      f.emitError(llvm::formatv(
          "cnn-pipeline-partition: {0} need a layer with parameters "
          "each; @train_step has {1}",
          cutStages, owners));
      return signalPassFailure();
    }
    bounds = solve(numVirtual, timeSlack);
    if (!bounds) {
      int64_t fewest = 0;
      for (int64_t s = stages + 1; s <= n && !fewest && chunks == 1; ++s)
        if (solve(s, timeSlack))
          fewest = s;
      f.emitError(llvm::formatv(
          "cnn-pipeline-partition: {0} cannot hold @train_step "
          "within device-memory-bytes {1} with {2} micro-batches in flight{3}",
          cutStages, (int64_t)deviceMemoryBytes,
          oneFOneB ? std::string("min(M, S - s) of ") +
                         std::to_string(microBatches) + " (1F1B)"
                   : std::to_string(microBatches),
          fewest
              ? llvm::formatv("; the fewest stages that fit: {0}", fewest).str()
              : std::string()));
      return signalPassFailure();
    }
  } else {
    for (int64_t s = 1; s <= n && !bounds; ++s)
      bounds = solve(s, timeSlack);
    if (!bounds) {
      // Every layer fits alone, but a tied parameter forbids the cuts that
      // would separate them.
      f.emitError("cnn-pipeline-partition: no partition of @train_step fits "
                  "device-memory-bytes (parameters read by distant layers "
                  "keep their layers on one stage)");
      return signalPassFailure();
    }
  }
  // Interleaved: a GPU runs each micro-batch through all its chunks, so
  // its time is the sum of its virtual stages'; the dynamic program only
  // bounds the slowest virtual stage and leaves the others free (ResNet-50
  // f16 at S=4 x 2 got GPUs of 1.5 to 3.2 ms). Moving one cut at a time to
  // where the slowest GPU's sum falls most (then the slowest virtual
  // stage) balances the GPUs; every stage stays admissible.
  //
  // The search starts from two plans and keeps the better: the fewest bytes
  // within time-slack of the slowest virtual stage, and the fastest slowest
  // virtual stage (slack 0). Bytes within 10 % of one virtual stage leave
  // the others free to be tiny (ResNet-50 f16 S=4 x 2: a chunk of one op),
  // which no single-cut move undoes: 45.4 ms estimated against 40.9 from
  // the time's plan.
  if (chunks > 1) {
    const int64_t V = numVirtual;
    auto gpuLoad = [&](ArrayRef<int64_t> b) {
      std::vector<double> gpu(stages, 0.0);
      double slowest = 0;
      for (int64_t v = 0; v < V; ++v) {
        double t = stageTime(b[v], b[v + 1]);
        gpu[v % stages] += t;
        slowest = std::max(slowest, t);
      }
      return std::make_pair(*std::max_element(gpu.begin(), gpu.end()),
                            slowest);
    };
    auto better = [](std::pair<double, double> a, std::pair<double, double> b) {
      return a.first < b.first - 1e-9 ||
             (a.first <= b.first + 1e-9 && a.second < b.second - 1e-9);
    };
    // Moves one cut at a time while the load falls; returns the load.
    auto balance = [&](SmallVector<int64_t> &bd) {
      auto best = gpuLoad(bd);
      for (bool moved = true; moved;) {
        moved = false;
        for (int64_t k = 1; k < V; ++k) {
          SmallVector<int64_t> trial(bd);
          for (int64_t at = bd[k - 1] + 1; at < bd[k + 1]; ++at) {
            trial[k] = at;
            if (at == bd[k] || !cutOK[at - 1] ||
                !admissible(trial[k - 1], at, k - 1, V) ||
                !admissible(at, trial[k + 1], k, V))
              continue;
            auto c = gpuLoad(trial);
            if (better(c, best)) {
              best = c;
              bd[k] = at;
              moved = true;
            }
          }
        }
      }
      return best;
    };
    auto load = balance(*bounds);
    if (timeSlack > 0)
      if (auto fastest = solve(V, 0.0)) {
        auto fastestLoad = balance(*fastest);
        if (better(fastestLoad, load))
          bounds = std::move(fastest);
      }
  }
  // S: the virtual stages (the stages unless interleaved); cnn.stage is the
  // virtual stage, run by stage (GPU) cnn.stage mod (S / chunks).
  const int64_t S = bounds->size() - 1;

  // Stage of every op: forward ops from the cuts; the others from what they
  // read. Ops reading only arguments and replicated ops (constants, the
  // accumulation step) are replicated: cnn-pipeline-split clones them.
  MLIRContext *ctx = &getContext();
  Builder b(ctx);
  llvm::DenseMap<Operation *, int64_t> stageOf;
  for (int64_t s = 0; s < S; ++s)
    for (int64_t k = (*bounds)[s]; k < (*bounds)[s + 1]; ++k)
      stageOf[fwd[k].op] = s;
  auto argStage = [&](BlockArgument a) -> int64_t {
    int64_t o = ownerArg(a.getArgNumber());
    if (o < 0 || firstUse[o] < 0)
      return -1;
    return stageOf.lookup(fwd[firstUse[o]].op);
  };
  // The last stage whose forward ops read a forward value.
  auto lastFwdStage = [&](Value v, int64_t s) {
    for (Operation *u : v.getUsers())
      if (forward.count(u) && stageOf.count(u))
        s = std::max(s, stageOf.lookup(u));
    return s;
  };
  llvm::DenseSet<Operation *> replicated;
  // The stages a backward op may run on: [lo, fwdHi] from the forward
  // values and parameters it reads.
  llvm::DenseMap<Operation *, std::pair<int64_t, int64_t>> range;
  for (Operation &op : body.without_terminator()) {
    if (stageOf.count(&op))
      continue;
    int64_t lo = 0, hi = std::numeric_limits<int64_t>::max(), fwdHi = hi;
    bool pinned = false;
    for (Value v : op.getOperands()) {
      if (auto a = dyn_cast<BlockArgument>(v)) {
        if (int64_t s = argStage(a); s >= 0) {
          lo = std::max(lo, s);
          hi = std::min(hi, s);
          fwdHi = std::min(fwdHi, s);
          pinned = true;
        }
        continue;
      }
      Operation *d = v.getDefiningOp();
      if (replicated.count(d))
        continue;
      pinned = true;
      int64_t s = stageOf.lookup(d);
      if (forward.count(d)) {
        lo = std::max(lo, s);
        hi = std::min(hi, lastFwdStage(v, s));
        fwdHi = std::min(fwdHi, lastFwdStage(v, s));
      } else {
        // A gradient flows to the same or an earlier stage.
        hi = std::min(hi, s);
      }
    }
    if (!pinned) {
      replicated.insert(&op);
      continue;
    }
    if (hi == std::numeric_limits<int64_t>::max())
      hi = lo;
    if (lo > hi) {
      op.emitError(llvm::formatv(
          "cnn-pipeline-partition: this op reads values of stage {0} and "
          "gradients of stage {1}: no stage can run it",
          lo, hi));
      return signalPassFailure();
    }
    stageOf[&op] = hi;
    range[&op] = {lo, fwdHi};
  }
  // As late as the gradients allow puts a layer's parameter gradient on the
  // stage that received the gradient of its output (a bias_grad of the
  // first layer after a cut on the later stage). Walking back, an op whose
  // readers all run on one earlier stage (that its forward operands allow)
  // moves there: its input gradient crosses the cut instead, and the
  // layer's gradients stay with its parameters.
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    auto it = range.find(&op);
    if (it == range.end())
      continue;
    int64_t cur = stageOf.lookup(&op), target = -1;
    bool one = true;
    for (Operation *u : op.getUsers()) {
      auto su = stageOf.find(u);
      if (su == stageOf.end()) {
        one = false; // the return: results stay where they are made
        break;
      }
      if (target >= 0 && su->second != target)
        one = false;
      target = su->second;
    }
    auto [lo, fwdHi] = it->second;
    if (one && target >= 0 && target < cur && target >= lo && target <= fwdHi)
      stageOf[&op] = target;
  }

  // What crosses each cut: a value made on stage a and read on stages b != a
  // crosses every cut between a and the farthest b once (cnn-pipeline-split
  // relays it through the stages between; forward: activations, backward:
  // gradients), in f16 when the step is (half-precision: cnn-precision runs
  // on each stage's step after the split, so the f32 IR here sends half its
  // bytes).
  auto sentBytes = [&](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return halfPrecision && t && t.getElementType().isF32() ? bytesOf(v) / 2
                                                             : bytesOf(v);
  };
  std::vector<int64_t> cutBytes(std::max<int64_t>(S - 1, 0), 0),
      cutTensors(std::max<int64_t>(S - 1, 0), 0);
  int64_t crossings = 0;
  for (Operation &op : body.without_terminator()) {
    if (!stageOf.count(&op))
      continue;
    for (Value r : op.getResults()) {
      llvm::SmallDenseSet<int64_t> to;
      for (Operation *u : r.getUsers())
        if (auto it = stageOf.find(u);
            it != stageOf.end() && it->second != stageOf.lookup(&op))
          to.insert(it->second);
      if (to.empty())
        continue;
      ++crossings;
      int64_t a = stageOf.lookup(&op), lo = a, hi = a;
      for (int64_t t : to) {
        lo = std::min(lo, t);
        hi = std::max(hi, t);
      }
      for (int64_t c = lo; c < hi; ++c) {
        cutBytes[c] += sentBytes(r);
        ++cutTensors[c];
      }
    }
  }
  for (auto &[op, s] : stageOf)
    op->setAttr(kStageAttr, b.getI64IntegerAttr(s));
  for (Operation *op : replicated)
    op->removeAttr(kStageAttr);

  SmallVector<int64_t> cuts, peak, saved, params, kept;
  SmallVector<double> times;
  for (int64_t s = 0; s < S; ++s) {
    if (s > 0)
      cuts.push_back((*bounds)[s] - 1);
    const StageCost &c = stageCost((*bounds)[s], (*bounds)[s + 1]);
    peak.push_back(c.peak(inFlightAt(s, S)));
    kept.push_back(inFlightAt(s, S));
    saved.push_back(c.saved);
    params.push_back(c.param);
    times.push_back(stageTime((*bounds)[s], (*bounds)[s + 1]));
  }
  // Interleaved: a GPU holds its chunks' parameters and kept activations
  // together (GPipe keeps all M micro-batches of each).
  if (chunks > 1 && deviceMemoryBytes > 0)
    for (int64_t g = 0; g < stages; ++g) {
      int64_t sum = 0;
      for (int64_t c = 0; c < chunks; ++c)
        sum += peak[g + c * stages];
      if (sum > (int64_t)deviceMemoryBytes) {
        module.emitError(llvm::formatv(
            "cnn-pipeline-partition: stage {0} runs {1} chunks of {2} bytes "
            "together, over device-memory-bytes {3} (give more stages or "
            "chunks=1)",
            g, (int64_t)chunks, sum, (int64_t)deviceMemoryBytes));
        return signalPassFailure();
      }
    }
  SmallVector<NamedAttribute> planAttrs = {
      b.getNamedAttr("stages", b.getI64IntegerAttr(S / chunks)),
      b.getNamedAttr("micro_batches", b.getI64IntegerAttr(microBatches)),
      b.getNamedAttr("budget_bytes", b.getI64IntegerAttr(deviceMemoryBytes)),
      b.getNamedAttr("cuts", b.getDenseI64ArrayAttr(cuts)),
      b.getNamedAttr("stage_peak_bytes", b.getDenseI64ArrayAttr(peak)),
      b.getNamedAttr("stage_saved_bytes", b.getDenseI64ArrayAttr(saved)),
      b.getNamedAttr("stage_in_flight", b.getDenseI64ArrayAttr(kept)),
      b.getNamedAttr("schedule", b.getStringAttr(oneFOneB ? "1f1b" : "gpipe")),
      b.getNamedAttr("stage_param_bytes", b.getDenseI64ArrayAttr(params)),
      b.getNamedAttr("stage_time_us", b.getDenseF64ArrayAttr(times)),
      b.getNamedAttr("cut_bytes", b.getDenseI64ArrayAttr(cutBytes)),
      b.getNamedAttr("cut_tensors", b.getDenseI64ArrayAttr(cutTensors))};
  if (chunks > 1)
    planAttrs.push_back(
        b.getNamedAttr("chunks", b.getI64IntegerAttr(chunks)));
  // A measured step says so (the roofline, the default, is not recorded).
  if (!profile.empty())
    planAttrs.push_back(
        b.getNamedAttr("time_source", b.getStringAttr(timeSource)));
  module->setAttr(kPipelineAttr, b.getDictionaryAttr(planAttrs));
  numStages = S / chunks;
  numCrossings = crossings;
  if (printPlan)
    (void)printPipelinePlan(module, llvm::outs());
}

LogicalResult cnnc::printPipelinePlan(ModuleOp module, raw_ostream &os) {
  auto plan = module->getAttrOfType<DictionaryAttr>(kPipelineAttr);
  if (!plan)
    return failure();
  auto i64 = [&](StringRef k) {
    auto a = plan.getAs<IntegerAttr>(k);
    return a ? a.getInt() : 0;
  };
  auto arr = [&](StringRef k) {
    auto a = plan.getAs<DenseI64ArrayAttr>(k);
    return a ? SmallVector<int64_t>(a.asArrayRef()) : SmallVector<int64_t>();
  };
  auto timesAttr = plan.getAs<DenseF64ArrayAttr>("stage_time_us");
  // Interleaved plans list the S x V virtual stages (stage v mod S runs
  // virtual stage v).
  const int64_t V = std::max<int64_t>(1, i64("chunks"));
  const int64_t gpus = i64("stages"), M = i64("micro_batches");
  const int64_t S = gpus * V;
  SmallVector<int64_t> cuts = arr("cuts"), peak = arr("stage_peak_bytes"),
                       saved = arr("stage_saved_bytes"),
                       params = arr("stage_param_bytes"),
                       cutBytes = arr("cut_bytes"),
                       cutTensors = arr("cut_tensors"),
                       kept = arr("stage_in_flight");
  // Plans written before the 1F1B memory model: every stage keeps M.
  if ((int64_t)kept.size() != S)
    kept.assign(S, M);
  auto scheduleAttr = plan.getAs<StringAttr>("schedule");
  const bool oneFOneB = scheduleAttr && scheduleAttr.getValue() == "1f1b";
  if ((int64_t)peak.size() != S || (int64_t)cuts.size() != S - 1 ||
      !timesAttr || (int64_t)timesAttr.size() != S)
    return failure();
  auto mib = [](int64_t b) -> std::string {
    if (b < 1024)
      return llvm::formatv("{0} B", b).str();
    if (b < 1048576)
      return llvm::formatv("{0:f1} KiB", b / 1024.0).str();
    return llvm::formatv("{0:f2} MiB", b / 1048576.0).str();
  };
  double bubble = double(gpus - 1) / double(V * M + gpus - 1);
  if (V > 1)
    os << llvm::formatv("pipeline plan: {0} stage(s) x {1} chunks = {2} "
                        "virtual stages (virtual stage v on stage v mod {0}) "
                        "x {3} micro-batch(es) (memory as GPipe keeps it), "
                        "bubble (S-1)/(V*M+S-1) = {4:f3}",
                        gpus, V, S, M, bubble);
  else
    os << llvm::formatv("pipeline plan: {0} stage(s) x {1} micro-batch(es) "
                        "(memory as {2} keeps it), bubble "
                        "(S-1)/(M+S-1) = {3:f3}",
                        S, M,
                        oneFOneB ? "1F1B (min(M, S - s) on stage s)"
                                 : "GPipe",
                        bubble);
  if (int64_t budget = i64("budget_bytes"))
    os << ", device memory " << mib(budget);
  os << "\n";
  if (auto source = plan.getAs<StringAttr>("time_source"))
    os << "  stage times measured: " << source.getValue() << "\n";
  double slowest = 0;
  for (int64_t s = 0; s < S; ++s) {
    slowest = std::max(slowest, timesAttr[s]);
    os << llvm::formatv(
        "  {8}stage {0}{9}: forward ops {1}-{2}, peak {3} "
        "(parameters and state {4}, {5} x {6} kept for the "
        "backward pass), est. {7:f3} us\n",
        s, s == 0 ? 0 : cuts[s - 1] + 1,
        s + 1 < S ? llvm::formatv("{0}", cuts[s]).str() : std::string("end"),
        mib(peak[s]), mib(params[s]), kept[s], mib(saved[s]), timesAttr[s],
        V > 1 ? "virtual " : "",
        V > 1 ? llvm::formatv(" (stage {0}, chunk {1})", s % gpus, s / gpus)
                    .str()
              : std::string());
    if (s + 1 < S)
      os << llvm::formatv("  cut {0}|{1} after forward op {2}: {3} "
                          "tensor(s), {4} bytes per micro-batch (both "
                          "directions)\n",
                          s, s + 1, cuts[s], cutTensors[s], cutBytes[s]);
  }
  // Interleaved: a stage runs each micro-batch through its chunks, so the
  // slowest stage's sum sets the pace; filling and draining the loop take
  // S - 1 slots of a virtual stage each way.
  if (V > 1) {
    // Each GPU holds its chunks together: their peaks add up (a bound: the
    // chunks' working sets need not coincide).
    double slowestGpu = 0;
    for (int64_t g = 0; g < gpus; ++g) {
      double sum = 0;
      int64_t bytes = 0;
      std::string chunks;
      for (int64_t c = 0; c < V; ++c) {
        sum += timesAttr[g + c * gpus];
        bytes += peak[g + c * gpus];
        chunks += (c ? ", " : "") + std::to_string(g + c * gpus);
      }
      slowestGpu = std::max(slowestGpu, sum);
      os << llvm::formatv("  stage {0} (virtual stages {1}): peak {2} with its "
                          "chunks together, est. {3:f3} us a micro-batch\n",
                          g, chunks, mib(bytes), sum);
    }
    os << llvm::formatv("  estimated step: {0:f3} us for {1} micro-batches "
                        "(M x the slowest stage's chunks, {2:f3} us, + (S-1) x "
                        "the slowest virtual stage)\n",
                        M * slowestGpu + (gpus - 1) * slowest, M, slowestGpu);
  } else
    os << llvm::formatv("  estimated step: {0:f3} us for {1} micro-batches "
                        "((M+S-1) x the slowest stage)\n",
                        (M + S - 1) * slowest / 1.0, M);
  return success();
}
