//===- Driver.cpp - the cnnc compiler driver ------------------------------===//
#include "Driver.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Frontend/ONNXImporter.h"
#include "cnnc/Reference/TensorEntry.h"
#include "cnnc/Target/CUDA/EmitCUDA.h"
#include "cnnc/Transforms/Passes.h"
#include "cnnrt/HyperParams.h"
#include "cnnrt/TensorFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/Statistic.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::driver;

#ifndef CNNC_VERSION
#define CNNC_VERSION "0.1.0"
#endif

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

namespace {
namespace cl = llvm::cl;

// llvm::cl prints the categories sorted by name: the numbers put cnnc's own
// before LLVM's "Generic Options" (--help, --version).
cl::OptionCategory cnncCategory("1. Model, output and reference run");

cl::opt<std::string> inputFile(cl::Positional,
                               cl::desc("<model.onnx|model.mlir>"),
                               cl::Optional, cl::cat(cnncCategory));
cl::opt<std::string> listOnnxOps(
    "list-onnx-ops",
    cl::desc("Print the ONNX ops the importer handles (opsets, gradient, GPU "
             "kernel, notes) and exit; =markdown prints docs/ops.md"),
    cl::value_desc("text|markdown"), cl::ValueOptional, cl::init(""),
    cl::cat(cnncCategory));
cl::opt<std::string> outputFile("o", cl::desc("Output file (default: stdout)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::cat(cnncCategory));
cl::opt<std::string>
    emitKind("emit",
             cl::desc("What to emit: mlir (the IR; the default when no other "
                      "action is requested), cuda (the training step as CUDA "
                      "C++; also implied by -o FILE.cu), exe (a native "
                      "training executable; implied by -o FILE without "
                      ".mlir/.cu) or lib (a shared library exposing the "
                      "runtime's C API, cnnrt_c.h)"),
             cl::value_desc("mlir|cuda|exe|lib"), cl::init(""),
             cl::cat(cnncCategory));
cl::opt<int64_t> batchSize("batch",
                           cl::desc("Batch size (replaces the input's first, "
                                    "possibly dynamic, dimension); 'auto': "
                                    "the largest whose memory plan fits the "
                                    "GPU's free memory"),
                           cl::value_desc("N"), cl::init(0),
                           cl::cat(cnncCategory));
cl::opt<int64_t> maxTensorElementsOpt(
    "max-tensor-elements",
    cl::desc("The most elements any tensor may have (a graph input, an op "
             "result): a larger one is an error where its shape is made; at "
             "most the default, 2^40"),
    cl::value_desc("N"), cl::init(kDefaultMaxTensorElements),
    cl::cat(cnncCategory));
cl::opt<bool> printLocations("print-locations",
                             cl::desc("Print op locations (ONNX node names) "
                                      "in the emitted IR"),
                             cl::init(false), cl::cat(cnncCategory));
cl::opt<bool> runRef("run-reference",
                     cl::desc("Run @forward with the CPU reference "
                              "interpreter on --input, write --output"),
                     cl::init(false), cl::cat(cnncCategory));
cl::opt<std::string> inputTensor("input",
                                 cl::desc("Input tensor for --run-reference "
                                          "(.npy or raw CNNT .bin)"),
                                 cl::value_desc("file"), cl::init(""),
                                 cl::cat(cnncCategory));
cl::opt<std::string> outputTensor("output",
                                  cl::desc("Where --run-reference writes the "
                                           "first result (.npy or .bin)"),
                                  cl::value_desc("file"), cl::init(""),
                                  cl::cat(cnncCategory));
cl::opt<std::string>
    weightsFile("weights",
                cl::desc("Weights file (.cnnw, or .safetensors by the "
                         "extension) overriding the module's cnn.weights"),
                cl::value_desc("file"), cl::init(""), cl::cat(cnncCategory));

cl::OptionCategory trainCategory("2. Training (cnn-autodiff, data, checkpoints)");
cl::opt<bool> trainFlag("train",
                        cl::desc("Build the training step (loss, backward, "
                                 "optimizer) with cnn-autodiff"),
                        cl::init(false), cl::cat(trainCategory));
cl::opt<std::string> optimizerName("optimizer",
                                   cl::desc("sgd, adam, adamw, or none "
                                            "(return gradients)"),
                                   cl::init("sgd"), cl::cat(trainCategory));
cl::opt<double> lrOpt("lr",
                      cl::desc("Learning rate (default: 0.01 for SGD, "
                               "0.001 for Adam)"),
                      cl::init(-1.0), cl::cat(trainCategory));
cl::opt<double> momentumOpt("momentum", cl::desc("SGD momentum"), cl::init(0.9),
                            cl::cat(trainCategory));
cl::opt<double> dampeningOpt("dampening", cl::desc("SGD dampening"),
                             cl::init(0.0), cl::cat(trainCategory));
cl::opt<bool> nesterovOpt("nesterov", cl::desc("SGD Nesterov momentum"),
                          cl::init(false), cl::cat(trainCategory));
cl::opt<double> weightDecayOpt("weight-decay", cl::desc("Weight decay"),
                               cl::init(0.0), cl::cat(trainCategory));
cl::opt<bool> noBNWeightDecayOpt(
    "no-bn-weight-decay",
    cl::desc("No weight decay on 1-D parameters (BatchNorm scale/shift, "
             "biases)"),
    cl::init(false), cl::cat(trainCategory));
cl::opt<std::string> paramGroupsOpt(
    "param-groups",
    cl::desc("JSON file of frozen parameters and torch-style param groups "
             "(per-group lr, weight_decay, momentum, dampening, nesterov, "
             "betas, eps): {\"frozen\": [names], \"groups\": [{\"params\": "
             "[names], ...}]} (docs/python.md)"),
    cl::value_desc("file"), cl::init(""), cl::cat(trainCategory));
cl::opt<double> clipGradNormOpt(
    "clip-grad-norm",
    cl::desc("Clip the gradients to this global L2 norm before each update, "
             "as torch.nn.utils.clip_grad_norm_ (after unscaling under "
             "fp16; a skipped fp16 step skips it)"),
    cl::value_desc("max_norm"), cl::init(0.0), cl::cat(trainCategory));
cl::opt<int64_t> accumulateOpt(
    "accumulate",
    cl::desc("Gradient accumulation: each step is a micro-step; the update "
             "applies every N micro-steps to the mean of their gradients "
             "(torch's loop of N backward passes of loss / N); fp32 only"),
    cl::value_desc("N"), cl::init(1), cl::cat(trainCategory));
cl::opt<double> beta1Opt("beta1", cl::desc("Adam beta1"), cl::init(0.9),
                         cl::cat(trainCategory));
cl::opt<double> beta2Opt("beta2", cl::desc("Adam beta2"), cl::init(0.999),
                         cl::cat(trainCategory));
cl::opt<double> epsOpt("eps", cl::desc("Adam epsilon"), cl::init(1e-8),
                       cl::cat(trainCategory));
cl::opt<double> labelSmoothingOpt("label-smoothing",
                                  cl::desc("Cross-entropy label smoothing"),
                                  cl::init(0.0), cl::cat(trainCategory));
// The default is cnn-autodiff's (Passes.td declares it once).
cl::opt<int64_t> ignoreIndexOpt(
    "ignore-index",
    cl::desc("Label that contributes nothing to the loss and is not counted "
             "in its mean (PyTorch's ignore_index; e.g. 255 for the void "
             "pixels of segmentation masks)"),
    cl::init(CNNAutodiffOptions().ignoreIndex), cl::cat(trainCategory));
cl::opt<double> auxLossWeightOpt(
    "aux-loss-weight",
    cl::desc("Weight of each auxiliary classifier's cross-entropy in the loss "
             "(models returning several logits: GoogLeNet, Inception-v3, "
             "segmentation models' 'aux' head, where torchvision uses 0.5)"),
    cl::init(0.4), cl::cat(trainCategory));
cl::opt<int64_t> stepsOpt("steps", cl::desc("Training steps"), cl::init(0),
                          cl::cat(trainCategory));
cl::opt<std::string>
    dataOpt("data",
            cl::desc("Training data: an image folder (torchvision "
                     "ImageFolder layout, JPEG/PNG; train/ and val/ "
                     "subfolders for validation), .npy arrays (images.npy "
                     "with --labels, or a directory with train_x.npy/"
                     "train_y.npy), CIFAR-10 binary files (a directory or "
                     "one file), or 'synthetic' (docs/runtime.md)"),
            cl::value_desc("DIR|FILE|synthetic"), cl::init(""),
            cl::cat(trainCategory));
cl::opt<std::string> labelsOpt("labels",
                               cl::desc("Labels (.npy) of the fixed batch "
                                        "--input, for --train --run-reference"),
                               cl::value_desc("file"), cl::init(""),
                               cl::cat(trainCategory));
cl::opt<std::string> saveStateOpt("save-state",
                                  cl::desc("After reference training or "
                                           "'cnnc train', write parameters, "
                                           "statistics, optimizer state (and "
                                           "gradients) to a .cnnw or "
                                           ".safetensors ('cnnc train' "
                                           "default: <-o>.trained.cnnw)"),
                                  cl::value_desc("file"), cl::init(""),
                                  cl::cat(trainCategory));
cl::opt<std::string> checkpointOpt(
    "checkpoint",
    cl::desc("With --run-reference or 'cnnc train': write a checkpoint "
             "(parameters, buffers, optimizer state, step, data position) at "
             "the end, atomically; '{step}' in FILE is replaced by the step. "
             ".safetensors or .cnnw by the extension"),
    cl::value_desc("file"), cl::init(""), cl::cat(trainCategory));
cl::opt<int64_t> checkpointEveryOpt(
    "checkpoint-every",
    cl::desc("Also write --checkpoint every K steps"), cl::value_desc("K"),
    cl::init(0), cl::cat(trainCategory));
cl::opt<std::string> resumeOpt(
    "resume",
    cl::desc("Continue from a checkpoint (exact resume: the losses of the "
             "remaining steps equal the uninterrupted run's); --steps/--epochs "
             "still name the end of the whole run"),
    cl::value_desc("file"), cl::init(""), cl::cat(trainCategory));
cl::opt<int64_t> gpusOpt(
    "gpus",
    cl::desc("Data-parallel training on N GPUs (one process per GPU, "
             "gradients all-reduced with NCCL); without a GPU, N ranks of the "
             "CPU reference interpreter (threads). Each rank trains on the "
             "model's batch: the global batch is N times it"),
    cl::value_desc("N"), cl::init(0), cl::cat(trainCategory));
cl::alias worldSizeAlias("world-size", cl::desc("Alias for --gpus"),
                         cl::aliasopt(gpusOpt), cl::cat(trainCategory));
cl::opt<double> bucketMBOpt(
    "bucket-mb",
    cl::desc("Data parallelism: largest gradient bucket of one all-reduce, in "
             "MiB (default 25, as PyTorch DDP)"),
    cl::init(25.0), cl::cat(trainCategory));
cl::opt<bool> syncBNOpt(
    "sync-bn",
    cl::desc("Data parallelism: BatchNorm normalizes with the statistics of "
             "the global batch (PyTorch's SyncBatchNorm; needs --gpus)"),
    cl::init(false), cl::cat(trainCategory));
cl::opt<uint64_t> seedOpt("seed", cl::desc("Data shuffling seed"), cl::init(0),
                          cl::cat(trainCategory));
cl::opt<bool> dumpPlanOpt("dump-plan",
                          cl::desc("Print the arena buffer plan of the "
                                   "training step"),
                          cl::init(false), cl::cat(trainCategory));
cl::opt<std::string> dumpPlanSvgOpt(
    "dump-plan-svg",
    cl::desc("Write the arena timeline of the training step's temporaries "
             "(buffers over ops) as an SVG picture"),
    cl::value_desc("file.svg"), cl::init(""), cl::cat(trainCategory));
cl::opt<std::string> archOpt(
    "arch",
    cl::desc("GPU architecture for nvcc: native (the default: this machine's "
             "GPU via nvidia-smi, sm_90a without one), sm_80, sm_86, sm_89, "
             "sm_90 or sm_90a"),
    cl::value_desc("native|sm_80|sm_86|sm_89|sm_90|sm_90a"), cl::init("native"),
    cl::cat(trainCategory));
cl::opt<std::string> runtimeDirOpt("runtime-dir",
                                   cl::desc("Directory with include/cnnrt and "
                                            "libcnnrt.a (default: next to "
                                            "cnnc, or $CNNC_RUNTIME_DIR)"),
                                   cl::value_desc("dir"), cl::init(""),
                                   cl::cat(trainCategory));

cl::OptionCategory optCategory("3. Optimization passes");
cl::opt<bool> o0("O0", cl::desc("Turn all optimization passes off"),
                 cl::init(false), cl::cat(optCategory));
cl::opt<bool> fuseOpt("fuse",
                      cl::desc("cnn-fuse (default: on when compiling for the "
                               "GPU, off for the reference interpreter)"),
                      cl::init(true), cl::cat(optCategory));
cl::opt<bool> rematOpt(
    "remat",
    cl::desc("cnn-remat: recompute BN-apply/ReLU outputs and expanding 1x1 "
             "convolutions in the backward pass instead of storing them "
             "(fewer stored activations, more kernels; GPU target)"),
    cl::init(false), cl::cat(optCategory));
cl::opt<int64_t> rematMBOpt(
    "remat-mb",
    cl::desc("cnn-remat with a budget: recompute activations, the least "
             "memory traffic per byte freed first (expanding 1x1 "
             "convolutions: 1.25-1.5 bytes; elementwise: about 3), until "
             "about this many MiB are no longer stored"),
    cl::value_desc("MiB"), cl::init(0), cl::cat(optCategory));
cl::opt<bool> rematConvsOpt(
    "remat-convs",
    cl::desc("Without --remat/--remat-mb: recompute the expanding 1x1 "
             "convolutions (a bottleneck's last) in the backward pass, up to "
             "9 % of the stored activations (GPU target; default on, "
             "--remat-convs=false turns it off)"),
    cl::init(true), cl::cat(optCategory));
cl::opt<bool> convStatsOpt(
    "conv-stats",
    cl::desc("cnn-conv-stats: BatchNorm statistics in the epilogue of the "
             "convolution before it (cuDNN GenStats; GPU target, NHWC f16; "
             "default on, --conv-stats=false turns it off)"),
    cl::init(true), cl::cat(optCategory));
cl::opt<bool> dgradEpilogueOpt(
    "dgrad-epilogue",
    cl::desc("cnn-dgrad-epilogue: a residual block's gradient sum and ReLU "
             "gradient applied by the backward-data convolution before them "
             "(cuDNN's dgrad + add + ReLU-backward graph, timed against the "
             "split form; GPU target, NHWC f16; default on, "
             "--dgrad-epilogue=false turns it off)"),
    cl::init(true), cl::cat(optCategory));
cl::opt<int> workspaceMBOpt(
    "workspace-mb",
    cl::desc("GPU target: the cuDNN/cuBLASLt workspace in the arena, in MiB "
             "(default: the largest tensor a convolution reads or writes, 4 to "
             "64 MiB; algorithms that need more are not chosen)"),
    cl::value_desc("MiB"), cl::init(-1), cl::cat(optCategory));
cl::opt<bool> dualBnGradOpt(
    "dual-bn-grad",
    cl::desc("cnn-fuse: two BatchNorm gradients of one gradient (a shortcut "
             "with its own BatchNorm) read it in one pair of passes"),
    cl::init(true), cl::cat(optCategory));
cl::opt<bool> poolBnGradOpt(
    "pool-bn-grad",
    cl::desc("cnn-max-pool-index: the pooling gradient is gathered inside the "
             "BatchNorm + ReLU gradient that is its only reader (ResNet's "
             "stem; default off: on the H100 the separate gather measured "
             "faster, docs/benchmarks.md)"),
    cl::init(false), cl::cat(optCategory));
cl::opt<bool> maxPoolIndexOpt(
    "max-pool-index",
    cl::desc("cnn-max-pool-index: max pooling records each window's argmax "
             "for its gradient instead of keeping its input for the backward "
             "pass, and a BatchNorm apply + ReLU before it becomes its "
             "prologue (GPU target; default on, --max-pool-index=false turns "
             "it off)"),
    cl::init(true), cl::cat(optCategory));
cl::opt<bool> wgradPrologueOpt(
    "wgrad-prologue",
    cl::desc("cnn-conv-stats: the BatchNorm apply + ReLU recomputed for a "
             "filter gradient becomes that gradient's prologue (cuDNN's "
             "scale-bias-ReLU + wgrad graph, timed against the split form; "
             "with --conv-prologue; opt-in: each graph times faster alone, "
             "but ResNet-50's whole step on the H100 measured 21.45 ms with "
             "it against 21.27 without)"),
    cl::init(false), cl::cat(optCategory));
cl::opt<bool> paramFormatOpt(
    "param-format",
    cl::desc("cnn-param-format: convolution filters and their optimizer "
             "state stored as the NHWC convolution reads them, no per-step "
             "re-layout (GPU target; default on, --param-format=false turns "
             "it off; checkpoints keep the public K, C, R, S layout)"),
    cl::init(true), cl::cat(optCategory));
cl::opt<bool> convPrologueOpt(
    "conv-prologue",
    cl::desc("cnn-conv-stats: the BatchNorm apply + ReLU before a convolution "
             "becomes its prologue (cuDNN), and is recomputed for the filter "
             "gradient instead of stored (ResNet-50 on the H100: -800 MiB "
             "and 1.5-2 % faster; default on, --conv-prologue=false turns it "
             "off)"),
    cl::init(true), cl::cat(optCategory));
cl::opt<std::string> layoutOpt("layout",
                               cl::desc("Activation layout: nchw or nhwc"),
                               cl::value_desc("nchw|nhwc"), cl::init(""),
                               cl::cat(optCategory));
cl::opt<std::string> precisionOpt("precision",
                                  cl::desc("fp32 or fp16 (f16 compute, f32 "
                                           "master weights, loss scaling)"),
                                  cl::value_desc("fp32|fp16"), cl::init(""),
                                  cl::cat(optCategory));
cl::opt<std::string> targetOpt(
    "target",
    cl::desc("Whose optimization pipeline runs on the training step: gpu "
             "(the CUDA target's: NHWC, fp16, fusion, memory plan; the "
             "default for --emit cuda/exe/lib) or cpu (the reference "
             "interpreter's; the default otherwise). With --emit mlir, "
             "--target gpu prints the IR the CUDA target compiles"),
    cl::value_desc("gpu|cpu"), cl::init(""), cl::cat(optCategory));
cl::opt<bool> memoryPlanOpt("memory-plan",
                            cl::desc("cnn-memory-plan (default on)"),
                            cl::init(true), cl::cat(optCategory));

bool hasExtension(StringRef path, StringRef ext) {
  return llvm::sys::path::extension(path).equals_insensitive(ext);
}
} // namespace

DriverOptions cnnc::driver::parseCommandLine(int argc, char **argv) {
  // The standard MLIR printing/context options (--mlir-print-debuginfo, ...),
  // pass-manager options (--mlir-print-ir-after-all, --mlir-pass-statistics,
  // ...) and --mlir-timing; runPasses and Compilation apply the latter two.
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  // --mlir-print-ir-after=<pass> and friends take the passes registered when
  // the options are created: register them first.
  registerCNNPasses();
  registerCNNPipelines();
  registerCanonicalizerPass();
  registerCSEPass();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  // --stats is LLVM's own (hidden) flag; cnnc adds its fusion counts and
  // kernel launches per step, so --help lists it with the other options.
  auto &registered = cl::getRegisteredOptions();
  if (auto it = registered.find("stats"); it != registered.end()) {
    it->second->setHiddenFlag(cl::NotHidden);
    it->second->setDescription(
        "Print what cnn-fuse fused and the kernel launches per training step "
        "(with LLVM's statistics)");
    it->second->addCategory(optCategory);
  }
  // MLIR's and LLVM's own options (--mlir-print-ir-after-all, --mlir-timing,
  // --color, ...) are for debugging the compiler: --help-hidden lists them
  // in their own category, after cnnc's.
  static cl::OptionCategory mlirCategory(
      "MLIR and LLVM options (debugging the compiler)");
  for (auto &entry : registered) {
    cl::Option *opt = entry.second;
    // (--help, --help-list and --version are LLVM's "Generic Options".)
    bool keep = llvm::any_of(opt->Categories, [](cl::OptionCategory *cat) {
      return cat == &cnncCategory || cat == &trainCategory ||
             cat == &optCategory || cat->getName() == "Generic Options";
    });
    if (keep || opt->getOptionHiddenFlag() == cl::ReallyHidden)
      continue;
    opt->setHiddenFlag(cl::Hidden);
    opt->addCategory(mlirCategory);
  }
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "cnnc " << CNNC_VERSION << " (MLIR " << LLVM_VERSION_STRING << ")\n";
  });
  // The training-loop flags shared with generated executables are parsed by
  // cnnrt::TrainFlags (one definition for both); llvm::cl sees the rest.
  // --labels stays with llvm::cl (it also names a fixed batch's labels).
  cnnrt::TrainFlags trainFlags;
  bool batchAuto = false;
  std::vector<char *> rest;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i], v;
    size_t eq = a.find('=');
    std::string name = a.substr(0, eq);
    // --batch auto: the largest batch whose memory plan fits the GPU
    // (chooseAutoBatch); llvm::cl sees numeric batches only.
    if ((name == "--batch" || name == "-batch") &&
        (eq != std::string::npos
             ? a.substr(eq + 1) == "auto"
             : i + 1 < argc && std::string(argv[i + 1]) == "auto")) {
      batchAuto = true;
      if (eq == std::string::npos)
        ++i;
      continue;
    }
    if (i == 0 || name == "--labels" || !cnnrt::TrainFlags::isFlag(name)) {
      rest.push_back(argv[i]);
      continue;
    }
    if (eq != std::string::npos) {
      v = a.substr(eq + 1);
    } else if (i + 1 < argc) {
      v = argv[++i];
    } else {
      llvm::errs() << "cnnc: error: missing value for " << name << "\n";
      std::exit(1);
    }
    std::string err;
    if (trainFlags.parse(name, v, err) < 0) {
      llvm::errs() << "cnnc: error: " << err << "\n";
      std::exit(1);
    }
  }
  static std::string overview =
      std::string(
          "cnnc: compiles CNN training steps to CUDA\n\n"
          "  cnnc model.onnx [--batch N] [--emit mlir] [-o model.mlir]\n"
          "  cnnc model.mlir --run-reference --input x.npy --output y.npy\n"
          "  cnnc model.onnx --train [--optimizer sgd|adam|adamw] --emit "
          "mlir\n"
          "  cnnc model.onnx --train --run-reference --steps K --data DIR\n"
          "  cnnc model.onnx --train -o train [--emit cuda]\n"
          "  cnnc model.onnx --emit lib -o libstep.so   (C API, cnnrt_c.h)\n"
          "  cnnc train model.onnx --data DIR --steps N   (compile and run)\n"
          "\n--help-hidden also lists MLIR's options (--mlir-print-ir-after-all,"
          "\n--mlir-timing, ...).\n"
          "\ntraining-loop flags (--run-reference, cnnc train, and the "
          "generated executable):\n") +
      cnnrt::TrainFlags::help();
  int restArgc = static_cast<int>(rest.size());
  rest.push_back(nullptr);
  cl::ParseCommandLineOptions(restArgc, rest.data(), overview);
  DriverOptions o;
  if (listOnnxOps.getNumOccurrences()) {
    if (listOnnxOps != "" && listOnnxOps != "text" &&
        listOnnxOps != "markdown") {
      llvm::errs() << "cnnc: error: --list-onnx-ops takes text or markdown, "
                      "got '"
                   << listOnnxOps << "'\n";
      std::exit(1);
    }
    o.listOnnxOps = listOnnxOps == "" ? "text" : listOnnxOps.getValue();
  } else if (inputFile.empty()) {
    llvm::errs() << argv[0]
                 << ": Not enough positional command line arguments "
                    "specified!\nMust specify at least 1 positional argument: "
                    "See: "
                 << argv[0] << " --help\n";
    std::exit(1);
  }
  o.inputFile = inputFile;
  o.outputFile = outputFile == "-" ? "" : outputFile.getValue();
  o.emit = emitKind;
  o.batch = batchSize;
  o.maxTensorElements = maxTensorElementsOpt;
  o.batchAuto = batchAuto;
  o.printLocations = printLocations;
  o.runReference = runRef;
  o.inputTensor = inputTensor;
  o.outputTensor = outputTensor;
  o.weightsFile = weightsFile;
  o.train = trainFlag;
  o.optimizer = optimizerName;
  if (lrOpt.getNumOccurrences())
    o.lr = lrOpt;
  o.momentum = momentumOpt;
  o.dampening = dampeningOpt;
  o.nesterov = nesterovOpt;
  o.weightDecay = weightDecayOpt;
  o.noBNWeightDecay = noBNWeightDecayOpt;
  o.paramGroups = paramGroupsOpt;
  if (clipGradNormOpt.getNumOccurrences())
    o.clipGradNorm = clipGradNormOpt;
  o.accumulate = accumulateOpt;
  o.beta1 = beta1Opt;
  o.beta2 = beta2Opt;
  o.eps = epsOpt;
  o.labelSmoothing = labelSmoothingOpt;
  o.ignoreIndex = ignoreIndexOpt;
  o.auxLossWeight = auxLossWeightOpt;
  o.steps = stepsOpt;
  o.data = dataOpt;
  o.labelsTensor = labelsOpt;
  o.saveState = saveStateOpt;
  o.checkpoint = checkpointOpt;
  o.checkpointEvery = checkpointEveryOpt;
  o.resume = resumeOpt;
  if (o.checkpointEvery < 0 ||
      (o.checkpointEvery > 0 && o.checkpoint.empty())) {
    llvm::errs() << "cnnc: error: --checkpoint-every needs a positive K and "
                    "--checkpoint FILE\n";
    std::exit(1);
  }
  o.seed = seedOpt;
  if (gpusOpt.getNumOccurrences()) {
    if (gpusOpt < 1) {
      llvm::errs() << "cnnc: error: --gpus/--world-size must be >= 1, got "
                   << gpusOpt << "\n";
      std::exit(1);
    }
    o.worldSize = gpusOpt;
    o.dataParallel = true;
  }
  if (syncBNOpt && !o.dataParallel) {
    llvm::errs() << "cnnc: error: --sync-bn synchronizes BatchNorm across "
                    "data-parallel ranks: give --gpus N too\n";
    std::exit(1);
  }
  if (rematMBOpt < 0 || rematMBOpt > (int64_t(1) << 30)) {
    llvm::errs() << "cnnc: error: --remat-mb must be between 0 and "
                 << (int64_t(1) << 30) << " MiB, got " << rematMBOpt << "\n";
    std::exit(1);
  }
  if (workspaceMBOpt < -1 || workspaceMBOpt > (1 << 20)) {
    llvm::errs() << "cnnc: error: --workspace-mb must be between 0 and "
                 << (1 << 20) << " MiB, got " << workspaceMBOpt << "\n";
    std::exit(1);
  }
  o.workspaceMB = workspaceMBOpt;
  o.syncBN = syncBNOpt;
  o.bucketMB = bucketMBOpt;
  o.trainFlags = trainFlags;
  o.dumpPlan = dumpPlanOpt;
  o.dumpPlanSvg = dumpPlanSvgOpt;
  o.arch = archOpt;
  o.runtimeDir = runtimeDirOpt;
  o.argv0 = argv[0];
  o.optimize = !o0;
  o.fuse = fuseOpt;
  o.fuseExplicit = fuseOpt.getNumOccurrences() > 0;
  o.remat = rematOpt || rematMBOpt > 0;
  o.rematMB = rematMBOpt;
  o.rematConvs = rematConvsOpt;
  o.convStats = convStatsOpt;
  o.dgradEpilogue = dgradEpilogueOpt;
  o.maxPoolIndex = maxPoolIndexOpt;
  o.poolBnGrad = poolBnGradOpt;
  o.dualBnGrad = dualBnGradOpt;
  o.wgradPrologue = wgradPrologueOpt;
  o.paramFormat = paramFormatOpt;
  o.convPrologue = convPrologueOpt || rematOpt;
  o.layout = layoutOpt;
  o.precision = precisionOpt;
  o.memoryPlan = memoryPlanOpt;
  o.target = targetOpt;
  // --stats is LLVM's own flag (statistics); cnnc adds its fusion counts and
  // kernel launches per step to what it prints.
  o.stats = llvm::AreStatisticsEnabled();
  std::string err;
  if (!validateOptions(o, err)) {
    llvm::errs() << "cnnc: error: " << err << "\n";
    std::exit(1);
  }
  return o;
}

bool cnnc::driver::validateOptions(const DriverOptions &o, std::string &err) {
  using namespace cnnrt;
  const double inf = HUGE_VAL;
  if (o.lr && !checkParam("--lr", *o.lr, lrRange(), err))
    return false;
  if (!checkParam("--momentum", o.momentum, momentumRange(), err) ||
      !checkParam("--dampening", o.dampening, dampeningRange(), err) ||
      !checkParam("--weight-decay", o.weightDecay, weightDecayRange(), err) ||
      !checkParam("--beta1", o.beta1, betaRange(), err) ||
      !checkParam("--beta2", o.beta2, betaRange(), err) ||
      !checkParam("--eps", o.eps, epsRange(), err) ||
      !checkParam("--label-smoothing", o.labelSmoothing, labelSmoothingRange(),
                  err) ||
      !checkParam("--aux-loss-weight", o.auxLossWeight, {0, inf, false, true},
                  err) ||
      !checkParam("--bucket-mb", o.bucketMB, {0, inf, false, true}, err))
    return false;
  if (o.clipGradNorm && !checkParam("--clip-grad-norm", *o.clipGradNorm,
                                    {0, inf, true, true}, err))
    return false;
  // The data loader, the runtime and the CUDA launch code keep the batch,
  // the micro-step count and the rank count in an int: a larger value would
  // wrap (--batch 4294967298 became 2), so it is refused here.
  const int64_t intMax = std::numeric_limits<int32_t>::max();
  auto intFlag = [&](const char *flag, int64_t v, int64_t lo, int64_t hi) {
    if (v >= lo && v <= hi)
      return true;
    err = std::string(flag) + " must be in [" + std::to_string(lo) + ", " +
          std::to_string(hi) + "], got " + std::to_string(v);
    return false;
  };
  // The ceiling only goes down: the default keeps products of a few sizes
  // (flatten, matmul, im2col extents) far from int64's end.
  return intFlag("--max-tensor-elements", o.maxTensorElements, 1,
                 kDefaultMaxTensorElements) &&
         intFlag("--batch", o.batch, 0, intMax) &&
         intFlag("--accumulate", o.accumulate, 1, intMax) &&
         intFlag("--gpus/--world-size", o.worldSize, 1, 65536) &&
         intFlag("--steps", o.steps, 0, INT64_MAX / 2);
}

// Tensor conversions: cnnc/Reference/TensorEntry.h.
using reference::fromEntry;
using reference::toEntry;

LogicalResult cnnc::driver::readWeights(const std::string &path,
                                        reference::TensorMap &weights,
                                        std::string &err) {
  std::vector<cnnrt::TensorEntry> entries;
  if (!cnnrt::readTensorFile(path, entries, err))
    return failure();
  for (const auto &e : entries)
    weights[e.name] = fromEntry(e);
  return success();
}

LogicalResult cnnc::driver::writeWeights(const std::string &path,
                                         const reference::TensorMap &weights,
                                         std::string &err) {
  std::vector<cnnrt::TensorEntry> entries;
  entries.reserve(weights.size());
  for (const auto &[name, t] : weights)
    entries.push_back(toEntry(name, t));
  return success(cnnrt::writeTensorFileAtomic(path, entries, err));
}

LogicalResult cnnc::driver::readTensor(const std::string &path,
                                       reference::Tensor &t, std::string &err) {
  cnnrt::TensorEntry e;
  bool ok;
  if (hasExtension(path, ".npy"))
    ok = cnnrt::readNpy(path, e, err);
  else if (hasExtension(path, ".bin"))
    ok = cnnrt::readRawTensor(path, e, err);
  else {
    err = "tensor file '" + path + "' must end in .npy or .bin";
    return failure();
  }
  if (!ok)
    return failure();
  t = fromEntry(e);
  return success();
}

LogicalResult cnnc::driver::writeTensor(const std::string &path,
                                        const reference::Tensor &t,
                                        std::string &err) {
  cnnrt::TensorEntry e = toEntry(path, t);
  if (hasExtension(path, ".npy"))
    return success(cnnrt::writeNpy(path, e, err));
  if (hasExtension(path, ".bin"))
    return success(cnnrt::writeRawTensor(path, e, err));
  err = "tensor file '" + path + "' must end in .npy or .bin";
  return failure();
}

//===----------------------------------------------------------------------===//
// Actions
//===----------------------------------------------------------------------===//

void Compilation::enableTimingFromCommandLine() {
  applyDefaultTimingManagerCLOptions(timingManager);
  timing = timingManager.getRootScope();
}

LogicalResult cnnc::driver::runPasses(PassManager &pm, Compilation &c) {
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  pm.enableTiming(c.timing);
  return pm.run(*c.module);
}

namespace {
LogicalResult fail(Compilation &c, const Twine &msg) {
  emitError(UnknownLoc::get(&c.context)) << msg;
  return failure();
}

/// Resolves the cnn.weights path of `mlirPath`: as written, else next to the
/// .mlir file.
std::string resolveWeightsPath(StringRef mlirPath, StringRef weights) {
  if (llvm::sys::fs::exists(weights) || llvm::sys::path::is_absolute(weights))
    return weights.str();
  SmallString<256> p(llvm::sys::path::parent_path(mlirPath));
  llvm::sys::path::append(p, llvm::sys::path::filename(weights));
  return llvm::sys::fs::exists(p) ? std::string(p) : weights.str();
}

/// The importer maps ONNX Add/Mul/Div to the broadcasting cnn ops; their
/// canonicalization patterns give the specialized forms the passes and the
/// CUDA target know (cnn.scale for a scalar factor, cnn.bias_add for a
/// per-channel addend, cnn.global_avg_pool for a spatial mean). Only these
/// patterns run, without folding: folders would drop cnn.dropout, from which
/// cnn-autodiff builds the training mask.
LogicalResult canonicalizeImport(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  RewritePatternSet patterns(ctx);
  cnn::AddOp::getCanonicalizationPatterns(patterns, ctx);
  cnn::MulOp::getCanonicalizationPatterns(patterns, ctx);
  cnn::DivOp::getCanonicalizationPatterns(patterns, ctx);
  cnn::ReduceMeanOp::getCanonicalizationPatterns(patterns, ctx);
  GreedyRewriteConfig config;
  config.enableFolding(false).enableConstantCSE(false);
  (void)applyPatternsGreedily(module, std::move(patterns), config);
  return mlir::verify(module);
}

func::FuncOp findForward(Compilation &c) {
  return c.module->lookupSymbol<func::FuncOp>("forward");
}
} // namespace

LogicalResult cnnc::driver::loadInput(const DriverOptions &options,
                                      Compilation &c) {
  const std::string &path = options.inputFile;
  bool isOnnx = hasExtension(path, ".onnx");
  bool isMlir = hasExtension(path, ".mlir");
  if (!isOnnx && !isMlir)
    return fail(c, "input file '" + path +
                       "' must have the extension .onnx or .mlir");
  if (!llvm::sys::fs::exists(path))
    return fail(c, "cannot open input file '" + path +
                       "': No such file or directory");
  if (options.batch < 0)
    return fail(c, "--batch must be positive, got " + Twine(options.batch));
  // The shape rule's ceiling (ShapeLimits.h), read by the importer and by
  // every cnn op's verifier in this context.
  c.context.getOrLoadDialect<cnn::CNNDialect>()->setMaxTensorElements(
      options.maxTensorElements);

  if (isOnnx) {
    ONNXImportOptions importOptions;
    importOptions.batch = options.batch;
    importOptions.forTraining = options.train;
    importOptions.runForward = options.runReference && !options.train;
    TimingScope importTiming = c.timing.nest("ONNX import");
    c.module = importONNX(path, c.context, importOptions, c.weights);
    if (!c.module)
      return failure();
    if (failed(canonicalizeImport(*c.module)))
      return failure();
  } else {
    if (options.batch > 0)
      return fail(c, "--batch applies to ONNX input only");
    std::string err;
    auto buffer = llvm::MemoryBuffer::getFile(path);
    if (!buffer)
      return fail(c, "cannot open input file '" + path +
                         "': " + buffer.getError().message());
    c.sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
    c.context.loadDialect<cnn::CNNDialect, func::FuncDialect>();
    TimingScope parseTiming = c.timing.nest("Parse MLIR");
    c.module = parseSourceFile<ModuleOp>(c.sourceMgr, ParserConfig(&c.context));
    if (!c.module)
      return failure();
    if (options.weightsFile.empty()) {
      if (auto attr = (*c.module)->getAttrOfType<StringAttr>(kWeightsAttr)) {
        std::string wpath = resolveWeightsPath(path, attr.getValue());
        if (failed(readWeights(wpath, c.weights, err)))
          return fail(c, "cannot read the weights '" + wpath + "' named by " +
                             kWeightsAttr + ": " + err);
      }
    }
  }
  if (!options.weightsFile.empty()) {
    std::string err;
    c.weights.clear();
    if (failed(readWeights(options.weightsFile, c.weights, err)))
      return fail(c,
                  "cannot read weights '" + options.weightsFile + "': " + err);
  }
  return success();
}

LogicalResult cnnc::driver::emitMLIR(const DriverOptions &options,
                                     Compilation &c) {
  OpPrintingFlags flags;
  if (options.printLocations)
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  if (options.outputFile.empty()) {
    c.module->print(llvm::outs(), flags);
    llvm::outs().flush();
    return success();
  }
  // The IR and its weights side file are staged and published together; a
  // special output (/dev/null, a fifo) gets the IR only.
  std::string weightsPath = options.outputFile + ".cnnw";
  std::string err;
  cnnrt::OutputFile irOut, weightsOut;
  if (!irOut.open(options.outputFile, err))
    return fail(c, "cannot write '" + options.outputFile + "': " + err);
  if (!irOut.isSpecial()) {
    if (!weightsOut.open(weightsPath, err) ||
        failed(writeWeights(weightsOut.stagingPath(), c.weights, err)))
      return fail(c, "cannot write weights '" + weightsPath + "': " + err);
    (*c.module)->setAttr(kWeightsAttr,
                         StringAttr::get(&c.context, weightsPath));
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(irOut.stagingPath(), ec);
    if (!ec)
      c.module->print(os, flags);
    os.close();
    if (ec || os.has_error())
      return fail(c, "cannot write '" + options.outputFile +
                         "': " + (ec ? ec : os.error()).message());
  }
  if ((!irOut.isSpecial() && !weightsOut.commit(err)) || !irOut.commit(err))
    return fail(c, "cannot write '" + options.outputFile + "': " + err);
  return success();
}

LogicalResult cnnc::driver::runReference(const DriverOptions &options,
                                         Compilation &c) {
  if (options.inputTensor.empty() || options.outputTensor.empty())
    return fail(c, "--run-reference needs --input FILE and --output FILE");
  func::FuncOp func = findForward(c);
  if (!func)
    return fail(c, "the module has no function @forward");
  std::string err;
  reference::Tensor input;
  if (failed(readTensor(options.inputTensor, input, err)))
    return fail(c, "cannot read input tensor: " + err);
  FailureOr<reference::Tensor> output = runForward(c, input);
  if (failed(output))
    return failure();
  if (failed(writeTensor(options.outputTensor, *output, err)))
    return fail(c, "cannot write output tensor: " + err);
  return success();
}

FailureOr<reference::Tensor>
cnnc::driver::runForward(Compilation &c, const reference::Tensor &input) {
  func::FuncOp func = findForward(c);
  if (!func)
    return fail(c, "the module has no function @forward");
  auto args = reference::bindArguments(func, c.weights, {input});
  if (failed(args))
    return failure();
  auto results = reference::run(func, *args);
  if (failed(results))
    return failure();
  if (results->empty())
    return fail(c, "@forward returned no results");
  return std::move(results->front());
}

namespace {
/// The ONNX location NameLoc("<node>", FileLineColLoc("<file>", 0, 0)), if
/// `loc` is one, as "<file>:<node>".
std::optional<std::string> onnxLocation(Location loc) {
  auto name = dyn_cast<NameLoc>(loc);
  if (!name)
    return std::nullopt;
  auto file = dyn_cast<FileLineColLoc>(name.getChildLoc());
  if (!file || file.getLine() != 0)
    return std::nullopt;
  return (file.getFilename().getValue() + ":" + name.getName().getValue())
      .str();
}

const char *severityName(DiagnosticSeverity s) {
  switch (s) {
  case DiagnosticSeverity::Error:
    return "error";
  case DiagnosticSeverity::Warning:
    return "warning";
  case DiagnosticSeverity::Note:
    return "note";
  case DiagnosticSeverity::Remark:
    return "remark";
  }
  return "error";
}

void printPlain(llvm::raw_ostream &os, const std::string &where,
                Diagnostic &d) {
  os << where << ": " << severityName(d.getSeverity()) << ": " << d << "\n";
  for (Diagnostic &note : d.getNotes()) {
    auto loc = onnxLocation(note.getLocation());
    os << (loc ? *loc : where) << ": note: " << note << "\n";
  }
}
} // namespace

int cnnc::driver::runDriver(const DriverOptions &options) {
  if (!options.listOnnxOps.empty()) {
    printONNXOpTable(llvm::outs(), options.listOnnxOps == "markdown");
    return 0;
  }
  Compilation c;
  c.enableTimingFromCommandLine();
  // Every diagnostic goes to stderr as "<loc>: error: <msg>": MLIR source
  // locations through the SourceMgr handler (with the source line), ONNX
  // node locations as "<file>:<node>", location-less ones as "cnnc".
  c.context.printOpOnDiagnostic(false);
  SourceMgrDiagnosticHandler diagHandler(c.sourceMgr, &c.context, llvm::errs());
  ScopedDiagnosticHandler plainHandler(&c.context, [](Diagnostic &d) {
    if (auto where = onnxLocation(d.getLocation())) {
      printPlain(llvm::errs(), *where, d);
      return success();
    }
    if (isa<UnknownLoc>(d.getLocation())) {
      printPlain(llvm::errs(), "cnnc", d);
      return success();
    }
    return failure(); // to the SourceMgr handler
  });

  if (!options.emit.empty() && options.emit != "mlir" &&
      options.emit != "cuda" && options.emit != "exe" &&
      options.emit != "lib") {
    emitError(UnknownLoc::get(&c.context))
        << "unknown --emit kind '" << options.emit
        << "' (expected: mlir, cuda, exe or lib)";
    return 1;
  }
  // `cnnc model.onnx -o train` (no --emit, an output that is not .mlir/.cu)
  // builds the training executable: --train is implied.
  DriverOptions o = options;
  // `-o model.cu` without --emit: the CUDA source.
  if (o.emit.empty() && !o.outputFile.empty() &&
      hasExtension(o.outputFile, ".cu") && !o.runReference)
    o.emit = "cuda";
  bool exeOutput = !o.outputFile.empty() &&
                   !hasExtension(o.outputFile, ".mlir") &&
                   !hasExtension(o.outputFile, ".cu") &&
                   !hasExtension(o.outputFile, ".onnx");
  const bool planOnly = o.dumpPlan || !o.dumpPlanSvg.empty();
  if (o.emit.empty() && exeOutput && !o.runReference && !planOnly)
    o.train = true;
  if (o.emit == "exe" || o.emit == "cuda" || o.emit == "lib")
    o.train = true;
  bool wantsCuda = o.emit == "cuda" || o.emit == "exe" || o.emit == "lib" ||
                   (o.train && o.emit.empty() && exeOutput && !o.runReference);
  if ((planOnly || o.trainAndRun) && !o.train) {
    emitError(UnknownLoc::get(&c.context))
        << "--dump-plan and 'cnnc train' need the training step: add --train";
    return 1;
  }
  if (wantsCuda || o.trainAndRun) {
    o.arch = resolveArch(o.arch);
    if (o.emit != "cuda" && !isSupportedArch(o.arch)) {
      emitError(UnknownLoc::get(&c.context))
          << "unsupported --arch '" << o.arch << "' (expected native, "
          << kSupportedArchs << ")";
      return 1;
    }
  }
  if (!o.target.empty() && o.target != "gpu" && o.target != "cpu") {
    emitError(UnknownLoc::get(&c.context))
        << "unknown --target '" << o.target << "' (expected gpu or cpu)";
    return 1;
  }
  if (o.target == "cpu" && (wantsCuda || planOnly)) {
    emitError(UnknownLoc::get(&c.context))
        << "--target cpu cannot emit CUDA or plan GPU memory (drop --target "
           "or use --target gpu)";
    return 1;
  }
  // The executable takes --checkpoint/--resume when it runs; at compile
  // time they belong to a run on the reference interpreter or `cnnc train`.
  if ((!o.checkpoint.empty() || !o.resume.empty()) &&
      !(o.train && (o.runReference || o.trainAndRun))) {
    emitError(UnknownLoc::get(&c.context))
        << "--checkpoint/--resume need a training run: --train "
           "--run-reference or 'cnnc train' (a built executable takes them "
           "when it runs)";
    return 1;
  }
  o.targetGPU = o.target == "gpu" || wantsCuda || planOnly ||
                (o.target.empty() && o.trainAndRun && hasGPU());
  if (o.batchAuto && failed(chooseAutoBatch(o)))
    return 1;
  if (failed(loadInput(o, c)))
    return 1;
  if (o.train && failed(buildTrainStep(o, c)))
    return 1;
  if (o.trainAndRun)
    return trainAndRun(o, c);
  if (!o.dumpPlanSvg.empty()) {
    std::string svg, err;
    llvm::raw_string_ostream svgOS(svg);
    if (failed(writeBufferPlanSVG(*c.module, svgOS)))
      return 1;
    svgOS.flush();
    if (!cnnrt::writeFileAtomic(o.dumpPlanSvg, svg, err)) {
      emitError(UnknownLoc::get(&c.context))
          << "cannot write --dump-plan-svg '" << o.dumpPlanSvg << "': " << err;
      return 1;
    }
  }
  if (planOnly) {
    if (o.dumpPlan && failed(dumpBufferPlan(*c.module, llvm::outs())))
      return 1;
    llvm::outs().flush();
    if (!wantsCuda && o.emit.empty() && !o.runReference)
      return 0;
  }
  if (wantsCuda) {
    std::string exe;
    return failed(compileCUDA(o, c, exe)) ? 1 : 0;
  }
  if (o.runReference && o.train) {
    if (failed(trainReference(options, c)))
      return 1;
  } else if (o.runReference && failed(runReference(options, c))) {
    return 1;
  }
  // IR is emitted when asked for, when written to a file with -o, or when
  // no other action was requested.
  bool emit = o.emit == "mlir" || !o.runReference || !o.outputFile.empty();
  if (emit && failed(emitMLIR(o, c)))
    return 1;
  return 0;
}
