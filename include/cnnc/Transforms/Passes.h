//===- Passes.h - cnnc passes ----------------------------------*- C++ -*-===//
#ifndef CNNC_TRANSFORMS_PASSES_H
#define CNNC_TRANSFORMS_PASSES_H

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include <optional>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace cnnc {
#define GEN_PASS_DECL
#include "cnnc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cnnc/Transforms/Passes.h.inc"

/// What one run of cnn-fuse rewrote (its pass Statistics, readable in every
/// build: MLIR's Pass::Statistic is LLVM's Statistic, a no-op where
/// LLVM_ENABLE_STATS is off, as in Release builds against Debian's LLVM).
struct FusionCounts {
  int64_t convEpilogueOps = 0;   ///< ops folded into fused_conv2d (convs too)
  int64_t bnSplits = 0;          ///< batch_norm_train split in two
  int64_t bnReluGradOps = 0;     ///< ops folded into fused_batch_norm_relu_grad
  int64_t bnReluMasksRecomputed = 0; ///< ... whose mask is recomputed from x
  int64_t bnGradPairs = 0; ///< batch_norm_grad pairs of one gradient fused
  int64_t elementwiseOps = 0;    ///< elementwise ops given the fused form
  int64_t elementwiseMerges = 0; ///< fused_elementwise producer/consumer merges
};
/// The counts of `pass` after it ran, if it is a cnn-fuse pass.
std::optional<FusionCounts> getFusionCounts(const mlir::Pass &pass);

/// The activation layout the optimization pipeline gives the step.
enum class PipelineLayout { NCHW, NHWC };
/// The compute precision the optimization pipeline gives the step.
enum class PipelinePrecision { FP32, FP16 };

/// Options of `cnn-gpu-pipeline`, the passes that run on the training step
/// after cnn-autodiff. The defaults are what the CUDA target gets (`cnnc
/// --emit cuda`); the reference interpreter's pipeline (`cnnc --emit mlir`
/// without --target gpu) is `layout=nchw precision=fp32 fuse=false
/// lower-elementwise=false memory-plan=false`.
struct CNNGPUPipelineOptions
    : public mlir::PassPipelineOptions<CNNGPUPipelineOptions> {
  Option<PipelineLayout> layout{
      *this, "layout", llvm::cl::desc("Activation layout (cnn-layout)"),
      llvm::cl::init(PipelineLayout::NHWC),
      llvm::cl::values(
          clEnumValN(PipelineLayout::NCHW, "nchw", "N x C x H x W"),
          clEnumValN(PipelineLayout::NHWC, "nhwc",
                     "N x H x W x C (cnn-layout)"))};
  Option<PipelinePrecision> precision{
      *this, "precision", llvm::cl::desc("Compute precision (cnn-precision)"),
      llvm::cl::init(PipelinePrecision::FP16),
      llvm::cl::values(
          clEnumValN(PipelinePrecision::FP32, "fp32", "f32 everywhere"),
          clEnumValN(PipelinePrecision::FP16, "fp16",
                     "f16 compute, f32 master weights (cnn-precision)"))};
  Option<bool> fuse{*this, "fuse", llvm::cl::desc("Run cnn-fuse"),
                    llvm::cl::init(true)};
  Option<bool> lowerElementwise{
      *this, "lower-elementwise",
      llvm::cl::desc("Run cnn-lower-elementwise (the CUDA target needs it)"),
      llvm::cl::init(true)};
  Option<bool> paramFormat{
      *this, "param-format",
      llvm::cl::desc("Run cnn-param-format (filters stored as the NHWC "
                     "convolution reads them)"),
      llvm::cl::init(true)};
  Option<bool> convStats{
      *this, "conv-stats",
      llvm::cl::desc("Run cnn-conv-stats (BatchNorm statistics in the "
                     "convolution's epilogue; NHWC f16 only)"),
      llvm::cl::init(true)};
  Option<bool> convStatsPrologue{
      *this, "conv-stats-prologue",
      llvm::cl::desc("cnn-conv-stats with the BN-apply + ReLU prologue (the "
                     "normalized tensor recomputed for the filter gradient: "
                     "less memory, a few more kernels)"),
      llvm::cl::init(true)};
  Option<bool> wgradPrologue{
      *this, "wgrad-prologue",
      llvm::cl::desc("cnn-conv-stats: the BN-apply + ReLU recomputed for a "
                     "filter gradient becomes the wgrad's prologue (cuDNN; "
                     "off: ResNet-50's step measured 0.18 ms slower with it)"),
      llvm::cl::init(false)};
  Option<bool> dgradEpilogue{
      *this, "dgrad-epilogue",
      llvm::cl::desc("Run cnn-dgrad-epilogue (the residual-gradient add and "
                     "ReLU gradient in the backward-data convolution; NHWC "
                     "f16 only)"),
      llvm::cl::init(true)};
  Option<bool> maxPoolIndex{
      *this, "max-pool-index",
      llvm::cl::desc("Run cnn-max-pool-index (max pooling records each "
                     "window's argmax for its gradient; a BN + ReLU before "
                     "it becomes its prologue)"),
      llvm::cl::init(true)};
  Option<bool> dualBnGrad{
      *this, "dual-bn-grad",
      llvm::cl::desc("cnn-fuse's dual-bn-grad (two BatchNorm gradients of "
                     "one gradient read it once)"),
      llvm::cl::init(true)};
  Option<bool> poolBnGrad{
      *this, "pool-bn-grad",
      llvm::cl::desc("cnn-max-pool-index's grad-fusion (the pooling gradient "
                     "gathered inside the BN + ReLU gradient that reads it; "
                     "off by default: measured slower than the separate "
                     "gather on ResNet-50, docs/benchmarks.md session 17)"),
      llvm::cl::init(false)};
  Option<bool> remat{
      *this, "remat",
      llvm::cl::desc("Run cnn-remat (recompute BN-apply/ReLU outputs in the "
                     "backward pass instead of storing them)"),
      llvm::cl::init(false)};
  Option<int64_t> rematMB{
      *this, "remat-mb",
      llvm::cl::desc("cnn-remat's budget-mb: free about this many MiB, the "
                     "least traffic per byte freed first (0: every "
                     "candidate)"),
      llvm::cl::init(0)};
  Option<bool> rematConvs{
      *this, "remat-convs",
      llvm::cl::desc("Without remat: cnn-remat on the expanding 1x1 "
                     "convolutions alone, up to remat-convs-percent of the "
                     "stored activations (ResNet-50 b128: two layer1 conv3 "
                     "outputs, 392 MiB, for 0.18 ms of a 20.7 ms step; a "
                     "third cost as much again: docs/benchmarks.md session "
                     "19)"),
      llvm::cl::init(true)};
  Option<int64_t> rematConvsPercent{
      *this, "remat-convs-percent",
      llvm::cl::desc("remat-convs' budget-percent"), llvm::cl::init(9)};
  Option<bool> memoryReuse{
      *this, "memory-reuse",
      llvm::cl::desc("cnn-memory-plan shares memory between temporaries "
                     "(false: each its own range)"),
      llvm::cl::init(true)};
  Option<int64_t> workspaceMB{
      *this, "workspace-mb",
      llvm::cl::desc("cnn-memory-plan: the cuDNN/cuBLASLt workspace in MiB "
                     "(-1: the largest tensor a convolution reads or writes, "
                     "4 to 64 MiB)"),
      llvm::cl::init(-1)};
  Option<bool> memoryPlan{*this, "memory-plan",
                          llvm::cl::desc("Run cnn-memory-plan"),
                          llvm::cl::init(true)};
  Option<bool> dataParallel{
      *this, "data-parallel",
      llvm::cl::desc("Run cnn-data-parallel (gradients all-reduced in "
                     "buckets; docs/data-parallel.md)"),
      llvm::cl::init(false)};
  Option<double> bucketMB{
      *this, "bucket-mb",
      llvm::cl::desc("cnn-data-parallel's bucket size in MiB"),
      llvm::cl::init(25.0)};
  Option<bool> syncBN{
      *this, "sync-bn",
      llvm::cl::desc("cnn-data-parallel: BatchNorm over the global batch"),
      llvm::cl::init(false)};
  Option<int64_t> worldSize{
      *this, "world-size",
      llvm::cl::desc("cnn-data-parallel: the number of ranks"),
      llvm::cl::init(0)};
  Option<std::string> arch{
      *this, "arch",
      llvm::cl::desc("cnn-prepare-for-emission's GPU architecture (sm_80, "
                     "sm_86, sm_89, sm_90, sm_90a; empty: sm_90)"),
      llvm::cl::init("")};
};

/// Adds the optimization passes of the training step to `pm` (a ModuleOp
/// pass manager): cnn-layout, cnn-precision, canonicalize + CSE,
/// cnn-data-parallel, cnn-fuse,
/// cnn-lower-elementwise, cnn-memory-plan, cnn-prepare-for-emission, as
/// `options` select. The `cnnc`
/// driver and `cnnc-opt --cnn-gpu-pipeline` both build it here.
void buildCNNGPUPipeline(mlir::OpPassManager &pm,
                         const CNNGPUPipelineOptions &options);

/// Registers `cnn-gpu-pipeline` (for cnnc-opt and --pass-pipeline).
void registerCNNPipelines();
} // namespace cnnc

#endif
