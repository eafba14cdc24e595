//===- Elementwise.cpp - cnn ops: elementwise verifiers and rules ---------===//
//
// What the dialect knows about clip, gelu, celu, prelu, the binary ops' and
// select's broadcasting, cast; the gradient rules of relu, clip, add, mul,
// scale and cast (the other elementwise ops derive theirs from their scalar
// derivative, CNNGradients.cpp): verifiers and shape inference, then the
// gradient rules (GradientOpInterface; cnn-autodiff asks each op).
//
//===----------------------------------------------------------------------===//
#include "OpHelpers.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;
using namespace cnnc::cnn::detail;

LogicalResult ClipOp::verify() {
  if (getMin().convertToFloat() > getMax().convertToFloat())
    return emitOpError("'min' (")
           << getMin().convertToFloat() << ") must not exceed 'max' ("
           << getMax().convertToFloat() << ")";
  return success();
}

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("'approximate' must be \"none\" or \"tanh\", got \"")
           << getApproximate() << "\"";
  return success();
}

LogicalResult CeluOp::verify() {
  // CELU divides by alpha.
  if (getAlpha().isZero())
    return emitOpError("'alpha' must not be 0");
  return success();
}

LogicalResult PReluOp::verify() {
  // The slope broadcasts to the input, never the input to the slope (ONNX
  // PRelu's unidirectional broadcasting): the result is the input's type.
  if (getLhs().getType() != getResult().getType())
    return emitOpError("the slope ")
           << getRhs().getType() << " must broadcast to the input "
           << getLhs().getType() << " (the result is the input's type)";
  return success();
}

/// numpy broadcasting of two same-rank operands (cnn binary elementwise ops).
static LogicalResult inferBroadcast(std::optional<Location> loc,
                                    RankedTensorType lhs, RankedTensorType rhs,
                                    SmallVectorImpl<Type> &out) {
  if (lhs.getElementType() != rhs.getElementType())
    return fail(loc, "'lhs' " + str(lhs) + " and 'rhs' " + str(rhs) +
                         " have different element types");
  if (lhs.getRank() != rhs.getRank())
    return fail(loc, "'lhs' " + str(lhs) + " and 'rhs' " + str(rhs) +
                         " must have the same rank");
  SmallVector<int64_t> shape;
  for (auto [l, r] : llvm::zip(lhs.getShape(), rhs.getShape())) {
    if (l != r && l != 1 && r != 1)
      return fail(loc, "'lhs' " + str(lhs) + " and 'rhs' " + str(rhs) +
                           " do not broadcast: each dimension must be equal "
                           "or 1 in one of them");
    shape.push_back(l == 1 ? r : l);
  }
  out.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

#define CNN_BINARY_INFER(OP)                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> loc, Adaptor a,   \
                                     SmallVectorImpl<Type> &out) {             \
    return inferBroadcast(loc, ranked(a.getLhs()), ranked(a.getRhs()), out);   \
  }
CNN_BINARY_INFER(AddOp)
CNN_BINARY_INFER(SubOp)
CNN_BINARY_INFER(MulOp)
CNN_BINARY_INFER(DivOp)
CNN_BINARY_INFER(PowTensorOp)
CNN_BINARY_INFER(PReluOp)
CNN_BINARY_INFER(MaximumOp)
CNN_BINARY_INFER(MinimumOp)
#undef CNN_BINARY_INFER

// numpy broadcasting of select's three operands.
LogicalResult SelectOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  auto cond = ranked(a.getCondition()), onTrue = ranked(a.getOnTrue()),
       onFalse = ranked(a.getOnFalse());
  if (onTrue.getElementType() != onFalse.getElementType())
    return fail(loc, "'on_true' " + str(onTrue) + " and 'on_false' " +
                         str(onFalse) + " have different element types");
  if (cond.getRank() != onTrue.getRank() ||
      onTrue.getRank() != onFalse.getRank())
    return fail(loc, "'condition' " + str(cond) + ", 'on_true' " +
                         str(onTrue) + " and 'on_false' " + str(onFalse) +
                         " must have the same rank");
  SmallVector<int64_t> shape(cond.getRank(), 1);
  for (RankedTensorType t : {cond, onTrue, onFalse})
    for (auto [d, n] : llvm::enumerate(t.getShape())) {
      if (n != shape[d] && n != 1 && shape[d] != 1)
        return fail(loc, "'condition' " + str(cond) + ", 'on_true' " +
                             str(onTrue) + " and 'on_false' " + str(onFalse) +
                             " do not broadcast: each dimension must be 1 "
                             "or one size in all three");
      if (shape[d] == 1)
        shape[d] = n;
    }
  out.push_back(RankedTensorType::get(shape, onTrue.getElementType()));
  return success();
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getType().getShape())
    return emitOpError("'input' ") << getInput().getType() << " and result "
                                   << getType() << " must have the same shape";
  return success();
}
OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

LogicalResult ReluOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(),
               ReluGradOp::create(b, getLoc(), g.resultGrad(0), getResult()));
  return success();
}

LogicalResult ClipOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Value dy = g.resultGrad(0);
  g.accumulate(getInput(), ClipGradOp::create(b, getLoc(),
                                              TypeRange{dy.getType()},
                                              ValueRange{dy, getInput()},
                                              (*this)->getAttrs()));
  return success();
}

LogicalResult AddOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Value dy = g.resultGrad(0);
  for (Value v : {getLhs(), getRhs()})
    if (g.wants(v))
      g.accumulate(v, sumToShape(b, getLoc(), dy, v.getType()));
  return success();
}

LogicalResult MulOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0);
  if (g.wants(getLhs()))
    g.accumulate(getLhs(),
                 sumToShape(b, loc, MulOp::create(b, loc, dy, getRhs()),
                            getLhs().getType()));
  if (g.wants(getRhs()))
    g.accumulate(getRhs(),
                 sumToShape(b, loc, MulOp::create(b, loc, dy, getLhs()),
                            getRhs().getType()));
  return success();
}

LogicalResult ScaleOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Value dy = g.resultGrad(0);
  g.accumulate(getInput(),
               ScaleOp::create(b, getLoc(), TypeRange{dy.getType()},
                               ValueRange{dy}, (*this)->getAttrs()));
  return success();
}

LogicalResult CastOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(), CastOp::create(b, getLoc(), getInput().getType(),
                                          g.resultGrad(0)));
  return success();
}
