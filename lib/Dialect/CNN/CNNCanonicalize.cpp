//===- CNNCanonicalize.cpp - canonicalization patterns of the cnn ops ----===//
//
// The ONNX importer imports Add/Mul/Div faithfully as the broadcasting
// cnn.add/cnn.mul/cnn.div; these patterns give them the specialized forms
// the rest of the compiler has kernels and gradients for:
//
//   cnn.mul(x, splat c) / cnn.mul(splat c, x)  ->  cnn.scale(x) {factor = c}
//   cnn.div(x, splat c)                         ->  cnn.scale(x) {factor = 1/c}
//   cnn.add(x, b) with b of shape 1 x C x 1...  ->  cnn.bias_add(x, b')
//   cnn.reduce_mean(x) {axes = [2, 3]}, x 4-D     ->  cnn.global_avg_pool(x)
//
// where x has the result's type (the constant does not broadcast x) and b'
// is the 1-D channel vector behind b (the value a cnn.reshape expanded, or
// the constant's values).
//
//===----------------------------------------------------------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace cnnc::cnn;

namespace {

/// The value of a splat float cnn.constant.
std::optional<double> splatValue(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto attr = dyn_cast<DenseFPElementsAttr>(c.getValue());
  if (!attr || !attr.isSplat())
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

Value makeScale(PatternRewriter &rewriter, Location loc, Value x,
                double factor) {
  return ScaleOp::create(rewriter, loc, x.getType(), x,
                         rewriter.getF32FloatAttr(float(factor)));
}

struct MulByScalarToScale : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (int i = 0; i < 2; ++i) {
      Value x = op->getOperand(i), c = op->getOperand(1 - i);
      auto f = splatValue(c);
      if (!f || x.getType() != op.getType())
        continue;
      rewriter.replaceOp(op, makeScale(rewriter, op.getLoc(), x, *f));
      return success();
    }
    return failure();
  }
};

struct DivByScalarToScale : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp op,
                                PatternRewriter &rewriter) const override {
    auto f = splatValue(op.getRhs());
    if (!f || *f == 0.0 || op.getLhs().getType() != op.getType())
      return failure();
    rewriter.replaceOp(op,
                       makeScale(rewriter, op.getLoc(), op.getLhs(), 1.0 / *f));
    return success();
  }
};

/// The channel vector (1-D, C elements) behind `b`, a tensor of x's rank
/// that is 1 everywhere but in dimension 1; null if there is none.
Value channelVector(PatternRewriter &rewriter, Location loc, Value b,
                    RankedTensorType xType) {
  auto bType = dyn_cast<RankedTensorType>(b.getType());
  int64_t rank = xType.getRank();
  if (!bType || bType.getRank() != rank || rank < 2 ||
      bType.getElementType() != xType.getElementType())
    return {};
  int64_t c = xType.getDimSize(1);
  if (c <= 1)
    return {};
  for (int64_t d = 0; d < rank; ++d)
    if (bType.getDimSize(d) != (d == 1 ? c : 1))
      return {};
  auto vecType = RankedTensorType::get({c}, xType.getElementType());
  if (auto r = b.getDefiningOp<ReshapeOp>())
    if (r.getInput().getType() == vecType)
      return r.getInput();
  if (auto k = b.getDefiningOp<ConstantOp>())
    if (auto attr = dyn_cast<DenseElementsAttr>(k.getValue()))
      return ConstantOp::create(rewriter, loc, vecType, attr.reshape(vecType));
  return ReshapeOp::create(rewriter, loc, vecType, b);
}

struct PerChannelAddToBiasAdd : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    for (int i = 0; i < 2; ++i) {
      Value x = op->getOperand(i), b = op->getOperand(1 - i);
      if (x.getType() != type || b.getType() == type)
        continue;
      Value bias = channelVector(rewriter, op.getLoc(), b, type);
      if (!bias)
        continue;
      rewriter.replaceOpWithNewOp<BiasAddOp>(op, type, x, bias);
      return success();
    }
    return failure();
  }
};

struct SpatialMeanToGlobalAvgPool : OpRewritePattern<ReduceMeanOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceMeanOp op,
                                PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getInput().getType());
    // (Not an f32 mean of f16 values: global_avg_pool keeps the type.)
    if (type.getRank() != 4 || op.getAxes() != ArrayRef<int64_t>{2, 3} ||
        type.getElementType() != op.getType().getElementType())
      return failure();
    rewriter.replaceOpWithNewOp<GlobalAvgPoolOp>(op, op.getType(),
                                                 op.getInput());
    return success();
  }
};

} // namespace

void ReduceMeanOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                               MLIRContext *context) {
  results.add<SpatialMeanToGlobalAvgPool>(context);
}

void MulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<MulByScalarToScale>(context);
}

void DivOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<DivByScalarToScale>(context);
}

void AddOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<PerChannelAddToBiasAdd>(context);
}
