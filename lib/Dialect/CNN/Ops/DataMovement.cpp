//===- DataMovement.cpp - cnn ops: data movement --------------------------===//
//
// What the dialect knows about flatten, reshape, concat, slice, pad,
// pad_grad, transpose, gather_elements and its gradient: verifiers and shape
// inference, then the gradient rules (GradientOpInterface; cnn-autodiff asks
// each op).
//
//===----------------------------------------------------------------------===//
#include "OpHelpers.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;
using namespace cnnc::cnn::detail;

LogicalResult FlattenOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor a,
                                          SmallVectorImpl<Type> &out) {
  auto in = ranked(a.getInput());
  int64_t axis = a.getAxis();
  if (axis < 0 || axis > in.getRank())
    return fail(loc, "'axis' " + Twine(axis) + " out of range for 'input' " +
                         str(in));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    int64_t &side = i < axis ? outer : inner;
    if (llvm::MulOverflow(side, in.getDimSize(i), side))
      return fail(loc, "'input' " + str(in) + " has too many elements");
  }
  out.push_back(RankedTensorType::get({outer, inner}, in.getElementType()));
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), res = getType();
  if (in.getElementType() != res.getElementType() ||
      in.getNumElements() != res.getNumElements())
    return emitOpError("cannot reshape 'input' ")
           << in << " (" << in.getNumElements() << " elements) to " << res
           << " (" << res.getNumElements() << " elements)";
  return success();
}
OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto prev = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(prev.getInput());
    return getResult();
  }
  return {};
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc, Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  if (a.getInputs().empty())
    return fail(loc, "needs at least one input");
  auto first = ranked(a.getInputs()[0]);
  int64_t axis = a.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return fail(loc,
                "'axis' " + Twine(axis) + " out of range for " + str(first));
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (auto [i, v] : llvm::enumerate(a.getInputs())) {
    auto t = ranked(v);
    bool ok = t.getRank() == first.getRank() &&
              t.getElementType() == first.getElementType();
    for (int64_t d = 0; ok && d < t.getRank(); ++d)
      ok = d == axis || t.getDimSize(d) == first.getDimSize(d);
    if (!ok)
      return fail(loc, "input #" + Twine(i) + " " + str(t) +
                           " does not match input #0 " + str(first) +
                           " outside axis " + Twine(axis));
    if (llvm::AddOverflow(shape[axis], t.getDimSize(axis), shape[axis]))
      return fail(loc, "concatenating along axis " + Twine(axis) +
                           " gives a dimension int64 cannot hold");
  }
  out.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc, Adaptor a,
                                        SmallVectorImpl<Type> &out) {
  auto in = ranked(a.getInput());
  auto off = a.getOffsets(), sz = a.getSizes();
  if ((int64_t)off.size() != in.getRank() || (int64_t)sz.size() != in.getRank())
    return fail(loc, "'offsets' " + str(off) + " and 'sizes' " + str(sz) +
                         " must have one entry per dimension of 'input' " +
                         str(in));
  // `off + sz` is compared without computing it: an offset near INT64_MAX
  // must not wrap into range.
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (off[d] < 0 || sz[d] < 1 || sz[d] > in.getDimSize(d) ||
        off[d] > in.getDimSize(d) - sz[d])
      return fail(loc, "slice offsets " + str(off) + " sizes " + str(sz) +
                           " exceed 'input' " + str(in));
  out.push_back(RankedTensorType::get(sz, in.getElementType()));
  return success();
}

/// Shared checks of pad and pad_grad: `pads` has 2 x rank non-negative
/// entries, `mode` is known, and "reflect" pads are smaller than the
/// unpadded dimension `in` they mirror.
static LogicalResult checkPad(std::optional<Location> loc,
                              ArrayRef<int64_t> pads, StringRef mode,
                              ArrayRef<int64_t> in, StringRef inName) {
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return fail(loc, "'mode' must be \"constant\", \"reflect\" or "
                     "\"edge\", got \"" +
                         mode + "\"");
  int64_t rank = in.size();
  if (failed(checkArray(loc, "pads", pads, 2 * rank, 0)))
    return failure();
  if (mode == "reflect")
    for (int64_t d = 0; d < rank; ++d)
      if (pads[d] >= in[d] || pads[rank + d] >= in[d])
        return fail(loc, "\"reflect\" pads " + str(pads) +
                             " must be smaller than each dimension of " +
                             inName + " " + str(in));
  return success();
}

template <typename AdaptorT> static StringRef padModeOf(AdaptorT &a) {
  auto attr = a.getModeAttr();
  return attr ? attr.getValue() : StringRef("constant");
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc, Adaptor a,
                                      SmallVectorImpl<Type> &out) {
  auto in = ranked(a.getInput());
  auto pads = a.getPads();
  if (failed(checkPad(loc, pads, padModeOf(a), in.getShape(), "'input'")))
    return failure();
  SmallVector<int64_t> shape(in.getShape());
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (llvm::AddOverflow(shape[d], pads[d], shape[d]) ||
        llvm::AddOverflow(shape[d], pads[in.getRank() + d], shape[d]))
      return fail(loc, "'pads' " + str(pads) + " on 'input' " + str(in) +
                           " give a dimension int64 cannot hold");
  out.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult PadGradOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor a,
                                          SmallVectorImpl<Type> &out) {
  auto dy = ranked(a.getGradOutput());
  auto pads = a.getPads();
  int64_t rank = dy.getRank();
  if ((int64_t)pads.size() != 2 * rank)
    return fail(loc, "'pads' must have " + Twine(2 * rank) + " entries, got " +
                         str(pads));
  SmallVector<int64_t> shape(dy.getShape());
  for (int64_t d = 0; d < rank; ++d) {
    shape[d] -= pads[d] + pads[rank + d];
    if (shape[d] < 1)
      return fail(loc, "'pads' " + str(pads) + " leave no element of " +
                           "'grad_output' " + str(dy) + " in dimension " +
                           Twine(d));
  }
  if (failed(checkPad(loc, pads, padModeOf(a), shape, "the result")))
    return failure();
  out.push_back(RankedTensorType::get(shape, dy.getElementType()));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  auto in = ranked(a.getInput());
  auto perm = a.getPermutation();
  SmallVector<bool> seen(in.getRank(), false);
  bool ok = (int64_t)perm.size() == in.getRank();
  for (int64_t p : perm) {
    ok = ok && p >= 0 && p < in.getRank() && !seen[p];
    if (ok)
      seen[p] = true;
  }
  if (!ok)
    return fail(loc, "'permutation' " + str(perm) +
                         " is not a permutation of the dimensions of 'input' " +
                         str(in));
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(in.getDimSize(p));
  out.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}
OpFoldResult TransposeOp::fold(FoldAdaptor) {
  if (llvm::equal(getPermutation(),
                  llvm::seq<int64_t>(0, getPermutation().size())))
    return getInput();
  // transpose(transpose(x, p), q) == x when p∘q is the identity.
  if (auto prev = getInput().getDefiningOp<TransposeOp>()) {
    auto p = prev.getPermutation(), q = getPermutation();
    bool identity = true;
    for (size_t i = 0; i < q.size(); ++i)
      identity &= p[q[i]] == (int64_t)i;
    if (identity)
      return prev.getInput();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// CUDA lowering of the "tiled" transposes: kernels/Transpose.cuh
//===----------------------------------------------------------------------===//

std::optional<TiledTransposeShape>
cnnc::cnn::tiledTransposeShape(Operation *op) {
  auto t = dyn_cast<TransposeOp>(op);
  if (!t)
    return std::nullopt;
  auto in = ranked(t.getInput());
  Type et = in.getElementType();
  if (!in.hasStaticShape() || !(et.isF16() || et.isF32()) ||
      in.getNumElements() == 0)
    return std::nullopt;
  // perm = (0, .., p - 1, p + k, .., rank - 1, p, .., p + k - 1): the
  // prefix kept, then the last rank - p - k dimensions, then the k before.
  ArrayRef<int64_t> perm = t.getPermutation();
  int64_t rank = in.getRank(), p = 0;
  while (p < rank && perm[p] == p)
    ++p;
  if (p == rank)
    return std::nullopt; // the identity (it folds away)
  int64_t k = perm[p] - p, moved = rank - p - k;
  if (k < 1 || moved < 1)
    return std::nullopt;
  for (int64_t j = 0; j < moved; ++j)
    if (perm[p + j] != p + k + j)
      return std::nullopt;
  for (int64_t j = 0; j < k; ++j)
    if (perm[p + moved + j] != p + j)
      return std::nullopt;
  TiledTransposeShape s{1, 1, 1};
  for (int64_t d = 0; d < rank; ++d)
    (d < p ? s.batch : d < p + k ? s.rows : s.cols) *= in.getDimSize(d);
  if (s.rows < kTiledTransposeMinSide || s.cols < kTiledTransposeMinSide)
    return std::nullopt;
  return s;
}

LogicalResult
cnnc::cnn::describeTiledTranspose(Operation *op, LaunchAttr launch,
                                  SmallVectorImpl<KernelCall> &calls) {
  std::optional<TiledTransposeShape> s = tiledTransposeShape(op);
  if (!s)
    return failure();
  constexpr int64_t kTile = 32; // batchedTranspose2D's
  int64_t tiles = s->batch * llvm::divideCeil(s->rows, kTile) *
                  llvm::divideCeil(s->cols, kTile);
  KernelCall call;
  call.kernel = "batchedTranspose2D";
  call.templateArgs = {KernelTemplateArg::elementType(
      ranked(op->getOperand(0)).getElementType())};
  call.grid = KernelGrid::blockPerUnit(
      std::min<int64_t>(tiles, std::max<int64_t>(1, launch.getGridLimit())));
  call.args = {KernelArg::read(op->getOperand(0)),
               KernelArg::write(op->getResult(0)), KernelArg::i64(s->batch),
               KernelArg::i64(s->rows), KernelArg::i64(s->cols)};
  calls.push_back(call);
  return success();
}

/// gather_elements' operands: `indices` of the input's rank and sizes except
/// along `axis`.
static LogicalResult checkGatherElements(std::optional<Location> loc,
                                         RankedTensorType input,
                                         RankedTensorType indices,
                                         int64_t axis) {
  if (axis < 0 || axis >= input.getRank())
    return fail(loc, "'axis' " + Twine(axis) + " must lie in [0, " +
                         Twine(input.getRank()) + ") for 'input' " +
                         str(input));
  if (indices.getRank() != input.getRank())
    return fail(loc, "'indices' " + str(indices) + " must have the rank of "
                         "'input' " + str(input));
  for (int64_t d = 0; d < input.getRank(); ++d)
    if (d != axis && indices.getDimSize(d) != input.getDimSize(d))
      return fail(loc, "'indices' " + str(indices) + " must have the sizes "
                           "of 'input' " + str(input) +
                           " except along 'axis' " + Twine(axis));
  return success();
}

LogicalResult GatherElementsOp::inferReturnTypes(MLIRContext *,
                                                 std::optional<Location> loc,
                                                 Adaptor a,
                                                 SmallVectorImpl<Type> &out) {
  auto input = ranked(a.getInput()), indices = ranked(a.getIndices());
  if (failed(checkGatherElements(loc, input, indices,
                                 a.getAxisAttr().getInt())))
    return failure();
  out.push_back(
      RankedTensorType::get(indices.getShape(), input.getElementType()));
  return success();
}

LogicalResult GatherElementsGradOp::verify() {
  auto indices = ranked(getIndices());
  if (failed(checkGatherElements(getLoc(), getType(), indices,
                                 static_cast<int64_t>(getAxis()))))
    return failure();
  if (getGradOutput().getType().getShape() != indices.getShape())
    return emitOpError("'grad_output' ")
           << getGradOutput().getType() << " must have the shape of 'indices' "
           << indices;
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

// The gathered positions receive the result's gradient (summed where one is
// gathered more than once): gather_elements_grad.
LogicalResult GatherElementsOp::buildGradient(OpBuilder &b,
                                              GradientEmitter &g) {
  Value dy = g.resultGrad(0);
  if (!dy || !g.wants(getInput()))
    return success();
  Value dx = GatherElementsGradOp::create(
      b, getLoc(), withElementOf(getInput().getType(), dy), dy, getIndices(),
      getAxisAttr());
  g.accumulate(getInput(), dx);
  return success();
}

LogicalResult FlattenOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(), ReshapeOp::create(b, getLoc(), getInput().getType(),
                                             g.resultGrad(0)));
  return success();
}

LogicalResult ReshapeOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(), ReshapeOp::create(b, getLoc(), getInput().getType(),
                                             g.resultGrad(0)));
  return success();
}

LogicalResult TransposeOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  auto perm = getPermutation();
  SmallVector<int64_t> inv(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inv[p] = i;
  g.accumulate(getInput(),
               TransposeOp::create(b, getLoc(), ValueRange{g.resultGrad(0)},
                                   {i64ArrayAttr(b, "permutation", inv)}));
  return success();
}

LogicalResult ConcatOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Value dy = g.resultGrad(0);
  int64_t axis = getAxis(), offset = 0;
  auto dyType = cast<RankedTensorType>(dy.getType());
  for (Value in : getInputs()) {
    auto t = cast<RankedTensorType>(in.getType());
    if (g.wants(in)) {
      SmallVector<int64_t> offs(dyType.getRank(), 0);
      offs[axis] = offset;
      g.accumulate(in, SliceOp::create(b, getLoc(), ValueRange{dy},
                                       {i64ArrayAttr(b, "offsets", offs),
                                        i64ArrayAttr(b, "sizes",
                                                     t.getShape())}));
    }
    offset += t.getDimSize(axis);
  }
  return success();
}

// A constant pad only moves the input: its gradient is the interior of dy.
// Reflect/edge pads copy input elements several times (pad_grad sums them).
LogicalResult PadOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0), grad;
  if (getMode() == "constant") {
    auto in = getInput().getType();
    auto offs = getPads().take_front(in.getRank());
    grad = SliceOp::create(b, loc, ValueRange{dy},
                           {i64ArrayAttr(b, "offsets", offs),
                            i64ArrayAttr(b, "sizes", in.getShape())});
  } else {
    grad = PadGradOp::create(b, loc, ValueRange{dy},
                             {b.getNamedAttr("pads", getPadsAttr()),
                              b.getNamedAttr("mode", getModeAttr())});
  }
  g.accumulate(getInput(), grad);
  return success();
}

// Zeros around dy: a constant pad to the input's shape.
LogicalResult SliceOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  auto in = getInput().getType();
  int64_t rank = in.getRank();
  SmallVector<int64_t> pads(2 * rank);
  for (int64_t d = 0; d < rank; ++d) {
    pads[d] = getOffsets()[d];
    pads[rank + d] = in.getDimSize(d) - getOffsets()[d] - getSizes()[d];
  }
  g.accumulate(getInput(),
               PadOp::create(b, getLoc(), ValueRange{g.resultGrad(0)},
                             {i64ArrayAttr(b, "pads", pads),
                              b.getNamedAttr("mode", b.getStringAttr("constant")),
                              b.getNamedAttr("value", b.getF32FloatAttr(0.0))}));
  return success();
}
