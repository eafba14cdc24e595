//===- CNNOps.cpp - cnn op verifiers, type inference, folders ---------===//
//
// Result type inference doubles as the shape verifier: the generated
// verifier re-runs inference and compares, so every message below names the
// operand and both shapes involved.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Support/Resize.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {
std::string str(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}
std::string str(ArrayRef<int64_t> a) {
  std::string s = "[";
  for (auto [i, v] : llvm::enumerate(a))
    s += (i ? ", " : "") + std::to_string(v);
  return s + "]";
}

/// Emits an error at `loc` (if present) and fails.
LogicalResult fail(std::optional<Location> loc, const Twine &msg) {
  return emitOptionalError(loc, msg);
}

RankedTensorType ranked(Value v) { return cast<RankedTensorType>(v.getType()); }

LogicalResult checkArray(std::optional<Location> loc, StringRef name,
                         ArrayRef<int64_t> a, size_t size, int64_t min) {
  if (a.size() != size)
    return fail(loc, "'" + name + "' must have " + Twine(size) +
                         " entries, got " + str(a));
  for (int64_t v : a)
    if (v < min)
      return fail(loc, "'" + name + "' entries must be >= " + Twine(min) +
                           ", got " + str(a));
  return success();
}

/// One spatial output size of a window (conv or pooling) computed with
/// checked arithmetic: `in + pads` and the dilated extent may exceed int64
/// for attributes near INT64_MAX, which windowOutputSize would wrap.
FailureOr<int64_t> checkedWindowSize(std::optional<Location> loc, int64_t in,
                                     int64_t padBefore, int64_t padAfter,
                                     int64_t kernel, int64_t stride,
                                     int64_t dilation, bool ceilMode) {
  // ceil_mode adds `stride - 1` to the padded span.
  int64_t padded, extent, ceiled;
  if (llvm::AddOverflow(in, padBefore, padded) ||
      llvm::AddOverflow(padded, padAfter, padded) ||
      llvm::AddOverflow(padded, stride, ceiled) ||
      llvm::MulOverflow(dilation, kernel - 1, extent))
    return fail(loc, "a dimension of " + Twine(in) + " padded by " +
                         Twine(padBefore) + " and " + Twine(padAfter) +
                         " with a kernel of " + Twine(kernel) + " (dilation " +
                         Twine(dilation) + ", stride " + Twine(stride) +
                         ") gives sizes int64 cannot hold");
  return windowOutputSize(in, padBefore, padAfter, kernel, stride, dilation,
                          ceilMode);
}

/// The `layout` of an adaptor. Result type inference sees the attributes a
/// builder gave, before the defaults are filled in: unset means NCHW.
template <typename AdaptorT> Layout layoutOf(AdaptorT &a) {
  LayoutAttr attr = a.getLayoutAttr();
  return attr ? attr.getValue() : Layout::NCHW;
}

/// The channel dimension of an activation: the last one for NHWC.
int64_t chanDim(RankedTensorType t, Layout layout) {
  return layout == Layout::NHWC && t.getRank() > 1 ? t.getRank() - 1 : 1;
}

/// The shape of a 4-D tensor in NCHW (FCHW) order: NHWC (KRSC) is permuted.
SmallVector<int64_t, 4> nchwShape(RankedTensorType t, bool nhwc) {
  auto s = t.getShape();
  if (!nhwc || s.size() != 4)
    return SmallVector<int64_t, 4>(s);
  return {s[0], s[3], s[1], s[2]};
}
/// An N, C, H, W shape as a tensor type of the layout.
RankedTensorType typeInLayout(ArrayRef<int64_t> nchw, Type elt, bool nhwc) {
  if (!nhwc)
    return RankedTensorType::get(nchw, elt);
  return RankedTensorType::get({nchw[0], nchw[2], nchw[3], nchw[1]}, elt);
}

/// Shared checks and shape computation for conv2d and its gradients. With
/// `nhwc`, `in` is N x H x W x C and `filter` K x R x S x C/groups (KRSC).
FailureOr<RankedTensorType>
inferConv(std::optional<Location> loc, RankedTensorType in,
          RankedTensorType filter, ArrayRef<int64_t> strides,
          ArrayRef<int64_t> padding, ArrayRef<int64_t> dilations,
          int64_t groups, bool nhwc = false) {
  if (in.getRank() != 4)
    return fail(loc, Twine("'input' must be 4-D (") + (nhwc ? "NHWC" : "NCHW") +
                         "), got " + str(in));
  if (filter.getRank() != 4)
    return fail(loc, Twine("'filter' must be 4-D (") +
                         (nhwc ? "KRSC" : "FCHW") + "), got " + str(filter));
  if (in.getElementType() != filter.getElementType())
    return fail(loc, "'input' " + str(in) + " and 'filter' " + str(filter) +
                         " have different element types");
  if (failed(checkArray(loc, "strides", strides, 2, 1)) ||
      failed(checkArray(loc, "padding", padding, 4, 0)) ||
      failed(checkArray(loc, "dilations", dilations, 2, 1)))
    return failure();
  if (groups < 1)
    return fail(loc, "'groups' must be >= 1, got " + Twine(groups));
  auto is = nchwShape(in, nhwc), fs = nchwShape(filter, nhwc);
  if (is[1] % groups || fs[0] % groups)
    return fail(loc, "input channels (" + Twine(is[1]) + ") and filters (" +
                         Twine(fs[0]) +
                         ") must be divisible by groups = " + Twine(groups));
  if (fs[1] * groups != is[1])
    return fail(loc, "'filter' " + str(filter) + " expects " +
                         Twine(fs[1] * groups) +
                         " input channels but 'input' " + str(in) + " has " +
                         Twine(is[1]) + " (groups = " + Twine(groups) + ")");
  auto ohOr = checkedWindowSize(loc, is[2], padding[0], padding[2], fs[2],
                                strides[0], dilations[0], false);
  auto owOr = checkedWindowSize(loc, is[3], padding[1], padding[3], fs[3],
                                strides[1], dilations[1], false);
  if (failed(ohOr) || failed(owOr))
    return failure();
  int64_t oh = *ohOr, ow = *owOr;
  if (oh < 1 || ow < 1)
    return fail(loc, "the " + Twine(fs[2]) + "x" + Twine(fs[3]) +
                         " window of 'filter' " + str(filter) +
                         " does not fit the padded 'input' " + str(in));
  return typeInLayout({is[0], fs[0], oh, ow}, in.getElementType(), nhwc);
}

FailureOr<RankedTensorType>
inferPool(std::optional<Location> loc, RankedTensorType in,
          ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
          ArrayRef<int64_t> padding, bool ceil, Layout layout) {
  bool nhwc = layout == Layout::NHWC;
  if (in.getRank() != 4)
    return fail(loc, "'input' must be 4-D (" + stringifyLayout(layout) +
                         "), got " + str(in));
  if (failed(checkArray(loc, "kernel", kernel, 2, 1)) ||
      failed(checkArray(loc, "strides", strides, 2, 1)) ||
      failed(checkArray(loc, "padding", padding, 4, 0)))
    return failure();
  // A window wholly in the padding would have no element (max) or no
  // divisor (average without the pads).
  for (int i = 0; i < 4; ++i)
    if (padding[i] >= kernel[i % 2])
      return fail(loc, "'padding' " + str(padding) +
                           " must be smaller than 'kernel' " + str(kernel));
  auto s = nchwShape(in, nhwc);
  auto ohOr = checkedWindowSize(loc, s[2], padding[0], padding[2], kernel[0],
                                strides[0], 1, ceil);
  auto owOr = checkedWindowSize(loc, s[3], padding[1], padding[3], kernel[1],
                                strides[1], 1, ceil);
  if (failed(ohOr) || failed(owOr))
    return failure();
  int64_t oh = *ohOr, ow = *owOr;
  if (oh < 1 || ow < 1)
    return fail(loc, "the " + Twine(kernel[0]) + "x" + Twine(kernel[1]) +
                         " pooling window does not fit 'input' " + str(in));
  return typeInLayout({s[0], s[1], oh, ow}, in.getElementType(), nhwc);
}

/// Checks `layout` and the conv shapes in it (conv2d and its gradients).
FailureOr<RankedTensorType>
inferConvIn(std::optional<Location> loc, RankedTensorType in,
            RankedTensorType filter, ArrayRef<int64_t> strides,
            ArrayRef<int64_t> padding, ArrayRef<int64_t> dilations,
            int64_t groups, Layout layout) {
  return inferConv(loc, in, filter, strides, padding, dilations, groups,
                   layout == Layout::NHWC);
}

LogicalResult checkChannelVector(std::optional<Location> loc, StringRef name,
                                 RankedTensorType in, RankedTensorType vec,
                                 Layout layout = Layout::NCHW) {
  int64_t cd = chanDim(in, layout);
  if (vec.getRank() != 1 || vec.getDimSize(0) != in.getDimSize(cd))
    return fail(loc, "'" + name + "' " + str(vec) + " must be 1-D of size " +
                         Twine(in.getDimSize(cd)) + " (dim " + Twine(cd) +
                         " of 'input' " + str(in) + ")");
  return success();
}

LogicalResult checkSameType(std::optional<Location> loc, StringRef a, Type ta,
                            StringRef b, Type tb) {
  if (ta != tb)
    return fail(loc, "'" + a + "' " + str(ta) + " and '" + b + "' " + str(tb) +
                         " must have the same type");
  return success();
}
} // namespace

FailureOr<RankedTensorType>
cnnc::cnn::inferPool2DType(Location loc, RankedTensorType in,
                           ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                           ArrayRef<int64_t> padding, bool ceilMode,
                           Layout layout) {
  return inferPool(loc, in, kernel, strides, padding, ceilMode, layout);
}

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

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getType())
    return emitOpError("value type ")
           << getValue().getType() << " differs from result type " << getType();
  return success();
}
OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

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

/// A reduction's declared result: the inferred type, or f32 of the same
/// shape where the input is f16 (statistics kept in f32 by cnn-precision).
static bool compatibleReduce(TypeRange inferred, TypeRange declared) {
  if (inferred.size() != declared.size())
    return false;
  for (auto [i, d] : llvm::zip(inferred, declared)) {
    if (i == d)
      continue;
    auto it = dyn_cast<RankedTensorType>(i), dt = dyn_cast<RankedTensorType>(d);
    if (!it || !dt || it.getShape() != dt.getShape() ||
        !it.getElementType().isF16() || !dt.getElementType().isF32())
      return false;
  }
  return true;
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

LogicalResult DropoutOp::verify() {
  float r = getRatio().convertToFloat();
  if (r < 0 || r >= 1)
    return emitOpError("'ratio' must be in [0, 1), got ") << r;
  return success();
}
OpFoldResult DropoutOp::fold(FoldAdaptor) { return getInput(); }

LogicalResult DropoutMaskOp::verify() {
  float r = getRatio().convertToFloat();
  if (r < 0 || r >= 1)
    return emitOpError("'ratio' must be in [0, 1), got ") << r;
  return success();
}

LogicalResult SoftmaxOp::verify() {
  int64_t axis = getAxisAttr().getInt();
  if (axis < 0 || axis >= getType().getRank())
    return emitOpError("'axis' ") << axis << " out of range for " << getType();
  return success();
}

static LogicalResult checkLogitsLabels(std::optional<Location> loc,
                                       RankedTensorType logits,
                                       RankedTensorType labels,
                                       float smoothing) {
  if (logits.getRank() != 2)
    return fail(loc, "'logits' must be 2-D (N x C), got " + str(logits));
  // Per-pixel labels (N x H x W, for logits flattened to (N*H*W) x C by
  // cnn-autodiff) are read in row order: any shape with one label per row.
  if (labels.getRank() < 1 || labels.getNumElements() != logits.getDimSize(0))
    return fail(loc, "'labels' " + str(labels) + " must hold " +
                         Twine(logits.getDimSize(0)) +
                         " labels, one per row of 'logits' " + str(logits));
  if (smoothing < 0 || smoothing > 1)
    return fail(loc, "'label_smoothing' must be in [0, 1], got " +
                         Twine(std::to_string(smoothing)));
  return success();
}

LogicalResult
SoftmaxCrossEntropyOp::inferReturnTypes(MLIRContext *ctx,
                                        std::optional<Location> loc, Adaptor a,
                                        SmallVectorImpl<Type> &out) {
  if (failed(checkLogitsLabels(loc, ranked(a.getLogits()),
                               ranked(a.getLabels()),
                               a.getLabelSmoothing().convertToFloat())))
    return failure();
  out.push_back(RankedTensorType::get({}, Float32Type::get(ctx)));
  return success();
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

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

LogicalResult SoftmaxCrossEntropyGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor a,
    SmallVectorImpl<Type> &out) {
  auto logits = ranked(a.getLogits());
  if (failed(checkLogitsLabels(loc, logits, ranked(a.getLabels()),
                               a.getLabelSmoothing().convertToFloat())))
    return failure();
  out.push_back(logits);
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer ops
//===----------------------------------------------------------------------===//

/// The optional `grad_scale, finite` operands: none or both.
static LogicalResult checkLossScaling(std::optional<Location> loc,
                                      ValueRange scaling) {
  if (!scaling.empty() && scaling.size() != 2)
    return fail(loc,
                "takes either no loss-scaling operands or two (grad_scale, "
                "finite), got " +
                    Twine(scaling.size()));
  return success();
}

/// An optimizer's gradient: the parameter's type, or, for an f32 parameter,
/// its shape in f16 (cnn-precision hands the f16 gradient of the step to the
/// update, which widens it on load: no cast kernel per parameter).
static LogicalResult checkGrad(std::optional<Location> loc,
                               RankedTensorType param, Type grad) {
  auto g = dyn_cast<RankedTensorType>(grad);
  if (g && param.getElementType().isF32() && g.getElementType().isF16() &&
      g.getShape() == param.getShape())
    return success();
  return checkSameType(loc, "param", param, "grad", grad);
}

LogicalResult SGDUpdateOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  if (failed(checkLossScaling(loc, a.getLossScaling())))
    return failure();
  auto p = ranked(a.getParam());
  if (failed(checkGrad(loc, p, a.getGrad().getType())) ||
      failed(checkSameType(loc, "param", p, "momentum_buffer",
                           a.getMomentumBuffer().getType())))
    return failure();
  out.append({p, p});
  return success();
}

LogicalResult AdamUpdateOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor a,
                                             SmallVectorImpl<Type> &out) {
  if (failed(checkLossScaling(loc, a.getLossScaling())))
    return failure();
  auto p = ranked(a.getParam());
  if (failed(checkGrad(loc, p, a.getGrad().getType())) ||
      failed(
          checkSameType(loc, "param", p, "exp_avg", a.getExpAvg().getType())) ||
      failed(checkSameType(loc, "param", p, "exp_avg_sq",
                           a.getExpAvgSq().getType())))
    return failure();
  out.append({p, p, p});
  return success();
}

//===----------------------------------------------------------------------===//
// Resampling
//===----------------------------------------------------------------------===//

/// The checks of resize and resize_grad on their attributes and the 4-D
/// tensor `in` (resize's input, or resize_grad's result); returns the
/// resized type.
static FailureOr<RankedTensorType>
inferResize(std::optional<Location> loc, RankedTensorType in, StringRef inName,
            ArrayRef<int64_t> size, StringAttr mode, StringAttr coord,
            StringAttr nearest, DenseF64ArrayAttr scales, Layout layout) {
  bool nhwc = layout == Layout::NHWC;
  if (in.getRank() != 4)
    return fail(loc, "'" + inName + "' must be 4-D (" +
                         stringifyLayout(layout) + "), got " + str(in));
  if (failed(checkArray(loc, "size", size, 2, 1)))
    return failure();
  // Unset attributes take their defaults (a builder may leave them out).
  StringRef m = mode ? mode.getValue() : "nearest";
  StringRef c = coord ? coord.getValue() : "half_pixel";
  StringRef n = nearest ? nearest.getValue() : "round_prefer_floor";
  if (!parseResizeMode(m))
    return fail(loc,
                "'mode' must be \"nearest\" or \"linear\", got \"" + m + "\"");
  if (!parseResizeCoord(c))
    return fail(loc, "'coordinate_transformation_mode' must be "
                     "\"half_pixel\", \"pytorch_half_pixel\", "
                     "\"align_corners\" or \"asymmetric\", got \"" +
                         c + "\"");
  if (!parseResizeNearest(n))
    return fail(loc, "'nearest_mode' must be \"round_prefer_floor\", "
                     "\"round_prefer_ceil\", \"floor\" or \"ceil\", got \"" +
                         n + "\"");
  if (scales) {
    ArrayRef<double> sc = scales.asArrayRef();
    if (sc.size() != 2 || llvm::any_of(sc, [](double v) {
          return !std::isfinite(v) || !(v > 0);
        })) {
      std::string list;
      for (auto [i, v] : llvm::enumerate(sc))
        list += (i ? ", " : "") + std::to_string(v);
      return fail(loc, "'scales' must have 2 finite entries > 0, got [" + list +
                           "]");
    }
  }
  auto s = nchwShape(in, nhwc);
  int64_t count = 1;
  for (int64_t d : {s[0], s[1], size[0], size[1]})
    if (llvm::MulOverflow(count, d, count))
      return fail(loc, "resizing '" + inName + "' " + str(in) + " to " +
                           str(size) +
                           " gives more elements than int64 can count");
  return typeInLayout({s[0], s[1], size[0], size[1]}, in.getElementType(),
                      nhwc);
}

LogicalResult ResizeOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc, Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  auto t = inferResize(loc, ranked(a.getInput()), "input", a.getSize(),
                       a.getModeAttr(), a.getCoordinateTransformationModeAttr(),
                       a.getNearestModeAttr(), a.getScalesAttr(), layoutOf(a));
  if (failed(t))
    return failure();
  out.push_back(*t);
  return success();
}

LogicalResult ResizeGradOp::verify() {
  auto resized =
      inferResize(getLoc(), getType(), "result", getSize(), getModeAttr(),
                  getCoordinateTransformationModeAttr(), getNearestModeAttr(),
                  getScalesAttr(), getLayout());
  if (failed(resized))
    return failure();
  if (*resized != getGradOutput().getType())
    return emitOpError("'grad_output' ")
           << getGradOutput().getType() << " must have the type " << *resized
           << " that resizing the result " << getType() << " to 'size' "
           << str(getSize()) << " gives";
  return success();
}

#include "cnnc/Dialect/CNN/CNNInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "cnnc/Dialect/CNN/CNNOps.cpp.inc"

// `cnn.constant dense<...> : tensor<...>`: the value carries the type.
ParseResult ConstantOp::parse(OpAsmParser &parser, OperationState &result) {
  ElementsAttr value;
  if (parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseAttribute(value, "value", result.attributes))
    return failure();
  result.addTypes(value.getType());
  return success();
}

void ConstantOp::print(OpAsmPrinter &p) {
  p.printOptionalAttrDict((*this)->getAttrs(), {"value"});
  p << ' ';
  p.printAttribute(getValue());
}
