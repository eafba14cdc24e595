//===- Pooling.cpp - cnn ops: pooling -------------------------------------===//
//
// What the dialect knows about max_pool2d, avg_pool2d, global_avg_pool and
// their gradients: verifiers and shape inference, gradient rules
// (GradientOpInterface; cnn-autodiff asks each op), and the CUDA lowering as
// data (KernelCallOpInterface; the CUDA printer asks each op).
// global_avg_pool_grad is a generated elementwise kernel, not a kernel call.
//
//===----------------------------------------------------------------------===//
#include "OpHelpers.h"

#include "SpatialSumLayout.h"

#include <algorithm>

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

/// Max and average pooling share their window attributes, hence their
/// result type.
template <typename PoolAdaptor>
static LogicalResult inferWindowedPool(std::optional<Location> loc,
                                       PoolAdaptor a,
                                       SmallVectorImpl<Type> &out) {
  auto t = inferPool(loc, ranked(a.getInput()), a.getKernel(), a.getStrides(),
                     a.getPadding(), a.getCeilMode(), layoutOf(a));
  if (failed(t))
    return failure();
  out.push_back(*t);
  return success();
}

LogicalResult MaxPool2DOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  return inferWindowedPool(loc, a, out);
}

LogicalResult AvgPool2DOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  return inferWindowedPool(loc, a, out);
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

//===----------------------------------------------------------------------===//
// CUDA lowering (KernelCallOpInterface): kernels/Pooling.cuh,
// kernels/PoolingNHWC.cuh, kernels/Reductions.cuh
//===----------------------------------------------------------------------===//

KernelArg cnnc::cnn::detail::poolParams(RankedTensorType x,
                                        RankedTensorType y,
                                        ArrayRef<int64_t> k,
                                        ArrayRef<int64_t> s,
                                        ArrayRef<int64_t> p,
                                        bool countIncludePad, bool nhwc) {
  auto xs = x.getShape(), ys = y.getShape();
  int64_t c = nhwc ? xs[3] : xs[1], h = nhwc ? xs[1] : xs[2],
          w = nhwc ? xs[2] : xs[3];
  int64_t ph = nhwc ? ys[1] : ys[2], pw = nhwc ? ys[2] : ys[3];
  SmallVector<KernelArg> fields;
  for (int64_t v : {xs[0], c, h, w, ph, pw, k[0], k[1], s[0], s[1], p[0], p[1],
                    p[2], p[3]})
    fields.push_back(KernelArg::i32(v));
  fields.push_back(KernelArg::boolean(countIncludePad));
  return KernelArg::record("PoolParams", fields);
}

/// The prelude's pooling kernel `name`<T, NHWC> (T the result's element
/// type), one thread per element of the result.
static KernelCall poolCall(StringRef name, Operation *op,
                           ArrayRef<KernelArg> args) {
  KernelCall call;
  call.kernel = name.str();
  Value result = op->getResult(0);
  call.templateArgs = {
      KernelTemplateArg::elementType(ranked(result).getElementType()),
      KernelTemplateArg::boolean(isNHWC(op))};
  call.grid = KernelGrid::threadPerElement(result);
  call.args.assign(args.begin(), args.end());
  return call;
}

bool cnnc::cnn::detail::isVec8(Operation *op) {
  auto lowering = op->getAttrOfType<StringAttr>("cnn.lowering");
  return lowering && lowering.getValue() == "vec8";
}

void MaxPool2DOp::describeKernelCalls(LaunchAttr,
                                      SmallVectorImpl<KernelCall> &calls) {
  KernelArg params =
      poolParams(getInput().getType(), getType(), getKernel(), getStrides(),
                 getPadding(), false, isNHWC());
  KernelCall call =
      poolCall("maxPoolFwd", *this,
               {KernelArg::read(getInput()), KernelArg::write(getResult()),
                params});
  // cnn-select-lowering's "vec8": eight channels a thread (NHWC);
  // maxPoolNHWC8<T, ARG> records no argmax (ARG false, its pointer null).
  if (isVec8(*this)) {
    call.kernel = "maxPoolNHWC8";
    call.templateArgs[1] = KernelTemplateArg::boolean(false);
    call.grid = KernelGrid::threadPerElement(getResult(), 8);
    call.args.insert(call.args.begin() + 2, KernelArg::null());
  }
  calls.push_back(call);
}

void MaxPool2DGradOp::describeKernelCalls(LaunchAttr,
                                          SmallVectorImpl<KernelCall> &calls) {
  // The gather form: each input element finds the first maximum of each
  // window it is in again. cnn-max-pool-index replaces this op on the
  // pipeline's step (the forward records the argmax).
  calls.push_back(poolCall(
      "maxPoolBwd", *this,
      {KernelArg::read(getGradOutput()), KernelArg::read(getInput()),
       KernelArg::write(getResult()),
       poolParams(getInput().getType(), getGradOutput().getType(),
                  getKernel(), getStrides(), getPadding(), false,
                  isNHWC())}));
}

void AvgPool2DOp::describeKernelCalls(LaunchAttr,
                                      SmallVectorImpl<KernelCall> &calls) {
  calls.push_back(poolCall(
      "avgPoolFwd", *this,
      {KernelArg::read(getInput()), KernelArg::write(getResult()),
       poolParams(getInput().getType(), getType(), getKernel(), getStrides(),
                  getPadding(), getCountIncludePad(), isNHWC())}));
}

void AvgPool2DGradOp::describeKernelCalls(LaunchAttr,
                                          SmallVectorImpl<KernelCall> &calls) {
  calls.push_back(poolCall(
      "avgPoolBwd", *this,
      {KernelArg::read(getGradOutput()), KernelArg::write(getResult()),
       poolParams(getType(), getGradOutput().getType(), getKernel(),
                  getStrides(), getPadding(), getCountIncludePad(),
                  isNHWC())}));
}

void cnnc::cnn::describeSpatialSum(Value x, Value y, int64_t n, int64_t pixels,
                                   int64_t channels, double divisor,
                                   LaunchAttr launch,
                                   SmallVectorImpl<KernelCall> &calls) {
  // Eight channels a lane with 16-byte loads where the rows allow it (the
  // arena aligns every buffer; C % 8 == 0 keeps each pixel's row aligned).
  // The lanes, rows and splits: kernels/SpatialSumLayout.h, which the
  // runtime's kernel checks launch with too.
  bool vec8 = channels % 8 == 0;
  cnnc_kernels::SpatialSumLayout layout = cnnc_kernels::spatialSumLayout(
      n, pixels, channels, vec8, launch.getGridLimit(), launch.getBlock());
  int64_t lanes = layout.lanes, splits = layout.splits;
  Type in = ranked(x).getElementType(), out = ranked(y).getElementType();
  KernelCall tiles;
  tiles.kernel = "spatialSumTiles";
  tiles.templateArgs = {KernelTemplateArg::elementType(in),
                        KernelTemplateArg::elementType(out),
                        KernelTemplateArg::boolean(vec8)};
  tiles.grid = KernelGrid::blockPerUnit(layout.blocks());
  int64_t scratch = splits > 1 ? n * channels * splits : 1;
  tiles.args = {KernelArg::scratch(scratch),
                KernelArg::read(x),
                KernelArg::write(y),
                KernelArg::i32(n),
                KernelArg::i32(pixels),
                KernelArg::i32(channels),
                KernelArg::i32(lanes),
                KernelArg::i32(splits),
                KernelArg::f32(divisor)};
  calls.push_back(tiles);
  if (splits == 1)
    return;
  KernelCall finish;
  finish.kernel = "spatialSumFinish";
  finish.templateArgs = {KernelTemplateArg::elementType(out)};
  finish.grid = KernelGrid::threadPerElement(y);
  finish.args = {KernelArg::scratch(scratch), KernelArg::write(y),
                 KernelArg::i64(n * channels), KernelArg::i32(splits),
                 KernelArg::f32(divisor)};
  calls.push_back(finish);
}

// NCHW: rowMean, a thread per result over the contiguous H x W. NHWC:
// describeSpatialSum's blocks over (image, channel chunk, pixel split);
// spatialMeanNHWC's thread per (n, c) striding over the channels only where
// there is one pixel (the mean is a copy: nothing to add) or N x C or the
// pixels exceed kSpatialSumMaxCount (spatialSumTiles counts in int).
void GlobalAvgPoolOp::describeKernelCalls(LaunchAttr launch,
                                          SmallVectorImpl<KernelCall> &calls) {
  auto t = getInput().getType();
  int64_t n = t.getDimSize(0);
  int64_t pixels = isNHWC() ? t.getDimSize(1) * t.getDimSize(2)
                            : t.getDimSize(2) * t.getDimSize(3);
  int64_t channels = t.getDimSize(isNHWC() ? 3 : 1);
  if (isNHWC() && pixels > 1 &&
      n * channels <= kSpatialSumMaxCount && pixels <= kSpatialSumMaxCount) {
    describeSpatialSum(getInput(), getResult(), n, pixels, channels,
                       (double)pixels, launch, calls);
    return;
  }
  KernelCall call;
  call.templateArgs = {KernelTemplateArg::elementType(t.getElementType())};
  call.grid = KernelGrid::threadPerElement(getResult());
  call.args = {KernelArg::read(getInput()), KernelArg::write(getResult())};
  if (isNHWC()) {
    call.kernel = "spatialMeanNHWC";
    call.args.append({KernelArg::i64(n), KernelArg::i64(pixels),
                      KernelArg::i64(channels)});
  } else {
    call.kernel = "rowMean";
    call.args.append({KernelArg::i64(n * channels), KernelArg::i64(pixels)});
  }
  calls.push_back(call);
}
