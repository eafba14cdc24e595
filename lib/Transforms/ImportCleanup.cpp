//===- ImportCleanup.cpp - specialized forms of imported ops --------------===//
//
// cnn-import-cleanup (Passes.td): the canonicalization patterns of the
// broadcasting ops the ONNX importer creates, without folding.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNIMPORTCLEANUP
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;

namespace {
struct CNNImportCleanupPass
    : public cnnc::impl::CNNImportCleanupBase<CNNImportCleanupPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    cnn::AddOp::getCanonicalizationPatterns(patterns, ctx);
    cnn::MulOp::getCanonicalizationPatterns(patterns, ctx);
    cnn::DivOp::getCanonicalizationPatterns(patterns, ctx);
    cnn::ReduceMeanOp::getCanonicalizationPatterns(patterns, ctx);
    cnn::ScaleOp::getCanonicalizationPatterns(patterns, ctx);
    // No folding: folders would drop cnn.dropout (see Passes.td). The
    // greedy driver not converging is not an error: what it rewrote stands.
    GreedyRewriteConfig config;
    config.enableFolding(false).enableConstantCSE(false);
    (void)applyPatternsGreedily(getOperation(), std::move(patterns), config);
  }
};
} // namespace
