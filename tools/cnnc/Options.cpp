//===- Options.cpp - the cnnc command line --------------------------------===//
//
// The flags of cnnc (llvm::cl) and their translation into DriverOptions.
//
//===----------------------------------------------------------------------===//
#include "Options.h"

#include "cnnc/Transforms/Pipeline.h"

#include "cnnc/Transforms/Passes.h"
#include "cnnrt/TrainLoop.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/Statistic.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

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
cl::opt<bool> printPipelineOptionsJSON(
    "print-pipeline-options-json",
    cl::desc("Print cnn-train-pipeline's options (names, defaults, the "
             "target-dependent defaults) as JSON and exit (the Python "
             "package reads its defaults from it)"),
    cl::init(false), cl::cat(cnncCategory));
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

// The pipeline declares the training and optimization groups (its options
// are listed in them).
cl::OptionCategory &trainCategory = trainingStepOptionCategory();
cl::opt<bool> trainFlag("train",
                        cl::desc("Build the training step (loss, backward, "
                                 "optimizer) with cnn-autodiff"),
                        cl::init(false), cl::cat(trainCategory));
cl::opt<double> lrOpt("lr",
                      cl::desc("Learning rate (default: 0.01 for SGD, "
                               "0.001 for Adam)"),
                      cl::init(-1.0), cl::cat(trainCategory));
cl::opt<std::string> paramGroupsOpt(
    "param-groups",
    cl::desc("JSON file of frozen parameters and torch-style param groups "
             "(per-group lr, weight_decay, momentum, dampening, nesterov, "
             "betas, eps): {\"frozen\": [names], \"groups\": [{\"params\": "
             "[names], ...}]} (docs/python.md)"),
    cl::value_desc("file"), cl::init(""), cl::cat(trainCategory));
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
    "checkpoint-every", cl::desc("Also write --checkpoint every K steps"),
    cl::value_desc("K"), cl::init(0), cl::cat(trainCategory));
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

cl::OptionCategory &optCategory = stepPassOptionCategory();
cl::opt<bool> o0("O0", cl::desc("Turn all optimization passes off"),
                 cl::init(false), cl::cat(optCategory));
cl::opt<std::string> targetOpt(
    "target",
    cl::desc("Whose optimization pipeline runs on the training step: gpu "
             "(the CUDA target's: NHWC, fp16, fusion, memory plan; the "
             "default for --emit cuda/exe/lib) or cpu (the reference "
             "interpreter's; the default otherwise). With --emit mlir, "
             "--target gpu prints the IR the CUDA target compiles"),
    cl::value_desc("gpu|cpu"), cl::init(""), cl::cat(optCategory));

/// The flags derived from cnn-train-pipeline's options (Pipeline.h): one
/// llvm::cl flag per option, with its name, description and group, whose
/// value is handed to the pipeline's own parser as written.
struct PipelineFlags {
  CNNPipelineOptions declared;
  std::vector<std::unique_ptr<cl::Option>> flags;

  PipelineFlags() {
    declared.forEachOption([&](cl::Option &opt) {
      if (isDriverSetOption(opt.ArgStr))
        return;
      cl::OptionCategory *cat =
          opt.Categories.empty() ? &optCategory : opt.Categories.front();
      // A bool option is a switch (--fuse, --fuse=false); every other one
      // takes a value.
      if (opt.getValueExpectedFlag() == cl::ValueOptional)
        flags.push_back(std::make_unique<cl::opt<bool>>(
            opt.ArgStr, cl::desc(opt.HelpStr), cl::cat(*cat)));
      else
        flags.push_back(std::make_unique<cl::opt<std::string>>(
            opt.ArgStr, cl::desc(opt.HelpStr), cl::value_desc("value"),
            cl::cat(*cat)));
      // A/B switches declared cl::Hidden stay out of --help (--help-hidden).
      flags.back()->setHiddenFlag(opt.getOptionHiddenFlag());
    });
  }

  /// The given flags in the pipeline's textual form, in name order.
  std::string text() const {
    std::string t;
    for (const auto &flag : flags) {
      if (!flag->getNumOccurrences())
        continue;
      std::string value;
      if (auto *b = dynamic_cast<cl::opt<bool> *>(flag.get()))
        value = b->getValue() ? "true" : "false";
      else
        value = static_cast<cl::opt<std::string> *>(flag.get())->getValue();
      // A value with a space stays one value.
      if (value.find(' ') != std::string::npos)
        value = "{" + value + "}";
      t += (t.empty() ? "" : " ") + flag->ArgStr.str() + "=" + value;
    }
    return t;
  }
};
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
  static PipelineFlags pipelineFlags;
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
          "\n--help-hidden also lists MLIR's options "
          "(--mlir-print-ir-after-all,"
          "\n--mlir-timing, ...).\n"
          "\ntraining-loop flags (--run-reference, cnnc train, and the "
          "generated executable):\n") +
      cnnrt::TrainFlags::help();
  int restArgc = static_cast<int>(rest.size());
  rest.push_back(nullptr);
  cl::ParseCommandLineOptions(restArgc, rest.data(), overview);
  DriverOptions o;
  if (printPipelineOptionsJSON) {
    printCNNPipelineOptionsJSON(llvm::outs());
    llvm::outs().flush();
    std::exit(0);
  }
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
  if (lrOpt.getNumOccurrences())
    o.lr = lrOpt;
  o.paramGroups = paramGroupsOpt;
  o.pipeline = pipelineFlags.text();
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
  o.trainFlags = trainFlags;
  o.dumpPlan = dumpPlanOpt;
  o.dumpPlanSvg = dumpPlanSvgOpt;
  o.arch = archOpt;
  o.runtimeDir = runtimeDirOpt;
  o.argv0 = argv[0];
  o.optimize = !o0;
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
