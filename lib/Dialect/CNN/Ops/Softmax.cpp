//===- Softmax.cpp - cnn ops: softmax and the loss ------------------------===//
//
// What the dialect knows about softmax, softmax_cross_entropy and
// softmax_cross_entropy_grad: verifiers and shape inference, gradient rules
// (GradientOpInterface; cnn-autodiff asks each op), and the three ops' CUDA
// lowering as data (KernelCallOpInterface; the CUDA printer asks each op).
// Also the imported losses' nll_loss and nll_loss_grad (ONNX
// NegativeLogLikelihoodLoss, and SoftmaxCrossEntropyLoss after a
// log-softmax): shape inference, verifier and gradient rule.
//
//===----------------------------------------------------------------------===//
#include "OpHelpers.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;
using namespace cnnc::cnn::detail;

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

/// What nll_loss and nll_loss_grad check alike: `labels` has the shape of
/// `input` without dimension 1 (the classes), `weight` one value per class.
static LogicalResult checkNLLOperands(std::optional<Location> loc,
                                      RankedTensorType input,
                                      RankedTensorType labels, Value weight) {
  if (input.getRank() < 2)
    return fail(loc, "'input' must be N x C x d1 x ... (rank >= 2), got " +
                         str(input));
  SmallVector<int64_t> perPosition(input.getShape());
  perPosition.erase(perPosition.begin() + 1);
  if (labels.getShape() != ArrayRef<int64_t>(perPosition))
    return fail(loc, "'labels' " + str(labels) + " must have the shape " +
                         str(perPosition) + " of 'input' " + str(input) +
                         " without dimension 1");
  if (weight) {
    auto w = ranked(weight);
    if (w.getRank() != 1 || w.getDimSize(0) != input.getDimSize(1))
      return fail(loc, "'weight' " + str(w) + " must be 1-D with one value "
                           "per class (" +
                           Twine(input.getDimSize(1)) + ")");
  }
  return success();
}

/// The type of an nll_loss result (and of nll_loss_grad's `grad_loss`):
/// per position for reduction none, else 0-D.
static RankedTensorType nllLossType(RankedTensorType labels, Type element,
                                    LossReduction reduction) {
  if (reduction == LossReduction::None)
    return RankedTensorType::get(labels.getShape(), element);
  return RankedTensorType::get({}, element);
}

/// Result type inference sees the attributes a builder gave, before the
/// defaults are filled in: an unset reduction is the mean.
template <typename AdaptorT> static LossReduction reductionOf(AdaptorT &a) {
  LossReductionAttr attr = a.getReductionAttr();
  return attr ? attr.getValue() : LossReduction::Mean;
}

LogicalResult NLLLossOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor a,
                                          SmallVectorImpl<Type> &out) {
  auto input = ranked(a.getInput()), labels = ranked(a.getLabels());
  if (failed(checkNLLOperands(loc, input, labels, a.getWeight())))
    return failure();
  out.push_back(nllLossType(labels, input.getElementType(), reductionOf(a)));
  return success();
}

LogicalResult NLLLossGradOp::verify() {
  auto input = getType();
  auto labels = ranked(getLabels());
  if (failed(checkNLLOperands(getLoc(), input, labels, getWeight())))
    return failure();
  auto gradLoss = ranked(getGradLoss());
  auto expected =
      nllLossType(labels, gradLoss.getElementType(), getReduction());
  if (gradLoss != expected)
    return emitOpError("'grad_loss' ")
           << gradLoss << " must be " << expected << " for reduction '"
           << stringifyLossReduction(getReduction()) << "'";
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

// y = softmax(x) along `axis`: dx = y * (dy - sum(dy * y, axis)), written with
// ops the GPU target already runs (a product, a sum over one axis, a fused
// elementwise).
LogicalResult SoftmaxOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0), y = getResult();
  auto type = cast<RankedTensorType>(y.getType());
  int64_t axis = static_cast<int64_t>(getAxis());
  Value dot = ReduceSumOp::create(b, loc, MulOp::create(b, loc, dy, y),
                                  b.getDenseI64ArrayAttr({axis}));
  auto full = withElementOf(type, dy);
  Value dx = makeFusedElementwise(
                 b, loc, TypeRange{full}, ValueRange{y, dy, dot},
                 {0, 0, broadcastKind(dot.getType(), full)}, Layout::NCHW,
                 [&](ScalarBuilder &s, ValueRange a) {
                   return SmallVector<Value>{s.mul(a[0], s.sub(a[1], a[2]))};
                 })
                 .getResult(0);
  g.accumulate(getInput(), dx);
  return success();
}

// The loss reads input[n, y, d] only: its gradient is nll_loss_grad, the
// upstream gradient scattered to those positions. Class weights are
// constants (ONNX initializers, PyTorch's `weight=`): a weight that a
// parameter feeds has no rule.
LogicalResult NLLLossOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  if (getWeight() && g.wants(getWeight()))
    return emitOpError("has no gradient rule for its 'weight' operand (class "
                       "weights are constants)");
  Value dy = g.resultGrad(0);
  if (!dy || !g.wants(getInput()))
    return success();
  Value dx = NLLLossGradOp::create(
      b, getLoc(), withElementOf(getInput().getType(), dy), dy, getLabels(),
      getWeight(), getReductionAttr(), getIgnoreIndexAttr());
  g.accumulate(getInput(), dx);
  return success();
}

//===----------------------------------------------------------------------===//
// CUDA lowering (KernelCallOpInterface): kernels/Softmax.cuh
//===----------------------------------------------------------------------===//

// The tensor as outer x n x inner around the axis: a row per block
// (cnn-prepare-for-emission's "block_per_result", for a contiguous axis) or
// one thread per (outer, inner) pair. The kernels count the axis in int.
void SoftmaxOp::describeKernelCalls(LaunchAttr launch,
                                    SmallVectorImpl<KernelCall> &calls) {
  auto t = getType();
  int64_t axis = getAxis(), outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= t.getDimSize(d);
  for (int64_t d = axis + 1; d < t.getRank(); ++d)
    inner *= t.getDimSize(d);
  int64_t n = t.getDimSize(axis);
  KernelCall call;
  call.templateArgs = {KernelTemplateArg::elementType(t.getElementType())};
  call.args = {KernelArg::read(getInput()), KernelArg::write(getResult())};
  if (launch.getReduction() &&
      launch.getReduction().getValue() == "block_per_result") {
    call.kernel = "softmaxRows";
    call.grid = KernelGrid::blockPerUnit(outer);
    call.args.push_back(KernelArg::i32(n));
  } else {
    call.kernel = "softmaxStrided";
    call.grid = KernelGrid::threadPerUnit(outer * inner);
    call.args.append(
        {KernelArg::i64(outer), KernelArg::i32(n), KernelArg::i64(inner)});
  }
  calls.push_back(call);
}

//===----------------------------------------------------------------------===//
// CUDA lowering (KernelCallOpInterface): kernels/Loss.cuh
//===----------------------------------------------------------------------===//

/// The rows a block of the loss kernels takes: one warp each.
static int64_t xentWarpsPerBlock(LaunchAttr launch) {
  return std::max<int64_t>(launch.getBlock() / 32, 1);
}

// The loss in two passes on the runtime's reduction scratch: one warp per
// row in at most partial_blocks blocks (the prelude's scratch holds
// kXentMaxBlocks), each block's sum and count of its non-ignored rows into
// 2 x blocks doubles; then one block adds them in block order and divides.
void SoftmaxCrossEntropyOp::describeKernelCalls(
    LaunchAttr launch, SmallVectorImpl<KernelCall> &calls) {
  auto t = getLogits().getType();
  int64_t rows = t.getDimSize(0);
  int64_t warps = xentWarpsPerBlock(launch);
  int64_t blocks = std::max<int64_t>(
      1, std::min<int64_t>((rows + warps - 1) / warps,
                           launch.getPartialBlocks()));
  KernelCall partial;
  partial.kernel = "softmaxXentLossPartial";
  partial.templateArgs = {
      KernelTemplateArg::elementType(t.getElementType()),
      KernelTemplateArg::elementType(getLabels().getType().getElementType())};
  partial.grid = KernelGrid::blockPerUnit(blocks);
  partial.args = {KernelArg::scratch(2 * blocks),
                  KernelArg::read(getLogits()),
                  KernelArg::read(getLabels()),
                  KernelArg::i64(rows),
                  KernelArg::i32(t.getDimSize(1)),
                  KernelArg::f32(getLabelSmoothing().convertToFloat()),
                  KernelArg::i64(getIgnoreIndex())};
  calls.push_back(partial);
  KernelCall finish;
  finish.kernel = "softmaxXentLossFinish";
  finish.grid = KernelGrid::blockPerUnit(1);
  finish.args = {KernelArg::scratch(2 * blocks), KernelArg::write(getLoss()),
                 KernelArg::i32(blocks)};
  calls.push_back(finish);
}

// The count of non-ignored rows first (the mean's divisor, one reduce_block
// block into the scratch's first double), then one warp per row.
void SoftmaxCrossEntropyGradOp::describeKernelCalls(
    LaunchAttr launch, SmallVectorImpl<KernelCall> &calls) {
  auto t = getLogits().getType();
  int64_t rows = t.getDimSize(0);
  int64_t warps = xentWarpsPerBlock(launch);
  Type labelType = getLabels().getType().getElementType();
  KernelCall count;
  count.kernel = "xentCountValid";
  count.templateArgs = {KernelTemplateArg::elementType(labelType)};
  count.grid = KernelGrid::blockPerUnit(1);
  count.block = KernelBlock::ReduceBlock;
  count.args = {KernelArg::scratch(1), KernelArg::read(getLabels()),
                KernelArg::i64(rows), KernelArg::i64(getIgnoreIndex())};
  calls.push_back(count);
  KernelCall grad;
  grad.kernel = "softmaxXentGrad";
  grad.templateArgs = {KernelTemplateArg::elementType(t.getElementType()),
                       KernelTemplateArg::elementType(labelType)};
  grad.grid = KernelGrid::blockPerUnit(std::max<int64_t>(
      1, std::min<int64_t>((rows + warps - 1) / warps, launch.getGridLimit())));
  grad.args = {KernelArg::scratch(1),
               KernelArg::read(getLogits()),
               KernelArg::read(getLabels()),
               KernelArg::read(getGradLoss()),
               KernelArg::write(getResult()),
               KernelArg::i64(rows),
               KernelArg::i32(t.getDimSize(1)),
               KernelArg::f32(getLabelSmoothing().convertToFloat()),
               KernelArg::i64(getIgnoreIndex())};
  calls.push_back(grad);
}
