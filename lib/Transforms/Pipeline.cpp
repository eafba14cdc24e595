//===- Pipeline.cpp - the training pipeline -------------------------------===//
//
// One definition of the pass pipeline for the cnnc driver, `cnnc-opt
// --cnn-train-pipeline` / `--cnn-gpu-pipeline`, the fuzz targets and (through
// cnnc) the Python package, so that a lit test of cnnc-opt sees exactly what
// the driver compiles. The policy (what each target gets by default, what
// -O0 leaves on) is resolve()'s; the order of the passes is
// buildCNNStepPipeline's.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Pipeline.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;
using namespace cnnc;

llvm::cl::OptionCategory &cnnc::trainingStepOptionCategory() {
  static llvm::cl::OptionCategory category(
      "2. Training (cnn-autodiff, data, checkpoints)");
  return category;
}

llvm::cl::OptionCategory &cnnc::stepPassOptionCategory() {
  static llvm::cl::OptionCategory category("3. Optimization passes");
  return category;
}

void CNNPipelineOptions::forEachOption(
    llvm::function_ref<void(llvm::cl::Option &)> fn) {
  // The options are registered in this object's own llvm::cl sub-command.
  std::vector<llvm::cl::Option *> opts;
  for (auto &entry : OptionsMap)
    opts.push_back(entry.second);
  llvm::sort(opts, [](llvm::cl::Option *a, llvm::cl::Option *b) {
    return a->ArgStr < b->ArgStr;
  });
  for (llvm::cl::Option *opt : opts)
    fn(*opt);
}

bool cnnc::isDriverSetOption(StringRef name) {
  return llvm::is_contained(
      {"target", "optimize", "import-cleanup", "world-size", "arch"}, name);
}

LogicalResult
cnnc::verifyCNNPipelineOptions(const CNNPipelineOptions &o,
                               llvm::function_ref<void(const Twine &)> error,
                               StringRef flagPrefix) {
  auto oneOf = [&](StringRef name, StringRef value,
                   std::initializer_list<StringRef> allowed,
                   StringRef expected) {
    if (llvm::is_contained(allowed, value))
      return true;
    error("unknown " + flagPrefix + name + " '" + value + "' (expected " +
          expected + ")");
    return false;
  };
  auto inRange = [&](StringRef name, int64_t v, int64_t lo, int64_t hi) {
    if (v >= lo && v <= hi)
      return true;
    error(flagPrefix + name + " must be between " +
          Twine(std::max<int64_t>(lo, 0)) + " and " + Twine(hi) + " MiB, got " +
          Twine(v));
    return false;
  };
  bool ok =
      oneOf("target", o.target, {"gpu", "cpu"}, "gpu or cpu") &&
      oneOf("optimizer", o.optimizer, {"sgd", "adam", "adamw", "none"},
            "sgd, adam, adamw or none") &&
      oneOf("layout", o.layout, {"", "nchw", "nhwc"}, "nchw or nhwc") &&
      oneOf("precision", o.precision, {"", "fp32", "fp16"}, "fp32 or fp16") &&
      inRange("remat-mb", o.rematMB, 0, int64_t(1) << 30) &&
      inRange("workspace-mb", o.workspaceMB, -1, 1 << 20);
  // Pipeline stages: the micro-batches are accumulation's micro-steps.
  if (ok && o.pipelineMemoryMB < 0) {
    error(flagPrefix + Twine("pipeline-memory-mb must be >= 0, got ") +
          Twine(o.pipelineMemoryMB));
    ok = false;
  }
  if (ok && (o.pipelineStages < 0 || o.microBatches < 1)) {
    error(flagPrefix + Twine("pipeline-stages must be >= 0 and ") +
          flagPrefix + "micro-batches >= 1, got " + Twine(o.pipelineStages) +
          " and " + Twine(o.microBatches));
    ok = false;
  }
  if (ok && o.pipelineSchedule != "gpipe" && o.pipelineSchedule != "1f1b") {
    error(flagPrefix + Twine("pipeline-schedule must be gpipe or 1f1b, got '") +
          o.pipelineSchedule + "'");
    ok = false;
  }
  if (ok && o.pipelineChunks != 1 &&
      (o.pipelineChunks < 1 || o.pipelineStages < 2 ||
       o.pipelineSchedule != "gpipe")) {
    std::string why =
        o.pipelineChunks < 1
            ? std::string(" is not a positive count")
            : (" (interleaved stages) needs " + flagPrefix +
               "pipeline-stages S >= 2 and " + flagPrefix +
               "pipeline-schedule gpipe")
                  .str();
    error(flagPrefix + Twine("pipeline-chunks ") + Twine(o.pipelineChunks) +
          why);
    ok = false;
  }
  // Interleaved stages on the compute stream deadlock: the first stage
  // takes chunk 1's inputs only after chunk 0's M micro-batches, while the
  // last stage's blocking send of the next one waits (a model of blocking
  // transfers, test_pipeline.py). The asynchronous transfers post them
  // ahead.
  if (ok && o.pipelineChunks > 1 && o.target == "gpu" &&
      o.pipelineAsyncTransfers.hasValue() && !o.pipelineAsyncTransfers) {
    error(flagPrefix + Twine("pipeline-chunks ") + Twine(o.pipelineChunks) +
          " needs the asynchronous transfers on the GPU (" + flagPrefix +
          "pipeline-async-transfers=false would deadlock the loop of stages)");
    ok = false;
  }
  if (ok && !o.pipelineProfile.empty() && !isPipelined(o)) {
    error(flagPrefix + Twine("pipeline-profile balances pipeline stages: "
                             "give ") +
          flagPrefix + "pipeline-stages S too");
    ok = false;
  }
  if (ok && !(o.pipelineTimeSlack >= 0 && o.pipelineTimeSlack <= 10)) {
    error(flagPrefix + Twine("pipeline-time-slack must be within [0, 10], "
                             "got ") +
          Twine(std::to_string((double)o.pipelineTimeSlack)));
    ok = false;
  }
  if (ok && o.pipelineSendsFirst.hasValue() && !isPipelined(o)) {
    error(flagPrefix + Twine("pipeline-sends-first orders the functions of "
                             "pipeline stages: give ") +
          flagPrefix + "pipeline-stages S too");
    ok = false;
  }
  if (ok && o.pipelineSchedule != "gpipe" && !isPipelined(o)) {
    error(flagPrefix + Twine("pipeline-schedule orders the micro-batches of "
                             "pipeline stages: give ") +
          flagPrefix + "pipeline-stages S too");
    ok = false;
  }
  // Asynchronous transfers asked for where there are none to make so:
  // without stages, and under 1F1B (its grouped transfers stay on the
  // compute stream, cnn-pipeline-async-transfers).
  if (ok && o.pipelineAsyncTransfers.hasValue() && o.pipelineAsyncTransfers &&
      (!isPipelined(o) || o.pipelineSchedule == "1f1b")) {
    error(flagPrefix + Twine("pipeline-async-transfers applies to GPipe "
                             "pipeline stages: ") +
          (isPipelined(o) ? "1F1B's grouped transfers run on the compute "
                            "stream (give " +
                                flagPrefix + "pipeline-schedule gpipe)"
                          : "give " + flagPrefix + "pipeline-stages S too"));
    ok = false;
  }
  if (ok && o.microBatches > 1 && !isPipelined(o)) {
    error(flagPrefix + Twine("micro-batches splits the batch of pipeline "
                             "stages: give ") +
          flagPrefix + "pipeline-stages S too");
    ok = false;
  }
  if (ok && isPipelined(o) && o.accumulate != 1 &&
      o.accumulate != o.microBatches) {
    error(flagPrefix + Twine("accumulate ") + Twine(o.accumulate) +
          " with pipeline stages: the " + Twine(o.microBatches) +
          " micro-batches are the accumulation's micro-steps");
    ok = false;
  }
  // Pipeline x data parallel (docs/pipeline-parallel.md): D replicas of
  // every stage, on the CUDA target (the reference interpreter's split
  // refuses the all-reduces, cnn-pipeline-partition); BatchNorm statistics
  // stay per micro-batch.
  if (ok && isPipelined(o) && o.syncBN) {
    error(flagPrefix + Twine("sync-bn with pipeline stages is not built "
                             "(BatchNorm statistics are per micro-batch)"));
    ok = false;
  }
  // The CUDA target (docs/pipeline-parallel.md) runs both schedules (1F1B's
  // crossing transfers as NCCL groups, cnn-pipeline-stage) in f32 and fp16
  // (each stage's finite flag combined over the stages by cnn-precision).
  if (ok && o.syncBN && o.worldSize < 1) {
    error(flagPrefix +
          Twine("sync-bn synchronizes BatchNorm across "
                "data-parallel ranks: give ") +
          (flagPrefix.empty() ? "world-size" : "--gpus N") + " too");
    ok = false;
  }
  return success(ok);
}

std::string cnnc::effectiveLayout(const CNNPipelineOptions &o) {
  if (!o.layout.empty())
    return o.layout;
  return o.optimize && o.target == "gpu" ? "nhwc" : "nchw";
}

std::string cnnc::effectivePrecision(const CNNPipelineOptions &o) {
  if (!o.precision.empty())
    return o.precision;
  return o.optimize && o.target == "gpu" ? "fp16" : "fp32";
}

CNNPipelinePartitionOptions
cnnc::getPartitionOptions(const CNNPipelineOptions &o) {
  CNNPipelinePartitionOptions po;
  po.stages = o.pipelineStages;
  po.microBatches = o.microBatches;
  po.deviceMemoryBytes = o.pipelineMemoryMB * (int64_t(1) << 20);
  po.halfPrecision = effectivePrecision(o) == "fp16";
  // The CUDA target's GPipe transfers run on their own streams
  // (cnn-pipeline-async-transfers); 1F1B's and the reference's do not.
  po.overlapTransfers = o.target == "gpu" && o.pipelineAsyncTransfers &&
                        o.pipelineSchedule != "1f1b";
  po.profile = o.pipelineProfile;
  po.timeSlack = o.pipelineTimeSlack;
  po.schedule = o.pipelineSchedule;
  po.chunks = o.pipelineChunks;
  return po;
}

CNNPipelineSplitOptions cnnc::getSplitOptions(const CNNPipelineOptions &o) {
  CNNPipelineSplitOptions so;
  so.sendsFirst = o.pipelineSendsFirst;
  return so;
}

CNNAutodiffOptions cnnc::getAutodiffOptions(const CNNPipelineOptions &o) {
  CNNAutodiffOptions ad;
  ad.optimizer = o.optimizer;
  ad.momentum = o.momentum;
  ad.dampening = o.dampening;
  ad.nesterov = o.nesterov;
  ad.weightDecay = o.weightDecay;
  ad.noBNWeightDecay = o.noBNWeightDecay;
  ad.clipGradNorm = o.clipGradNorm;
  ad.accumulate = o.accumulate;
  // Pipeline stages: one update per M micro-batches.
  if (isPipelined(o))
    ad.accumulate = o.microBatches;
  ad.beta1 = o.beta1;
  ad.beta2 = o.beta2;
  ad.epsilon = o.eps;
  ad.labelSmoothing = o.labelSmoothing;
  ad.ignoreIndex = o.ignoreIndex;
  ad.auxLossWeight = o.auxLossWeight;
  return ad;
}

namespace {
/// What runs, after the target's defaults and -O0 are applied.
struct StepSettings {
  bool nhwc, fp16, fuse, lowerElementwise, remat, rematConvs, convStats,
      convStatsPrologue, dgradEpilogue, maxPoolIndex, poolBnGrad, dualBnGrad,
      fuseGroupNorm, fuseResizeConcat, tiledTranspose,
      wgradPrologue, paramFormat, memoryPlan, memoryReuse, dataParallel, syncBN,
      asyncTransfers;
  int64_t rematMB, rematConvsPercent, workspaceMB, worldSize;
  double bucketMB;
  std::string arch;
};

StepSettings resolve(const CNNPipelineOptions &o) {
  const bool gpu = o.target == "gpu";
  StepSettings s;
  s.nhwc = effectiveLayout(o) == "nhwc";
  s.fp16 = effectivePrecision(o) == "fp16";
  // The reference interpreter is the golden model: it runs the unfused step
  // unless fuse is given (tests compare the two).
  s.fuse = o.optimize && o.fuse && (gpu || o.fuse.hasValue());
  // The CUDA target prints elementwise ops in their fused form only.
  s.lowerElementwise = gpu;
  s.remat = o.optimize && (o.remat || o.rematMB > 0) && s.fuse;
  s.rematMB = o.rematMB;
  s.rematConvs = o.optimize && o.rematConvs && s.fuse;
  s.rematConvsPercent = o.rematConvsPercent;
  s.convStats = o.optimize && o.convStats;
  s.convStatsPrologue = o.convPrologue || o.remat;
  s.dgradEpilogue = o.optimize && o.dgradEpilogue;
  s.maxPoolIndex = o.maxPoolIndex;
  s.poolBnGrad = o.poolBnGrad;
  s.dualBnGrad = o.dualBnGrad;
  s.fuseGroupNorm = o.fuseGroupNorm;
  s.fuseResizeConcat = o.fuseResizeConcat;
  s.tiledTranspose = o.tiledTranspose;
  s.wgradPrologue = o.wgradPrologue;
  s.paramFormat = o.paramFormat;
  // The CUDA target reads its arena plan from the IR, always (the reference
  // interpreter allocates per value); without optimization or memory-plan
  // it plans without sharing memory between temporaries.
  s.memoryPlan = gpu;
  s.memoryReuse = o.optimize && o.memoryPlan;
  s.asyncTransfers = gpu && o.pipelineAsyncTransfers;
  s.workspaceMB = o.workspaceMB;
  s.dataParallel = o.worldSize >= 1;
  s.worldSize = o.worldSize;
  s.bucketMB = o.bucketMB;
  s.syncBN = o.syncBN;
  s.arch = o.arch;
  return s;
}
} // namespace

void cnnc::buildCNNTrainPipeline(OpPassManager &pm,
                                 const CNNPipelineOptions &options) {
  if (options.importCleanup)
    pm.addPass(createCNNImportCleanup());
  pm.addPass(createCNNAutodiff(getAutodiffOptions(options)));
  pm.addPass(createCSEPass());
  // Pipeline stages on the CUDA target: the driver splits @train_step and
  // runs the step pipeline on each stage's step (cnn-pipeline-stage).
  if (isPipelined(options) && options.target != "cpu")
    return;
  buildCNNStepPipeline(pm, options);
}

void cnnc::buildCNNStepPipeline(OpPassManager &pm,
                                const CNNPipelineOptions &options) {
  StepSettings s = resolve(options);
  bool nhwc = s.nhwc, fp16 = s.fp16;
  if (nhwc)
    pm.addPass(createCNNLayout());
  if (fp16)
    pm.addPass(createCNNPrecision());
  // Both passes leave transposes and casts behind that fold and dedupe.
  if (nhwc || fp16) {
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  // The CUDA target's runtime converts each batch straight into the format
  // the first convolution reads.
  if (s.lowerElementwise && (nhwc || fp16))
    pm.addPass(createCNNInputFormat());
  // Filters (and their optimizer state) stored as the NHWC convolution
  // reads them: no per-step re-layout of weights and gradients.
  if (s.lowerElementwise && nhwc && s.paramFormat)
    pm.addPass(createCNNParamFormat());
  // Data parallelism: after layout/precision (the f16 gradients are the ones
  // reduced), before fusion and the memory plan.
  if (s.dataParallel) {
    CNNDataParallelOptions dp;
    dp.bucketMB = s.bucketMB;
    dp.syncBN = s.syncBN;
    dp.worldSize = s.worldSize;
    pm.addPass(createCNNDataParallel(dp));
  }
  // The residual-gradient add + ReLU gradient into the backward-data
  // convolution before them (cuDNN's dgrad graph): before cnn-fuse merges
  // the add and relu_grad into an elementwise kernel.
  if (s.fuse && s.dgradEpilogue && s.lowerElementwise && nhwc && fp16)
    pm.addPass(createCNNDgradEpilogue());
  if (s.fuse) {
    CNNFuseOptions fo;
    fo.dualBatchNormGrad = s.dualBnGrad;
    fo.groupNormChannelView = s.fuseGroupNorm;
    fo.resizeConcat = s.fuseResizeConcat;
    pm.addPass(createCNNFuse(fo));
  }
  // BatchNorm statistics out of the convolution's epilogue: the CUDA
  // target's NHWC f16 convolutions only (cuDNN's runtime fusion).
  if (s.fuse && s.convStats && s.lowerElementwise && nhwc && fp16) {
    CNNConvStatsOptions cs;
    cs.prologue = s.convStatsPrologue;
    cs.wgradPrologue = s.wgradPrologue;
    pm.addPass(createCNNConvStats(cs));
  }
  // Max pooling keeps its argmax for the gradient, so the pooled input is
  // not stored, and the gradient is one gather (the CUDA target's other
  // form finds every window's maximum again: ResNet-50's step measured
  // 25.7 ms with it, 21.3 without). With fusion, a BN + ReLU before the
  // pooling becomes its prologue (after cnn-fuse made it a
  // fused_elementwise). With --pool-bn-grad the pooling gradient is
  // gathered inside the BatchNorm + ReLU gradient after it (off by default:
  // its two gathering passes measured slower than one gather kernel plus
  // the BN gradient's two streaming passes on ResNet-50's stem).
  if (s.lowerElementwise && s.maxPoolIndex) {
    CNNMaxPoolIndexOptions mpi;
    mpi.prologue = s.fuse;
    mpi.gradFusion = s.fuse && s.poolBnGrad;
    pm.addPass(createCNNMaxPoolIndex(mpi));
  }
  // The CUDA target prints elementwise ops in their fused form only.
  if (s.lowerElementwise)
    pm.addPass(createCNNLowerElementwise());
  // Fewer stored activations: needs the fused form (it clones
  // fused_elementwise ops), before the lowering choices and the plan.
  if (s.remat && s.lowerElementwise) {
    CNNRematOptions ro;
    ro.budgetMB = s.rematMB;
    pm.addPass(createCNNRemat(ro));
  } else if (s.rematConvs && s.lowerElementwise) {
    // The default: the recomputations that cost least (1x1 convolutions
    // that expand their input), for a share of the stored activations.
    CNNRematOptions ro;
    ro.onlyConvolutions = true;
    ro.budgetPercent = s.rematConvsPercent;
    pm.addPass(createCNNRemat(ro));
  }
  // How each op runs on the GPU: decided here, printed by the emitter.
  if (s.lowerElementwise) {
    CNNSelectLoweringOptions sl;
    sl.tiledTranspose = s.tiledTranspose;
    pm.addPass(createCNNSelectLowering(sl));
  }
  // A pipeline stage's transfers on its links' streams: after every pass
  // that adds readers (a received value's readers follow its wait), before
  // the plan (a sent tensor lives until its wait).
  if (s.asyncTransfers)
    pm.addPass(createCNNPipelineAsyncTransfers());
  // The arena plan is for the CUDA target (the reference interpreter
  // allocates per value); it runs last, after every rewrite of the step.
  if (s.memoryPlan) {
    CNNMemoryPlanOptions mp;
    mp.reuse = s.memoryReuse;
    mp.workspaceMB = s.workspaceMB;
    pm.addPass(createCNNMemoryPlan(mp));
  }
  // Last: how each generated kernel launches (grids from the target's SM
  // count, reduction strategies, multi-tensor chunks), decided in IR for
  // the CUDA printer, after every rewrite of the step.
  if (s.lowerElementwise) {
    CNNPrepareForEmissionOptions pe;
    pe.arch = s.arch;
    pm.addPass(createCNNPrepareForEmission(pe));
  }
}

namespace {
/// Registers `arg` with CNNPipelineOptions: parse, verify, build.
void registerPipeline(StringRef arg, StringRef description,
                      void (*build)(OpPassManager &,
                                    const CNNPipelineOptions &)) {
  registerPassPipeline(
      arg, description,
      [arg, build](OpPassManager &pm, StringRef text,
                   function_ref<LogicalResult(const Twine &)> errorHandler) {
        CNNPipelineOptions options;
        // The option parser's message (an unknown option, a value of the
        // wrong type) names the option; llvm::cl prints a bad value's
        // itself.
        std::string parseError;
        llvm::raw_string_ostream parseOS(parseError);
        if (failed(options.parseFromString(text, parseOS))) {
          StringRef why = StringRef(parseError).trim();
          return errorHandler(arg + ": cannot parse the options '" + text +
                              "'" + (why.empty() ? "" : ": ") + why);
        }
        if (failed(verifyCNNPipelineOptions(options, [&](const Twine &msg) {
              (void)errorHandler(arg + ": " + msg);
            })))
          return failure();
        build(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> optHandler) {
        optHandler(CNNPipelineOptions());
      });
}
} // namespace

void cnnc::registerCNNPipelines() {
  registerPipeline(
      "cnn-train-pipeline",
      "The training pipeline as the cnnc driver runs it: cnn-import-cleanup, "
      "cnn-autodiff, CSE, then the step's optimization passes "
      "(cnn-gpu-pipeline); defaults: the CUDA target's",
      buildCNNTrainPipeline);
  registerPipeline(
      "cnn-gpu-pipeline",
      "The training step's optimization passes after cnn-autodiff, as the "
      "cnnc driver runs them (cnn-train-pipeline's tail; target=cpu: the "
      "reference interpreter's)",
      buildCNNStepPipeline);
}

void cnnc::printCNNPipelineOptionsJSON(llvm::raw_ostream &os) {
  CNNPipelineOptions defaults;
  // "{name=value name=value ...}": each option's default as MLIR prints it.
  std::string text;
  {
    llvm::raw_string_ostream ts(text);
    defaults.print(ts);
  }
  StringRef body = StringRef(text).trim().drop_front().drop_back();
  llvm::StringMap<std::string> values;
  SmallVector<StringRef> parts;
  body.split(parts, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts) {
    auto [name, value] = part.split('=');
    values[name] = value.str();
  }
  llvm::json::Array options;
  defaults.forEachOption([&](llvm::cl::Option &opt) {
    StringRef name = opt.ArgStr;
    std::string value = values.lookup(name);
    llvm::json::Value def = value;
    bool isBool = opt.getValueExpectedFlag() == llvm::cl::ValueOptional;
    double number;
    if (isBool)
      def = value == "true";
    else if (!value.empty() && llvm::to_float(value, number))
      def = number;
    options.push_back(llvm::json::Object{
        {"name", name},
        {"flag", isDriverSetOption(name)
                     ? llvm::json::Value(nullptr)
                     : llvm::json::Value("--" + name.str())},
        {"type", isBool                                    ? "bool"
                 : def.kind() == llvm::json::Value::Number ? "number"
                                                           : "string"},
        {"default", std::move(def)},
        {"description", opt.HelpStr},
        // A/B and tuning switches: listed by cnnc --help-hidden only.
        {"hidden", opt.getOptionHiddenFlag() != llvm::cl::NotHidden}});
  });
  // The defaults that depend on the target (and on optimize).
  llvm::json::Object targets;
  for (const char *target : {"gpu", "cpu"}) {
    CNNPipelineOptions o;
    o.target = target;
    StepSettings s = resolve(o);
    targets[target] = llvm::json::Object{{"layout", effectiveLayout(o)},
                                         {"precision", effectivePrecision(o)},
                                         {"fuse", s.fuse}};
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                   {"pipeline", "cnn-train-pipeline"},
                                   {"options", std::move(options)},
                                   {"targets", std::move(targets)}}))
     << "\n";
}
