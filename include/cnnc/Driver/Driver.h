//===- Driver.h - the cnnc compiler driver ----------------------*- C++ -*-===//
//
// The driver loads a model (ONNX or cnn-dialect MLIR with its weights) into a
// Compilation and then runs the requested actions on it, each a separate
// function: emitting MLIR, running the reference interpreter; training and
// CUDA emission are added the same way.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_DRIVER_DRIVER_H
#define CNNC_DRIVER_DRIVER_H

#include "cnnc/Reference/Interpreter.h"
#include "cnnc/Support/ShapeLimits.h"
#include "cnnc/Transforms/Pipeline.h"
#include "cnnrt/TrainLoop.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace mlir {
class PassManager;
} // namespace mlir

namespace cnnc::driver {

/// Everything the command line asks for.
struct DriverOptions {
  std::string inputFile;  ///< model.onnx or model.mlir
  std::string outputFile; ///< -o; empty or "-" means stdout
  std::string emit;       ///< --emit: "mlir" (default when no other action)
  int64_t batch = 0;      ///< --batch
  /// --max-tensor-elements: the shape rule's ceiling (ShapeLimits.h), at
  /// most the default.
  int64_t maxTensorElements = kDefaultMaxTensorElements;
  bool batchAuto = false; ///< --batch auto
  bool printLocations = false;
  // --run-reference
  bool runReference = false;
  std::string inputTensor;  ///< --input x.npy|x.bin
  std::string outputTensor; ///< --output y.npy|y.bin
  std::string weightsFile;  ///< --weights FILE.cnnw (overrides cnn.weights)
  // --train: build @train_step with cnn-train-pipeline
  bool train = false;
  /// The pipeline's options as the command line gave them, in
  /// cnn-train-pipeline's textual form ("fuse=false remat-mb=100"; the
  /// flags are derived from CNNPipelineOptions, Pipeline.h). The driver
  /// sets the target, optimize, world-size and arch options itself:
  /// pipelineOptions() gives the whole set.
  std::string pipeline;
  std::string paramGroups; ///< --param-groups FILE (JSON)
  /// --lr; unset: the optimizer's default (SGD 0.01, Adam 1e-3). No
  /// sentinel value: a given --lr is validated, never replaced.
  std::optional<double> lr;
  int64_t steps = 0;        ///< --steps (reference training / cnnc train)
  std::string data;         ///< --data DIR|FILE|synthetic
  std::string labelsTensor; ///< --labels y.npy (fixed batch with --input)
  std::string saveState;    ///< --save-state out.cnnw|out.safetensors
  /// Checkpoints of the training loop, as the executable's flags
  /// (Checkpoint.h): --checkpoint FILE ("{step}" -> the step) at the end and
  /// every --checkpoint-every K steps; --resume FILE continues from one.
  std::string checkpoint;
  int64_t checkpointEvery = 0;
  std::string resume;
  uint64_t seed = 0; ///< --seed (data order)
  /// Data parallelism (docs/data-parallel.md): --gpus N / --world-size N
  /// ranks, each with the model's batch (the global batch is N times it);
  /// cnn-data-parallel all-reduces the gradients in --bucket-mb buckets.
  /// On the CPU reference interpreter the ranks are threads.
  int64_t worldSize = 1;
  bool dataParallel = false; ///< --gpus/--world-size given (even 1)
  /// --epochs, --lr-schedule, --eval-every, --log-json, --workers, ... (the
  /// flags the generated executable shares; parsed by cnnrt::TrainFlags).
  cnnrt::TrainFlags trainFlags;
  bool dumpPlan = false;       ///< --dump-plan
  std::string dumpPlanSvg;     ///< --dump-plan-svg FILE
  std::string arch = "native"; ///< --arch for nvcc
  std::string runtimeDir;      ///< --runtime-dir (include/ + libcnnrt.a)
  bool trainAndRun = false;    ///< `cnnc train ...`: compile and run
  bool optimize = true;        ///< false with -O0
  bool stats = false;          ///< --stats
  /// Compiling for the GPU (--emit cuda/exe, -o exe, `cnnc train` with a
  /// GPU): the optimized defaults are NHWC and fp16 (Tensor Cores); for the
  /// CPU reference interpreter NCHW and fp32.
  bool targetGPU = false;
  /// --target gpu|cpu ("" = from the action): gpu makes `--emit mlir` print
  /// the IR the CUDA target compiles (the GPU pipeline's output).
  std::string target;
  std::string argv0; ///< path of this executable
  /// --list-onnx-ops[=text|markdown]: print the importer's op table only.
  std::string listOnnxOps;
};

/// The pipeline's options for `o`: the command line's (o.pipeline), with
/// the target (GPU or CPU), optimize (-O0), world-size (--gpus) and the
/// resolved --arch the driver decided.
std::unique_ptr<CNNPipelineOptions> pipelineOptions(const DriverOptions &o);

/// Every numeric setting checked in one place (the rules are
/// cnnrt/HyperParams.h's, shared with the generated executable): finite, in
/// range, sizes that fit the int the data loader and runtime keep them in.
/// On failure `err` names the flag and the value.
bool validateOptions(const DriverOptions &o, std::string &err);

/// The model being compiled: the IR and the values of its parameters.
struct Compilation {
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  reference::TensorMap weights;
  /// --mlir-timing: import, each pass and CUDA emission nest under `timing`'s
  /// root. Disabled (a no-op) unless enableTimingFromCommandLine() ran, so
  /// helper compilations (--batch auto's planning runs) report nothing.
  mlir::DefaultTimingManager timingManager;
  mlir::TimingScope timing;
  void enableTimingFromCommandLine();
};

/// Reports `msg` as an error of the compilation (cnnc's one diagnostic
/// helper for the driver library) and returns failure().
mlir::LogicalResult fail(Compilation &c, const llvm::Twine &msg);

/// Runs `pm` on the module with the standard MLIR pass-manager flags of the
/// command line applied (--mlir-print-ir-after-all, --mlir-pass-statistics,
/// ...) and its passes timed under `c.timing`.
mlir::LogicalResult runPasses(mlir::PassManager &pm, Compilation &c);

/// Module attribute naming the weights file that belongs to a .mlir file.
constexpr const char *kWeightsAttr = "cnn.weights";

/// Loads `options.inputFile` (ONNX import or MLIR parse) and its weights.
mlir::LogicalResult loadInput(const DriverOptions &options, Compilation &c);
/// Writes the IR to -o (atomically, weights to "<-o>.cnnw") or stdout.
mlir::LogicalResult emitMLIR(const DriverOptions &options, Compilation &c);
/// Runs @forward on --input with the reference interpreter; writes --output.
mlir::LogicalResult runReference(const DriverOptions &options, Compilation &c);
/// runReference's run: @forward on `input` (its parameters from c.weights);
/// the first result. Also the `reference` fuzz target's entry point.
mlir::FailureOr<reference::Tensor> runForward(Compilation &c,
                                              const reference::Tensor &input);

/// --param-groups FILE: tags @forward's parameters cnn.frozen and
/// cnn.param_options from the JSON file (ParamGroups.cpp).
mlir::LogicalResult applyParamGroups(const std::string &path,
                                     mlir::ModuleOp module);
/// Runs cnn-train-pipeline (cnn-autodiff, CSE, the step's optimization
/// passes) to build @train_step from @forward; with --stats, prints what
/// changed.
mlir::LogicalResult buildTrainStep(const DriverOptions &options,
                                   Compilation &c);
/// --lr, else the optimizer's default (SGD 0.01, Adam 1e-3).
double learningRate(const DriverOptions &options);
/// Trains on the CPU reference interpreter: --steps K on --data or on the
/// fixed batch --input/--labels; prints the loss of each step, the held-out
/// accuracy, and writes --save-state.
mlir::LogicalResult trainReference(const DriverOptions &options,
                                   Compilation &c);
/// Emits CUDA C++ (--emit cuda) or builds an executable with nvcc (-o exe,
/// weights beside it as "<exe>.cnnw"). Sets `exePath` when one was built.
mlir::LogicalResult compileCUDA(const DriverOptions &options, Compilation &c,
                                std::string &exePath);
/// `cnnc train`: compile and run on the GPU, or fall back to the reference
/// interpreter with a note when there is no GPU (or no nvcc).
int trainAndRun(const DriverOptions &options, Compilation &c);
/// --batch auto: sets options.batch to the largest batch whose static
/// memory plan (only the planning passes run, no nvcc) fits the GPU's free
/// memory with a 5 % margin, and prints the choice. Without a GPU (the CPU
/// reference path) the model's own batch is kept, with a note.
mlir::LogicalResult chooseAutoBatch(DriverOptions &options);
/// Whether this machine has an NVIDIA GPU device node (CNNC_ASSUME_NO_GPU=1
/// says no).
bool hasGPU();
/// The architectures `--arch` accepts besides "native".
constexpr const char *kSupportedArchs = "sm_80, sm_86, sm_89, sm_90 or sm_90a";
bool isSupportedArch(llvm::StringRef arch);
/// "native" -> the GPU's architecture (nvidia-smi), sm_90a without a GPU or
/// when it cannot be determined; anything else unchanged.
std::string resolveArch(llvm::StringRef requested);

/// Runs the whole pipeline; returns the process exit code.
int runDriver(const DriverOptions &options);

/// Weights file I/O (.cnnw through cnnrt::TensorFile).
mlir::LogicalResult readWeights(const std::string &path,
                                reference::TensorMap &weights,
                                std::string &err);
mlir::LogicalResult writeWeights(const std::string &path,
                                 const reference::TensorMap &weights,
                                 std::string &err);
/// A single tensor from/to .npy or raw CNNT (.bin), chosen by extension.
mlir::LogicalResult readTensor(const std::string &path, reference::Tensor &t,
                               std::string &err);
mlir::LogicalResult writeTensor(const std::string &path,
                                const reference::Tensor &t, std::string &err);

} // namespace cnnc::driver

#endif
