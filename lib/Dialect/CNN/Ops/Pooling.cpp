//===- Pooling.cpp - cnn ops: pooling -------------------------------------===//
//
// What the dialect knows about max_pool2d, avg_pool2d, global_avg_pool and
// their gradients: verifiers and shape inference, then the gradient rules
// (GradientOpInterface; cnn-autodiff asks each op).
//
//===----------------------------------------------------------------------===//
#include "OpHelpers.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;
using namespace cnnc::cnn::detail;

FailureOr<RankedTensorType>
cnnc::cnn::inferPool2DType(Location loc, RankedTensorType in,
                           ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                           ArrayRef<int64_t> padding, bool ceilMode,
                           Layout layout) {
  return inferPool(loc, in, kernel, strides, padding, ceilMode, layout);
}

LogicalResult MaxPool2DOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  auto t = inferPool(loc, ranked(a.getInput()), a.getKernel(), a.getStrides(),
                     a.getPadding(), a.getCeilMode(), layoutOf(a));
  if (failed(t))
    return failure();
  out.push_back(*t);
  return success();
}

LogicalResult AvgPool2DOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  auto t = inferPool(loc, ranked(a.getInput()), a.getKernel(), a.getStrides(),
                     a.getPadding(), a.getCeilMode(), layoutOf(a));
  if (failed(t))
    return failure();
  out.push_back(*t);
  return success();
}

LogicalResult GlobalAvgPoolOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor a,
                                                SmallVectorImpl<Type> &out) {
  auto in = ranked(a.getInput());
  bool nhwc = layoutOf(a) == Layout::NHWC;
  if (in.getRank() != 4)
    return fail(loc, "'input' must be 4-D (" + stringifyLayout(layoutOf(a)) +
                         "), got " + str(in));
  out.push_back(
      typeInLayout({in.getDimSize(0), in.getDimSize(nhwc ? 3 : 1), 1, 1},
                   in.getElementType(), nhwc));
  return success();
}

LogicalResult MaxPool2DGradOp::verify() {
  auto t = inferPool(getLoc(), getInput().getType(), getKernel(), getStrides(),
                     getPadding(), getCeilMode(), getLayout());
  if (failed(t))
    return failure();
  if (*t != getGradOutput().getType())
    return emitOpError("'grad_output' ")
           << getGradOutput().getType() << " does not match the pooled output "
           << *t << " of 'input' " << getInput().getType();
  if (getType() != getInput().getType())
    return emitOpError("result ")
           << getType() << " must have the type of 'input' "
           << getInput().getType();
  return success();
}

FailureOr<RankedTensorType> cnnc::cnn::verifyPoolGradOutput(
    Operation *op, RankedTensorType result, RankedTensorType gradOutput,
    ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
    ArrayRef<int64_t> padding, bool ceilMode, Layout layout) {
  auto t = inferPool(op->getLoc(), result, kernel, strides, padding, ceilMode,
                     layout);
  if (failed(t))
    return failure();
  if (*t != gradOutput)
    return op->emitOpError("'grad_output' ")
           << gradOutput << " does not match the pooled output " << *t
           << " of result " << result;
  return *t;
}

LogicalResult AvgPool2DGradOp::verify() {
  if (failed(verifyPoolGradOutput(*this, getType(), getGradOutput().getType(),
                                  getKernel(), getStrides(), getPadding(),
                                  getCeilMode(), getLayout())))
    return failure();
  return success();
}

LogicalResult GlobalAvgPoolGradOp::verify() {
  auto g = getGradOutput().getType(), r = getType();
  if (getLayout() == Layout::NHWC) {
    if (r.getRank() != 4 || g.getRank() != 4 ||
        g.getDimSize(0) != r.getDimSize(0) ||
        g.getDimSize(3) != r.getDimSize(3) || g.getDimSize(1) != 1 ||
        g.getDimSize(2) != 1 || g.getElementType() != r.getElementType())
      return emitOpError("'grad_output' ")
             << g << " must be N x 1 x 1 x C of result " << r << " (NHWC)";
    return success();
  }
  if (r.getRank() != 4 || g.getRank() != 4 ||
      g.getDimSize(0) != r.getDimSize(0) ||
      g.getDimSize(1) != r.getDimSize(1) || g.getDimSize(2) != 1 ||
      g.getDimSize(3) != 1 || g.getElementType() != r.getElementType())
    return emitOpError("'grad_output' ")
           << g << " must be N x C x 1 x 1 of result " << r;
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

LogicalResult MaxPool2DOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(), MaxPool2DGradOp::create(
                               b, getLoc(), TypeRange{getInput().getType()},
                               ValueRange{g.resultGrad(0), getInput()},
                               (*this)->getAttrs()));
  return success();
}

LogicalResult AvgPool2DOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(), AvgPool2DGradOp::create(
                               b, getLoc(), TypeRange{getInput().getType()},
                               ValueRange{g.resultGrad(0)},
                               (*this)->getAttrs()));
  return success();
}

LogicalResult GlobalAvgPoolOp::buildGradient(OpBuilder &b,
                                             GradientEmitter &g) {
  g.accumulate(getInput(),
               GlobalAvgPoolGradOp::create(b, getLoc(), getInput().getType(),
                                           g.resultGrad(0)));
  return success();
}
