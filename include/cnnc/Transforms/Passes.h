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
  int64_t groupNormChannelViews = 0; ///< GroupNorm elementwise ops rebuilt
                                     ///< on the channel view
  int64_t resizeConcats = 0;     ///< concat(resize) made fused_resize_concat
  int64_t resizeGradSlices = 0;  ///< resize_grad reading a channel range
};
/// The counts of `pass` after it ran, if it is a cnn-fuse pass.
std::optional<FusionCounts> getFusionCounts(const mlir::Pass &pass);

} // namespace cnnc

#endif
