//===- Fuse.cpp - cnn-fuse ------------------------------------------------===//
//
// Fusion on the whole training step, in five rewrites:
//  1. conv2d [+ bias_add] [+ add residual] [+ relu | clip] -> fused_conv2d
//     (clip_grad is first re-pointed at the clip output, which carries the
//     same mask, so the clip input has no other user).
//  2. batch_norm_train -> batch_norm_stats + an elementwise normalization,
//     which then fuses with the residual add and ReLU that follow.
//  3. batch_norm_grad(relu_grad(dy, y)) -> fused_batch_norm_relu_grad, and
//     where y = relu(x * alpha + beta) of 2, the mask recomputed from x
//     (fused_batch_norm_affine_relu_grad: y is not read). Two batch_norm_grad
//     of one dy -> fused_dual_batch_norm_grad (dy read once for both).
//  4. Every elementwise op becomes a fused_elementwise; an op on
//     GroupNorm's grouped N x G x K view is rebuilt on the channel view its
//     reader uses, NCHW or NHWC (GroupedElementwiseToChannelView);
//     producer/consumer pairs of the same shape merge until nothing
//     changes, at the producer's place or, for a producer read only by the
//     consumer, at the consumer's. (A merged f16 body reads its producer's
//     value as the f32 scalar the producer computed, where the unmerged
//     step stored it as f16: cnn-precision's gradient bodies yield
//     unrounded scalars, so an f16 step after the merges is not bit for bit
//     the unmerged one, and more accurate. Rounding those reads made
//     ConvNeXt-V2's GRN f16 filter gradient 7.8 % off its f32 step instead
//     of 0.23 %, test_precision_stats.py.)
//  5. Upsample + concat (a U-Net decoder): concat(resize(x), skip) along the
//     channels -> fused_resize_concat (one kernel, the resized tensor never
//     stored); resize_grad(slice of a channel range of dy) ->
//     resize_grad(dy) with channel_offset (no slice copy).
// Each rewrite keeps the step's semantics exactly (checked by running the
// reference interpreter before and after in the tests). Each is a
// RewritePattern; the pass runs them phase by phase (a phase finishes on the
// function before the next starts), 1-3 and the conversion of 4 with the
// greedy driver, the merges of 4 in block order (applyFirstMatchInBlockOrder
// says why). Counts: the pass Statistics and getFusionCounts.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Rewrite/PatternApplicator.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNFUSE
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

/// A fused_elementwise of `types` over `inputs` (`broadcast` kinds,
/// `layout`) whose body is one empty block of an f32 argument per input:
/// the caller fills it and its cnn.yield.
std::pair<FusedElementwiseOp, Block *>
createFusedShell(OpBuilder &b, Location loc, TypeRange types,
                 ValueRange inputs, ArrayRef<int64_t> broadcast,
                 LayoutAttr layout) {
  auto fused = FusedElementwiseOp::create(
      b, loc, types, inputs,
      {b.getNamedAttr("broadcast", b.getDenseI64ArrayAttr(broadcast)),
       b.getNamedAttr("layout", layout)});
  Block *block = new Block();
  fused.getBody().push_back(block);
  for (size_t i = 0; i < inputs.size(); ++i)
    block->addArgument(b.getF32Type(), loc);
  return {fused, block};
}


bool hasOneUse(Value v) { return v.hasOneUse(); }

/// NCHW -> NHWC and back (cnn-layout's permutations).
constexpr int64_t kChannelsLast[] = {0, 2, 3, 1};
constexpr int64_t kChannelsFirst[] = {0, 3, 1, 2};

/// What one run of the pass did; the patterns add to it as they rewrite.
using Counts = FusionCounts;

/// A rewrite pattern (`Base`: OpRewritePattern<Op> or
/// OpInterfaceRewritePattern<Interface>) that adds what it rewrites to the
/// pass's counts.
template <typename Base> struct Counted : Base {
  Counted(MLIRContext *ctx, Counts &counts) : Base(ctx), counts(counts) {}
  Counts &counts;
};

//===----------------------------------------------------------------------===//
// 1. Convolution epilogues
//===----------------------------------------------------------------------===//

/// clip_grad(dy, x) == clip_grad(dy, clip(x)): x in (min, max) iff clip(x)
/// is. Re-pointing the gradient at the clip output leaves the clip the only
/// user of x, so the convolution epilogue below can absorb it.
struct RepointClipGradAtClip : OpRewritePattern<ClipGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ClipGradOp g,
                                PatternRewriter &rewriter) const override {
    for (Operation *u : g.getInput().getUsers())
      if (auto c = dyn_cast<ClipOp>(u))
        if (c.getMin() == g.getMin() && c.getMax() == g.getMax() &&
            c->getBlock() == g->getBlock() && c->isBeforeInBlock(g)) {
          rewriter.modifyOpInPlace(
              g, [&] { g.getInputMutable().assign(c.getResult()); });
          return success();
        }
    return failure();
  }
};

/// conv2d [+ bias_add] [+ add residual] [+ relu | clip] -> fused_conv2d,
/// when every intermediate value has one user.
struct FuseConvEpilogue : Counted<OpRewritePattern<Conv2DOp>> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(Conv2DOp conv,
                                PatternRewriter &rewriter) const override {
    Value cur = conv.getResult();
    Value bias, residual;
    SmallVector<Operation *> chain;
    std::string act = "none";
    float clipMin = 0, clipMax = 6;
    if (hasOneUse(cur))
      if (auto b = dyn_cast<BiasAddOp>(*cur.getUsers().begin()))
        if (b.getInput() == cur && b.getLayout() == conv.getLayout()) {
          bias = b.getBias();
          chain.push_back(b);
          cur = b.getResult();
        }
    if (hasOneUse(cur))
      if (auto a = dyn_cast<AddOp>(*cur.getUsers().begin())) {
        Value other = a.getLhs() == cur ? a.getRhs() : a.getLhs();
        // The residual must exist before the convolution and have the
        // convolution's type: cnn.add broadcasts (numpy rules), and an
        // addend that does not (the constant 3 of relu6(x + 3) / 6, an
        // effective-SE gate's hard sigmoid) is no residual.
        Operation *def = other.getDefiningOp();
        if (other != cur && other.getType() == cur.getType() &&
            a.getType() == cur.getType() &&
            (!def || def->isBeforeInBlock(conv))) {
          residual = other;
          chain.push_back(a);
          cur = a.getResult();
        }
      }
    if (hasOneUse(cur)) {
      Operation *u = *cur.getUsers().begin();
      if (auto r = dyn_cast<ReluOp>(u)) {
        act = "relu";
        chain.push_back(r);
        cur = r.getResult();
      } else if (auto c = dyn_cast<ClipOp>(u)) {
        act = "clip";
        clipMin = c.getMin().convertToFloat();
        clipMax = c.getMax().convertToFloat();
        chain.push_back(c);
        cur = c.getResult();
      }
    }
    if (chain.empty())
      return rewriter.notifyMatchFailure(conv, "no fusable epilogue");
    // The fused op takes the place of the chain's last op: the residual and
    // every other operand are defined before it.
    Operation *last = chain.back();
    rewriter.setInsertionPoint(last);
    SmallVector<NamedAttribute> attrs{
        rewriter.getNamedAttr("strides", conv.getStridesAttr()),
        rewriter.getNamedAttr("padding", conv.getPaddingAttr()),
        rewriter.getNamedAttr("dilations", conv.getDilationsAttr()),
        rewriter.getNamedAttr("groups", conv.getGroupsAttr()),
        rewriter.getNamedAttr("layout", conv.getLayoutAttr()),
        rewriter.getNamedAttr("activation", rewriter.getStringAttr(act)),
        rewriter.getNamedAttr("clip_min", rewriter.getF32FloatAttr(clipMin)),
        rewriter.getNamedAttr("clip_max", rewriter.getF32FloatAttr(clipMax)),
        rewriter.getNamedAttr("operandSegmentSizes",
                              rewriter.getDenseI32ArrayAttr(
                                  {1, 1, bias ? 1 : 0, residual ? 1 : 0}))};
    SmallVector<Value> operands{conv.getInput(), conv.getFilter()};
    if (bias)
      operands.push_back(bias);
    if (residual)
      operands.push_back(residual);
    auto fused = FusedConv2DOp::create(
        rewriter, conv.getLoc(), TypeRange{cur.getType()}, operands, attrs);
    rewriter.replaceAllUsesWith(cur, fused.getResult());
    for (Operation *op : llvm::reverse(chain))
      rewriter.eraseOp(op);
    rewriter.eraseOp(conv);
    counts.convEpilogueOps += chain.size() + 1;
    return success();
  }
};

//===----------------------------------------------------------------------===//
// 2. BN statistics / normalization split, 3. ReLU mask into BN grad
//===----------------------------------------------------------------------===//

/// batch_norm_train -> batch_norm_stats (statistics and the per-channel
/// affine map alpha, beta) + a fused_elementwise y = x * alpha + beta, which
/// the residual add and ReLU that follow then join.
struct SplitBatchNormTrain : Counted<OpRewritePattern<BatchNormTrainOp>> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(BatchNormTrainOp bn,
                                PatternRewriter &rewriter) const override {
    Layout layout = bn.getLayout();
    auto f32 = RankedTensorType::get(bn.getSavedMean().getType().getShape(),
                                     rewriter.getF32Type());
    auto stats = BatchNormStatsOp::create(
        rewriter, bn.getLoc(),
        TypeRange{bn.getSavedMean().getType(), bn.getSavedInvstd().getType(),
                  bn.getNewRunningMean().getType(),
                  bn.getNewRunningVar().getType(), f32, f32},
        ValueRange{bn.getInput(), bn.getScale(), bn.getBias(),
                   bn.getRunningMean(), bn.getRunningVar()},
        {rewriter.getNamedAttr("epsilon", bn.getEpsilonAttr()),
         rewriter.getNamedAttr("momentum", bn.getMomentumAttr()),
         rewriter.getNamedAttr("layout", bn.getLayoutAttr())});
    auto norm = makeFusedElementwise(
        rewriter, bn.getLoc(), TypeRange{bn.getResult().getType()},
        ValueRange{bn.getInput(), stats.getAlpha(), stats.getBeta()}, {0, 1, 1},
        layout, [&](ScalarBuilder &s, ValueRange a) {
          // x * alpha + beta: the batch_norm_train kernel's operations.
          return SmallVector<Value>{s.add(s.mul(a[0], a[1]), a[2])};
        });
    rewriter.replaceOp(bn, ValueRange{norm.getResult(0), stats.getSavedMean(),
                                      stats.getSavedInvstd(),
                                      stats.getNewRunningMean(),
                                      stats.getNewRunningVar()});
    ++counts.bnSplits;
    return success();
  }
};

/// batch_norm_grad(relu_grad(dy, y)) -> fused_batch_norm_relu_grad, in
/// either layout: the mask is applied while reading dy, the masked gradient
/// is never stored.
struct FuseReluGradIntoBatchNormGrad
    : Counted<OpRewritePattern<BatchNormGradOp>> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(BatchNormGradOp g,
                                PatternRewriter &rewriter) const override {
    auto rg = g.getGradOutput().getDefiningOp<ReluGradOp>();
    if (!rg || !rg.getResult().hasOneUse())
      return rewriter.notifyMatchFailure(g, "dy is not a one-use relu_grad");
    auto fused = FusedBatchNormReluGradOp::create(
        rewriter, g.getLoc(), g->getResultTypes(),
        ValueRange{rg.getGradOutput(), rg.getOutput(), g.getInput(),
                   g.getScale(), g.getSavedMean(), g.getSavedInvstd()},
        {rewriter.getNamedAttr("layout", g.getLayoutAttr())});
    rewriter.replaceOp(g, fused->getResults());
    rewriter.eraseOp(rg);
    counts.bnReluGradOps += 2;
    return success();
  }
};

/// (alpha, beta) where `y` = relu(x * alpha + beta) is the normalization of
/// `x` in `layout` that SplitBatchNormTrain (alpha, beta of
/// batch_norm_stats of x) or cnn-data-parallel's sync-bn rewrite (of
/// batch_norm_finalize) made: a relu of a fused_elementwise whose body is
/// exactly x * alpha + beta. Runs before the ReLU joins the normalization
/// in phase 4, so that y's definition is still the two ops recognized here.
std::optional<std::pair<Value, Value>> affineReluOf(Value y, Value x,
                                                    Layout layout) {
  auto relu = y.getDefiningOp<ReluOp>();
  if (!relu)
    return std::nullopt;
  auto norm = relu.getInput().getDefiningOp<FusedElementwiseOp>();
  if (!norm || norm->getNumResults() != 1 || norm.getInputs().size() != 3 ||
      norm.getInputs()[0] != x || norm.getLayout() != layout)
    return std::nullopt;
  Value alpha = norm.getInputs()[1], beta = norm.getInputs()[2];
  if (auto stats = alpha.getDefiningOp<BatchNormStatsOp>()) {
    if (alpha != stats.getAlpha() || beta != stats.getBeta() ||
        stats.getInput() != x)
      return std::nullopt;
  } else if (auto fin = alpha.getDefiningOp<BatchNormFinalizeOp>()) {
    // The sync-bn form: the statistics come from all-reduced sums, not
    // from x itself; the recomputation needs only y = relu(x*alpha+beta).
    if (alpha != fin.getAlpha() || beta != fin.getBeta())
      return std::nullopt;
  } else {
    return std::nullopt;
  }
  // The body must be exactly x * alpha + beta (SplitBatchNormTrain's and
  // the sync-bn rewrite's), per channel.
  Block &body = norm.getBody().front();
  auto ops = body.without_terminator();
  if (std::distance(ops.begin(), ops.end()) != 2)
    return std::nullopt;
  auto mul = dyn_cast<arith::MulFOp>(&*ops.begin());
  auto add = dyn_cast<arith::AddFOp>(&*std::next(ops.begin()));
  auto yield = cast<YieldOp>(body.getTerminator());
  if (!mul || !add || mul.getLhs() != body.getArgument(0) ||
      mul.getRhs() != body.getArgument(1) || add.getLhs() != mul ||
      add.getRhs() != body.getArgument(2) || yield.getValues().size() != 1 ||
      yield.getValues()[0] != add)
    return std::nullopt;
  return std::make_pair(alpha, beta);
}

/// fused_batch_norm_relu_grad(dy, y, x) with y = relu(x * alpha + beta), the
/// normalization SplitBatchNormTrain made of the same x ->
/// fused_batch_norm_affine_relu_grad(dy, x, alpha, beta): the mask is
/// recomputed from x, which the gradient reads anyway, so y is not read
/// (the backward kernels then stream dy and x only). Runs after phase 2-3.
struct RecomputeReluMask : Counted<OpRewritePattern<FusedBatchNormReluGradOp>> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(FusedBatchNormReluGradOp g,
                                PatternRewriter &rewriter) const override {
    auto ab = affineReluOf(g.getReluOutput(), g.getInput(), g.getLayout());
    if (!ab || !ab->first.getDefiningOp<BatchNormStatsOp>())
      return rewriter.notifyMatchFailure(g, "y is not relu(norm(x))");
    auto fused = FusedBatchNormAffineReluGradOp::create(
        rewriter, g.getLoc(), g->getResultTypes(),
        ValueRange{g.getGradOutput(), g.getInput(), g.getScale(),
                   g.getSavedMean(), g.getSavedInvstd(), ab->first,
                   ab->second},
        {rewriter.getNamedAttr("layout", g.getLayoutAttr())});
    rewriter.replaceOp(g, fused->getResults());
    ++counts.bnReluMasksRecomputed;
    return success();
  }
};

/// Moves `sums` right after the last definition of its operands in its
/// block, and each cnn.all_reduce of its results alone right after it.
void hoistSumsAndCollective(PatternRewriter &rewriter, Operation *sums) {
  Block *block = sums->getBlock();
  Operation *last = nullptr;
  for (Value v : sums->getOperands())
    if (Operation *d = v.getDefiningOp())
      if (d->getBlock() == block && (!last || last->isBeforeInBlock(d)))
        last = d;
  if (!last || last == sums->getPrevNode())
    return;
  SmallVector<Operation *> collectives;
  for (Operation *u : sums->getUsers())
    if (isa<AllReduceOp>(u) && u->getBlock() == block &&
        llvm::all_of(u->getOperands(), [&](Value v) {
          return v.getDefiningOp() == sums;
        }) &&
        !llvm::is_contained(collectives, u))
      collectives.push_back(u);
  rewriter.moveOpAfter(sums, last);
  Operation *at = sums;
  for (Operation *c : collectives) {
    rewriter.moveOpAfter(c, at);
    at = c;
  }
}

/// The sync-bn rewrite's counterpart: batch_norm_grad_sums(relu_grad(dy, y),
/// x, ...) with y = relu(x * alpha + beta) ->
/// fused_batch_norm_affine_relu_grad_sums(dy, x, ..., alpha, beta), and the
/// relu_grad's other reader (the input gradient's elementwise kernel) gets
/// the mask recomputed from x too: round(x * alpha + beta) > 0, rounded to
/// the stored type as y was. The masked gradient is then never stored and
/// y never read (on ResNet-50 f16, one full read-read-write pass per
/// BN + ReLU less). The elementwise phase merges the recomputed mask into
/// its reader.
struct RecomputeReluMaskOfGradSums
    : Counted<OpRewritePattern<BatchNormGradSumsOp>> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(BatchNormGradSumsOp s,
                                PatternRewriter &rewriter) const override {
    auto rg = s.getGradOutput().getDefiningOp<ReluGradOp>();
    if (!rg)
      return rewriter.notifyMatchFailure(s, "dy is not a relu_grad");
    auto ab = affineReluOf(rg.getOutput(), s.getInput(), s.getLayout());
    if (!ab)
      return rewriter.notifyMatchFailure(s, "y is not relu(norm(x))");
    auto [alpha, beta] = *ab;
    // What the masked elementwise below needs, read before `s` is erased.
    Value x = s.getInput();
    Layout layout = s.getLayout();
    auto fused = FusedBatchNormAffineReluGradSumsOp::create(
        rewriter, s.getLoc(), s->getResultTypes(),
        ValueRange{rg.getGradOutput(), x, s.getSavedMean(), s.getSavedInvstd(),
                   alpha, beta},
        {rewriter.getNamedAttr("layout", s.getLayoutAttr())});
    rewriter.replaceOp(s, fused->getResults());
    ++counts.bnReluMasksRecomputed;
    // The sums and their all-reduce up to where dy is final (before the
    // weight gradient of dy's convolution, which the sync-bn rewrite put
    // first): that work then overlaps the collective, whose first reader
    // stays where it was.
    hoistSumsAndCollective(rewriter, fused);
    if (rg->use_empty()) {
      rewriter.eraseOp(rg);
      return success();
    }
    bool half = cast<RankedTensorType>(rg.getType()).getElementType().isF16();
    rewriter.setInsertionPoint(rg);
    FusedElementwiseOp masked = makeFusedElementwise(
        rewriter, rg.getLoc(), TypeRange{rg.getType()},
        ValueRange{rg.getGradOutput(), x, alpha, beta}, {0, 0, 1, 1}, layout,
        [&](ScalarBuilder &b, ValueRange a) {
          // The forward's x * alpha + beta (the same ops, so the same
          // rounding and contraction), rounded as the stored y was.
          Value y = b.add(b.mul(a[1], a[2]), a[3]);
          if (half)
            y = b.roundToHalf(y);
          return SmallVector<Value>{b.select(b.gt(y, b.c(0)), a[0], b.c(0))};
        });
    rewriter.replaceOp(rg, masked->getResults());
    return success();
  }
};

/// Two batch_norm_grad of one dy (a residual block whose shortcut has its
/// own BatchNorm) -> fused_dual_batch_norm_grad at the first of them: both
/// reductions and both apply passes then read dy once. Only where the
/// second's other operands are defined before the first (they are forward
/// values in a training step), so moving it up keeps the IR valid.
struct FuseBatchNormGradPair : Counted<OpRewritePattern<BatchNormGradOp>> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(BatchNormGradOp a,
                                PatternRewriter &rewriter) const override {
    Value dy = a.getGradOutput();
    BatchNormGradOp b;
    for (Operation *u : dy.getUsers()) {
      auto other = dyn_cast<BatchNormGradOp>(u);
      if (!other || other == a || other->getBlock() != a->getBlock() ||
          !a->isBeforeInBlock(other) || other.getGradOutput() != dy ||
          other.getLayout() != a.getLayout() ||
          other.getInput().getType() != a.getInput().getType() ||
          other->getResultTypes() != a->getResultTypes())
        continue;
      bool dominates = llvm::all_of(other->getOperands(), [&](Value v) {
        Operation *d = v.getDefiningOp();
        return !d || (d->getBlock() == a->getBlock() && d->isBeforeInBlock(a));
      });
      if (dominates && (!b || other->isBeforeInBlock(b)))
        b = other;
    }
    if (!b)
      return rewriter.notifyMatchFailure(a, "no later batch_norm_grad of dy");
    SmallVector<Type> types(a->getResultTypes());
    types.append(b->getResultTypes().begin(), b->getResultTypes().end());
    auto fused = FusedDualBatchNormGradOp::create(
        rewriter, a.getLoc(), types,
        ValueRange{dy, a.getInput(), a.getScale(), a.getSavedMean(),
                   a.getSavedInvstd(), b.getInput(), b.getScale(),
                   b.getSavedMean(), b.getSavedInvstd()},
        {rewriter.getNamedAttr("layout", a.getLayoutAttr())});
    rewriter.replaceOp(a, fused->getResults().take_front(3));
    rewriter.replaceOp(b, fused->getResults().drop_front(3));
    ++counts.bnGradPairs;
    return success();
  }
};

//===----------------------------------------------------------------------===//
// 4. Elementwise chains
//===----------------------------------------------------------------------===//

/// Every elementwise cnn op (ElementwiseOpInterface) becomes a single-op
/// fused_elementwise with the op's own scalar body, so that the merge below
/// works on one form.
struct ElementwiseToFused
    : Counted<OpInterfaceRewritePattern<ElementwiseOpInterface>> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(ElementwiseOpInterface op,
                                PatternRewriter &rewriter) const override {
    if (isa<FusedElementwiseOp>(op.getOperation()))
      return failure();
    FusedElementwiseOp fused = wrapElementwise(rewriter, op);
    if (!fused)
      return rewriter.notifyMatchFailure(op, "no scalar body");
    rewriter.replaceOp(op, fused->getResults());
    ++counts.elementwiseOps;
    return success();
  }
};

/// bias_add, whose bias is per channel of a layout, is the one elementwise
/// op with its own form here (broadcast kind 1).
struct BiasAddToFused : Counted<OpRewritePattern<BiasAddOp>> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(BiasAddOp o,
                                PatternRewriter &rewriter) const override {
    bool half = o.getType().getElementType().isF16();
    auto fused = makeFusedElementwise(
        rewriter, o.getLoc(), o->getResultTypes(), o->getOperands(), {0, 1},
        o.getLayout(), [&](ScalarBuilder &s, ValueRange a) {
          Value r = s.add(a[0], a[1]);
          return SmallVector<Value>{half ? s.roundToHalf(r) : r};
        });
    rewriter.replaceOp(o, fused->getResults());
    ++counts.elementwiseOps;
    return success();
  }
};

/// A fused_elementwise on a grouped view [N, G, K] of a tensor that a
/// cnn.reshape takes back to [N, D, S...] with D = G * (D / G) and
/// K = (D / G) * prod(S): the reshape splits dimension 1 into G x D/G and
/// merges D/G with the rest, so element (n, g, k) is element
/// (n, g * D/G + k / prod(S), ...) of the channel view. GroupNorm's
/// normalization (x - mean) * invstd, which the importer computes on that
/// view, is such an op; its scale, shift and activation then follow on the
/// channel view, and the reshape between kept them apart. The op is rebuilt
/// on the channel view: each same-shape input is reshaped with it, each
/// per-(N, G) statistic [A, G, 1] is repeated over its group's D/G channels
/// by a small [A, G, D/G] identity fused_elementwise and reshaped to
/// [A, D, 1, ...] (which the rebuilt op broadcasts), and an input that is
/// one value per batch item or overall ([A, 1, 1]) is reshaped to
/// [A, 1, 1, ...]. The body is unchanged, so every element gets the same
/// f32 operations on the same operands; cnn-fuse's merge phase then joins
/// the rebuilt op with what follows. Anything else (another broadcast, a
/// statistic that varies along K, a reshape that is not such a split) is
/// left alone.
///
/// In the f16 NHWC pipeline the reshape's one reader is a transpose to
/// N x H x W x C (cnn-layout's pull-up), and the op is rebuilt on that NHWC
/// view instead: statistics reshaped to [A, 1, 1, D], and a same-shape
/// input that a grouped-view elementwise op computes from inputs already
/// on the NHWC view (the centering x - mean, x the grouped view of the
/// convolution's NHWC output) recomputed inside it, so that no transpose
/// is needed. All statistics of one batch extent share one repeat kernel.
/// The grouped op stays for its grouped-view readers (the backward), where
/// the merge phase sinks it into its reader.
struct GroupedElementwiseToChannelView
    : Counted<OpRewritePattern<ReshapeOp>> {
  using Counted::Counted;

  LogicalResult matchAndRewrite(ReshapeOp reshape,
                                PatternRewriter &rewriter) const override {
    auto grouped = reshape.getInput().getDefiningOp<FusedElementwiseOp>();
    if (!grouped || grouped->getNumResults() != 1)
      return rewriter.notifyMatchFailure(reshape,
                                         "input is not a one-result elementwise");
    auto from = cast<RankedTensorType>(reshape.getInput().getType());
    auto to = cast<RankedTensorType>(reshape.getType());
    if (from.getRank() != 3 || to.getRank() < 2)
      return rewriter.notifyMatchFailure(reshape, "not [N, G, K] -> [N, D...]");
    int64_t n = from.getDimSize(0), g = from.getDimSize(1),
            k = from.getDimSize(2), d = to.getDimSize(1);
    int64_t rest = 1;
    for (int64_t s : to.getShape().drop_front(2))
      rest *= s;
    if (to.getDimSize(0) != n || g < 1 || d % g != 0 ||
        (d / g) * rest != k)
      return rewriter.notifyMatchFailure(reshape,
                                         "not a split of dimension 1 into G");
    // Where the inputs go: 0 = reshaped with the op, 1 = one value per
    // (A, G) repeated over the group, 2 = one value per A (or overall);
    // -1: none of these (the op is left alone).
    auto roleOf = [&](Value in, int64_t kind) {
      auto t = cast<RankedTensorType>(in.getType());
      if (kind == 0 && t.getShape() == from.getShape())
        return 0;
      if (kind == 3 && t.getRank() == 3 && t.getDimSize(2) == 1 &&
          (t.getDimSize(0) == 1 || t.getDimSize(0) == n) &&
          (t.getDimSize(1) == 1 || t.getDimSize(1) == g))
        return t.getDimSize(1) == g && g != 1 ? 1 : 2;
      return -1;
    };
    SmallVector<int> role;
    for (auto [i, in] : llvm::enumerate(grouped.getInputs())) {
      role.push_back(roleOf(in, grouped.getBroadcast()[i]));
      if (role.back() < 0)
        return rewriter.notifyMatchFailure(reshape,
                                           "an input is not [N, G, K], "
                                           "[A, G, 1] or [A, 1, 1]");
    }
    // The channel view: the reshape's result (NCHW), or, in the NHWC
    // pipeline, its one transpose to N x H x W x C (cnn-layout pulls the
    // transpose in front of the scale up to the reshape); the rebuilt op
    // then works on the NHWC tensor, each same-shape input transposed
    // instead of its result.
    Value view = reshape.getResult();
    TransposeOp toNHWC;
    if (reshape->hasOneUse() && to.getRank() == 4)
      if (auto t = dyn_cast<TransposeOp>(*reshape->getUsers().begin());
          t && t.getPermutation() == ArrayRef<int64_t>(kChannelsLast)) {
        toNHWC = t;
        view = t.getResult();
      }
    // Only where an elementwise op on the channel view can join the rebuilt
    // one (the scale and shift of the forward); otherwise the reshapes only
    // keep the op from its grouped-view producers (the backward's input
    // gradient, read by a bias gradient, stays as it is).
    if (llvm::none_of(view.getUsers(),
                      [](Operation *u) { return isa<FusedElementwiseOp>(u); }))
      return rewriter.notifyMatchFailure(reshape,
                                         "no elementwise reader to join");
    // Only an op that reads the grouped tensor itself: not a broadcast of
    // statistics alone (the repeat below is one, and is left as it is).
    if (!llvm::is_contained(role, 0))
      return rewriter.notifyMatchFailure(reshape, "no input of shape [N, G, K]");
    // The rebuilt op goes right before the view's first user, so that
    // every other operand of that user is defined before it (the merge
    // phase's condition for joining them).
    // Other readers of the grouped result (the backward pass reads the
    // normalized x) read a reshape of the rebuilt op's result instead; in
    // NHWC that would be a transpose back, so there they keep the grouped
    // op (the merge phase sinks it into its one reader).
    Operation *first = nullptr;
    SmallVector<Operation *> users(view.getUsers());
    for (Operation *u : grouped->getUsers())
      if (u != reshape.getOperation())
        users.push_back(u);
    for (Operation *u : users) {
      if (u->getBlock() != reshape->getBlock())
        return rewriter.notifyMatchFailure(reshape, "a user in another block");
      if (!first || u->isBeforeInBlock(first))
        first = u;
    }
    if (!first)
      return rewriter.notifyMatchFailure(reshape, "no user");
    // A grouped-view reader before the first channel-view reader (the
    // square of GroupNorm's centered x, which merges with the centering)
    // would be split from it: leave such an op on the grouped view.
    if (!llvm::is_contained(view.getUsers(), first))
      return rewriter.notifyMatchFailure(
          reshape, "the grouped result is read first on the grouped view");
    rewriter.setInsertionPoint(first);
    Location loc = grouped.getLoc();
    auto viewType = cast<RankedTensorType>(view.getType());
    // Dimension of the channels in the view, and the shape of a per-(A, D)
    // statistic there: [A, D, 1, ...] or [A, 1, 1, D].
    int64_t channelDim = toNHWC ? viewType.getRank() - 1 : 1;

    // A same-shape input on the NHWC view without a transpose: the grouped
    // view of a tensor that came from NHWC (GroupNorm's input x, the
    // convolution's NHWC output transposed for the statistics); else null.
    auto freeNHWCView = [&](Value in) -> Value {
      auto r = in.getDefiningOp<ReshapeOp>();
      if (!r || cast<ShapedType>(r.getInput().getType()).getShape() !=
                    to.getShape())
        return nullptr;
      auto t = r.getInput().getDefiningOp<TransposeOp>();
      if (!t || t.getPermutation() != ArrayRef<int64_t>(kChannelsFirst))
        return nullptr;
      return t.getInput();
    };
    // In NHWC, an input that a transpose would have to bring there but that
    // a grouped-view elementwise op computes from inputs that are free on
    // the view (the centering x - mean) is recomputed inside the rebuilt op
    // from those: the transpose of the centered x goes, and its statistic
    // joins the one repeat kernel below.
    auto inlinable = [&](Value in) -> FusedElementwiseOp {
      auto producer = in.getDefiningOp<FusedElementwiseOp>();
      if (!toNHWC || freeNHWCView(in) || !producer ||
          producer->getBlock() != grouped->getBlock())
        return nullptr;
      for (auto [i, pin] : llvm::enumerate(producer.getInputs())) {
        int r = roleOf(pin, producer.getBroadcast()[i]);
        if (r < 0 || (r == 0 && !freeNHWCView(pin)))
          return nullptr;
      }
      return producer;
    };

    // The rebuilt op's inputs (value, role), each once.
    SmallVector<std::pair<Value, int>> leaves;
    auto leaf = [&](Value v, int r) -> unsigned {
      auto it = llvm::find(leaves, std::make_pair(v, r));
      if (it != leaves.end())
        return it - leaves.begin();
      leaves.push_back({v, r});
      return leaves.size() - 1;
    };
    // For each input of `grouped`: its leaf, or the producer recomputed.
    SmallVector<FusedElementwiseOp> recomputed;
    SmallVector<SmallVector<unsigned>> producerLeaves;
    SmallVector<unsigned> groupedLeaves;
    for (auto [i, in] : llvm::enumerate(grouped.getInputs())) {
      FusedElementwiseOp producer = role[i] == 0 ? inlinable(in) : nullptr;
      recomputed.push_back(producer);
      producerLeaves.emplace_back();
      if (!producer) {
        groupedLeaves.push_back(leaf(in, role[i]));
        continue;
      }
      groupedLeaves.push_back(~0u);
      for (auto [k, pin] : llvm::enumerate(producer.getInputs()))
        producerLeaves.back().push_back(
            leaf(pin, roleOf(pin, producer.getBroadcast()[k])));
    }

    // The per-(A, G) statistics repeated over their groups: one small
    // kernel per batch extent A for all of them. A statistic that an
    // elementwise op computes from others of its shape (the mean's cast to
    // f16) is recomputed there, so that the op stays with its other reader.
    DenseMap<unsigned, Value> repeatedOf;
    SmallVector<int64_t> extents;
    for (auto [v, r] : leaves)
      if (r == 1 && !llvm::is_contained(
                        extents, cast<ShapedType>(v.getType()).getDimSize(0)))
        extents.push_back(cast<ShapedType>(v.getType()).getDimSize(0));
    auto statProducer = [](Value v) -> FusedElementwiseOp {
      auto p = v.getDefiningOp<FusedElementwiseOp>();
      if (!p || p->getNumResults() != 1)
        return nullptr;
      for (auto [k, in] : llvm::enumerate(p.getInputs())) {
        auto t = cast<RankedTensorType>(in.getType());
        if (p.getBroadcast()[k] == 1 || t.getRank() != 3 ||
            (p.getBroadcast()[k] == 0 &&
             t.getShape() != cast<ShapedType>(v.getType()).getShape()))
          return nullptr;
      }
      return p;
    };
    for (int64_t a : extents) {
      SmallVector<unsigned> which;
      SmallVector<Value> repeatInputs;
      SmallVector<Type> repeatedTypes;
      for (auto [j, lv] : llvm::enumerate(leaves)) {
        Value v = lv.first;
        if (lv.second != 1 || cast<ShapedType>(v.getType()).getDimSize(0) != a)
          continue;
        which.push_back(j);
        repeatedTypes.push_back(RankedTensorType::get(
            {a, g, d / g}, cast<ShapedType>(v.getType()).getElementType()));
        if (FusedElementwiseOp p = statProducer(v)) {
          for (Value in : p.getInputs())
            if (!llvm::is_contained(repeatInputs, in))
              repeatInputs.push_back(in);
        } else if (!llvm::is_contained(repeatInputs, v)) {
          repeatInputs.push_back(v);
        }
      }
      SmallVector<int64_t> kinds(repeatInputs.size(), 3);
      // (Not a structured binding: argOf below captures the block.)
      FusedElementwiseOp repeat;
      Block *rb;
      std::tie(repeat, rb) = createFusedShell(
          rewriter, loc, repeatedTypes, repeatInputs, kinds,
          rewriter.getAttr<LayoutAttr>(Layout::NCHW));
      OpBuilder rbb = OpBuilder::atBlockEnd(rb);
      auto argOf = [&](Value in) {
        return rb->getArgument(llvm::find(repeatInputs, in) -
                               repeatInputs.begin());
      };
      SmallVector<Value> yields;
      for (unsigned j : which) {
        Value v = leaves[j].first;
        FusedElementwiseOp p = statProducer(v);
        if (!p) {
          yields.push_back(argOf(v));
          continue;
        }
        IRMapping pmap;
        Block &pb = p.getBody().front();
        for (auto [k, parg] : llvm::enumerate(pb.getArguments()))
          pmap.map(parg, argOf(p.getInputs()[k]));
        for (Operation &op : pb.without_terminator())
          rbb.clone(op, pmap);
        yields.push_back(
            pmap.lookup(cast<YieldOp>(pb.getTerminator()).getValues()[0]));
      }
      YieldOp::create(rbb, loc, yields);
      for (auto [j, r] : llvm::zip(which, repeat->getResults()))
        repeatedOf[j] = r;
    }

    SmallVector<Value> inputs;
    SmallVector<int64_t> broadcast;
    for (auto [j, lv] : llvm::enumerate(leaves)) {
      auto [in, r] = lv;
      auto t = cast<RankedTensorType>(in.getType());
      if (r == 0) {
        Value v = toNHWC ? freeNHWCView(in) : Value();
        if (!v) {
          v = ReshapeOp::create(rewriter, loc, to.clone(t.getElementType()),
                                in);
          if (toNHWC)
            v = TransposeOp::create(
                rewriter, loc, ValueRange{v},
                {rewriter.getNamedAttr(
                    "permutation",
                    rewriter.getDenseI64ArrayAttr(kChannelsLast))});
        }
        inputs.push_back(v);
        broadcast.push_back(0);
        continue;
      }
      SmallVector<int64_t> shape(viewType.getRank(), 1);
      shape[0] = t.getDimSize(0);
      Value stat = in;
      if (r == 1) {
        stat = repeatedOf.lookup(j);
        shape[channelDim] = d;
      }
      inputs.push_back(ReshapeOp::create(
          rewriter, loc, RankedTensorType::get(shape, t.getElementType()),
          stat));
      broadcast.push_back(3);
    }
    // The body: each recomputed producer's, then the grouped op's, the same
    // f32 operations in the same order (bit for bit the values they stored).
    auto [channel, body] =
        createFusedShell(rewriter, loc, TypeRange{viewType}, inputs,
                         broadcast, grouped.getLayoutAttr());
    OpBuilder ib = OpBuilder::atBlockEnd(body);
    IRMapping map;
    Block &gb = grouped.getBody().front();
    for (auto [i, arg] : llvm::enumerate(gb.getArguments())) {
      FusedElementwiseOp producer = recomputed[i];
      if (!producer) {
        map.map(arg, body->getArgument(groupedLeaves[i]));
        continue;
      }
      IRMapping pmap;
      Block &pb = producer.getBody().front();
      for (auto [k, parg] : llvm::enumerate(pb.getArguments()))
        pmap.map(parg, body->getArgument(producerLeaves[i][k]));
      for (Operation &op : pb.without_terminator())
        ib.clone(op, pmap);
      unsigned result =
          cast<OpResult>(grouped.getInputs()[i]).getResultNumber();
      map.map(arg, pmap.lookup(
                       cast<YieldOp>(pb.getTerminator()).getValues()[result]));
    }
    for (Operation &op : gb)
      ib.clone(op, map);
    // What the recomputed producers yielded for their other readers.
    for (Operation &op : llvm::make_early_inc_range(
             llvm::reverse(body->without_terminator())))
      if (isOpTriviallyDead(&op))
        op.erase();
    if (toNHWC) {
      rewriter.replaceOp(toNHWC, channel->getResults());
      rewriter.eraseOp(reshape);
      if (grouped->use_empty())
        rewriter.eraseOp(grouped);
    } else {
      Value back = ReshapeOp::create(rewriter, loc, from, channel.getResult(0));
      rewriter.replaceOp(reshape, channel->getResults());
      rewriter.replaceOp(grouped, back);
    }
    ++counts.groupNormChannelViews;
    return success();
  }
};

/// Whether `v` is defined before `op` in its block (or is an argument), or
/// by a chain of cnn.reshape ops (free: a reshape is a view) of such a
/// value, which `hoistReshapesBefore` can then move before `op`. A
/// parameter's reshape to the shape an elementwise op broadcasts is often
/// placed right before its reader, after the reader's producer.
bool definedOrReshapedBefore(Value v, Operation *op) {
  Operation *d = v.getDefiningOp();
  if (!d || d == op || (d->getBlock() == op->getBlock() &&
                        d->isBeforeInBlock(op)))
    return true;
  auto reshape = dyn_cast<ReshapeOp>(d);
  return reshape && reshape->getBlock() == op->getBlock() &&
         definedOrReshapedBefore(reshape.getInput(), op);
}

/// Moves the cnn.reshape chain that defines `v` before `op`
/// (definedOrReshapedBefore(v, op) holds), innermost first.
void hoistReshapesBefore(RewriterBase &b, Value v, Operation *op) {
  Operation *d = v.getDefiningOp();
  if (!d || d == op || d->isBeforeInBlock(op))
    return;
  auto reshape = cast<ReshapeOp>(d);
  hoistReshapesBefore(b, reshape.getInput(), op);
  b.moveOpBefore(reshape, op);
}

/// Merges `consumer` into `producer` (both fused_elementwise, same shape and
/// compatible layouts) at `at`: the producer's place when every other
/// operand of `consumer` is defined before `producer`, or the consumer's
/// when the consumer is the producer's only reader (sinkable).
FusedElementwiseOp merge(RewriterBase &b, FusedElementwiseOp producer,
                         FusedElementwiseOp consumer, Operation *at) {
  b.setInsertionPoint(at);
  Location loc =
      FusedLoc::get(b.getContext(), {producer.getLoc(), consumer.getLoc()});
  // Inputs: the producer's, then the consumer's that are not producer results.
  SmallVector<Value> inputs(producer.getInputs());
  SmallVector<int64_t> bc(producer.getBroadcast());
  for (auto [k, in] : llvm::enumerate(consumer.getInputs())) {
    if (in.getDefiningOp() == producer.getOperation())
      continue;
    auto it = llvm::find(inputs, in);
    if (it != inputs.end() &&
        bc[it - inputs.begin()] == consumer.getBroadcast()[k])
      continue;
    inputs.push_back(in);
    bc.push_back(consumer.getBroadcast()[k]);
  }
  // Results: producer results still needed elsewhere, then the consumer's.
  SmallVector<Value> oldResults;
  for (Value r : producer.getResults())
    if (llvm::any_of(r.getUsers(), [&](Operation *u) {
          return u != consumer.getOperation();
        }))
      oldResults.push_back(r);
  llvm::append_range(oldResults, consumer.getResults());
  SmallVector<Type> types;
  for (Value r : oldResults)
    types.push_back(r.getType());
  LayoutAttr layout = producer.getLayoutAttr();
  if (llvm::is_contained(consumer.getBroadcast(), 1))
    layout = consumer.getLayoutAttr();
  auto [fused, block] = createFusedShell(b, loc, types, inputs, bc, layout);
  OpBuilder ib = OpBuilder::atBlockEnd(block);
  // Producer body.
  IRMapping map;
  Block &pb = producer.getBody().front();
  for (auto [i, arg] : llvm::enumerate(pb.getArguments()))
    map.map(arg, block->getArgument(i));
  for (Operation &op : pb.without_terminator())
    ib.clone(op, map);
  auto pyield = cast<YieldOp>(pb.getTerminator());
  // Consumer body: its arguments are producer yields or new inputs.
  Block &cb = consumer.getBody().front();
  for (auto [k, arg] : llvm::enumerate(cb.getArguments())) {
    Value in = consumer.getInputs()[k];
    if (in.getDefiningOp() == producer.getOperation()) {
      map.map(
          arg,
          map.lookup(pyield.getValues()[cast<OpResult>(in).getResultNumber()]));
      continue;
    }
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i] == in && bc[i] == consumer.getBroadcast()[k]) {
        map.map(arg, block->getArgument(i));
        break;
      }
  }
  for (Operation &op : cb.without_terminator())
    ib.clone(op, map);
  auto cyield = cast<YieldOp>(cb.getTerminator());
  SmallVector<Value> yields;
  for (Value r : producer.getResults())
    if (llvm::is_contained(oldResults, r))
      yields.push_back(
          map.lookup(pyield.getValues()[cast<OpResult>(r).getResultNumber()]));
  for (Value y : cyield.getValues())
    yields.push_back(map.lookup(y));
  YieldOp::create(ib, loc, yields);
  for (auto [old, now] : llvm::zip(oldResults, fused.getResults()))
    b.replaceAllUsesWith(old, now);
  b.eraseOp(consumer);
  b.eraseOp(producer);
  return fused;
}

/// Whether `producer` can be recomputed inside `consumer`: its one result
/// is broadcast (kind 3) into `consumer` and used nowhere else, and its own
/// inputs can be broadcast the same way (not per channel). This is the
/// squeeze-excitation gate: sigmoid(N x C x 1 x 1) * x(N x C x H x W) becomes
/// one kernel that recomputes the N x C gate per element.
bool canInlineBroadcast(FusedElementwiseOp producer,
                        FusedElementwiseOp consumer) {
  if (producer->getNumResults() != 1 ||
      llvm::is_contained(producer.getBroadcast(), 1))
    return false;
  Value r = producer.getResult(0);
  if (!llvm::all_of(r.getUsers(),
                    [&](Operation *u) { return u == consumer.getOperation(); }))
    return false;
  for (auto [k, in] : llvm::enumerate(consumer.getInputs()))
    if (in == r && consumer.getBroadcast()[k] != 3)
      return false;
  return true;
}

FusedElementwiseOp inlineBroadcast(RewriterBase &b, FusedElementwiseOp producer,
                                   FusedElementwiseOp consumer) {
  b.setInsertionPoint(consumer);
  Location loc =
      FusedLoc::get(b.getContext(), {producer.getLoc(), consumer.getLoc()});
  Value r = producer.getResult(0);
  Type space = consumer.getResult(0).getType();
  SmallVector<Value> inputs;
  SmallVector<int64_t> bc;
  auto slot = [&](Value v, int64_t kind) -> unsigned {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i] == v && bc[i] == kind)
        return i;
    inputs.push_back(v);
    bc.push_back(kind);
    return inputs.size() - 1;
  };
  SmallVector<unsigned> producerSlots, consumerSlots;
  for (auto [k, in] : llvm::enumerate(producer.getInputs())) {
    int64_t kind = producer.getBroadcast()[k];
    producerSlots.push_back(
        slot(in, kind == 2 ? 2 : broadcastKind(in.getType(), space)));
  }
  for (auto [k, in] : llvm::enumerate(consumer.getInputs()))
    consumerSlots.push_back(in == r ? ~0u
                                    : slot(in, consumer.getBroadcast()[k]));
  auto [fused, block] = createFusedShell(b, loc, consumer->getResultTypes(),
                                         inputs, bc, consumer.getLayoutAttr());
  OpBuilder ib = OpBuilder::atBlockEnd(block);
  IRMapping map;
  Block &pb = producer.getBody().front();
  for (auto [k, arg] : llvm::enumerate(pb.getArguments()))
    map.map(arg, block->getArgument(producerSlots[k]));
  for (Operation &op : pb.without_terminator())
    ib.clone(op, map);
  Value gate = map.lookup(cast<YieldOp>(pb.getTerminator()).getValues()[0]);
  Block &cb = consumer.getBody().front();
  for (auto [k, arg] : llvm::enumerate(cb.getArguments()))
    map.map(arg, consumerSlots[k] == ~0u
                     ? gate
                     : Value(block->getArgument(consumerSlots[k])));
  for (Operation &op : cb.without_terminator())
    ib.clone(op, map);
  SmallVector<Value> yields;
  for (Value y : cast<YieldOp>(cb.getTerminator()).getValues())
    yields.push_back(map.lookup(y));
  YieldOp::create(ib, loc, yields);
  b.replaceOp(consumer, fused->getResults());
  b.eraseOp(producer);
  return fused;
}

/// Whether `producer` can move down into `consumer` (the merge at the
/// consumer's place): the consumer reads every result, nothing else does,
/// and the producer reads at most one tensor of its own shape that the
/// consumer does not read already, so keeping its inputs alive until the
/// consumer costs no more memory than keeping its result. GroupNorm's
/// normalized x on the grouped view, which the backward reads there while
/// the forward computes it on the NHWC channel view: recomputed in the
/// backward's kernel from the centered x and the statistic, not a kernel
/// of its own.
///
/// Only a producer whose results are f32: sunk, an f16 result's store (its
/// rounding) disappears and the reader computes with the f32 scalar, which
/// moves an f16 step's numbers where nothing asked for it (session 29: on
/// ResNet-50 the sinks of f16 producers took check_vs_torch's AMP curve
/// from 4.6 % to 9.9 % of its starting loss, over its 7.5 % bound).
bool sinkable(FusedElementwiseOp producer, FusedElementwiseOp consumer) {
  if (!llvm::all_of(producer->getResultTypes(), [](Type t) {
        return getElementTypeOrSelf(t).isF32();
      }))
    return false;
  if (producer->getBlock() != consumer->getBlock() ||
      !llvm::all_of(producer->getUsers(), [&](Operation *u) {
        return u == consumer.getOperation();
      }))
    return false;
  ArrayRef<int64_t> space =
      cast<ShapedType>(producer.getResult(0).getType()).getShape();
  int64_t fullInputs = 0;
  for (Value in : producer.getInputs())
    if (cast<ShapedType>(in.getType()).getShape() == space)
      fullInputs += !llvm::is_contained(consumer.getInputs(), in);
  return fullInputs <= 1;
}

bool sameSpace(FusedElementwiseOp a, FusedElementwiseOp b) {
  auto ta = cast<RankedTensorType>(a.getResult(0).getType());
  auto tb = cast<RankedTensorType>(b.getResult(0).getType());
  if (ta.getShape() != tb.getShape())
    return false;
  bool ca = llvm::is_contained(a.getBroadcast(), 1),
       cb = llvm::is_contained(b.getBroadcast(), 1);
  return !(ca && cb) || a.getLayout() == b.getLayout();
}

/// Whether `op` only widens its one input (an f16 -> f32 cast: its body
/// yields its argument) for one elementwise reader. Merged up into the
/// producer it would make the producer store the value a second time, in
/// f32, until that reader runs (GroupNorm's normalized x, which the
/// backward's scale gradient reads as f32: the f16 NHWC forward kernel
/// kept it twice, +20 % peak memory on a GroupNorm ResNet-18); left alone
/// it sinks into that reader instead (`sinkable`; only where it can).
bool widensForOneReader(FusedElementwiseOp op) {
  if (op.getInputs().size() != 1 || op->getNumResults() != 1 ||
      !op->hasOneUse())
    return false;
  auto reader = dyn_cast<FusedElementwiseOp>(*op->user_begin());
  if (!reader || !sameSpace(op, reader) || !sinkable(op, reader))
    return false;
  Block &body = op.getBody().front();
  if (!body.without_terminator().empty() ||
      body.getTerminator()->getOperand(0) != body.getArgument(0))
    return false;
  return getElementTypeOrSelf(op.getResult(0).getType())
             .getIntOrFloatBitWidth() >
         getElementTypeOrSelf(op.getInputs()[0].getType())
             .getIntOrFloatBitWidth();
}

/// Merges a fused_elementwise consumer with the first of its producers
/// (operand order) that can join it: a broadcast gate is recomputed inside
/// it, a producer of the same shape takes it in when every other operand of
/// the consumer is defined before the producer (the merged op takes the
/// producer's place).
struct MergeElementwiseProducer
    : Counted<OpRewritePattern<FusedElementwiseOp>> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(FusedElementwiseOp consumer,
                                PatternRewriter &rewriter) const override {
    for (Value in : consumer.getInputs()) {
      auto producer = in.getDefiningOp<FusedElementwiseOp>();
      if (!producer)
        continue;
      if (canInlineBroadcast(producer, consumer)) {
        inlineBroadcast(rewriter, producer, consumer);
        ++counts.elementwiseMerges;
        return success();
      }
      if (!sameSpace(producer, consumer))
        continue;
      bool dominated = llvm::all_of(consumer.getInputs(), [&](Value v) {
        return definedOrReshapedBefore(v, producer);
      });
      if (dominated && !widensForOneReader(consumer)) {
        for (Value v : consumer.getInputs())
          hoistReshapesBefore(rewriter, v, producer);
        merge(rewriter, producer, consumer, producer);
      } else if (sinkable(producer, consumer)) {
        merge(rewriter, producer, consumer, consumer);
      } else {
        continue;
      }
      ++counts.elementwiseMerges;
      return success();
    }
    return rewriter.notifyMatchFailure(consumer, "no producer can join");
  }
};

//===----------------------------------------------------------------------===//
// 5. Upsample + concat (a U-Net decoder)
//===----------------------------------------------------------------------===//

/// The channel dimension of a 4-D `op` that has a layout, or -1.
int64_t channelDimOf(Operation *op) {
  auto layout = cast<LayoutSensitiveOpInterface>(op);
  Type t = op->getResult(0).getType();
  return cast<RankedTensorType>(t).getRank() == 4 ? layout.getChannelDim(t)
                                                  : -1;
}

/// The resize attributes of `op` (a resize or resize_grad) that the fused
/// forms keep: size, the modes, scales (when set) and layout.
template <typename ResizeLikeOp>
SmallVector<NamedAttribute> resizeAttrsOf(OpBuilder &b, ResizeLikeOp op) {
  SmallVector<NamedAttribute> attrs{
      b.getNamedAttr("size", op.getSizeAttr()),
      b.getNamedAttr("mode", op.getModeAttr()),
      b.getNamedAttr("coordinate_transformation_mode",
                     op.getCoordinateTransformationModeAttr()),
      b.getNamedAttr("nearest_mode", op.getNearestModeAttr()),
      b.getNamedAttr("layout", op.getLayoutAttr())};
  if (auto scales = op.getScalesAttr())
    attrs.push_back(b.getNamedAttr("scales", scales));
  return attrs;
}

/// concat(resize(x), skip) along the channels -> fused_resize_concat(x,
/// skip) (or concat(skip, resize(x))), when the resize has no other user:
/// one kernel writes the concatenation, the resized tensor is never stored
/// and re-read. Two operands only (the U-Net's decoder); with two resizes,
/// the first is fused.
struct FuseResizeIntoConcat : Counted<OpRewritePattern<ConcatOp>> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(ConcatOp concat,
                                PatternRewriter &rewriter) const override {
    if (concat.getInputs().size() != 2)
      return rewriter.notifyMatchFailure(concat, "not two operands");
    for (int64_t i = 0; i < 2; ++i) {
      auto resize = concat.getInputs()[i].getDefiningOp<ResizeOp>();
      if (!resize || !resize.getResult().hasOneUse() ||
          channelDimOf(resize) != static_cast<int64_t>(concat.getAxis()))
        continue;
      Value other = concat.getInputs()[1 - i];
      SmallVector<NamedAttribute> attrs = resizeAttrsOf(rewriter, resize);
      attrs.push_back(
          rewriter.getNamedAttr("resized_first", rewriter.getBoolAttr(i == 0)));
      rewriter.setInsertionPoint(concat);
      auto fused = FusedResizeConcatOp::create(
          rewriter, concat.getLoc(), TypeRange{concat.getType()},
          ValueRange{resize.getInput(), other}, attrs);
      rewriter.replaceOp(concat, fused.getResult());
      rewriter.eraseOp(resize);
      ++counts.resizeConcats;
      return success();
    }
    return rewriter.notifyMatchFailure(
        concat, "no single-use resize concatenated along its channels");
  }
};

/// resize_grad(slice(dy)) where the slice, read by nothing else, takes a
/// channel range of dy (a concatenation's gradient) -> resize_grad(dy) with
/// `channel_offset`: the range is read in place, the slice's copy is gone.
struct ResizeGradReadsChannelRange
    : Counted<OpRewritePattern<ResizeGradOp>> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(ResizeGradOp grad,
                                PatternRewriter &rewriter) const override {
    auto slice = grad.getGradOutput().getDefiningOp<SliceOp>();
    int64_t c = channelDimOf(grad);
    if (grad.getChannelOffset() || !slice || c < 0 ||
        !slice.getResult().hasOneUse())
      return rewriter.notifyMatchFailure(grad, "no single-use slice read");
    auto full = cast<RankedTensorType>(slice.getInput().getType());
    ArrayRef<int64_t> offsets = slice.getOffsets(), sizes = slice.getSizes();
    for (int64_t d = 0; d < full.getRank(); ++d)
      if (d != c && (offsets[d] != 0 || sizes[d] != full.getDimSize(d)))
        return rewriter.notifyMatchFailure(grad, "not a channel range");
    SmallVector<NamedAttribute> attrs = resizeAttrsOf(rewriter, grad);
    attrs.push_back(rewriter.getNamedAttr(
        "channel_offset", rewriter.getI64IntegerAttr(offsets[c])));
    rewriter.setInsertionPoint(grad);
    auto read = ResizeGradOp::create(rewriter, grad.getLoc(),
                                     TypeRange{grad.getType()},
                                     ValueRange{slice.getInput()}, attrs);
    rewriter.replaceOp(grad, read.getResult());
    rewriter.eraseOp(slice);
    ++counts.resizeGradSlices;
    return success();
  }
};

/// Applies `patterns` to the first op of `block` (in block order) that one
/// matches, then starts over at the top of the block, until none matches.
///
/// The merge patterns need this order, not the greedy driver's worklist:
/// which producer/consumer pairs merge first decides which groups form (a
/// merge moves the consumer to the producer's place, which changes what the
/// dominance test allows for the ops around it), and so the kernels the CUDA
/// target emits. Visiting the block top-down and restarting after each
/// rewrite keeps the groups deterministic and independent of the worklist's
/// implementation; it is quadratic in the worst case, like the loop it
/// replaces, which is fine for a training step's few thousand ops.
void applyFirstMatchInBlockOrder(Block &block,
                                 const FrozenRewritePatternSet &patterns) {
  PatternApplicator applicator(patterns);
  applicator.applyDefaultCostModel();
  PatternRewriter rewriter(block.getParent()->getContext());
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : block) {
      rewriter.setInsertionPoint(&op);
      if (succeeded(applicator.matchAndRewrite(&op, rewriter))) {
        changed = true;
        break;
      }
    }
  }
}

/// Runs `patterns` with the greedy driver, top-down, without folding,
/// constant CSE or region simplification: the rewrites of these phases are
/// local (each matched op's chain is disjoint from the others'), so their
/// order does not change the result, and nothing but them may touch the IR.
void applyGreedily(func::FuncOp f, RewritePatternSet &&patterns) {
  GreedyRewriteConfig config;
  config.setUseTopDownTraversal(true)
      .enableFolding(false)
      .enableConstantCSE(false)
      .setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  (void)applyPatternsGreedily(f, std::move(patterns), config);
}

struct FusePass : public cnnc::impl::CNNFuseBase<FusePass> {
  using CNNFuseBase::CNNFuseBase;
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    counts = {};
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (f.getBlocks().size() != 1)
        continue;
      // Each phase finishes on the whole function before the next starts:
      // the clip_grad re-pointing frees the clip input the epilogue needs,
      // and the elementwise phase sees the BN normalization as its input.
      RewritePatternSet clipGrad(ctx);
      clipGrad.add<RepointClipGradAtClip>(ctx);
      applyGreedily(f, std::move(clipGrad));

      RewritePatternSet conv(ctx);
      conv.add<FuseConvEpilogue>(ctx, counts);
      applyGreedily(f, std::move(conv));

      RewritePatternSet bn(ctx);
      bn.add<SplitBatchNormTrain, FuseReluGradIntoBatchNormGrad>(ctx, counts);
      applyGreedily(f, std::move(bn));

      if (recomputeReluMask) {
        RewritePatternSet mask(ctx);
        mask.add<RecomputeReluMask, RecomputeReluMaskOfGradSums>(ctx, counts);
        applyGreedily(f, std::move(mask));
      }

      // After the ReLU-gradient folds above, which take single-use dys.
      if (dualBatchNormGrad) {
        RewritePatternSet pairs(ctx);
        pairs.add<FuseBatchNormGradPair>(ctx, counts);
        applyGreedily(f, std::move(pairs));
      }

      // Upsample + concat: independent of the other phases (no other
      // rewrite takes a resize, concat or slice).
      if (resizeConcat) {
        RewritePatternSet resizeConcatSet(ctx);
        resizeConcatSet.add<FuseResizeIntoConcat, ResizeGradReadsChannelRange>(
            ctx, counts);
        applyGreedily(f, std::move(resizeConcatSet));
      }

      RewritePatternSet toFused(ctx);
      toFused.add<ElementwiseToFused, BiasAddToFused>(ctx, counts);
      applyGreedily(f, std::move(toFused));

      // GroupNorm's normalization onto the channel view its scale, shift
      // and activation use, before the merges join them.
      if (groupNormChannelView) {
        RewritePatternSet channelView(ctx);
        channelView.add<GroupedElementwiseToChannelView>(ctx, counts);
        applyGreedily(f, std::move(channelView));
      }

      RewritePatternSet mergeSet(ctx);
      mergeSet.add<MergeElementwiseProducer>(ctx, counts);
      applyFirstMatchInBlockOrder(f.getBody().front(),
                                  FrozenRewritePatternSet(std::move(mergeSet)));
    }
    numConvEpilogueOps = counts.convEpilogueOps;
    numBatchNormSplits = counts.bnSplits;
    numBatchNormReluGradOps = counts.bnReluGradOps;
    numReluMasksRecomputed = counts.bnReluMasksRecomputed;
    numBatchNormGradPairs = counts.bnGradPairs;
    numElementwiseOps = counts.elementwiseOps;
    numElementwiseMerges = counts.elementwiseMerges;
    numGroupedToChannelView = counts.groupNormChannelViews;
    numResizeConcats = counts.resizeConcats;
    numResizeGradSlices = counts.resizeGradSlices;
  }
  /// The counts of the last run, for getFusionCounts: the Statistics above
  /// are no-ops in builds without LLVM_ENABLE_STATS (NDEBUG without
  /// LLVM_FORCE_ENABLE_STATS, as Debian's release packages and this
  /// project's Release build), where --mlir-pass-statistics prints nothing.
  FusionCounts counts;
};

} // namespace

std::optional<FusionCounts> cnnc::getFusionCounts(const Pass &pass) {
  if (pass.getTypeID() != TypeID::get<FusePass>())
    return std::nullopt;
  return static_cast<const FusePass &>(pass).counts;
}
