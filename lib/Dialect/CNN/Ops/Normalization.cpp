//===- Normalization.cpp - cnn ops: batch normalization -------------------===//
//
// What the dialect knows about batch_norm, batch_norm_train,
// batch_norm_grad: verifiers and shape inference, then the gradient rules
// (GradientOpInterface; cnn-autodiff asks each op).
//
//===----------------------------------------------------------------------===//
#include "OpHelpers.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;
using namespace cnnc::cnn::detail;

static LogicalResult
inferBatchNormCommon(std::optional<Location> loc, RankedTensorType in,
                     ArrayRef<std::pair<StringRef, Value>> vecs,
                     Layout layout) {
  if (in.getRank() != 2 && in.getRank() != 4)
    return fail(loc, "'input' must be 2-D or 4-D, got " + str(in));
  for (auto [name, v] : vecs) {
    auto t = ranked(v);
    if (failed(checkChannelVector(loc, name, in, t, layout)))
      return failure();
    if (t.getElementType() != in.getElementType() &&
        !t.getElementType().isF32())
      return fail(loc, "'" + name + "' " + str(t) +
                           " must be f32 or have the element type of 'input'");
  }
  return success();
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  auto in = ranked(a.getInput());
  if (failed(inferBatchNormCommon(loc, in,
                                  {{"scale", a.getScale()},
                                   {"bias", a.getBias()},
                                   {"mean", a.getMean()},
                                   {"var", a.getVar()}},
                                  layoutOf(a))))
    return failure();
  out.push_back(in);
  return success();
}

LogicalResult BatchNormTrainOp::inferReturnTypes(MLIRContext *,
                                                 std::optional<Location> loc,
                                                 Adaptor a,
                                                 SmallVectorImpl<Type> &out) {
  auto in = ranked(a.getInput());
  if (failed(inferBatchNormCommon(loc, in,
                                  {{"scale", a.getScale()},
                                   {"bias", a.getBias()},
                                   {"running_mean", a.getRunningMean()},
                                   {"running_var", a.getRunningVar()}},
                                  layoutOf(a))))
    return failure();
  float m = a.getMomentum().convertToFloat();
  if (m < 0 || m > 1)
    return fail(loc, "'momentum' must be in [0, 1], got " +
                         Twine(std::to_string(m)));
  auto stat = RankedTensorType::get({in.getDimSize(chanDim(in, layoutOf(a)))},
                                    Float32Type::get(in.getContext()));
  out.push_back(in);
  out.push_back(stat);
  out.push_back(stat);
  out.push_back(ranked(a.getRunningMean()));
  out.push_back(ranked(a.getRunningVar()));
  return success();
}

LogicalResult BatchNormGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor a,
                                                SmallVectorImpl<Type> &out) {
  auto in = ranked(a.getInput()), g = ranked(a.getGradOutput());
  if (failed(checkSameType(loc, "grad_output", g, "input", in)) ||
      failed(inferBatchNormCommon(loc, in,
                                  {{"scale", a.getScale()},
                                   {"saved_mean", a.getSavedMean()},
                                   {"saved_invstd", a.getSavedInvstd()}},
                                  layoutOf(a))))
    return failure();
  out.push_back(in);
  out.push_back(ranked(a.getScale()));
  out.push_back(ranked(a.getScale()));
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

LogicalResult BatchNormTrainOp::buildGradient(OpBuilder &b,
                                              GradientEmitter &g) {
  auto grad = BatchNormGradOp::create(b, getLoc(), g.resultGrad(0), getInput(),
                                      getScale(), getSavedMean(),
                                      getSavedInvstd());
  if (g.wants(getInput()))
    g.accumulate(getInput(), grad.getGradInput());
  if (g.wants(getScale()))
    g.accumulate(getScale(), grad.getGradScale());
  if (g.wants(getBias()))
    g.accumulate(getBias(), grad.getGradBias());
  return success();
}

// The inference form in a training step (use_running_stats: a BatchNorm
// module in eval mode): the running statistics are constants of the step, so
// y = x * a + c per channel with a = scale / sqrt(var + eps). Written with
// ops every target already runs in both layouts: dx is the same
// normalization of dy with zero mean and bias, x's normalized value
// (x - mean) / sqrt(var + eps) is one with unit scale, and the per-channel
// sums are bias_grad.
LogicalResult BatchNormOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0);
  auto channelType = cast<RankedTensorType>(getVar().getType());
  auto splat = [&](double v) -> Value {
    return ConstantOp::create(
        b, loc, channelType,
        DenseElementsAttr::get(
            channelType, b.getFloatAttr(channelType.getElementType(), v)));
  };
  Value zero = splat(0.0);
  auto normalize = [&](Value x, Value scale, Value mean) -> Value {
    return BatchNormOp::create(
        b, loc, TypeRange{withElementOf(x.getType(), dy)},
        ValueRange{x, scale, zero, mean, getVar()},
        {b.getNamedAttr("epsilon", getEpsilonAttr()),
         b.getNamedAttr("momentum", getMomentumAttr()),
         b.getNamedAttr("layout", getLayoutAttr())});
  };
  if (g.wants(getInput()))
    g.accumulate(getInput(), normalize(dy, getScale(), zero));
  if (g.wants(getScale())) {
    Value xhat = normalize(getInput(), splat(1.0), getMean());
    g.accumulate(getScale(),
                 BiasGradOp::create(b, loc, MulOp::create(b, loc, dy, xhat),
                                    getLayoutAttr()));
  }
  if (g.wants(getBias()))
    g.accumulate(getBias(), BiasGradOp::create(b, loc, dy, getLayoutAttr()));
  return success();
}
