//===- Train.cpp - training-step actions of the cnnc driver ---------------===//
//
// --train (cnn-train-pipeline), CUDA emission (the nvcc build is
// NvccCompile.cpp's), and `cnnc train` (compile + run, CPU fallback without
// a GPU). The reference training loop is ReferenceTraining.cpp, --batch auto
// AutoBatch.cpp.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Driver/Driver.h"
#include "cnnc/Driver/NvccCompile.h"
#include "PipelineCUDA.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Target/CUDA/EmitCUDA.h"
#include "cnnc/Transforms/MemoryPlan.h"
#include "cnnc/Transforms/Passes.h"
#include "cnnrt/Dataset.h"
#include "cnnrt/TensorFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <optional>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::driver;

double cnnc::driver::learningRate(const DriverOptions &o) {
  if (o.lr)
    return *o.lr;
  return pipelineOptions(o)->optimizer == "sgd" ? 0.01 : 0.001;
}

namespace {
int64_t countCNNOps(ModuleOp module) {
  int64_t n = 0;
  module->walk([&](Operation *op) {
    if (isa<cnn::CNNDialect>(op->getDialect()) && !isa<cnn::YieldOp>(op))
      ++n;
  });
  return n;
}

/// --stats' "cnn ops N -> M": N counted once the step exists (after the CSE
/// that follows cnn-autodiff), before its optimization passes.
struct CountAfterAutodiff : public PassInstrumentation {
  int64_t &count;
  bool sawAutodiff = false, counted = false;
  explicit CountAfterAutodiff(int64_t &count) : count(count) {}
  void runAfterPass(Pass *pass, Operation *op) override {
    if (pass->getArgument() == "cnn-autodiff")
      sawAutodiff = true;
    else if (sawAutodiff && !counted && pass->getArgument() == "cse") {
      count = countCNNOps(cast<ModuleOp>(op));
      counted = true;
    }
  }
};
} // namespace

LogicalResult cnnc::driver::buildTrainStep(const DriverOptions &o,
                                           Compilation &c) {
  if ((*c.module).lookupSymbol("train_step"))
    return success(); // a .mlir file that already holds the step
  if (!o.paramGroups.empty() &&
      failed(applyParamGroups(o.paramGroups, *c.module)))
    return failure();
  std::unique_ptr<CNNPipelineOptions> pipeline = pipelineOptions(o);
  // Several outputs: every ONNX graph output after the first is an auxiliary
  // head (the file's output order decides); say what the loss is.
  if (auto fwd = (*c.module).lookupSymbol<func::FuncOp>(
          CNNAutodiffOptions().forwardName))
    if (unsigned n = fwd.getNumResults(); n > 1) {
      char weight[32];
      std::snprintf(weight, sizeof weight, "%g",
                    pipeline->auxLossWeight.getValue());
      llvm::errs() << llvm::formatv(
          "cnnc: note: the model has {0} outputs: the loss is CE(output 0) + "
          "{1} x (the sum of CE of outputs 1..{2}): every graph output after "
          "the first is an auxiliary classifier weighted by "
          "--aux-loss-weight\n",
          n, weight, n - 1);
    }
  // cnn-train-pipeline, as cnnc-opt --cnn-train-pipeline builds it.
  PassManager pm(&c.context);
  buildCNNTrainPipeline(pm, *pipeline);
  int64_t opsBefore = 0;
  if (o.stats)
    pm.addInstrumentation(std::make_unique<CountAfterAutodiff>(opsBefore));
  if (failed(runPasses(pm, c)))
    return failure();
  // State with an initial value (a param group's LR, --param-groups) goes
  // into the weights file, which the executable loads its state from (a
  // missing optimizer state would start at zero there). The loss scale of
  // cnn-precision starts from its cnn.init in the executable and the
  // interpreter: it is not written.
  if (auto step = (*c.module).lookupSymbol<func::FuncOp>("train_step"))
    for (unsigned i = 0; i < step.getNumArguments(); ++i) {
      auto name = step.getArgAttrOfType<StringAttr>(i, cnn::kStateAttr);
      auto init = step.getArgAttrOfType<FloatAttr>(i, "cnn.init");
      if (name && init && !step.getArgAttr(i, "cnn.loss_scale") &&
          !c.weights.count(name.str()))
        c.weights[name.str()] = reference::Tensor::zeros(
            cast<RankedTensorType>(step.getArgument(i).getType()),
            static_cast<float>(init.getValueAsDouble()));
    }
  if (o.stats) {
    llvm::errs() << "cnnc: stats: layout " << effectiveLayout(*pipeline)
                 << ", precision " << effectivePrecision(*pipeline)
                 << ", cnn ops " << opsBefore << " -> "
                 << countCNNOps(*c.module) << "\n";
    // cnn-fuse's statistics, in the names and order --stats always printed.
    for (Pass &pass : pm.getPasses())
      if (std::optional<FusionCounts> fused = getFusionCounts(pass)) {
        std::pair<const char *, int64_t> lines[] = {
            {"bn_relu_grad_ops", fused->bnReluGradOps},
            {"bn_relu_masks_recomputed", fused->bnReluMasksRecomputed},
            {"bn_grad_pairs", fused->bnGradPairs},
            {"bn_split", fused->bnSplits},
            {"conv_epilogue_ops", fused->convEpilogueOps},
            {"elementwise_merges", fused->elementwiseMerges},
            {"elementwise_ops", fused->elementwiseOps},
            {"group_norm_channel_views", fused->groupNormChannelViews},
            {"resize_concats", fused->resizeConcats},
            {"resize_grad_slices", fused->resizeGradSlices}};
        for (auto [name, count] : lines)
          llvm::errs() << "cnnc: stats: fusion " << name << " " << count
                       << "\n";
      }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// CUDA
//===----------------------------------------------------------------------===//

bool cnnc::driver::isSupportedArch(StringRef arch) {
  return arch == "sm_80" || arch == "sm_86" || arch == "sm_89" ||
         arch == "sm_90" || arch == "sm_90a";
}

std::string cnnc::driver::resolveArch(StringRef requested) {
  if (requested != "native")
    return requested.str();
  const char *fallback = "sm_90a";
  if (!hasGPU())
    return fallback;
  // The GPU's compute capability, "9.0", from nvidia-smi.
  auto smi = llvm::sys::findProgramByName("nvidia-smi");
  llvm::SmallString<128> outPath;
  if (!smi || llvm::sys::fs::createTemporaryFile("cnnc-smi", "txt", outPath)) {
    llvm::errs() << "cnnc: note: --arch native: nvidia-smi not found, using "
                 << fallback << "\n";
    return fallback;
  }
  llvm::FileRemover remove(outPath);
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(outPath),
                                          StringRef("")};
  StringRef args[] = {*smi, "--query-gpu=compute_cap", "--format=csv,noheader",
                      "--id=0"};
  int rc = llvm::sys::ExecuteAndWait(*smi, args, std::nullopt, redirects,
                                     /*SecondsToWait=*/20);
  auto text = llvm::MemoryBuffer::getFile(outPath);
  std::string cap = rc == 0 && text ? (*text)->getBuffer().trim().str() : "";
  std::string arch = cap == "9.0"   ? "sm_90a"
                     : cap == "8.0" ? "sm_80"
                     : cap == "8.6" ? "sm_86"
                     : cap == "8.9" ? "sm_89"
                                    : "";
  if (arch.empty()) {
    llvm::errs() << "cnnc: note: --arch native: the GPU's compute capability "
                 << (cap.empty() ? "could not be read" : "'" + cap + "'")
                 << " is not one cnnc targets, using " << fallback << "\n";
    return fallback;
  }
  return arch;
}

bool cnnc::driver::hasGPU() {
  if (const char *e = std::getenv("CNNC_ASSUME_NO_GPU"))
    if (std::string(e) == "1")
      return false;
  return llvm::sys::fs::exists("/dev/nvidia0") ||
         llvm::sys::fs::exists("/dev/nvidiactl");
}

LogicalResult cnnc::driver::writeCUDASource(const DriverOptions &o,
                                            Compilation &c,
                                            const std::string &cu) {
  if (o.outputFile.empty()) {
    llvm::outs() << cu;
    return success();
  }
  std::string err;
  if (!cnnrt::writeFileAtomic(o.outputFile, cu, err))
    return fail(c, "cannot write '" + o.outputFile + "': " + err);
  return success();
}

LogicalResult cnnc::driver::compileCUDA(const DriverOptions &o, Compilation &c,
                                        std::string &exePath) {
  if (o.emit != "cuda" && !isSupportedArch(o.arch))
    return fail(c, "unsupported --arch '" + o.arch + "' (expected " +
                       kSupportedArchs + ")");
  // Pipeline stages: one step unit per stage (PipelineCUDA.cpp).
  if (isPipelined(*pipelineOptions(o)))
    return compilePipelineCUDA(o, c, exePath);
  CUDAEmitOptions eo;
  eo.modelName = llvm::sys::path::stem(o.inputFile).str();
  eo.library = o.emit == "lib";
  eo.defaultLR = (float)learningRate(o);
  if (o.steps > 0)
    eo.defaultSteps = o.steps;
  // A step given as MLIR (already optimized, e.g. by cnnc-opt in a lit
  // test) may not have its lowering chosen yet: the emitter only prints.
  bool selected = true;
  c.module->walk([&](func::FuncOp f) {
    if (!f.isExternal() && !f->hasAttr("cnn.lowering_selected"))
      selected = false;
  });
  // Likewise its arena plan, the one the emitter reads (it plans nothing),
  // and its launch decisions for this --arch (cnn-prepare-for-emission).
  bool planned = c.module->getOperation()->hasAttr(kArenaBytesAttr);
  auto target = c.module->getOperation()->getAttrOfType<cnn::TargetAttr>(
      cnn::kTargetAttr);
  bool prepared = selected && planned && target && target.getArch() == o.arch;
  if (!prepared) {
    PassManager pm(&c.context);
    if (!selected) {
      // How its max poolings' gradients run is a lowering choice too
      // (before the arena plan: not once the step has one).
      if (pipelineOptions(o)->maxPoolIndex && !planned) {
        CNNMaxPoolIndexOptions mpi;
        mpi.prologue = false; // a step given as MLIR keeps its fusions
        mpi.gradFusion = false;
        pm.addPass(createCNNMaxPoolIndex(mpi));
      }
      CNNSelectLoweringOptions sl;
      sl.tiledTranspose = pipelineOptions(o)->tiledTranspose;
      pm.addPass(createCNNSelectLowering(sl));
    }
    if (!planned) {
      CNNMemoryPlanOptions mp;
      mp.reuse = o.optimize && pipelineOptions(o)->memoryPlan;
      pm.addPass(createCNNMemoryPlan(mp));
    }
    CNNPrepareForEmissionOptions pe;
    pe.arch = o.arch;
    pm.addPass(createCNNPrepareForEmission(pe));
    if (failed(runPasses(pm, c)))
      return failure();
  }
  std::string cu;
  llvm::raw_string_ostream os(cu);
  {
    TimingScope emitTiming = c.timing.nest("Emit CUDA");
    if (failed(emitCUDA(*c.module, os, eo)))
      return failure();
  }
  os.flush();
  if (o.stats) {
    // The emitter states the count in the header comment of the .cu file.
    size_t at = cu.find(" kernel launches and library calls per training step");
    size_t from = cu.rfind("': ", at);
    if (at != std::string::npos && from != std::string::npos)
      llvm::errs() << "cnnc: stats: " << cu.substr(from + 3, at - from - 3)
                   << " kernel launches and library calls per training step\n";
  }
  if (o.emit == "cuda")
    return writeCUDASource(o, c, cu);
  // An executable (or shared library): built by nvcc (NvccCompile.cpp).
  exePath = o.outputFile.empty()
                ? std::string(eo.library ? "libstep.so" : "train")
                : o.outputFile;
  NvccOptions no;
  no.arch = o.arch;
  no.runtimeDir = o.runtimeDir;
  no.argv0 = o.argv0;
  no.library = eo.library;
  return buildWithNvcc(c, cu, no, exePath);
}

int cnnc::driver::trainAndRun(const DriverOptions &options, Compilation &c) {
  DriverOptions o = options;
  if (o.steps <= 0 && o.trainFlags.epochs < 0)
    o.steps = 100;
  if (o.data.empty()) {
    emitError(UnknownLoc::get(&c.context))
        << "cnnc train needs --data DIR|FILE|synthetic";
    return 1;
  }
  // The trained state (parameters, BN statistics, optimizer state) is kept
  // on both paths: --checkpoint, --save-state, else "<-o or
  // train>.trained.cnnw". The executable writes one state file (its
  // --checkpoint), so the two flags do not go together here.
  if (!o.checkpoint.empty() && !o.saveState.empty()) {
    emitError(UnknownLoc::get(&c.context))
        << "cnnc train writes the trained state to one file: give "
           "--checkpoint or --save-state, not both";
    return 1;
  }
  if (o.saveState.empty() && o.checkpoint.empty())
    o.saveState = (o.outputFile.empty() ? std::string("train") : o.outputFile) +
                  ".trained.cnnw";
  const std::string statePath =
      o.checkpoint.empty() ? o.saveState : o.checkpoint;
  auto kept = [&](int rc) {
    if (rc == 0)
      llvm::errs() << "cnnc: trained state written to '" << statePath << "'\n";
    return rc;
  };
  auto fallback = [&](const std::string &why) {
    llvm::errs() << "cnnc: note: " << why
                 << "; training on the CPU reference interpreter instead\n";
    llvm::errs().flush();
    if (!o.targetGPU)
      return kept(failed(trainReference(o, c)) ? 1 : 0);
    // The module was compiled for the GPU (-o asked for an executable): its
    // step takes the image in the GPU's format (cnn-input-format) and is
    // fused for the GPU. The interpreter runs its own pipeline's step.
    DriverOptions ro = o;
    ro.targetGPU = false;
    Compilation rc;
    if (failed(loadInput(ro, rc)) || failed(buildTrainStep(ro, rc)))
      return 1;
    return kept(failed(trainReference(ro, rc)) ? 1 : 0);
  };
  if (!hasGPU())
    return fallback("no CUDA GPU found");
  if (findNvcc().empty())
    return fallback("nvcc not found");
  o.emit = "exe";
  if (o.outputFile.empty())
    o.outputFile = "train";
  std::string exe;
  if (failed(compileCUDA(o, c, exe)))
    return 1;
  SmallString<256> abs(exe);
  llvm::sys::fs::make_absolute(abs);
  std::vector<std::string> args = {std::string(abs),
                                   "--data",
                                   o.data,
                                   "--lr",
                                   std::to_string(learningRate(o)),
                                   "--seed",
                                   std::to_string(o.seed),
                                   "--checkpoint",
                                   statePath};
  if (o.checkpointEvery > 0)
    args.insert(args.end(),
                {"--checkpoint-every", std::to_string(o.checkpointEvery)});
  if (!o.resume.empty())
    args.insert(args.end(), {"--resume", o.resume});
  if (o.steps > 0)
    args.insert(args.end(), {"--steps", std::to_string(o.steps)});
  if (!o.labelsTensor.empty())
    args.insert(args.end(), {"--labels", o.labelsTensor});
  for (const std::string &a : o.trainFlags.toArgs())
    args.push_back(a);
  if (cnnrt::hasTestSplit(o.data))
    args.push_back("--eval");
  // Data parallel: the executable starts one process per GPU itself.
  if (o.worldSize > 1 || o.dataParallel)
    args.insert(args.end(), {"--gpus", std::to_string(o.worldSize)});
  std::vector<StringRef> argRefs(args.begin(), args.end());
  int rc = llvm::sys::ExecuteAndWait(args[0], argRefs);
  if (rc == 3) // the runtime's "no GPU" exit code
    return fallback("the executable found no usable GPU");
  return kept(rc);
}
