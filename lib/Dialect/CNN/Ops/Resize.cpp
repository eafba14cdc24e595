//===- Resize.cpp - cnn ops: resampling -----------------------------------===//
//
// What the dialect knows about resize, resize_grad and cnn-fuse's
// fused_resize_concat (upsample + concat): verifiers and shape
// inference, gradient rules (GradientOpInterface; cnn-autodiff asks each
// op), and the CUDA lowering as data (KernelCallOpInterface; the CUDA
// printer asks each op).
//
//===----------------------------------------------------------------------===//
#include "OpHelpers.h"
#include "cnnc/Support/Resize.h"

#include <limits>
#include <type_traits>

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

/// `t` with `channels` channels (dimension chanDim of `layout`).
static RankedTensorType withChannels(RankedTensorType t, int64_t channels,
                                     Layout layout) {
  SmallVector<int64_t> shape(t.getShape());
  shape[chanDim(t, layout)] = channels;
  return RankedTensorType::get(shape, t.getElementType());
}

/// cnn-select-lowering's "vec8" on a fused form (eight channels a thread,
/// 16-byte accesses): NHWC, and every channel count and offset of its
/// tensors a multiple of 8.
static LogicalResult verifyVec8(Operation *op, ArrayRef<int64_t> channels) {
  if (!isVec8(op))
    return success();
  if (!cast<LayoutSensitiveOpInterface>(op).isNHWC() ||
      llvm::any_of(channels, [](int64_t c) { return c % 8 != 0; }))
    return op->emitOpError("'cnn.lowering' \"vec8\" needs NHWC and channel "
                           "counts and offsets that are multiples of 8, got ")
           << str(channels);
  return success();
}

LogicalResult ResizeGradOp::verify() {
  auto resized =
      inferResize(getLoc(), getType(), "result", getSize(), getModeAttr(),
                  getCoordinateTransformationModeAttr(), getNearestModeAttr(),
                  getScalesAttr(), getLayout());
  if (failed(resized))
    return failure();
  RankedTensorType dy = getGradOutput().getType();
  std::optional<int64_t> offset = getChannelOffset();
  if (!offset) {
    if (*resized != dy)
      return emitOpError("'grad_output' ")
             << dy << " must have the type " << *resized
             << " that resizing the result " << getType() << " to 'size' "
             << str(getSize()) << " gives";
    if (isVec8(*this))
      return emitOpError("'cnn.lowering' \"vec8\" is for a resize_grad "
                         "with a 'channel_offset' only");
    return success();
  }
  // A channel range of a wider gradient: every other dimension as resized.
  int64_t channels = (*resized).getDimSize(chanDim(*resized, getLayout()));
  int64_t dyChannels =
      dy.getRank() == 4 ? dy.getDimSize(chanDim(dy, getLayout())) : -1;
  if (dy.getRank() != 4 ||
      withChannels(*resized, dyChannels, getLayout()) != dy)
    return emitOpError("'grad_output' ")
           << dy << " must have the type " << *resized
           << " that resizing the result " << getType() << " to 'size' "
           << str(getSize()) << " gives, but for its channel count";
  if (*offset > dyChannels - channels)
    return emitOpError("'channel_offset' ")
           << *offset << " + the result's " << channels
           << " channels exceed the " << dyChannels
           << " channels of 'grad_output'";
  return verifyVec8(*this, {channels, dyChannels, *offset});
}

LogicalResult FusedResizeConcatOp::verify() {
  auto resized = inferResize(
      getLoc(), getInput().getType(), "input", getSize(), getModeAttr(),
      getCoordinateTransformationModeAttr(), getNearestModeAttr(),
      getScalesAttr(), getLayout());
  if (failed(resized))
    return failure();
  RankedTensorType other = getOther().getType();
  int64_t resizedChannels =
      (*resized).getDimSize(chanDim(*resized, getLayout()));
  int64_t otherChannels =
      other.getRank() == 4 ? other.getDimSize(chanDim(other, getLayout())) : -1;
  if (other.getRank() != 4 ||
      withChannels(*resized, otherChannels, getLayout()) != other)
    return emitOpError("'other' ")
           << other << " must have the batch, spatial size and element type "
           << "of the resized input " << *resized;
  auto result = withChannels(*resized, resizedChannels + otherChannels,
                             getLayout());
  if (result != getType())
    return emitOpError("result ")
           << getType() << " must be the channel concatenation " << result
           << " of the resized input " << *resized << " and 'other' "
           << other;
  return verifyVec8(*this, {resizedChannels, otherChannels});
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

//===----------------------------------------------------------------------===//
// CUDA lowering (KernelCallOpInterface): kernels/Resize.cuh
//===----------------------------------------------------------------------===//

// The prelude's resizeFwd / resizeBwd (gathers) read their source taps from
// tables computed here by cnnc/Support/Resize.h, the code the verifier and
// the reference interpreter read: the three cannot disagree about which
// input pixel an output reads. The gradient also reads, for each input row
// and column, the outputs [first, last] that may read it. The tables are
// bound at compile time, so the call is a wrapped device function.
//
// The fused forward (resizeConcatFwd) writes the whole channel
// concatenation of the resized input and `other`; the gradient with a
// `channel_offset` (resizeSliceBwd) reads its channel range of the wider
// gradient. Both take the resize's ResizeParams (the resized channels only)
// and the other tensor's channel count and the resized channels' offset.
template <typename ResizeLikeOp>
static void describeResize(ResizeLikeOp op,
                           SmallVectorImpl<KernelCall> &calls) {
  constexpr bool grad = std::is_same_v<ResizeLikeOp, ResizeGradOp>;
  constexpr bool concat = std::is_same_v<ResizeLikeOp, FusedResizeConcatOp>;
  bool nhwc = op.isNHWC();
  // x: the resize input (the gradient's result), y: its output (the
  // concatenation, or the gradient of one, where the op has channels
  // besides the resized ones).
  RankedTensorType x = ranked(grad ? op->getResult(0) : op->getOperand(0));
  RankedTensorType y = ranked(grad ? op->getOperand(0) : op->getResult(0));
  auto xs = nchwShape(x, nhwc), ys = nchwShape(y, nhwc);
  std::optional<ArrayRef<double>> scales;
  if (auto sc = op.getScalesAttr())
    scales = sc.asArrayRef();
  KernelCall call;
  // The fused forms: y has channels besides the resized ones (how many, and
  // where the resized ones start are the kernel's arguments).
  bool channelRange = false;
  int64_t otherChannels = ys[1] - xs[1], resizedOffset = 0;
  if constexpr (concat) {
    call.kernel = "resizeConcatFwd";
    channelRange = true;
    resizedOffset = op.getResizedFirst() ? 0 : otherChannels;
  } else if constexpr (grad) {
    channelRange = op.getChannelOffset().has_value();
    call.kernel = channelRange ? "resizeSliceBwd" : "resizeBwd";
    resizedOffset = op.getChannelOffset().value_or(0);
  } else {
    call.kernel = "resizeFwd";
  }
  call.wrap = true;
  call.templateArgs = {KernelTemplateArg::elementType(y.getElementType()),
                       KernelTemplateArg::boolean(nhwc),
                       KernelTemplateArg::boolean(op.getMode() == "linear")};
  call.grid = KernelGrid::threadPerElement(op->getResult(0));
  // cnn-select-lowering's "vec8" (the fused forms only; their verifiers
  // check the channel counts): eight NHWC channels a thread.
  if (channelRange && isVec8(op)) {
    call.kernel += "NHWC8";
    call.templateArgs.erase(call.templateArgs.begin() + 1);
    call.grid = KernelGrid::threadPerElement(op->getResult(0), 8);
  }
  call.args = {KernelArg::read(op->getOperand(0), grad ? "dy" : "x")};
  if constexpr (concat)
    call.args.push_back(KernelArg::read(op.getOther(), "other"));
  call.args.push_back(KernelArg::write(op->getResult(0), grad ? "dx" : "y"));
  SmallVector<KernelArg> params;
  for (int64_t d : {xs[0], xs[1], xs[2], xs[3], ys[2], ys[3]})
    params.push_back(KernelArg::i32(d));
  call.args.push_back(KernelArg::record("ResizeParams", params));
  if (channelRange)
    call.args.append(
        {KernelArg::i32(otherChannels), KernelArg::i32(resizedOffset)});
  // Sizes beyond the kernel's int are refused on the record
  // (verifyKernelCall): their tables, an entry per output row and column,
  // are not built.
  if (llvm::any_of(params, [](const KernelArg &a) {
        return a.integer > std::numeric_limits<int32_t>::max();
      })) {
    calls.push_back(call);
    return;
  }
  // Tables in the order the target declares them: per dimension the taps,
  // then (gradient) the ranges.
  int64_t tapTable[2], rangeTable[2];
  for (int d = 0; d < 2; ++d) {
    int64_t in = xs[2 + d], out = ys[2 + d];
    std::vector<ResizeTap> taps = resizeTaps(
        in, out, op.getMode(), op.getCoordinateTransformationMode(),
        op.getNearestMode(), scales ? (*scales)[d] : 0.0);
    KernelTable tapRows{"ResizeTap", {}};
    for (const ResizeTap &t : taps)
      tapRows.rows.push_back(KernelArg::record(
          "", {KernelArg::i32(t.lo), KernelArg::i32(t.hi),
               KernelArg::f32(t.l1)}));
    tapTable[d] = call.tables.size();
    call.tables.push_back(std::move(tapRows));
    if (!grad)
      continue;
    KernelTable rangeRows{"int2", {}};
    for (const ResizeRange &r : resizeRanges(in, taps))
      rangeRows.rows.push_back(KernelArg::record(
          "", {KernelArg::i32(r.first), KernelArg::i32(r.last)}));
    rangeTable[d] = call.tables.size();
    call.tables.push_back(std::move(rangeRows));
  }
  call.args.append(
      {KernelArg::table(tapTable[0]), KernelArg::table(tapTable[1])});
  if (grad)
    call.args.append(
        {KernelArg::table(rangeTable[0]), KernelArg::table(rangeTable[1])});
  calls.push_back(call);
}

void ResizeOp::describeKernelCalls(LaunchAttr,
                                   SmallVectorImpl<KernelCall> &calls) {
  describeResize(*this, calls);
}

void ResizeGradOp::describeKernelCalls(LaunchAttr,
                                       SmallVectorImpl<KernelCall> &calls) {
  describeResize(*this, calls);
}

void FusedResizeConcatOp::describeKernelCalls(
    LaunchAttr, SmallVectorImpl<KernelCall> &calls) {
  describeResize(*this, calls);
}
