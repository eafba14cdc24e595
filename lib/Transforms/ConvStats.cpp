//===- ConvStats.cpp - cnn-conv-stats: BN statistics in the conv epilogue -===//
//
// batch_norm_stats(conv2d(x, w)) -> batch_norm_finalize(fused_conv2d_stats):
// the statistics kernel that re-reads the convolution's output goes away;
// cuDNN's GenStats epilogue sums the output while it is still in registers.
// Only where cuDNN's runtime fusion engines apply (NHWC, f16, one group,
// channel counts that are multiples of 8); the runtime keeps a split form
// (the convolution, then a statistics kernel) for shapes its engines refuse.
// Then the BatchNorm apply + ReLU that feeds such a convolution becomes its
// prologue (the MLPerf ResNet recipe's other half).
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/CudnnFusionForm.h"
#include "cnnc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
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

/// Whether cuDNN's conv + GenStats graph can take `conv` (the RGB stem
/// padded to 4 input channels too: where cuDNN has no graph for it the
/// runtime runs the split form).
bool genStatsCandidate(Conv2DOp conv, bool anyPrecision) {
  return isCudnnFusionForm(conv.getLayout(), conv.getGroups(),
                           conv.getInput().getType(), conv.getType(),
                           conv.getFilter().getType().getElementType(),
                           anyPrecision, /*xAlign=*/4);
}

/// Whether cuDNN's wgrad graph with the scale-shift-ReLU prologue can take
/// `w`.
bool wgradCandidate(Conv2DBwdFilterOp w, bool anyPrecision) {
  return isCudnnFusionForm(w.getLayout(), w.getGroups(), w.getInput().getType(),
                           w.getGradOutput().getType(),
                           w.getType().getElementType(), anyPrecision);
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
        conv.getFilter(), /*scale=*/Value(), /*shift=*/Value(),
        conv.getStridesAttr(), conv.getPaddingAttr(), conv.getDilationsAttr(),
        conv.getGroupsAttr(), conv.getLayoutAttr());
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

/// batch_norm_sums(conv2d(x, w)) -> fused_conv2d_stats' sums: the sync-bn
/// form of a BatchNorm (cnn-data-parallel) takes its rank's sums from the
/// convolution's epilogue as the single-GPU form does.
struct FuseSumsIntoConv : OpRewritePattern<BatchNormSumsOp> {
  FuseSumsIntoConv(MLIRContext *ctx, bool anyPrecision, llvm::Statistic &fused)
      : OpRewritePattern(ctx), anyPrecision(anyPrecision), fused(fused) {}
  LogicalResult matchAndRewrite(BatchNormSumsOp sums,
                                PatternRewriter &rewriter) const override {
    auto conv = sums.getInput().getDefiningOp<Conv2DOp>();
    if (!conv || sums.getLayout() != Layout::NHWC ||
        !genStatsCandidate(conv, anyPrecision))
      return failure();
    auto y = conv.getType();
    auto f32 = RankedTensorType::get({y.getDimSize(3)}, rewriter.getF32Type());
    rewriter.setInsertionPoint(conv);
    auto fusedConv = FusedConv2DStatsOp::create(
        rewriter, conv.getLoc(), TypeRange{y, f32, f32}, conv.getInput(),
        conv.getFilter(), /*scale=*/Value(), /*shift=*/Value(),
        conv.getStridesAttr(), conv.getPaddingAttr(), conv.getDilationsAttr(),
        conv.getGroupsAttr(), conv.getLayoutAttr());
    rewriter.replaceOp(conv, fusedConv.getResult());
    rewriter.replaceOp(sums,
                       ValueRange{fusedConv.getSum(), fusedConv.getSumSq()});
    ++fused;
    return success();
  }
  bool anyPrecision;
  llvm::Statistic &fused;
};

/// fused_conv2d_stats(relu(x * alpha + beta), w) ->
/// fused_conv2d_stats(x, w) with the prologue (alpha, beta): the convolution
/// reads x, which the BatchNorm gradient keeps anyway, and the normalized
/// tensor is no longer made in the forward pass. Where something else (the
/// filter gradient) still reads the normalized tensor, its fused_elementwise
/// moves down to right before the first such use: the values it reads are
/// kept for the backward pass anyway, so it is recomputed there instead of
/// being stored across the step.
struct FusePrologueIntoConvStats : OpRewritePattern<FusedConv2DStatsOp> {
  FusePrologueIntoConvStats(MLIRContext *ctx, llvm::Statistic &fused,
                            llvm::Statistic &sunk)
      : OpRewritePattern(ctx), fused(fused), sunk(sunk) {}
  LogicalResult matchAndRewrite(FusedConv2DStatsOp conv,
                                PatternRewriter &rewriter) const override {
    if (conv.getScale())
      return failure();
    auto e = conv.getInput().getDefiningOp<FusedElementwiseOp>();
    if (!e || e.getLayout() != conv.getLayout() || !e.isScaleShiftRelu() ||
        e.getInputs()[0].getType() != conv.getInput().getType() ||
        e->getBlock() != conv->getBlock())
      return failure();
    rewriter.modifyOpInPlace(conv, [&] {
      conv.getInputMutable().assign(e.getInputs()[0]);
      conv.getScaleMutable().assign(e.getInputs()[1]);
      conv.getShiftMutable().assign(e.getInputs()[2]);
    });
    ++fused;
    if (e->use_empty()) {
      rewriter.eraseOp(e);
      return success();
    }
    Operation *first = nullptr;
    for (Operation *u : e->getUsers()) {
      Operation *top = e->getBlock()->findAncestorOpInBlock(*u);
      if (top && (!first || top->isBeforeInBlock(first)))
        first = top;
    }
    if (first && e->isBeforeInBlock(first) && e->getNextNode() != first) {
      rewriter.moveOpBefore(e, first);
      ++sunk;
    }
    return success();
  }
  llvm::Statistic &fused, &sunk;
};

struct ConvStatsPass : cnnc::impl::CNNConvStatsBase<ConvStatsPass> {
  using CNNConvStatsBase::CNNConvStatsBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseStatsIntoConv, FuseSumsIntoConv>(&getContext(),
                                                      anyPrecision, numFused);
    if (prologue)
      patterns.add<FusePrologueIntoConvStats>(&getContext(), numPrologues,
                                              numSunk);
    FrozenRewritePatternSet frozen(std::move(patterns));
    getOperation().walk([&](func::FuncOp f) {
      // Only the rewrite above: no folding of the step's other ops.
      GreedyRewriteConfig config;
      config.enableFolding(false);
      config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
      if (failed(applyPatternsGreedily(f, frozen, config)))
        signalPassFailure();
    });
    if (prologue && wgradPrologue)
      fusePrologueIntoWgrads();
  }

  /// The BatchNorm apply + ReLU left (sunk) for filter gradients only
  /// becomes their prologue: conv2d_bwd_filter(relu(x * a + b), dy) ->
  /// fused_conv2d_bwd_filter(x, dy, a, b), so the normalized tensor is not
  /// recomputed into memory. A second phase, after the prologue rewrite
  /// above has removed the forward convolution's use.
  void fusePrologueIntoWgrads() {
    SmallVector<FusedElementwiseOp> candidates;
    getOperation().walk([&](FusedElementwiseOp e) {
      if (e.isScaleShiftRelu() && !e->use_empty() &&
          llvm::all_of(e->getUsers(), [&](Operation *u) {
            auto w = dyn_cast<Conv2DBwdFilterOp>(u);
            return w && w.getInput() == e.getResult(0) &&
                   w.getLayout() == e.getLayout() &&
                   wgradCandidate(w, anyPrecision);
          }))
        candidates.push_back(e);
    });
    for (FusedElementwiseOp e : candidates) {
      for (Operation *u : llvm::make_early_inc_range(e->getUsers())) {
        auto w = cast<Conv2DBwdFilterOp>(u);
        OpBuilder b(w);
        auto fused = FusedConv2DBwdFilterOp::create(
            b, w.getLoc(), w.getType(), e.getInputs()[0], w.getGradOutput(),
            e.getInputs()[1], e.getInputs()[2], w.getStridesAttr(),
            w.getPaddingAttr(), w.getDilationsAttr(), w.getGroupsAttr(),
            w.getLayoutAttr());
        w.replaceAllUsesWith(fused.getResult());
        w.erase();
        ++numWgradPrologues;
      }
      e.erase();
    }
  }
};

} // namespace
