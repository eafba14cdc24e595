//===- CNNFusedOps.cpp - verifiers of the ops made by cnn-fuse -----------===//
#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace cnnc::cnn;

static LogicalResult checkLayout(Operation *op, StringRef layout) {
  if (layout != "NCHW" && layout != "NHWC")
    return op->emitOpError("'layout' must be NCHW or NHWC, got '")
           << layout << "'";
  return success();
}

static LogicalResult checkChannels(Operation *op, StringRef name, Value v,
                                   int64_t channels) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getRank() != 1 || t.getDimSize(0) != channels)
    return op->emitOpError("'") << name << "' " << t << " must be 1-D of size "
                                << channels << " (the channel count)";
  return success();
}

LogicalResult FusedConv2DOp::verify() {
  if (failed(checkLayout(*this, getLayout())))
    return failure();
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

LogicalResult BatchNormStatsOp::verify() {
  if (failed(checkLayout(*this, getLayout())))
    return failure();
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
  if (failed(checkLayout(*this, getLayout())))
    return failure();
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

LogicalResult FusedElementwiseOp::verify() {
  if (failed(checkLayout(*this, getLayout())))
    return failure();
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
    if (bc[k] < 0 || bc[k] > 2)
      return emitOpError("'broadcast' entries must be 0, 1 or 2");
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
