//===- Pipeline.cpp - the training step's optimization pipeline -----------===//
//
// One definition of the pass pipeline for both the cnnc driver and
// `cnnc-opt --cnn-gpu-pipeline`, so that a lit test of cnnc-opt sees exactly
// what the driver compiles.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void cnnc::buildCNNGPUPipeline(OpPassManager &pm,
                               const CNNGPUPipelineOptions &options) {
  bool nhwc = options.layout == PipelineLayout::NHWC;
  bool fp16 = options.precision == PipelinePrecision::FP16;
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
  if (options.lowerElementwise && (nhwc || fp16))
    pm.addPass(createCNNInputFormat());
  // Filters (and their optimizer state) stored as the NHWC convolution
  // reads them: no per-step re-layout of weights and gradients.
  if (options.lowerElementwise && nhwc && options.paramFormat)
    pm.addPass(createCNNParamFormat());
  // Data parallelism: after layout/precision (the f16 gradients are the ones
  // reduced), before fusion and the memory plan.
  if (options.dataParallel) {
    CNNDataParallelOptions dp;
    dp.bucketMB = options.bucketMB;
    dp.syncBN = options.syncBN;
    dp.worldSize = options.worldSize;
    pm.addPass(createCNNDataParallel(dp));
  }
  // The residual-gradient add + ReLU gradient into the backward-data
  // convolution before them (cuDNN's dgrad graph): before cnn-fuse merges
  // the add and relu_grad into an elementwise kernel.
  if (options.fuse && options.dgradEpilogue && options.lowerElementwise &&
      nhwc && fp16)
    pm.addPass(createCNNDgradEpilogue());
  if (options.fuse) {
    CNNFuseOptions fo;
    fo.dualBatchNormGrad = options.dualBnGrad;
    pm.addPass(createCNNFuse(fo));
  }
  // BatchNorm statistics out of the convolution's epilogue: the CUDA
  // target's NHWC f16 convolutions only (cuDNN's runtime fusion).
  if (options.fuse && options.convStats && options.lowerElementwise && nhwc &&
      fp16) {
    CNNConvStatsOptions cs;
    cs.prologue = options.convStatsPrologue;
    cs.wgradPrologue = options.wgradPrologue;
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
  if (options.lowerElementwise && options.maxPoolIndex) {
    CNNMaxPoolIndexOptions mpi;
    mpi.prologue = options.fuse;
    mpi.gradFusion = options.fuse && options.poolBnGrad;
    pm.addPass(createCNNMaxPoolIndex(mpi));
  }
  // The CUDA target prints elementwise ops in their fused form only.
  if (options.lowerElementwise)
    pm.addPass(createCNNLowerElementwise());
  // Fewer stored activations: needs the fused form (it clones
  // fused_elementwise ops), before the lowering choices and the plan.
  if (options.remat && options.lowerElementwise) {
    CNNRematOptions ro;
    ro.budgetMB = options.rematMB;
    pm.addPass(createCNNRemat(ro));
  } else if (options.rematConvs && options.lowerElementwise) {
    // The default: the recomputations that cost least (1x1 convolutions
    // that expand their input), for a share of the stored activations.
    CNNRematOptions ro;
    ro.onlyConvolutions = true;
    ro.budgetPercent = options.rematConvsPercent;
    pm.addPass(createCNNRemat(ro));
  }
  // How each op runs on the GPU: decided here, printed by the emitter.
  if (options.lowerElementwise)
    pm.addPass(createCNNSelectLowering());
  // The arena plan is for the CUDA target (the reference interpreter
  // allocates per value); it runs last, after every rewrite of the step.
  if (options.memoryPlan) {
    CNNMemoryPlanOptions mp;
    mp.reuse = options.memoryReuse;
    mp.workspaceMB = options.workspaceMB;
    pm.addPass(createCNNMemoryPlan(mp));
  }
  // Last: how each generated kernel launches (grids from the target's SM
  // count, reduction strategies, multi-tensor chunks), decided in IR for
  // the CUDA printer, after every rewrite of the step.
  if (options.lowerElementwise) {
    CNNPrepareForEmissionOptions pe;
    pe.arch = options.arch;
    pm.addPass(createCNNPrepareForEmission(pe));
  }
}

void cnnc::registerCNNPipelines() {
  PassPipelineRegistration<CNNGPUPipelineOptions>(
      "cnn-gpu-pipeline",
      "The training step's optimization passes after cnn-autodiff, as the "
      "cnnc driver runs them (defaults: the CUDA target's pipeline)",
      buildCNNGPUPipeline);
}
