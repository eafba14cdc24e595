//===- Resize.cpp - cnn ops: resampling -----------------------------------===//
//
// What the dialect knows about resize, resize_grad: verifiers and shape
// inference, then the gradient rules (GradientOpInterface; cnn-autodiff asks
// each op).
//
//===----------------------------------------------------------------------===//
#include "OpHelpers.h"
#include "cnnc/Support/Resize.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;
using namespace cnnc::cnn::detail;

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

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

LogicalResult ResizeOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  // The adjoint with the same attributes (size, scales, modes, layout).
  g.accumulate(getInput(), ResizeGradOp::create(b, getLoc(),
                                                TypeRange{getInput().getType()},
                                                ValueRange{g.resultGrad(0)},
                                                (*this)->getAttrs()));
  return success();
}
