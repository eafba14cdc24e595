//===- Pipeline.h - the training pipeline and its options -------*- C++ -*-===//
//
// `cnn-train-pipeline` is the one pass pipeline that turns an imported model
// into the training step the CUDA target prints or the reference interpreter
// runs: the import's clean-up, cnn-autodiff, CSE, then the step's
// optimization passes (`cnn-gpu-pipeline`, the same pipeline after
// cnn-autodiff). Its options are declared once, in CNNPipelineOptions: the
// cnnc driver derives its flags and their help from them (tools/cnnc), the
// Python package reads their defaults from `cnnc
// --print-pipeline-options-json`, and `cnnc-opt --cnn-train-pipeline='...'`
// takes them as the pipeline's textual options. Adding a tuning option is
// one Option here and its use in buildCNNStepPipeline.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_TRANSFORMS_PIPELINE_H
#define CNNC_TRANSFORMS_PIPELINE_H

#include "cnnc/Transforms/Passes.h"

#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace cnnc {

/// The groups cnnc's --help lists the pipeline's options in.
llvm::cl::OptionCategory &trainingStepOptionCategory();
llvm::cl::OptionCategory &stepPassOptionCategory();

/// The options of cnn-train-pipeline and cnn-gpu-pipeline. Defaults are the
/// CUDA target's pipeline. Options whose default depends on the target
/// (layout, precision, fuse) take it from `target` unless given. Each
/// option's name is also the cnnc flag (`--<name>`), except the ones the
/// driver sets from its own flags (driverSetOptions()).
struct CNNPipelineOptions
    : public mlir::PassPipelineOptions<CNNPipelineOptions> {
  //===--- Target and policy (set by the driver from its action) ---------===//
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("Whose optimization pipeline runs on the training step: "
                     "gpu (the CUDA target's: NHWC, fp16, fusion, memory "
                     "plan) or cpu (the reference interpreter's)"),
      llvm::cl::init("gpu")};
  Option<bool> optimize{
      *this, "optimize",
      llvm::cl::desc("The optimization passes (false: cnnc -O0; the CUDA "
                     "target still gets the fused elementwise form and a "
                     "memory plan that shares nothing)"),
      llvm::cl::init(true)};
  Option<bool> importCleanup{
      *this, "import-cleanup",
      llvm::cl::desc("Run cnn-import-cleanup first (cnnc runs it when it "
                     "imports an ONNX model)"),
      llvm::cl::init(true)};
  Option<int64_t> worldSize{
      *this, "world-size",
      llvm::cl::desc("Data parallelism (cnn-data-parallel) over this many "
                     "ranks; 0: none (cnnc --gpus N)"),
      llvm::cl::init(0)};
  Option<std::string> arch{
      *this, "arch",
      llvm::cl::desc("cnn-prepare-for-emission's GPU architecture (sm_80, "
                     "sm_86, sm_89, sm_90, sm_90a; empty: sm_90)"),
      llvm::cl::init("")};

  //===--- The training step (cnn-autodiff) ------------------------------===//
  // The defaults are cnn-autodiff's (Passes.td).
  Option<std::string> optimizer{
      *this, "optimizer",
      llvm::cl::desc("sgd, adam, adamw, or none (return gradients)"),
      llvm::cl::init(CNNAutodiffOptions().optimizer),
      llvm::cl::cat(trainingStepOptionCategory())};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(CNNAutodiffOptions().momentum),
                          llvm::cl::cat(trainingStepOptionCategory())};
  Option<double> dampening{*this, "dampening", llvm::cl::desc("SGD dampening"),
                           llvm::cl::init(CNNAutodiffOptions().dampening),
                           llvm::cl::cat(trainingStepOptionCategory())};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::desc("SGD Nesterov momentum"),
                        llvm::cl::init(CNNAutodiffOptions().nesterov),
                        llvm::cl::cat(trainingStepOptionCategory())};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("Weight decay"),
                             llvm::cl::init(CNNAutodiffOptions().weightDecay),
                             llvm::cl::cat(trainingStepOptionCategory())};
  Option<bool> noBNWeightDecay{
      *this, "no-bn-weight-decay",
      llvm::cl::desc("No weight decay on 1-D parameters (BatchNorm "
                     "scale/shift, biases)"),
      llvm::cl::init(CNNAutodiffOptions().noBNWeightDecay),
      llvm::cl::cat(trainingStepOptionCategory())};
  Option<double> clipGradNorm{
      *this, "clip-grad-norm",
      llvm::cl::desc("Clip the gradients to this global L2 norm before each "
                     "update, as torch.nn.utils.clip_grad_norm_ (after "
                     "unscaling under fp16; a skipped fp16 step skips it; "
                     "0: no clipping)"),
      llvm::cl::init(CNNAutodiffOptions().clipGradNorm),
      llvm::cl::cat(trainingStepOptionCategory())};
  Option<int64_t> accumulate{
      *this, "accumulate",
      llvm::cl::desc("Gradient accumulation: each step is a micro-step; the "
                     "update applies every N micro-steps to the mean of "
                     "their gradients (torch's loop of N backward passes of "
                     "loss / N); fp32 only"),
      llvm::cl::init(CNNAutodiffOptions().accumulate),
      llvm::cl::cat(trainingStepOptionCategory())};
  // Model parallelism (docs/pipeline-parallel.md): the reference
  // interpreter's training runs the step as stages; cnnc's reference
  // training (ReferenceTraining.cpp) splits a copy of the step.
  Option<int64_t> pipelineStages{
      *this, "pipeline-stages",
      llvm::cl::desc("Pipeline stages: split the training step into S "
                     "stages (cnn-pipeline-partition, cnn-pipeline-split, "
                     "cnn-pipeline-schedule), run on threads of the "
                     "reference interpreter or, for the CUDA target (fp32, "
                     "gpipe), as S processes on S GPUs of one executable "
                     "(0: no stages)"),
      llvm::cl::init(0), llvm::cl::cat(trainingStepOptionCategory())};
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("Pipeline stages: micro-batches per step (the batch is "
                     "one micro-batch's; one optimizer update per M, as "
                     "--accumulate M)"),
      llvm::cl::init(1), llvm::cl::cat(trainingStepOptionCategory())};
  Option<int64_t> pipelineMemoryMB{
      *this, "pipeline-memory-mb",
      llvm::cl::desc("Pipeline stages: each stage's peak memory budget in MiB "
                     "(cnn-pipeline-partition's cost model: parameters and "
                     "state, M micro-batches' kept activations, the largest "
                     "op); a plan over it is an error naming the layer. "
                     "Without --pipeline-stages: the fewest stages that fit "
                     "(0: no budget)"),
      llvm::cl::init(0), llvm::cl::cat(trainingStepOptionCategory())};
  Option<std::string> pipelineProfile{
      *this, "pipeline-profile",
      llvm::cl::desc("Pipeline stages: balance the stages by a measured step "
                     "instead of the roofline estimate: the JSON file "
                     "CNNRT_PROFILE_JSON=FILE CNNRT_PROFILE=1 writes when "
                     "the unpartitioned step runs at the micro-batch size "
                     "(cnn-pipeline-partition's profile)"),
      llvm::cl::init(""), llvm::cl::cat(trainingStepOptionCategory())};
  Option<double> pipelineTimeSlack{
      *this, "pipeline-time-slack",
      llvm::cl::desc("Pipeline stages: among cuts whose slowest stage is "
                     "within this fraction of the best balance, the fewest "
                     "crossing bytes (cnn-pipeline-partition's time-slack)"),
      llvm::cl::init(CNNPipelinePartitionOptions().timeSlack),
      llvm::cl::Hidden, llvm::cl::cat(trainingStepOptionCategory())};
  Option<bool> pipelineSendsFirst{
      *this, "pipeline-sends-first",
      llvm::cl::desc("Pipeline stages: each stage function runs the ops its "
                     "sends need first, so a backward pass hands its input "
                     "gradients on before computing its weight gradients "
                     "(cnn-pipeline-split's sends-first; default on)"),
      llvm::cl::init(CNNPipelineSplitOptions().sendsFirst),
      llvm::cl::Hidden, llvm::cl::cat(trainingStepOptionCategory())};
  Option<std::string> pipelineSchedule{
      *this, "pipeline-schedule",
      llvm::cl::desc("Pipeline stages: the order of each stage's micro-"
                     "batches (cnn-pipeline-schedule): gpipe (every forward, "
                     "then every backward) or 1f1b (S - s warm-up forwards, "
                     "then one backward and one forward alternating: fewer "
                     "activations in flight); each stage runs on a thread "
                     "of its own"),
      llvm::cl::init("gpipe"), llvm::cl::cat(trainingStepOptionCategory())};
  Option<int64_t> pipelineChunks{
      *this, "pipeline-chunks",
      llvm::cl::desc("Pipeline stages: interleaved stages, V chunks per GPU "
                     "(cnn-pipeline-partition's chunks): the step is cut "
                     "into S x V virtual stages placed in a loop (virtual "
                     "stage v on GPU v mod S), and the GPipe bubble falls "
                     "from (S-1)/(M+S-1) to (S-1)/(V*M+S-1); needs "
                     "--pipeline-stages S >= 2 and the gpipe schedule "
                     "(1: one range of layers per GPU)"),
      llvm::cl::init(CNNPipelinePartitionOptions().chunks),
      llvm::cl::cat(trainingStepOptionCategory())};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("Adam beta1"),
                       llvm::cl::init(CNNAutodiffOptions().beta1),
                       llvm::cl::cat(trainingStepOptionCategory())};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("Adam beta2"),
                       llvm::cl::init(CNNAutodiffOptions().beta2),
                       llvm::cl::cat(trainingStepOptionCategory())};
  Option<double> eps{*this, "eps", llvm::cl::desc("Adam epsilon"),
                     llvm::cl::init(CNNAutodiffOptions().epsilon),
                     llvm::cl::cat(trainingStepOptionCategory())};
  Option<double> labelSmoothing{
      *this, "label-smoothing", llvm::cl::desc("Cross-entropy label smoothing"),
      llvm::cl::init(CNNAutodiffOptions().labelSmoothing),
      llvm::cl::cat(trainingStepOptionCategory())};
  Option<int64_t> ignoreIndex{
      *this, "ignore-index",
      llvm::cl::desc("Label that contributes nothing to the loss and is not "
                     "counted in its mean (PyTorch's ignore_index; e.g. 255 "
                     "for the void pixels of segmentation masks)"),
      llvm::cl::init(CNNAutodiffOptions().ignoreIndex),
      llvm::cl::cat(trainingStepOptionCategory())};
  Option<double> auxLossWeight{
      *this, "aux-loss-weight",
      llvm::cl::desc("Weight of each auxiliary classifier's cross-entropy in "
                     "the loss (models returning several logits: GoogLeNet, "
                     "Inception-v3, segmentation models' 'aux' head, where "
                     "torchvision uses 0.5)"),
      llvm::cl::init(CNNAutodiffOptions().auxLossWeight),
      llvm::cl::cat(trainingStepOptionCategory())};

  //===--- The step's optimization passes --------------------------------===//
  Option<std::string> layout{
      *this, "layout",
      llvm::cl::desc("Activation layout: nchw or nhwc (default: nhwc for the "
                     "GPU target, nchw for the CPU and without optimization)"),
      llvm::cl::init(""), llvm::cl::cat(stepPassOptionCategory())};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("fp32 or fp16 (f16 compute, f32 master weights, loss "
                     "scaling; default: fp16 for the GPU target, fp32 for "
                     "the CPU and without optimization)"),
      llvm::cl::init(""), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> fuse{
      *this, "fuse",
      llvm::cl::desc("cnn-fuse (default: on when compiling for the GPU, off "
                     "for the reference interpreter)"),
      llvm::cl::init(true), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> remat{
      *this, "remat",
      llvm::cl::desc("cnn-remat: recompute BN-apply/ReLU outputs and "
                     "expanding 1x1 convolutions in the backward pass instead "
                     "of storing them (fewer stored activations, more "
                     "kernels; GPU target)"),
      llvm::cl::init(false), llvm::cl::cat(stepPassOptionCategory())};
  Option<int64_t> rematMB{
      *this, "remat-mb",
      llvm::cl::desc("cnn-remat with a budget: recompute activations, the "
                     "least memory traffic per byte freed first (expanding "
                     "1x1 convolutions: 1.25-1.5 bytes; elementwise: about "
                     "3), until about this many MiB are no longer stored"),
      llvm::cl::init(0), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> rematConvs{
      *this, "remat-convs",
      llvm::cl::desc("Without --remat/--remat-mb: recompute the expanding 1x1 "
                     "convolutions (a bottleneck's last) in the backward "
                     "pass, up to remat-convs-percent of the stored "
                     "activations (GPU target; default on, "
                     "--remat-convs=false turns it off)"),
      llvm::cl::init(true), llvm::cl::cat(stepPassOptionCategory())};
  Option<int64_t> rematConvsPercent{
      *this, "remat-convs-percent",
      llvm::cl::desc("remat-convs' budget in percent of the stored "
                     "activations (ResNet-50 b128: two layer1 conv3 outputs, "
                     "392 MiB, for 0.18 ms of a 20.7 ms step; a third cost "
                     "as much again: docs/benchmarks.md session 19)"),
      llvm::cl::init(9), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> convStats{
      *this, "conv-stats",
      llvm::cl::desc("cnn-conv-stats: BatchNorm statistics in the epilogue "
                     "of the convolution before it (cuDNN GenStats; GPU "
                     "target, NHWC f16; default on, --conv-stats=false turns "
                     "it off)"),
      llvm::cl::init(true), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> convPrologue{
      *this, "conv-prologue",
      llvm::cl::desc("cnn-conv-stats: the BatchNorm apply + ReLU before a "
                     "convolution becomes its prologue (cuDNN), and is "
                     "recomputed for the filter gradient instead of stored "
                     "(ResNet-50 on the H100: -800 MiB and 1.5-2 % faster; "
                     "default on, --conv-prologue=false turns it off; "
                     "--remat turns it on)"),
      llvm::cl::init(true), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> wgradPrologue{
      *this, "wgrad-prologue",
      llvm::cl::desc("cnn-conv-stats: the BatchNorm apply + ReLU recomputed "
                     "for a filter gradient becomes that gradient's prologue "
                     "(cuDNN's scale-bias-ReLU + wgrad graph, timed against "
                     "the split form; with --conv-prologue; opt-in: each "
                     "graph times faster alone, but ResNet-50's whole step "
                     "on the H100 measured 21.45 ms with it against 21.27 "
                     "without)"),
      llvm::cl::init(false), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> dgradEpilogue{
      *this, "dgrad-epilogue",
      llvm::cl::desc("cnn-dgrad-epilogue: a residual block's gradient sum "
                     "and ReLU gradient applied by the backward-data "
                     "convolution before them (cuDNN's dgrad + add + "
                     "ReLU-backward graph, timed against the split form; GPU "
                     "target, NHWC f16; default on, --dgrad-epilogue=false "
                     "turns it off)"),
      llvm::cl::init(true), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> maxPoolIndex{
      *this, "max-pool-index",
      llvm::cl::desc("cnn-max-pool-index: max pooling records each window's "
                     "argmax for its gradient instead of keeping its input "
                     "for the backward pass, and a BatchNorm apply + ReLU "
                     "before it becomes its prologue (GPU target; default "
                     "on, --max-pool-index=false turns it off)"),
      llvm::cl::init(true), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> poolBnGrad{
      *this, "pool-bn-grad",
      llvm::cl::desc("cnn-max-pool-index: the pooling gradient is gathered "
                     "inside the BatchNorm + ReLU gradient that is its only "
                     "reader (ResNet's stem; default off: on the H100 the "
                     "separate gather measured faster, docs/benchmarks.md)"),
      llvm::cl::init(false), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> dualBnGrad{
      *this, "dual-bn-grad",
      llvm::cl::desc("cnn-fuse: two BatchNorm gradients of one gradient (a "
                     "shortcut with its own BatchNorm) read it in one pair "
                     "of passes"),
      llvm::cl::init(true), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> fuseGroupNorm{
      *this, "fuse-group-norm",
      llvm::cl::desc("cnn-fuse: GroupNorm's normalization joins its scale, "
                     "shift and activation in one kernel (the channel view; "
                     "default on; an A/B switch, in --help-hidden)"),
      llvm::cl::init(true), llvm::cl::Hidden,
      llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> fuseResizeConcat{
      *this, "fuse-resize-concat",
      llvm::cl::desc("cnn-fuse: upsample + concat as one kernel, the resize "
                     "gradient reading its channels of the concat's gradient "
                     "in place (default on; an A/B switch, in --help-hidden)"),
      llvm::cl::init(true), llvm::cl::Hidden,
      llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> tiledTranspose{
      *this, "tiled-transpose",
      llvm::cl::desc("cnn-select-lowering: NCHW <-> NHWC transposes (and "
                     "other batched 2-D ones) in 32 x 32 shared-memory tiles "
                     "instead of a gather with strided reads (default on: "
                     "bitwise the gather's result, 2.3-3.7x faster on an "
                     "H100; --tiled-transpose=false keeps the gather)"),
      llvm::cl::init(CNNSelectLoweringOptions().tiledTranspose),
      llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> paramFormat{
      *this, "param-format",
      llvm::cl::desc("cnn-param-format: convolution filters and their "
                     "optimizer state stored as the NHWC convolution reads "
                     "them, no per-step re-layout (GPU target; default on, "
                     "--param-format=false turns it off; checkpoints keep the "
                     "public K, C, R, S layout)"),
      llvm::cl::init(true), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> pipelineAsyncTransfers{
      *this, "pipeline-async-transfers",
      llvm::cl::desc("Pipeline stages on the GPU (GPipe): sends and receives "
                     "on a stream per neighbour, overlapping the stage's "
                     "compute (cnn-pipeline-async-transfers; default on; off: "
                     "on the compute stream)"),
      llvm::cl::init(true), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> memoryPlan{
      *this, "memory-plan",
      llvm::cl::desc("cnn-memory-plan shares memory between temporaries "
                     "(default on; the GPU target always gets a plan, "
                     "without sharing when off)"),
      llvm::cl::init(true), llvm::cl::cat(stepPassOptionCategory())};
  Option<int64_t> workspaceMB{
      *this, "workspace-mb",
      llvm::cl::desc("GPU target: the cuDNN/cuBLASLt workspace in the arena, "
                     "in MiB, a cap: algorithms that need more are not "
                     "chosen (default: the largest tensor a convolution "
                     "reads or writes, 4 to 64 MiB, which a convolution "
                     "plan at least twice as fast may exceed with a "
                     "workspace of its own, said at start-up)"),
      llvm::cl::init(-1), llvm::cl::cat(stepPassOptionCategory())};
  Option<double> bucketMB{
      *this, "bucket-mb",
      llvm::cl::desc("Data parallelism: largest gradient bucket of one "
                     "all-reduce, in MiB (default 25, as PyTorch DDP)"),
      llvm::cl::init(25.0), llvm::cl::cat(stepPassOptionCategory())};
  Option<bool> syncBN{
      *this, "sync-bn",
      llvm::cl::desc("Data parallelism: BatchNorm normalizes with the "
                     "statistics of the global batch (PyTorch's "
                     "SyncBatchNorm; needs --gpus)"),
      llvm::cl::init(false), llvm::cl::cat(stepPassOptionCategory())};

  /// Calls `fn` on every option, in name order.
  void forEachOption(llvm::function_ref<void(llvm::cl::Option &)> fn);
};

/// Whether the step is split into pipeline stages (--pipeline-stages S, or
/// --pipeline-memory-mb alone: the fewest stages that fit).
inline bool isPipelined(const CNNPipelineOptions &o) {
  return o.pipelineStages > 0 || o.pipelineMemoryMB > 0;
}

/// The options the cnnc driver sets from its own flags and actions (--target
/// from the action, -O0, --gpus, --arch native, the import it ran): not
/// flags of their own.
bool isDriverSetOption(llvm::StringRef name);

/// Checks the values no option parser checks (names, ranges); `flagPrefix`
/// is put before an option's name in the message ("--" for cnnc's flags).
mlir::LogicalResult
verifyCNNPipelineOptions(const CNNPipelineOptions &options,
                         llvm::function_ref<void(const llvm::Twine &)> error,
                         llvm::StringRef flagPrefix = "");

/// The layout ("nchw"/"nhwc") and precision ("fp32"/"fp16") the pipeline
/// gives the step: the option, else the target's default.
std::string effectiveLayout(const CNNPipelineOptions &options);
std::string effectivePrecision(const CNNPipelineOptions &options);
/// cnn-autodiff's options from the pipeline's.
CNNAutodiffOptions getAutodiffOptions(const CNNPipelineOptions &options);
/// cnn-pipeline-partition's options from the pipeline's (stages, micro-
/// batches, memory budget, the step's precision, whether the target's
/// transfers overlap its compute, profile, time slack).
CNNPipelinePartitionOptions
getPartitionOptions(const CNNPipelineOptions &options);
/// cnn-pipeline-split's options from the pipeline's.
CNNPipelineSplitOptions getSplitOptions(const CNNPipelineOptions &options);

/// Adds cnn-train-pipeline to `pm` (a ModuleOp pass manager):
/// cnn-import-cleanup (with import-cleanup), cnn-autodiff, CSE, then
/// buildCNNStepPipeline.
void buildCNNTrainPipeline(mlir::OpPassManager &pm,
                           const CNNPipelineOptions &options);
/// Adds the training step's optimization passes (`cnn-gpu-pipeline`: what
/// runs after cnn-autodiff) as `options` and their target select:
/// cnn-layout, cnn-precision, canonicalize + CSE, cnn-input-format,
/// cnn-param-format, cnn-data-parallel, cnn-dgrad-epilogue, cnn-fuse,
/// cnn-conv-stats, cnn-max-pool-index, cnn-lower-elementwise, cnn-remat,
/// cnn-select-lowering, cnn-memory-plan, cnn-prepare-for-emission.
void buildCNNStepPipeline(mlir::OpPassManager &pm,
                          const CNNPipelineOptions &options);

/// Registers cnn-train-pipeline and cnn-gpu-pipeline (cnnc-opt,
/// --pass-pipeline); a bad option value is one error naming it.
void registerCNNPipelines();

/// The options as JSON: each option's name, description, whether it is a
/// cnnc flag, its type and default, and the effective target-dependent
/// defaults (layout, precision, fuse) of each target. `cnnc
/// --print-pipeline-options-json` prints it for the Python package.
void printCNNPipelineOptionsJSON(llvm::raw_ostream &os);

} // namespace cnnc

#endif
