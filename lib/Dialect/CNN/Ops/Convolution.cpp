//===- Convolution.cpp - cnn ops: convolutions, bias, matrix products -----===//
//
// What the dialect knows about conv2d, conv2d_bwd_data, conv2d_bwd_filter,
// bias_add, bias_grad, matmul: verifiers and shape inference, then the
// gradient rules (GradientOpInterface; cnn-autodiff asks each op).
//
//===----------------------------------------------------------------------===//
#include "OpHelpers.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;
using namespace cnnc::cnn::detail;

FailureOr<RankedTensorType> cnnc::cnn::inferConv2DType(
    Location loc, RankedTensorType in, RankedTensorType filter,
    ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
    ArrayRef<int64_t> dilations, int64_t groups, Layout layout) {
  if (layout != Layout::NHWC)
    return inferConv(loc, in, filter, strides, padding, dilations, groups);
  if (in.getRank() != 4 || filter.getRank() != 4)
    return emitError(loc, "'input' and 'filter' must be 4-D, got ")
           << in << " and " << filter;
  // NHWC/KRSC: check in NCHW/FCHW terms, answer in NHWC.
  auto toNCHW = [](RankedTensorType t) {
    auto s = t.getShape();
    return RankedTensorType::get({s[0], s[3], s[1], s[2]}, t.getElementType());
  };
  auto r = inferConv(loc, toNCHW(in), toNCHW(filter), strides, padding,
                     dilations, groups);
  if (failed(r))
    return failure();
  auto s = r->getShape();
  return RankedTensorType::get({s[0], s[2], s[3], s[1]}, r->getElementType());
}

LogicalResult Conv2DOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc, Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  auto t = inferConvIn(loc, ranked(a.getInput()), ranked(a.getFilter()),
                       a.getStrides(), a.getPadding(), a.getDilations(),
                       a.getGroups(), layoutOf(a));
  if (failed(t))
    return failure();
  out.push_back(*t);
  return success();
}

LogicalResult BiasAddOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor a,
                                          SmallVectorImpl<Type> &out) {
  auto in = ranked(a.getInput()), bias = ranked(a.getBias());
  if (in.getRank() < 2)
    return fail(loc, "'input' must have rank >= 2, got " + str(in));
  if (in.getElementType() != bias.getElementType())
    return fail(loc, "'input' " + str(in) + " and 'bias' " + str(bias) +
                         " have different element types");
  if (failed(checkChannelVector(loc, "bias", in, bias, layoutOf(a))))
    return failure();
  out.push_back(in);
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc, Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  auto l = ranked(a.getLhs()), r = ranked(a.getRhs());
  int64_t rank = l.getRank();
  if (rank < 2 || r.getRank() != rank ||
      l.getShape().drop_back(2) != r.getShape().drop_back(2))
    return fail(loc, "'lhs' " + str(l) + " and 'rhs' " + str(r) +
                         " must both be 2-D, or of one rank >= 3 with the "
                         "same leading (batch) dimensions");
  if (l.getElementType() != r.getElementType())
    return fail(loc, "'lhs' " + str(l) + " and 'rhs' " + str(r) +
                         " have different element types");
  // Read the attributes directly: a builder may leave the defaulted ones unset.
  auto tlAttr = a.getTransposeLhsAttr(), trAttr = a.getTransposeRhsAttr();
  bool tl = tlAttr && tlAttr.getValue(), tr = trAttr && trAttr.getValue();
  int64_t row = rank - 2, col = rank - 1;
  int64_t m = l.getDimSize(tl ? col : row), k = l.getDimSize(tl ? row : col);
  int64_t k2 = r.getDimSize(tr ? col : row), n = r.getDimSize(tr ? row : col);
  if (k != k2)
    return fail(loc, "contracting sizes differ: 'lhs' " + str(l) +
                         (tl ? " (transposed)" : "") + " gives " + Twine(k) +
                         ", 'rhs' " + str(r) + (tr ? " (transposed)" : "") +
                         " gives " + Twine(k2));
  SmallVector<int64_t> shape(l.getShape().drop_back(2));
  shape.append({m, n});
  out.push_back(RankedTensorType::get(shape, l.getElementType()));
  return success();
}

LogicalResult cnnc::cnn::verifyConvGradOutput(
    Operation *op, RankedTensorType in, RankedTensorType filter,
    RankedTensorType gradOutput, ArrayRef<int64_t> strides,
    ArrayRef<int64_t> padding, ArrayRef<int64_t> dilations, int64_t groups,
    Layout layout, StringRef inName) {
  auto t = inferConvIn(op->getLoc(), in, filter, strides, padding, dilations,
                       groups, layout);
  if (failed(t))
    return failure();
  if (*t != gradOutput)
    return op->emitOpError("'grad_output' ")
           << gradOutput << " does not match the conv2d output " << *t << " of "
           << inName << " " << in;
  return success();
}

LogicalResult Conv2DBwdDataOp::verify() {
  return verifyConvGradOutput(*this, getType(), getFilter().getType(),
                              getGradOutput().getType(), getStrides(),
                              getPadding(), getDilations(), getGroups(),
                              getLayout(), "result");
}

LogicalResult Conv2DBwdFilterOp::verify() {
  return verifyConvGradOutput(*this, getInput().getType(), getType(),
                              getGradOutput().getType(), getStrides(),
                              getPadding(), getDilations(), getGroups(),
                              getLayout(), "'input'");
}

bool BiasGradOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleReduce(l, r);
}

LogicalResult BiasGradOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor a,
                                           SmallVectorImpl<Type> &out) {
  auto g = ranked(a.getGradOutput());
  if (g.getRank() < 2)
    return fail(loc, "'grad_output' must have rank >= 2, got " + str(g));
  out.push_back(RankedTensorType::get({g.getDimSize(chanDim(g, layoutOf(a)))},
                                      g.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

LogicalResult Conv2DOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0);
  if (g.wants(getInput()))
    g.accumulate(getInput(), Conv2DBwdDataOp::create(
                                 b, loc, TypeRange{getInput().getType()},
                                 ValueRange{dy, getFilter()}, (*this)->getAttrs()));
  if (g.wants(getFilter()))
    g.accumulate(getFilter(),
                 Conv2DBwdFilterOp::create(
                     b, loc, TypeRange{getFilter().getType()},
                     ValueRange{getInput(), dy}, (*this)->getAttrs()));
  return success();
}

// A transposed convolution (ONNX ConvTranspose) is the adjoint of conv2d: its
// input's gradient is the convolution of dy, its filter's that of the
// convolution with input dy and output gradient x.
LogicalResult Conv2DBwdDataOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0);
  auto attrs = (*this)->getAttrs();
  if (g.wants(getGradOutput()))
    g.accumulate(getGradOutput(),
                 Conv2DOp::create(b, loc, TypeRange{getGradOutput().getType()},
                                  ValueRange{dy, getFilter()}, attrs));
  if (g.wants(getFilter()))
    g.accumulate(getFilter(),
                 Conv2DBwdFilterOp::create(b, loc,
                                           TypeRange{getFilter().getType()},
                                           ValueRange{dy, getGradOutput()},
                                           attrs));
  return success();
}

LogicalResult BiasAddOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Value dy = g.resultGrad(0);
  if (g.wants(getInput()))
    g.accumulate(getInput(), dy);
  if (g.wants(getBias()))
    g.accumulate(getBias(), BiasGradOp::create(b, getLoc(), dy));
  return success();
}

// C = op(A) op(B); each case below is dC/dA and dC/dB written as matmuls with
// transposed operands (no explicit transposes).
LogicalResult MatmulOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0);
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  Value a = getLhs(), bm = getRhs();
  auto mm = [&](Value x, Value y, bool tx, bool ty) -> Value {
    return MatmulOp::create(b, loc, ValueRange{x, y},
                            {boolAttr(b, "transpose_lhs", tx),
                             boolAttr(b, "transpose_rhs", ty)});
  };
  if (g.wants(a))
    g.accumulate(a, !ta ? mm(dy, bm, false, !tb)
                        : (tb ? mm(bm, dy, true, true)
                              : mm(bm, dy, false, true)));
  if (g.wants(bm))
    g.accumulate(bm, !tb ? (ta ? mm(a, dy, false, false)
                               : mm(a, dy, true, false))
                         : (ta ? mm(dy, a, true, true)
                               : mm(dy, a, true, false)));
  return success();
}
