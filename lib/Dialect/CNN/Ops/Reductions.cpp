//===- Reductions.cpp - cnn ops: reductions -------------------------------===//
//
// What the dialect knows about reduce_sum, reduce_mean, reduce_max,
// reduce_prod (forward only):
// verifiers and shape inference, then the gradient rules
// (GradientOpInterface; cnn-autodiff asks each op); and the shape inference
// of arg_max / arg_min (forward only: no gradient rule); and the CUDA
// lowering of cnn-select-lowering's "spatial_sum" reductions as kernel calls
// (kernels/PoolingNHWC.cuh's spatialSumTiles, which global_avg_pool uses).
//
//===----------------------------------------------------------------------===//
#include "OpHelpers.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;
using namespace cnnc::cnn::detail;

/// The keepdims result of a reduction over `axes` (distinct, in range).
static LogicalResult inferReduce(std::optional<Location> loc,
                                 RankedTensorType in, ArrayRef<int64_t> axes,
                                 SmallVectorImpl<Type> &out) {
  SmallVector<int64_t> shape(in.getShape());
  for (int64_t a : axes) {
    if (a < 0 || a >= in.getRank())
      return fail(loc, "'axes' " + str(axes) + " must lie in [0, " +
                           Twine(in.getRank()) + ") for 'input' " + str(in));
    if (llvm::count(axes, a) != 1)
      return fail(loc, "'axes' " + str(axes) + " must be distinct");
    shape[a] = 1;
  }
  out.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

bool ReduceSumOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleReduce(l, r);
}
bool ReduceMeanOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleReduce(l, r);
}
bool ReduceMaxOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleReduce(l, r);
}

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  return inferReduce(loc, ranked(a.getInput()), a.getAxes(), out);
}

LogicalResult ReduceMeanOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor a,
                                             SmallVectorImpl<Type> &out) {
  return inferReduce(loc, ranked(a.getInput()), a.getAxes(), out);
}

LogicalResult ReduceMaxOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  return inferReduce(loc, ranked(a.getInput()), a.getAxes(), out);
}

LogicalResult ReduceProdOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor a,
                                             SmallVectorImpl<Type> &out) {
  return inferReduce(loc, ranked(a.getInput()), a.getAxes(), out);
}

/// The i64 index tensor of arg_max / arg_min: `axis` kept as 1 or left out.
template <typename AdaptorT>
static LogicalResult inferArgExtreme(MLIRContext *ctx,
                                     std::optional<Location> loc, AdaptorT &a,
                                     SmallVectorImpl<Type> &out) {
  auto in = ranked(a.getInput());
  int64_t axis = a.getAxisAttr().getInt();
  if (axis < 0 || axis >= in.getRank())
    return fail(loc, "'axis' " + Twine(axis) + " must lie in [0, " +
                         Twine(in.getRank()) + ") for 'input' " + str(in));
  SmallVector<int64_t> shape(in.getShape());
  BoolAttr keep = a.getKeepdimsAttr();
  if (!keep || keep.getValue())
    shape[axis] = 1;
  else
    shape.erase(shape.begin() + axis);
  out.push_back(RankedTensorType::get(shape, IntegerType::get(ctx, 64)));
  return success();
}

LogicalResult ArgMaxOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  return inferArgExtreme(ctx, loc, a, out);
}

LogicalResult ArgMinOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  return inferArgExtreme(ctx, loc, a, out);
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

// The sum's gradient is dy repeated over the reduced dimensions.
LogicalResult ReduceSumOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(), broadcastTo(b, getLoc(), g.resultGrad(0),
                                       getInput().getType(), 1.0));
  return success();
}

LogicalResult ReduceMeanOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  auto in = cast<RankedTensorType>(getInput().getType());
  int64_t count = 1;
  for (int64_t a : getAxes())
    count *= in.getDimSize(a);
  g.accumulate(getInput(), broadcastTo(b, getLoc(), g.resultGrad(0), in,
                                       1.0 / (double)count));
  return success();
}

// PyTorch's rule for amax/max over dimensions: dy goes to the elements equal
// to the maximum, split evenly among ties (mask / count).
LogicalResult ReduceMaxOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0), x = getInput(), y = getResult();
  auto full = withElementOf(x.getType(), dy);
  int64_t bcY = broadcastKind(y.getType(), full);
  Value mask = makeFusedElementwise(
                   b, loc, TypeRange{full}, ValueRange{x, y}, {0, bcY},
                   Layout::NCHW,
                   [&](ScalarBuilder &s, ValueRange a) {
                     return SmallVector<Value>{s.select(
                         s.cmp(arith::CmpFPredicate::OEQ, a[0], a[1]), s.c(1),
                         s.c(0))};
                   })
                   .getResult(0);
  Value count = ReduceSumOp::create(b, loc, mask, getAxesAttr());
  Value dx = makeFusedElementwise(
                 b, loc, TypeRange{full}, ValueRange{mask, dy, count},
                 {0, broadcastKind(dy.getType(), full),
                  broadcastKind(count.getType(), full)},
                 Layout::NCHW,
                 [&](ScalarBuilder &s, ValueRange a) {
                   return SmallVector<Value>{
                       s.div(s.mul(a[0], a[1]), a[2])};
                 })
                 .getResult(0);
  g.accumulate(x, dx);
  return success();
}

//===----------------------------------------------------------------------===//
// CUDA lowering of the "spatial_sum" reductions: kernels/PoolingNHWC.cuh
//===----------------------------------------------------------------------===//

std::optional<SpatialSumShape> cnnc::cnn::spatialSumShape(Operation *op) {
  if (!isa<ReduceSumOp, ReduceMeanOp>(op))
    return std::nullopt;
  auto in = ranked(op->getOperand(0)), out = ranked(op->getResult(0));
  auto isFloat = [](Type t) { return t.isF16() || t.isF32(); };
  if (!in.hasStaticShape() || !isFloat(in.getElementType()) ||
      !isFloat(out.getElementType()))
    return std::nullopt;
  SmallVector<int64_t> axes(
      op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef());
  llvm::sort(axes);
  if (axes.empty())
    return std::nullopt;
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[i - 1] + 1)
      return std::nullopt; // not one run
  SpatialSumShape s{1, 1, 1};
  for (int64_t d = 0; d < in.getRank(); ++d)
    (d < axes.front()  ? s.outer
     : d > axes.back() ? s.inner
                       : s.middle) *= in.getDimSize(d);
  if (s.middle < kSpatialSumMinElements || s.middle > kSpatialSumMaxCount ||
      s.outer * s.inner > kSpatialSumMaxCount)
    return std::nullopt;
  // A run that is innermost gives each block one lane: fewer elements than
  // a block's threads would leave most of them idle, one block per result
  // (the generic thread per result reads such short rows well enough).
  if (s.inner == 1 && s.middle < kKernelBlock)
    return std::nullopt;
  return s;
}

LogicalResult
cnnc::cnn::describeSpatialReduction(Operation *op, LaunchAttr launch,
                                    SmallVectorImpl<KernelCall> &calls) {
  std::optional<SpatialSumShape> s = spatialSumShape(op);
  if (!s)
    return failure();
  describeSpatialSum(op->getOperand(0), op->getResult(0), s->outer, s->middle,
                     s->inner,
                     isa<ReduceMeanOp>(op) ? (double)s->middle : 1.0, launch,
                     calls);
  return success();
}
