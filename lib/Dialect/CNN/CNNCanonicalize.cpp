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
//   x * 0.5 * (1 + erf(x / sqrt 2)), associated
//   as an exporter writes it (below)             ->  cnn.gelu(x)
//   x * 0.5 * (1 + tanh(sqrt(2 / pi) (x +
//   0.044715 x^3)))                              ->  cnn.gelu(x) {tanh}
//   cnn.mul(x, cnn.sigmoid(x)), either order     ->  cnn.silu(x)
//   cnn.mul(x, cnn.tanh(cnn.softplus(x)))         ->  cnn.mish(x)
//
// where x has the result's type (the constant does not broadcast x) and b'
// is the 1-D channel vector behind b (the value a cnn.reshape expanded, or
// the constant's values).
//
// GELU: exporters before ONNX opset 20 (PyTorch's TorchScript exporter at
// opset 17, the default of cnnc.export) write nn.GELU out as Div, Erf, Add,
// Mul, Mul. Differentiated as written, the step keeps three full-size
// intermediates of x for the backward pass besides x (erf's argument, 1 +
// erf, the product): in ConvNeXt's 4C-wide MLP that was a third of the
// stored activations (docs/benchmarks.md, session 37). cnn.gelu's gradient
// reads x alone, as PyTorch's does. SiLU likewise: x * sigmoid(x) as
// written keeps sigmoid(x) besides x (EfficientNet's, RegNetY's activations),
// and Mish (ONNX's Mish is opset 18) tanh(softplus(x)).
//
//===----------------------------------------------------------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

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

/// Whether `v` is a splat constant within f32 rounding of `c` (an
/// exporter writes 1/sqrt 2 as a division by 1.4142135, or a product by
/// 0.70710677).
bool isSplatNear(Value v, double c) {
  auto f = splatValue(v);
  return f && std::abs(*f - c) <= 1e-6 * std::abs(c);
}

/// The x of a GELU's cumulative factor 2 * Phi(x), as exporters write it,
/// and the approximation it uses; a null x when `a` is neither form.
struct CdfForm {
  Value x;
  StringRef approximate;
};

/// x if `v` is x * x * x (cnn.mul of x and x * x, either order, or
/// cnn.pow(x) by 3), else null.
Value cubeArgument(Value v) {
  if (auto pow = v.getDefiningOp<PowOp>())
    return pow.getExponent().convertToDouble() == 3.0 ? pow.getInput()
                                                      : Value();
  auto mul = v.getDefiningOp<MulOp>();
  if (!mul)
    return {};
  for (int i = 0; i < 2; ++i) {
    Value x = mul->getOperand(i);
    auto sq = mul->getOperand(1 - i).getDefiningOp<MulOp>();
    if (sq && sq.getLhs() == x && sq.getRhs() == x)
      return x;
  }
  return {};
}

/// x if `v` is sqrt(2 / pi) * (x + 0.044715 x^3) (the tanh approximation's
/// argument: cnn.scale of a cnn.add, either order), else null.
Value tanhInnerArgument(Value v) {
  auto outer = v.getDefiningOp<ScaleOp>();
  if (!outer || std::abs(outer.getFactor().convertToDouble() -
                         std::sqrt(2.0 / M_PI)) > 1e-6)
    return {};
  auto add = outer.getInput().getDefiningOp<AddOp>();
  if (!add)
    return {};
  for (int i = 0; i < 2; ++i) {
    Value x = add->getOperand(i);
    auto k = add->getOperand(1 - i).getDefiningOp<ScaleOp>();
    if (k && std::abs(k.getFactor().convertToDouble() - 0.044715) <= 1e-7 &&
        cubeArgument(k.getInput()) == x)
      return x;
  }
  return {};
}

/// `a` as 1 + erf(x / sqrt 2) (approximate "none") or 1 + tanh(sqrt(2 / pi)
/// (x + 0.044715 x^3)) ("tanh"): a cnn.add of the erf or tanh and a splat
/// 1, in either order, of that op's type.
CdfForm cdfArgument(Value a) {
  auto add = a.getDefiningOp<AddOp>();
  if (!add)
    return {};
  for (int i = 0; i < 2; ++i) {
    Value f = add->getOperand(i);
    if (f.getType() != add.getType() ||
        !isSplatNear(add->getOperand(1 - i), 1.0))
      continue;
    if (auto erf = f.getDefiningOp<ErfOp>()) {
      auto arg = erf.getInput().getDefiningOp<ScaleOp>();
      if (arg && std::abs(arg.getFactor().convertToDouble() * std::sqrt(2.0) -
                          1.0) <= 1e-6)
        return {arg.getInput(), "none"};
    }
    if (auto tanh = f.getDefiningOp<TanhOp>())
      if (Value x = tanhInnerArgument(tanh.getInput()))
        return {x, "tanh"};
  }
  return {};
}

/// Whether `op` is cnn.scale by 0.5.
bool isHalf(ScaleOp op) {
  return op && op.getFactor().convertToDouble() == 0.5;
}

void replaceWithGelu(PatternRewriter &rewriter, Operation *op, Value x,
                     StringRef approximate) {
  rewriter.replaceOpWithNewOp<GeluOp>(op, op->getResult(0).getType(), x,
                                      rewriter.getStringAttr(approximate));
}

/// x if `mul` is x * f(x) in either operand order, x of the product's type,
/// where `argumentOf(f(x))` is x; else null.
Value selfProductArgument(MulOp mul, function_ref<Value(Value)> argumentOf) {
  for (int i = 0; i < 2; ++i) {
    Value x = mul->getOperand(i);
    if (x.getType() == mul.getType() && argumentOf(mul->getOperand(1 - i)) == x)
      return x;
  }
  return {};
}

/// cnn.scale(cnn.mul(x, 1 + erf(x / sqrt 2)), 0.5) -> cnn.gelu(x): PyTorch's
/// TorchScript exporter (symbolic_opset9's gelu); the same with the tanh
/// form -> cnn.gelu(x) {approximate = "tanh"}.
struct HalfOfProductToGelu : OpRewritePattern<ScaleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScaleOp op,
                                PatternRewriter &rewriter) const override {
    auto mul = op.getInput().getDefiningOp<MulOp>();
    if (!isHalf(op) || !mul)
      return failure();
    // The form of the factor that matched (the search stops at it).
    CdfForm cdf;
    Value x = selfProductArgument(mul, [&](Value f) {
      cdf = cdfArgument(f);
      return cdf.x;
    });
    if (!x)
      return failure();
    replaceWithGelu(rewriter, op, x, cdf.approximate);
    return success();
  }
};

/// cnn.mul(cnn.scale(x, 0.5), 1 + erf(x / sqrt 2)) and
/// cnn.mul(x, cnn.scale(1 + erf(x / sqrt 2), 0.5)), either operand order,
/// -> cnn.gelu(x): the other associations of 0.5 * x * (1 + erf(...)) (and
/// of the tanh form).
struct ProductWithHalfToGelu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (int i = 0; i < 2; ++i) {
      Value p = op->getOperand(i), q = op->getOperand(1 - i);
      auto half = p.getDefiningOp<ScaleOp>();
      if (!isHalf(half))
        continue;
      CdfForm cdf = cdfArgument(q); // (0.5 x) * (1 + erf)
      if (cdf.x != half.getInput()) {
        cdf = cdfArgument(half.getInput()); // (0.5 (1 + erf)) * x
        if (cdf.x != q)
          continue;
      }
      if (cdf.x.getType() == op.getType()) {
        replaceWithGelu(rewriter, op, cdf.x, cdf.approximate);
        return success();
      }
    }
    return failure();
  }
};

/// x if `v` is cnn.sigmoid(x), else null.
Value sigmoidArgument(Value v) {
  auto sig = v.getDefiningOp<SigmoidOp>();
  return sig ? sig.getInput() : Value();
}

/// x if `v` is cnn.tanh(cnn.softplus(x)), else null.
Value tanhSoftplusArgument(Value v) {
  auto t = v.getDefiningOp<TanhOp>();
  auto sp = t ? t.getInput().getDefiningOp<SoftplusOp>() : SoftplusOp();
  return sp ? sp.getInput() : Value();
}

/// cnn.mul(x, f(x)), either order -> ToOp(x), f recognized by
/// `GateArgument`: nn.SiLU (x * sigmoid(x)) as exporters before ONNX's Swish
/// write it, nn.Mish (x * tanh(softplus(x))) before opset 18.
template <typename ToOp, Value (*GateArgument)(Value)>
struct SelfGatedProductTo : OpRewritePattern<MulOp> {
  using OpRewritePattern<MulOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    Value x = selfProductArgument(op, GateArgument);
    if (!x)
      return failure();
    rewriter.replaceOpWithNewOp<ToOp>(op, op.getType(), x);
    return success();
  }
};
using ProductWithSigmoidToSilu = SelfGatedProductTo<SiluOp, sigmoidArgument>;
using ProductWithTanhSoftplusToMish =
    SelfGatedProductTo<MishOp, tanhSoftplusArgument>;

} // namespace

void ScaleOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                          MLIRContext *context) {
  results.add<HalfOfProductToGelu>(context);
}

void ReduceMeanOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                               MLIRContext *context) {
  results.add<SpatialMeanToGlobalAvgPool>(context);
}

void MulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<MulByScalarToScale, ProductWithHalfToGelu,
              ProductWithSigmoidToSilu, ProductWithTanhSoftplusToMish>(context);
}

void DivOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<DivByScalarToScale>(context);
}

void AddOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<PerChannelAddToBiasAdd>(context);
}
