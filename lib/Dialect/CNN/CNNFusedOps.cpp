//===- CNNFusedOps.cpp - verifiers of the ops made by cnn-fuse -----------===//
#include "Ops/OpHelpers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace cnnc::cnn;

static LogicalResult checkChannels(Operation *op, StringRef name, Value v,
                                   int64_t channels) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getRank() != 1 || t.getDimSize(0) != channels)
    return op->emitOpError("'") << name << "' " << t << " must be 1-D of size "
                                << channels << " (the channel count)";
  return success();
}

LogicalResult FusedConv2DOp::verify() {
  auto t = inferConv2DType(getLoc(), getInput().getType(),
                           getFilter().getType(), getStrides(), getPadding(),
                           getDilations(), getGroups(), getLayout());
  if (failed(t))
    return failure();
  if (*t != getType())
    return emitOpError("result ")
           << getType() << " differs from the convolution's " << *t;
  if (getBias() &&
      failed(checkChannels(*this, "bias", getBias(),
                           t->getDimSize(channelDim(*t, getLayout())))))
    return failure();
  if (getResidual() && getResidual().getType() != getType())
    return emitOpError("'residual' ")
           << getResidual().getType() << " must have the result type "
           << getType();
  StringRef act = getActivation();
  if (act != "none" && act != "relu" && act != "clip")
    return emitOpError("'activation' must be none, relu or clip, got '")
           << act << "'";
  if (getClipMin().convertToFloat() > getClipMax().convertToFloat())
    return emitOpError("'clip_min' must not exceed 'clip_max'");
  return success();
}

static LogicalResult checkF32Channels(Operation *op, StringRef name, Value v,
                                     int64_t channels) {
  if (failed(checkChannels(op, name, v, channels)))
    return failure();
  if (!cast<RankedTensorType>(v.getType()).getElementType().isF32())
    return op->emitOpError("'") << name << "' " << v.getType()
                                << " must be f32";
  return success();
}

/// A prologue's `scale` and `shift`: 1-D f32 of `input`'s channel count.
static LogicalResult checkPrologue(Operation *op, Value scale, Value shift,
                                   RankedTensorType input, Layout layout) {
  int64_t c = input.getDimSize(channelDim(input, layout));
  if (failed(checkF32Channels(op, "scale", scale, c)) ||
      failed(checkF32Channels(op, "shift", shift, c)))
    return failure();
  return success();
}

LogicalResult FusedConv2DStatsOp::verify() {
  auto t = inferConv2DType(getLoc(), getInput().getType(),
                           getFilter().getType(), getStrides(), getPadding(),
                           getDilations(), getGroups(), getLayout());
  if (failed(t))
    return failure();
  if (*t != getResult().getType())
    return emitOpError("result ")
           << getResult().getType() << " differs from the convolution's "
           << *t;
  int64_t k = t->getDimSize(channelDim(*t, getLayout()));
  if (failed(checkF32Channels(*this, "sum", getSum(), k)) ||
      failed(checkF32Channels(*this, "sum_sq", getSumSq(), k)))
    return failure();
  if (!getScale() != !getShift())
    return emitOpError("'scale' and 'shift' (the prologue) come together");
  if (getScale())
    return checkPrologue(*this, getScale(), getShift(), getInput().getType(),
                         getLayout());
  return success();
}

LogicalResult FusedConv2DBwdDataOp::verify() {
  if (failed(verifyConvGradOutput(
          *this, getResult().getType(), getFilter().getType(),
          getGradOutput().getType(), getStrides(), getPadding(), getDilations(),
          getGroups(), getLayout(), "result")))
    return failure();
  for (auto [name, v] : {std::pair<StringRef, Value>{"addend", getAddend()},
                         {"relu_output", getReluOutput()}})
    if (v.getType() != getResult().getType())
      return emitOpError("'")
             << name << "' " << v.getType() << " must have the result type "
             << getResult().getType();
  return success();
}

LogicalResult FusedConv2DBwdFilterOp::verify() {
  if (failed(verifyConvGradOutput(
          *this, getInput().getType(), getResult().getType(),
          getGradOutput().getType(), getStrides(), getPadding(), getDilations(),
          getGroups(), getLayout(), "'input'")))
    return failure();
  return checkPrologue(*this, getScale(), getShift(), getInput().getType(),
                       getLayout());
}

LogicalResult BatchNormFinalizeOp::verify() {
  if (getCount() < 1)
    return emitOpError("'count' must be at least 1, got ") << getCount();
  auto s = cast<RankedTensorType>(getSum().getType());
  if (s.getRank() != 1)
    return emitOpError("'sum' ") << s << " must be 1-D";
  int64_t c = s.getDimSize(0);
  for (auto [name, v] : {std::pair<StringRef, Value>{"sum", getSum()},
                         {"sum_sq", getSumSq()},
                         {"saved_mean", getSavedMean()},
                         {"saved_invstd", getSavedInvstd()},
                         {"alpha", getAlpha()},
                         {"beta", getBeta()}})
    if (failed(checkF32Channels(*this, name, v, c)))
      return failure();
  for (auto [name, v] : {std::pair<StringRef, Value>{"scale", getScale()},
                         {"bias", getBias()},
                         {"running_mean", getRunningMean()},
                         {"running_var", getRunningVar()},
                         {"new_running_mean", getNewRunningMean()},
                         {"new_running_var", getNewRunningVar()}})
    if (failed(checkChannels(*this, name, v, c)))
      return failure();
  return success();
}

LogicalResult BatchNormStatsOp::verify() {
  auto in = getInput().getType();
  if (in.getRank() != 2 && in.getRank() != 4)
    return emitOpError("'input' must be 2-D or 4-D, got ") << in;
  int64_t c = in.getDimSize(channelDim(in, getLayout()));
  for (auto [name, v] : {std::pair<StringRef, Value>{"scale", getScale()},
                         {"bias", getBias()},
                         {"running_mean", getRunningMean()},
                         {"running_var", getRunningVar()}})
    if (failed(checkChannels(*this, name, v, c)))
      return failure();
  for (Value r : getResults())
    if (failed(checkChannels(*this, "result", r, c)))
      return failure();
  return success();
}

LogicalResult FusedBatchNormReluGradOp::verify() {
  auto in = getInput().getType();
  if (getGradOutput().getType() != in || getReluOutput().getType() != in)
    return emitOpError("'grad_output' ")
           << getGradOutput().getType() << " and 'relu_output' "
           << getReluOutput().getType() << " must have the type of 'input' "
           << in;
  int64_t c = in.getDimSize(channelDim(in, getLayout()));
  for (auto [name, v] : {std::pair<StringRef, Value>{"scale", getScale()},
                         {"saved_mean", getSavedMean()},
                         {"saved_invstd", getSavedInvstd()}})
    if (failed(checkChannels(*this, name, v, c)))
      return failure();
  if (getGradInput().getType() != in)
    return emitOpError("'grad_input' must have the type of 'input'");
  return success();
}

LogicalResult FusedBatchNormAffineReluGradOp::verify() {
  auto in = getInput().getType();
  if (getGradOutput().getType() != in)
    return emitOpError("'grad_output' ")
           << getGradOutput().getType() << " must have the type of 'input' "
           << in;
  int64_t c = in.getDimSize(channelDim(in, getLayout()));
  for (auto [name, v] : {std::pair<StringRef, Value>{"scale", getScale()},
                         {"saved_mean", getSavedMean()},
                         {"saved_invstd", getSavedInvstd()},
                         {"alpha", getAlpha()},
                         {"beta", getBeta()}})
    if (failed(checkChannels(*this, name, v, c)))
      return failure();
  if (getGradInput().getType() != in)
    return emitOpError("'grad_input' must have the type of 'input'");
  return success();
}

LogicalResult FusedDualBatchNormGradOp::verify() {
  auto dy = getGradOutput().getType();
  for (auto [name, v] : {std::pair<StringRef, Value>{"input_a", getInputA()},
                         {"input_b", getInputB()},
                         {"grad_input_a", getGradInputA()},
                         {"grad_input_b", getGradInputB()}})
    if (v.getType() != dy)
      return emitOpError("'") << name << "' " << v.getType()
                              << " must have the type of 'grad_output' " << dy;
  int64_t c = dy.getDimSize(channelDim(dy, getLayout()));
  for (auto [name, v] : {std::pair<StringRef, Value>{"scale_a", getScaleA()},
                         {"saved_mean_a", getSavedMeanA()},
                         {"saved_invstd_a", getSavedInvstdA()},
                         {"scale_b", getScaleB()},
                         {"saved_mean_b", getSavedMeanB()},
                         {"saved_invstd_b", getSavedInvstdB()},
                         {"grad_scale_a", getGradScaleA()},
                         {"grad_bias_a", getGradBiasA()},
                         {"grad_scale_b", getGradScaleB()},
                         {"grad_bias_b", getGradBiasB()}})
    if (failed(checkChannels(*this, name, v, c)))
      return failure();
  return success();
}

LogicalResult FusedElementwiseOp::verify() {
  if (getResults().empty())
    return emitOpError("needs at least one result");
  auto shape = cast<RankedTensorType>(getResult(0).getType());
  for (Value r : getResults())
    if (cast<RankedTensorType>(r.getType()).getShape() != shape.getShape())
      return emitOpError("all results must have the shape of result #0 ")
             << shape;
  auto bc = getBroadcast();
  if (bc.size() != getInputs().size())
    return emitOpError("'broadcast' has ")
           << bc.size() << " entries for " << getInputs().size() << " inputs";
  int64_t channels = shape.getRank() >= 2
                         ? shape.getDimSize(channelDim(shape, getLayout()))
                         : 1;
  for (auto [k, in] : llvm::enumerate(getInputs())) {
    auto t = cast<RankedTensorType>(in.getType());
    if (bc[k] == 0 && t.getNumElements() != shape.getNumElements())
      return emitOpError("input #")
             << k << " " << t << " must have as many elements as " << shape;
    if (bc[k] == 1 && (t.getRank() != 1 || t.getDimSize(0) != channels))
      return emitOpError("per-channel input #")
             << k << " " << t << " must be 1-D of size " << channels;
    if (bc[k] == 2 && t.getNumElements() != 1)
      return emitOpError("scalar input #")
             << k << " " << t << " must have one element";
    if (bc[k] == 3) {
      bool ok = t.getRank() == shape.getRank();
      for (int64_t d = 0; ok && d < t.getRank(); ++d)
        ok = t.getDimSize(d) == 1 || t.getDimSize(d) == shape.getDimSize(d);
      if (!ok)
        return emitOpError("broadcast input #")
               << k << " " << t << " must have the rank of " << shape
               << " and each dimension equal or 1";
    }
    if (bc[k] < 0 || bc[k] > 3)
      return emitOpError("'broadcast' entries must be 0, 1, 2 or 3");
  }
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size() ||
      !llvm::all_of(body.getArgumentTypes(), [](Type t) { return t.isF32(); }))
    return emitOpError("the body must take one f32 argument per input");
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != getNumResults())
    return emitOpError("the body yields ")
           << yield.getValues().size() << " values for " << getNumResults()
           << " results";
  return success();
}

FusedElementwiseOp cnnc::cnn::makeFusedElementwise(
    OpBuilder &b, Location loc, TypeRange results, ValueRange inputs,
    ArrayRef<int64_t> broadcast, Layout layout,
    function_ref<SmallVector<Value>(ScalarBuilder &, ValueRange)> body) {
  auto op = FusedElementwiseOp::create(
      b, loc, results, inputs,
      {b.getNamedAttr("broadcast", b.getDenseI64ArrayAttr(broadcast)),
       b.getNamedAttr("layout", LayoutAttr::get(b.getContext(), layout))});
  Block *block = new Block();
  op.getBody().push_back(block);
  for (size_t i = 0; i < inputs.size(); ++i)
    block->addArgument(b.getF32Type(), loc);
  OpBuilder ib = OpBuilder::atBlockEnd(block);
  ScalarBuilder s(ib, loc);
  SmallVector<Value> ys = body(s, block->getArguments());
  YieldOp::create(ib, loc, ys);
  return op;
}

int64_t cnnc::cnn::broadcastKind(Type input, Type result) {
  return cast<RankedTensorType>(input).getShape() ==
                 cast<RankedTensorType>(result).getShape()
             ? 0
             : 3;
}

FusedElementwiseOp cnnc::cnn::wrapElementwise(OpBuilder &b,
                                              ElementwiseOpInterface op) {
  Operation *o = op.getOperation();
  Type result = o->getResult(0).getType();
  SmallVector<int64_t> bc;
  for (Value v : o->getOperands())
    bc.push_back(broadcastKind(v.getType(), result));
  bool half = cast<RankedTensorType>(result).getElementType().isF16();
  FusedElementwiseOp fused = makeFusedElementwise(
      b, o->getLoc(), o->getResultTypes(), o->getOperands(), bc, Layout::NCHW,
      [&](ScalarBuilder &s, ValueRange x) {
        Value r = op.buildScalar(s, x);
        // A stored f16 result is rounded: keep that inside a fused body.
        return SmallVector<Value>{half ? s.roundToHalf(r) : r};
      });
  // Annotations of later passes (the memory plan's in-place choice) stay.
  for (NamedAttribute a : o->getDiscardableAttrs())
    fused->setAttr(a.getName(), a.getValue());
  return fused;
}

int64_t cnnc::cnn::lowerElementwise(Operation *root) {
  SmallVector<ElementwiseOpInterface> ops;
  root->walk([&](ElementwiseOpInterface op) { ops.push_back(op); });
  for (ElementwiseOpInterface op : ops) {
    OpBuilder b(op);
    FusedElementwiseOp fused = wrapElementwise(b, op);
    op->replaceAllUsesWith(fused->getResults());
    op->erase();
  }
  return ops.size();
}

// CUDA lowering (KernelCallOpInterface): kernels/Reductions.cuh's bnFinalize,
// one thread per channel (no grid-stride loop: as many blocks as the
// channels need).
void BatchNormFinalizeOp::describeKernelCalls(
    LaunchAttr launch, SmallVectorImpl<KernelCall> &calls) {
  int64_t C = cast<RankedTensorType>(getSum().getType()).getDimSize(0);
  int64_t block = launch.getBlock();
  KernelCall call;
  call.kernel = "bnFinalize";
  call.templateArgs = {KernelTemplateArg::elementType(
      cast<RankedTensorType>(getRunningMean().getType()).getElementType())};
  call.grid = KernelGrid::blockPerUnit((C + block - 1) / block);
  call.args = {KernelArg::read(getSum()),
               KernelArg::read(getSumSq()),
               KernelArg::write(getSavedMean()),
               KernelArg::write(getSavedInvstd()),
               KernelArg::write(getNewRunningMean()),
               KernelArg::write(getNewRunningVar()),
               KernelArg::read(getRunningMean()),
               KernelArg::read(getRunningVar()),
               KernelArg::read(getScale()),
               KernelArg::read(getBias()),
               KernelArg::write(getAlpha()),
               KernelArg::write(getBeta()),
               KernelArg::i64(getCount()),
               KernelArg::i32(C),
               KernelArg::f32(getEpsilon().convertToFloat()),
               KernelArg::hyperParameter(getMomentum().convertToFloat())};
  calls.push_back(call);
}

//===----------------------------------------------------------------------===//
// fused_max_pool2d, max_pool2d_index_grad
//===----------------------------------------------------------------------===//

/// `window_index` holds one byte per pooled element: the kernel covers at
/// most 255 positions (0..254; the kernels write 255 for a window without
/// any element, which the attribute checks of max_pool2d rule out).
static LogicalResult checkWindowIndex(Operation *op, Value index,
                                      RankedTensorType pooled,
                                      ArrayRef<int64_t> kernel) {
  auto t = cast<RankedTensorType>(index.getType());
  if (t.getShape() != pooled.getShape())
    return op->emitOpError("'window_index' ")
           << t << " must have the shape of the pooled output " << pooled;
  if (kernel[0] * kernel[1] > 255)
    return op->emitOpError("the ")
           << kernel[0] << "x" << kernel[1]
           << " kernel has more than 255 positions: 'window_index' is one "
              "byte per window";
  return success();
}

LogicalResult FusedMaxPool2DOp::verify() {
  auto t =
      inferPool2DType(getLoc(), getInput().getType(), getKernel(), getStrides(),
                      getPadding(), getCeilMode(), getLayout());
  if (failed(t))
    return failure();
  if (*t != getResult().getType())
    return emitOpError("result ")
           << getResult().getType() << " differs from max_pool2d's " << *t;
  if (failed(checkWindowIndex(*this, getWindowIndex(), *t, getKernel())))
    return failure();
  if (!getScale() != !getShift())
    return emitOpError("'scale' and 'shift' come together (the prologue)");
  if (getScale())
    return checkPrologue(*this, getScale(), getShift(), getInput().getType(),
                         getLayout());
  return success();
}

LogicalResult MaxPool2DIndexGradOp::verify() {
  auto t = verifyPoolGradOutput(*this, getType(), getGradOutput().getType(),
                                getKernel(), getStrides(), getPadding(),
                                getCeilMode(), getLayout());
  if (failed(t))
    return failure();
  return checkWindowIndex(*this, getWindowIndex(), *t, getKernel());
}

// CUDA lowering (KernelCallOpInterface): kernels/Pooling.cuh and
// kernels/PoolingNHWC.cuh, one thread per pooled element (per 8 channels in
// cnn-select-lowering's "vec8" form), the argmax in one byte per window.
void FusedMaxPool2DOp::describeKernelCalls(LaunchAttr,
                                           SmallVectorImpl<KernelCall> &calls) {
  auto y = getResult().getType();
  bool prologue = static_cast<bool>(getScale());
  KernelCall call;
  call.templateArgs = {KernelTemplateArg::elementType(y.getElementType())};
  call.args = {KernelArg::read(getInput()),
               prologue ? KernelArg::read(getScale()) : KernelArg::null(),
               prologue ? KernelArg::read(getShift()) : KernelArg::null(),
               KernelArg::write(getResult()),
               KernelArg::write(getWindowIndex()),
               detail::poolParams(getInput().getType(), y, getKernel(),
                                  getStrides(), getPadding(), false,
                                  isNHWC())};
  if (detail::isVec8(*this)) {
    call.kernel = "maxPoolIndexNHWC8";
    call.grid = KernelGrid::threadPerElement(getResult(), 8);
  } else {
    call.kernel = "maxPoolIndex";
    call.templateArgs.push_back(KernelTemplateArg::boolean(isNHWC()));
    call.grid = KernelGrid::threadPerElement(getResult());
  }
  call.templateArgs.push_back(KernelTemplateArg::boolean(prologue));
  calls.push_back(call);
}

void MaxPool2DIndexGradOp::describeKernelCalls(
    LaunchAttr, SmallVectorImpl<KernelCall> &calls) {
  auto dx = getType();
  KernelCall call;
  call.templateArgs = {KernelTemplateArg::elementType(dx.getElementType())};
  call.args = {KernelArg::read(getGradOutput()),
               KernelArg::read(getWindowIndex()), KernelArg::write(getResult()),
               detail::poolParams(dx, getGradOutput().getType(), getKernel(),
                                  getStrides(), getPadding(), false,
                                  isNHWC())};
  if (detail::isVec8(*this)) {
    call.kernel = "maxPoolBwdGatherNHWC8";
    call.grid = KernelGrid::threadPerElement(getResult(), 8);
  } else {
    call.kernel = "maxPoolBwdGather";
    call.templateArgs.push_back(KernelTemplateArg::boolean(isNHWC()));
    call.grid = KernelGrid::threadPerElement(getResult());
  }
  calls.push_back(call);
}

LogicalResult FusedMaxPool2DBatchNormReluGradOp::verify() {
  auto in = getInput().getType();
  auto t = verifyPoolGradOutput(*this, in, getGradOutput().getType(),
                                getKernel(), getStrides(), getPadding(),
                                getCeilMode(), getLayout());
  if (failed(t) ||
      failed(checkWindowIndex(*this, getWindowIndex(), *t, getKernel())))
    return failure();
  int64_t c = in.getDimSize(channelDim(in, getLayout()));
  for (auto [name, v] : {std::pair<StringRef, Value>{"scale", getScale()},
                         {"saved_mean", getSavedMean()},
                         {"saved_invstd", getSavedInvstd()},
                         {"alpha", getAlpha()},
                         {"beta", getBeta()},
                         {"grad_scale", getGradScale()},
                         {"grad_bias", getGradBias()}})
    if (failed(checkChannels(*this, name, v, c)))
      return failure();
  if (getGradInput().getType() != in)
    return emitOpError("'grad_input' ")
           << getGradInput().getType() << " must have the type of 'input' "
           << in;
  return success();
}

//===----------------------------------------------------------------------===//
// fused_elementwise forms other passes ask about
//===----------------------------------------------------------------------===//

bool FusedElementwiseOp::isScaleShiftRelu() {
  FusedElementwiseOp e = *this;
  if (e->getNumResults() != 1 || e.getInputs().size() != 3 ||
      e.getBroadcast() != ArrayRef<int64_t>{0, 1, 1})
    return false;
  for (Value v : {e.getInputs()[1], e.getInputs()[2]})
    if (!cast<RankedTensorType>(v.getType()).getElementType().isF32())
      return false;
  Block &body = e.getBody().front();
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    if (!isa<arith::ConstantOp>(op))
      ops.push_back(&op);
  auto isZero = [](Value v) {
    auto c = v.getDefiningOp<arith::ConstantOp>();
    auto f = c ? dyn_cast<FloatAttr>(c.getValue()) : nullptr;
    return f && f.getValue().isZero();
  };
  if (ops.size() != 3 && ops.size() != 5)
    return false;
  auto mul = dyn_cast<arith::MulFOp>(ops[0]);
  auto add = dyn_cast<arith::AddFOp>(ops[1]);
  auto max = dyn_cast<arith::MaximumFOp>(ops[2]);
  if (!mul || !add || !max || mul.getLhs() != body.getArgument(0) ||
      mul.getRhs() != body.getArgument(1) || add.getLhs() != mul ||
      add.getRhs() != body.getArgument(2) ||
      !((max.getLhs() == add && isZero(max.getRhs())) ||
        (max.getRhs() == add && isZero(max.getLhs()))))
    return false;
  Value last = max;
  if (ops.size() == 5) {
    auto trunc = dyn_cast<arith::TruncFOp>(ops[3]);
    auto ext = dyn_cast<arith::ExtFOp>(ops[4]);
    Type et = cast<RankedTensorType>(e.getResult(0).getType()).getElementType();
    if (!trunc || !ext || trunc.getIn() != max || ext.getIn() != trunc ||
        trunc.getType() != et)
      return false;
    last = ext;
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  return yield.getValues().size() == 1 && yield.getValues()[0] == last;
}

/// The rank and channel count of a batch_norm_sums / batch_norm_grad_sums
/// input (2-D, 3-D or 4-D, as batch_norm_train takes it).
static FailureOr<int64_t> sumsChannels(Operation *op, RankedTensorType in,
                                       Layout layout) {
  if (in.getRank() < 2 || in.getRank() > 4)
    return op->emitOpError("'input' must be 2-D, 3-D or 4-D, got ") << in;
  return in.getDimSize(channelDim(in, layout));
}

LogicalResult BatchNormSumsOp::verify() {
  FailureOr<int64_t> c = sumsChannels(*this, getInput().getType(), getLayout());
  if (failed(c) || failed(checkF32Channels(*this, "sum", getSum(), *c)) ||
      failed(checkF32Channels(*this, "sum_sq", getSumSq(), *c)))
    return failure();
  return success();
}

/// The rule of both gradient-sums ops: `grad_output` has the type of
/// `input`; `vectors` (statistics, sums, alpha/beta) are f32 of the channel
/// count.
static LogicalResult
verifyGradSums(Operation *op, Value dy, Value x, Layout layout,
               ArrayRef<std::pair<StringRef, Value>> vectors) {
  auto in = cast<RankedTensorType>(x.getType());
  if (dy.getType() != in)
    return op->emitOpError("'grad_output' ")
           << dy.getType() << " must have the type of 'input' " << in;
  FailureOr<int64_t> c = sumsChannels(op, in, layout);
  if (failed(c))
    return failure();
  for (auto [name, v] : vectors)
    if (failed(checkF32Channels(op, name, v, *c)))
      return failure();
  return success();
}

LogicalResult BatchNormGradSumsOp::verify() {
  return verifyGradSums(*this, getGradOutput(), getInput(), getLayout(),
                        {{"saved_mean", getSavedMean()},
                         {"saved_invstd", getSavedInvstd()},
                         {"sum_dy", getSumDy()},
                         {"sum_dy_xhat", getSumDyXhat()}});
}

LogicalResult FusedBatchNormAffineReluGradSumsOp::verify() {
  return verifyGradSums(*this, getGradOutput(), getInput(), getLayout(),
                        {{"saved_mean", getSavedMean()},
                         {"saved_invstd", getSavedInvstd()},
                         {"alpha", getAlpha()},
                         {"beta", getBeta()},
                         {"sum_dy", getSumDy()},
                         {"sum_dy_xhat", getSumDyXhat()}});
}
