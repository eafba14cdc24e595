//===- ConvStats.cpp - cnn-conv-stats: BN statistics in the conv epilogue -===//
//
// batch_norm_stats(conv2d(x, w)) -> batch_norm_finalize(fused_conv2d_stats):
// the statistics kernel that re-reads the convolution's output goes away;
// cuDNN's GenStats epilogue sums the output while it is still in registers.
// Only where cuDNN's runtime fusion engines apply (NHWC, f16, one group,
// channel counts that are multiples of 8); the runtime keeps a split form
// (the convolution, then a statistics kernel) for shapes its engines refuse.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNCONVSTATS
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

/// Whether cuDNN's conv + GenStats graph can take `conv`: NHWC f16 tensors
/// whose channel counts keep every pixel's row 16-byte aligned.
/// (`anyPrecision`: any one element type, for the reference interpreter.)
bool genStatsCandidate(Conv2DOp conv, bool anyPrecision) {
  auto x = conv.getInput().getType(), y = conv.getType();
  Type et = x.getElementType();
  return conv.getLayout() == Layout::NHWC && conv.getGroups() == 1 &&
         x.getRank() == 4 && (et.isF16() || anyPrecision) &&
         y.getElementType() == et &&
         conv.getFilter().getType().getElementType() == et &&
         x.getDimSize(3) % 8 == 0 && y.getDimSize(3) % 8 == 0;
}

struct FuseStatsIntoConv : OpRewritePattern<BatchNormStatsOp> {
  FuseStatsIntoConv(MLIRContext *ctx, bool anyPrecision,
                    llvm::Statistic &fused)
      : OpRewritePattern(ctx), anyPrecision(anyPrecision), fused(fused) {}
  LogicalResult matchAndRewrite(BatchNormStatsOp stats,
                                PatternRewriter &rewriter) const override {
    auto conv = stats.getInput().getDefiningOp<Conv2DOp>();
    if (!conv || stats.getLayout() != Layout::NHWC || !genStatsCandidate(conv, anyPrecision))
      return failure();
    auto y = conv.getType();
    int64_t k = y.getDimSize(3);
    auto f32 = RankedTensorType::get({k}, rewriter.getF32Type());
    rewriter.setInsertionPoint(conv);
    auto fusedConv = FusedConv2DStatsOp::create(
        rewriter, conv.getLoc(), TypeRange{y, f32, f32}, conv.getInput(),
        conv.getFilter(), conv.getStridesAttr(), conv.getPaddingAttr(),
        conv.getDilationsAttr(), conv.getGroupsAttr(), conv.getLayoutAttr());
    rewriter.replaceOp(conv, fusedConv.getResult());
    rewriter.setInsertionPoint(stats);
    auto fin = BatchNormFinalizeOp::create(
        rewriter, stats.getLoc(), stats.getResultTypes(),
        ValueRange{fusedConv.getSum(), fusedConv.getSumSq(), stats.getScale(),
                   stats.getBias(), stats.getRunningMean(),
                   stats.getRunningVar()},
        {rewriter.getNamedAttr(
             "count", rewriter.getI64IntegerAttr(y.getNumElements() / k)),
         rewriter.getNamedAttr("epsilon", stats.getEpsilonAttr()),
         rewriter.getNamedAttr("momentum", stats.getMomentumAttr())});
    rewriter.replaceOp(stats, fin.getResults());
    ++fused;
    return success();
  }
  bool anyPrecision;
  llvm::Statistic &fused;
};

struct ConvStatsPass : cnnc::impl::CNNConvStatsBase<ConvStatsPass> {
  using CNNConvStatsBase::CNNConvStatsBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseStatsIntoConv>(&getContext(), anyPrecision, numFused);
    FrozenRewritePatternSet frozen(std::move(patterns));
    getOperation().walk([&](func::FuncOp f) {
      // Only the rewrite above: no folding of the step's other ops.
      GreedyRewriteConfig config;
      config.enableFolding(false);
      config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
      if (failed(applyPatternsGreedily(f, frozen, config)))
        signalPassFailure();
    });
  }
};

} // namespace
