//===- CNNOps.cpp - cnn op classes, shared checks, ops of no family -------===//
//
// The generated op classes (CNNOps.cpp.inc) and interfaces, the shape checks
// the op families share (detail::, OpHelpers.h), and the ops of no family:
// constant, dropout, the optimizer updates. What the dialect knows about
// each other op (verifier / shape inference, gradient rule, kernel-call
// description) is in its family's file, Ops/<Family>.cpp.
//
// Result type inference doubles as the shape verifier: the generated
// verifier re-runs inference and compares, so every message names the
// operand and both shapes involved.
//
//===----------------------------------------------------------------------===//
#include "Ops/OpHelpers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;
using namespace cnnc::cnn::detail;

namespace cnnc::cnn::detail {
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
          int64_t groups, bool nhwc) {
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
                                 Layout layout) {
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
} // namespace cnnc::cnn::detail

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getType())
    return emitOpError("value type ")
           << getValue().getType() << " differs from result type " << getType();
  return success();
}
OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

bool cnnc::cnn::detail::compatibleReduce(TypeRange inferred,
                                         TypeRange declared) {
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
