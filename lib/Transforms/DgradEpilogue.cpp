//===- DgradEpilogue.cpp - cnn-dgrad-epilogue -----------------------------===//
//
// relu_grad(add(conv2d_bwd_data(dy, w), a), y) -> fused_conv2d_bwd_data(dy,
// w, a, y): the residual-gradient sum and the ReLU gradient of a residual
// block's output are applied by the backward-data convolution (cuDNN's
// dgrad + add + ReLU-backward graph) instead of by a kernel that reads the
// convolution's gradient again with the shortcut's gradient and the ReLU
// output. Only where cuDNN's runtime fusion engines apply; the runtime keeps
// a split form (the convolution, then the elementwise epilogue) and times
// both.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/CudnnFusionForm.h"
#include "cnnc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNDGRADEPILOGUE
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

/// Whether cuDNN's dgrad graph can take `conv`: NHWC, one group, 16-byte
/// aligned rows of dx and dy (channel counts multiples of 8), and one
/// element type (f16 unless `anyPrecision`).
bool dgradCandidate(Conv2DBwdDataOp conv, bool anyPrecision) {
  return isCudnnFusionForm(conv.getLayout(), conv.getGroups(), conv.getType(),
                           conv.getGradOutput().getType(),
                           conv.getFilter().getType().getElementType(),
                           anyPrecision);
}

struct FuseAddReluGradIntoDgrad : OpRewritePattern<ReluGradOp> {
  FuseAddReluGradIntoDgrad(MLIRContext *ctx, bool anyPrecision,
                           llvm::Statistic &fused)
      : OpRewritePattern(ctx), anyPrecision(anyPrecision), fused(fused) {}
  LogicalResult matchAndRewrite(ReluGradOp relu,
                                PatternRewriter &rewriter) const override {
    auto add = relu.getGradOutput().getDefiningOp<AddOp>();
    if (!add || !add->hasOneUse())
      return failure();
    Type t = relu.getType();
    // No broadcasting: the sum, both addends and the ReLU output alike.
    if (add.getLhs().getType() != t || add.getRhs().getType() != t ||
        relu.getOutput().getType() != t)
      return failure();
    // Either operand may be the convolution's gradient; the other is the
    // addend (a shortcut's gradient, or a second convolution's).
    for (unsigned i = 0; i < 2; ++i) {
      Value d = add->getOperand(i), other = add->getOperand(1 - i);
      auto conv = d.getDefiningOp<Conv2DBwdDataOp>();
      if (!conv || !conv->hasOneUse() || !dgradCandidate(conv, anyPrecision))
        continue;
      // The fused op takes relu_grad's place: every operand is defined
      // before it (they were before the add and the relu_grad).
      rewriter.setInsertionPoint(relu);
      auto fusedOp = FusedConv2DBwdDataOp::create(
          rewriter, conv.getLoc(), t, conv.getGradOutput(), conv.getFilter(),
          other, relu.getOutput(), conv.getStridesAttr(), conv.getPaddingAttr(),
          conv.getDilationsAttr(), conv.getGroupsAttr(), conv.getLayoutAttr());
      rewriter.replaceOp(relu, fusedOp.getResult());
      rewriter.eraseOp(add);
      rewriter.eraseOp(conv);
      ++fused;
      return success();
    }
    return failure();
  }
  bool anyPrecision;
  llvm::Statistic &fused;
};

struct DgradEpiloguePass : cnnc::impl::CNNDgradEpilogueBase<DgradEpiloguePass> {
  using CNNDgradEpilogueBase::CNNDgradEpilogueBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseAddReluGradIntoDgrad>(&getContext(), anyPrecision,
                                           numFused);
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
