//===- Layout.cpp - cnn-layout: NHWC for convolutions, pooling and BN -----===//
//
// Tensor Cores want channels innermost, so every layout-sensitive op (an op
// with a `layout` attribute: conv2d and its gradients, bias_add/bias_grad,
// batch_norm*, the pools and their gradients, fused_conv2d) is switched to
// NHWC, with KRSC filters. The pass works in three steps:
//
// 1. Local rewrite. Each NCHW op with 4-D operands becomes its NHWC twin
//    between transposes: every 4-D operand goes through NCHW->NHWC (for a
//    filter the same permutation is FCHW->KRSC), every 4-D result back
//    through NHWC->NCHW. The function is correct after this step.
// 2. Propagation. Transposes are pushed down through layout-agnostic ops
//    (elementwise ops, concat, slice, pad, reductions and softmax over
//    explicit axes, renumbered), and back-to-back inverse transposes
//    fold away (TransposeOp's folder), so in between the edges the whole step
//    stays NHWC. One transpose moves up: NCHW->NHWC behind GroupNorm's
//    channel view, to the reshape of its grouped result (so that the scale
//    joins the shift and activation in cnn-fuse).
// 3. Cleanup. A transpose that only moves unit dimensions (N x 1 x 1 x C ->
//    N x C x 1 x 1, the global-avg-pool -> linear case, or a 1x1 filter) is a
//    reshape; reshape chains and flatten-of-reshape fold; CSE merges the
//    transposes of a filter used by conv2d and conv2d_bwd_data.
//
// What remains are the transposes at the graph's edges: the image argument
// (NCHW in), each filter use (parameters stay FCHW for the weights file and
// the optimizer), each filter gradient (KRSC -> FCHW before the optimizer)
// and a flatten of spatial NHWC data (PyTorch flattens in NCHW order).
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNLAYOUT
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

/// NCHW -> NHWC (and FCHW -> KRSC): result dim i is input dim kToNHWC[i].
constexpr int64_t kToNHWC[] = {0, 2, 3, 1};
/// NHWC -> NCHW (and KRSC -> FCHW).
constexpr int64_t kToNCHW[] = {0, 3, 1, 2};

bool isRank4(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && r.getRank() == 4;
}

RankedTensorType permuted(Type t, ArrayRef<int64_t> perm) {
  auto r = cast<RankedTensorType>(t);
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(r.getDimSize(p));
  return RankedTensorType::get(shape, r.getElementType());
}

bool isTransposeBy(Value v, ArrayRef<int64_t> perm) {
  auto t = v.getDefiningOp<TransposeOp>();
  return t && t.getPermutation() == perm;
}

/// transpose(v, perm), folding transpose(transpose(x, inv), perm) to x.
Value transposeOrFold(OpBuilder &b, Location loc, Value v,
                      ArrayRef<int64_t> perm) {
  ArrayRef<int64_t> inverse = perm == ArrayRef<int64_t>(kToNHWC)
                                  ? ArrayRef<int64_t>(kToNCHW)
                                  : ArrayRef<int64_t>(kToNHWC);
  if (auto t = v.getDefiningOp<TransposeOp>();
      t && t.getPermutation() == inverse)
    return t.getInput();
  return TransposeOp::create(
      b, loc, ValueRange{v},
      {b.getNamedAttr("permutation", b.getDenseI64ArrayAttr(perm))});
}

/// Elementwise ops with operands and results of one shape: any layout works.
/// (Broadcasting operands of the same rank stay broadcastable under one
/// permutation of all of them.)
bool isLayoutAgnostic(Operation *op) {
  return isa<ElementwiseOpInterface>(op) ||
         op->hasTrait<OpTrait::Elementwise>();
}

/// fused_elementwise depends on the layout only through its per-channel
/// inputs (broadcast kind 1); without one it is elementwise with numpy or
/// scalar broadcasting, which any common permutation of its full-rank
/// operands preserves. Converting such an op would transpose tensors that
/// are not activations in NCHW at all: ConvNeXt's LayerNorm works on
/// permuted N x H x W x C tensors, and making its backward "NHWC" put a
/// transpose on every operand (~13 % of its step).
bool isChannelFree(FusedElementwiseOp op) {
  return !llvm::is_contained(op.getBroadcast(), int64_t(1));
}

/// Whether step 1 must convert `op` to NHWC.
bool dependsOnLayout(LayoutSensitiveOpInterface op) {
  auto fused = dyn_cast<FusedElementwiseOp>(op.getOperation());
  return !fused || !isChannelFree(fused);
}

/// Rebuilds `op` (same name and attributes, plus `attrs`) on `operands` with
/// `types`, moving its regions (fused_elementwise's body) over; the caller
/// replaces the old results.
Operation *rebuild(OpBuilder &b, Operation *op, ValueRange operands,
                   TypeRange types, ArrayRef<NamedAttribute> attrs = {}) {
  OperationState st(op->getLoc(), op->getName());
  st.addOperands(operands);
  st.addTypes(types);
  NamedAttrList list(op->getAttrDictionary());
  for (const NamedAttribute &a : attrs)
    list.set(a.getName(), a.getValue());
  st.addAttributes(list);
  for (unsigned i = 0; i < op->getNumRegions(); ++i)
    st.addRegion();
  Operation *created = b.create(st);
  for (unsigned i = 0; i < op->getNumRegions(); ++i)
    created->getRegion(i).takeBody(op->getRegion(i));
  return created;
}

/// `op` rebuilt on NHWC operands and results between transposes (every 4-D
/// operand and result permuted alike); the old op is erased.
Operation *rebuildInNHWC(Operation *op) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  SmallVector<Value> operands;
  for (Value v : op->getOperands())
    operands.push_back(
        isRank4(v.getType()) ? transposeOrFold(b, loc, v, kToNHWC) : v);
  SmallVector<Type> types;
  for (Type t : op->getResultTypes())
    types.push_back(isRank4(t) ? permuted(t, kToNHWC) : t);
  Operation *nhwc = rebuild(b, op, operands, types);
  for (auto [old, res] : llvm::zip(op->getResults(), nhwc->getResults()))
    old.replaceAllUsesWith(isRank4(res.getType())
                               ? transposeOrFold(b, loc, res, kToNCHW)
                               : Value(res));
  op->erase();
  return nhwc;
}

/// Step 1: an NCHW layout-sensitive op becomes NHWC between transposes
/// (LayoutSensitiveOpInterface: every 4-D operand and result permuted alike).
void convertToNHWC(LayoutSensitiveOpInterface sensitive) {
  Operation *nhwc = rebuildInNHWC(sensitive.getOperation());
  cast<LayoutSensitiveOpInterface>(nhwc).setLayout(Layout::NHWC);
}

/// Pipeline transfers (cnn.send, cnn.recv, cnn.transfers) carry their 4-D
/// tensors in NHWC. Each stage is compiled on its own, and both ends of a
/// cut apply this same rule, so the bytes a stage sends are the NHWC bytes
/// its peer reads. Left NCHW, a cut between NHWC convolutions cost four
/// full transposes per micro-batch (the activation and its gradient, each
/// out of NHWC before the send and back in after the receive: 0.18 ms
/// apiece on ResNet-50's 51 MB cut at batch 32, 0.7 of a 4.4 ms stage
/// slot); this way the transposes fold into the NHWC ops on either side.
/// The attribute `cnn.transfer_layout = #cnn.layout<NHWC>` marks a converted
/// transfer (a second run leaves it alone).
constexpr StringLiteral kTransferLayout = "cnn.transfer_layout";

bool isNCHWTransfer(Operation *op) {
  return isa<SendOp, RecvOp, TransfersOp>(op) &&
         !op->hasAttr(kTransferLayout) &&
         (llvm::any_of(op->getOperandTypes(), isRank4) ||
          llvm::any_of(op->getResultTypes(), isRank4));
}

/// op(transpose(x, NHWC->NCHW), ...) -> transpose(op(x, ...), NHWC->NCHW) for
/// elementwise ops: the op runs on the NHWC data and the transpose moves on
/// towards the next NHWC op, where it cancels.
struct PushThroughElementwise : RewritePattern {
  PushThroughElementwise(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rw) const override {
    // A channel-free fused_elementwise's one-element (kind 2) inputs stay as
    // they are; every other operand is permuted.
    auto fused = dyn_cast<FusedElementwiseOp>(op);
    if (fused && !isChannelFree(fused))
      return failure();
    if ((!fused && !isLayoutAgnostic(op)) || op->getNumResults() == 0 ||
        op->getNumOperands() == 0)
      return failure();
    auto permutes = [&](unsigned i) {
      return !fused || fused.getBroadcast()[i] != 2;
    };
    for (OpOperand &o : op->getOpOperands())
      if (permutes(o.getOperandNumber()) && !isRank4(o.get().getType()))
        return failure();
    for (Type t : op->getResultTypes())
      if (!isRank4(t))
        return failure();
    if (!llvm::any_of(op->getOpOperands(), [&](OpOperand &o) {
          return permutes(o.getOperandNumber()) &&
                 isTransposeBy(o.get(), kToNCHW);
        }))
      return failure();
    SmallVector<Value> operands;
    for (OpOperand &o : op->getOpOperands())
      operands.push_back(
          permutes(o.getOperandNumber())
              ? transposeOrFold(rw, op->getLoc(), o.get(), kToNHWC)
              : o.get());
    SmallVector<Type> types;
    for (Type t : op->getResultTypes())
      types.push_back(permuted(t, kToNHWC));
    Operation *moved = rebuild(rw, op, operands, types);
    SmallVector<Value> results;
    for (Value r : moved->getResults())
      results.push_back(transposeOrFold(rw, op->getLoc(), r, kToNCHW));
    rw.replaceOp(op, results);
    return success();
  }
};

/// Whether transposing `v` to NHWC moves no data: only unit dimensions move
/// (a per-channel 1 x C x 1 x 1 operand becomes 1 x 1 x 1 x C, a reshape
/// after the cleanup step).
bool transposesToNHWCForFree(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || t.getRank() != 4)
    return false;
  int64_t last = -1;
  for (int64_t p : kToNHWC) {
    if (t.getDimSize(p) == 1)
      continue;
    if (p < last)
      return false;
    last = p;
  }
  return true;
}

/// The one operand of an NCHW elementwise op that a transpose to NHWC would
/// move data for, when every other operand transposes for free; null when
/// there is none or several.
OpOperand *onlyDataOperand(Operation *op) {
  OpOperand *data = nullptr;
  for (OpOperand &o : op->getOpOperands()) {
    if (!isRank4(o.get().getType()))
      return nullptr;
    if (transposesToNHWCForFree(o.get()))
      continue;
    if (data)
      return nullptr;
    data = &o;
  }
  return data;
}

/// Whether `v` is GroupNorm's channel view of its grouped N x G x K result
/// (a cnn.reshape from another rank), possibly through one-use elementwise
/// ops whose other operands are per-channel (its scale).
bool isGroupedViewChain(Value v) {
  Operation *d = v.getDefiningOp();
  if (auto reshape = dyn_cast_or_null<ReshapeOp>(d))
    return !isRank4(reshape.getInput().getType());
  if (!d || !isLayoutAgnostic(d) || isa<FusedElementwiseOp>(d) ||
      d->getNumResults() != 1 || !v.hasOneUse())
    return false;
  OpOperand *data = onlyDataOperand(d);
  return data && isGroupedViewChain(data->get());
}

/// transpose(op(a, s), NCHW->NHWC) -> op(transpose(a), transpose(s)) for an
/// elementwise op on GroupNorm's channel view: a is the reshape of the
/// grouped N x G x K result back to N x C x H x W (which no transpose can
/// pass), s transposes for free (the 1 x C x 1 x 1 scale). Step 1 puts the
/// transpose in front of the first layout-sensitive op (the shift's
/// bias_add), and step 2 only pushes NHWC->NCHW transposes down, so the
/// scale stayed NCHW, between the normalization and the transpose: the
/// transpose then split normalize * scale from shift + activation, and the
/// backward's transpose of the same normalized x was a second one. Pulled
/// up to the reshape, the transpose is one (CSE joins the backward's), and
/// cnn-fuse rebuilds the normalization on the NHWC channel view, where the
/// scale, shift and activation join it. Only on such a chain: elsewhere
/// (the image's cast) the transpose is where it belongs.
struct PullTransposeAboveGroupedViewElementwise : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rw) const override {
    if (op.getPermutation() != ArrayRef<int64_t>(kToNHWC))
      return failure();
    Operation *ew = op.getInput().getDefiningOp();
    if (!ew || !isLayoutAgnostic(ew) || isa<FusedElementwiseOp>(ew) ||
        ew->getNumResults() != 1 || !isGroupedViewChain(op.getInput()))
      return failure();
    // Every reader transposes to NHWC: the op's NCHW result is not needed.
    if (!llvm::all_of(ew->getUsers(), [](Operation *u) {
          auto t = dyn_cast<TransposeOp>(u);
          return t && t.getPermutation() == ArrayRef<int64_t>(kToNHWC);
        }))
      return failure();
    rw.setInsertionPoint(ew);
    SmallVector<Value> operands;
    for (Value v : ew->getOperands())
      operands.push_back(transposeOrFold(rw, ew->getLoc(), v, kToNHWC));
    Operation *moved = rebuild(rw, ew, operands,
                               {permuted(ew->getResult(0).getType(), kToNHWC)});
    for (Operation *u : llvm::make_early_inc_range(ew->getUsers()))
      rw.replaceOp(u, moved->getResults());
    rw.eraseOp(ew);
    return success();
  }
};

/// concat(transpose(x_i, NHWC->NCHW), axis) -> transpose(concat(x_i, axis'),
/// ...).
struct PushThroughConcat : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rw) const override {
    if (!isRank4(op.getType()) || !llvm::all_of(op.getInputs(), [](Value v) {
          return isTransposeBy(v, kToNCHW);
        }))
      return failure();
    SmallVector<Value> inputs;
    for (Value v : op.getInputs())
      inputs.push_back(v.getDefiningOp<TransposeOp>().getInput());
    int64_t axis =
        llvm::find(kToNHWC, (int64_t)op.getAxis()) - std::begin(kToNHWC);
    auto c =
        ConcatOp::create(rw, op.getLoc(), ValueRange{inputs},
                         {rw.getNamedAttr("axis", rw.getI64IntegerAttr(axis))});
    rw.replaceOp(op, transposeOrFold(rw, op.getLoc(), c, kToNCHW));
    return success();
  }
};

/// slice(transpose(x, NHWC->NCHW)) -> transpose(slice(x), NHWC->NCHW).
struct PushThroughSlice : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceOp op,
                                PatternRewriter &rw) const override {
    if (!isTransposeBy(op.getInput(), kToNCHW))
      return failure();
    SmallVector<int64_t> offs, sizes;
    for (int64_t p : kToNHWC) {
      offs.push_back(op.getOffsets()[p]);
      sizes.push_back(op.getSizes()[p]);
    }
    auto s = SliceOp::create(
        rw, op.getLoc(),
        ValueRange{op.getInput().getDefiningOp<TransposeOp>().getInput()},
        {rw.getNamedAttr("offsets", rw.getDenseI64ArrayAttr(offs)),
         rw.getNamedAttr("sizes", rw.getDenseI64ArrayAttr(sizes))});
    rw.replaceOp(op, transposeOrFold(rw, op.getLoc(), s, kToNCHW));
    return success();
  }
};

/// reduce(transpose(x, NHWC->NCHW), axes) -> transpose(reduce(x, axes'),
/// NHWC->NCHW): the reduction runs on the NHWC data (squeeze-excitation's
/// gradient sums over H and W).
template <typename ReduceOpT>
struct PushThroughReduce : OpRewritePattern<ReduceOpT> {
  using OpRewritePattern<ReduceOpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceOpT op,
                                PatternRewriter &rw) const override {
    if (!isTransposeBy(op.getInput(), kToNCHW))
      return failure();
    SmallVector<int64_t> axes;
    for (int64_t a : op.getAxes())
      axes.push_back(llvm::find(kToNHWC, a) - std::begin(kToNHWC));
    llvm::sort(axes);
    auto r = ReduceOpT::create(
        rw, op.getLoc(), op.getInput().template getDefiningOp<TransposeOp>().getInput(),
        rw.getDenseI64ArrayAttr(axes));
    rw.replaceOp(op, transposeOrFold(rw, op.getLoc(), r, kToNCHW));
    return success();
  }
};

/// softmax(transpose(x, NHWC->NCHW), axis) -> transpose(softmax(x, axis'),
/// NHWC->NCHW): a softmax over the channels of a convolution's output runs
/// over NHWC's last dimension (the CUDA target's row kernel), with no
/// transpose in front of it.
struct PushThroughSoftmax : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &rw) const override {
    if (!isTransposeBy(op.getInput(), kToNCHW))
      return failure();
    Value x = op.getInput().getDefiningOp<TransposeOp>().getInput();
    int64_t axis =
        llvm::find(kToNHWC, (int64_t)op.getAxis()) - std::begin(kToNHWC);
    auto s = SoftmaxOp::create(rw, op.getLoc(), x.getType(), x,
                               rw.getI64IntegerAttr(axis));
    rw.replaceOp(op, transposeOrFold(rw, op.getLoc(), s, kToNCHW));
    return success();
  }
};

/// pad(transpose(x, NHWC->NCHW)) -> transpose(pad(x), NHWC->NCHW), the pads
/// permuted (DenseNet's and Inception's Pad in front of AveragePool).
/// The same for pad_grad.
template <typename PadLikeOp>
struct PushThroughPad : OpRewritePattern<PadLikeOp> {
  using OpRewritePattern<PadLikeOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(PadLikeOp op,
                                PatternRewriter &rw) const override {
    Value in = op->getOperand(0);
    if (!isTransposeBy(in, kToNCHW))
      return failure();
    SmallVector<int64_t> pads;
    for (int64_t side = 0; side < 2; ++side)
      for (int64_t p : kToNHWC)
        pads.push_back(op.getPads()[side * 4 + p]);
    SmallVector<NamedAttribute> attrs(op->getAttrs());
    for (NamedAttribute &a : attrs)
      if (a.getName() == "pads")
        a.setValue(rw.getDenseI64ArrayAttr(pads));
    auto p = PadLikeOp::create(
        rw, op.getLoc(), ValueRange{in.getDefiningOp<TransposeOp>().getInput()},
        attrs);
    rw.replaceOp(op, transposeOrFold(rw, op.getLoc(), p, kToNCHW));
    return success();
  }
};

/// A transpose that keeps the order of the non-unit dimensions moves no data.
struct UnitTransposeToReshape : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rw) const override {
    auto in = op.getInput().getType();
    int64_t last = -1;
    for (int64_t p : op.getPermutation()) {
      if (in.getDimSize(p) == 1)
        continue;
      if (p < last)
        return failure();
      last = p;
    }
    rw.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), op.getInput());
    return success();
  }
};

/// flatten(reshape(x)) -> reshape(x).
struct FlattenOfReshape : OpRewritePattern<FlattenOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FlattenOp op,
                                PatternRewriter &rw) const override {
    auto r = op.getInput().getDefiningOp<ReshapeOp>();
    if (!r)
      return failure();
    rw.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), r.getInput());
    return success();
  }
};

struct LayoutPass : public cnnc::impl::CNNLayoutBase<LayoutPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();

    // 1. Every NCHW layout-sensitive op with 4-D operands or results.
    SmallVector<LayoutSensitiveOpInterface> todo;
    module.walk([&](LayoutSensitiveOpInterface op) {
      if (op.isNHWC() || !dependsOnLayout(op))
        return;
      if (llvm::any_of(op->getOperandTypes(), isRank4) ||
          llvm::any_of(op->getResultTypes(), isRank4))
        todo.push_back(op);
    });
    for (LayoutSensitiveOpInterface op : todo)
      convertToNHWC(op);
    SmallVector<Operation *> transfers;
    module.walk([&](Operation *op) {
      if (isNCHWTransfer(op))
        transfers.push_back(op);
    });
    for (Operation *op : transfers)
      rebuildInNHWC(op)->setAttr(kTransferLayout,
                                 LayoutAttr::get(ctx, Layout::NHWC));

    // 2. Push transposes down; inverse pairs fold.
    RewritePatternSet push(ctx);
    push.add<PushThroughElementwise, PullTransposeAboveGroupedViewElementwise,
             PushThroughConcat, PushThroughSlice,
             PushThroughReduce<ReduceSumOp>, PushThroughReduce<ReduceMeanOp>,
             PushThroughReduce<ReduceMaxOp>, PushThroughSoftmax,
             PushThroughPad<PadOp>, PushThroughPad<PadGradOp>>(ctx);
    if (failed(applyPatternsGreedily(module, std::move(push))))
      return signalPassFailure();

    // 3. Unit-dimension transposes are reshapes; then CSE.
    RewritePatternSet cleanup(ctx);
    cleanup.add<UnitTransposeToReshape, FlattenOfReshape>(ctx);
    if (failed(applyPatternsGreedily(module, std::move(cleanup))))
      return signalPassFailure();
    IRRewriter rewriter(ctx);
    DominanceInfo dom(module);
    eliminateCommonSubExpressions(rewriter, dom, module);
  }
};

} // namespace
