//===- Fuse.cpp - cnn-fuse ------------------------------------------------===//
//
// Fusion on the whole training step, in four rewrites:
//  1. conv2d [+ bias_add] [+ add residual] [+ relu | clip] -> fused_conv2d
//     (clip_grad is first re-pointed at the clip output, which carries the
//     same mask, so the clip input has no other user).
//  2. batch_norm_train -> batch_norm_stats + an elementwise normalization,
//     which then fuses with the residual add and ReLU that follow.
//  3. batch_norm_grad(relu_grad(dy, y)) -> fused_batch_norm_relu_grad.
//  4. Every elementwise op becomes a fused_elementwise; producer/consumer
//     pairs of the same shape merge until nothing changes.
// Each rewrite keeps the step's semantics exactly (checked by running the
// reference interpreter before and after in the tests).
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
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

StringRef layoutOf(Operation *op) {
  if (auto l = op->getAttrOfType<StringAttr>("layout"))
    return l.getValue();
  return "NCHW";
}

bool hasOneUse(Value v) { return v.hasOneUse(); }

//===----------------------------------------------------------------------===//
// 1. Convolution epilogues
//===----------------------------------------------------------------------===//

void fuseConvEpilogues(func::FuncOp f, int &count) {
  // clip_grad(dy, x) == clip_grad(dy, clip(x)): x in (min, max) iff clip(x) is.
  f.walk([&](ClipGradOp g) {
    for (Operation *u : g.getInput().getUsers())
      if (auto c = dyn_cast<ClipOp>(u))
        if (c.getMin() == g.getMin() && c.getMax() == g.getMax() &&
            c->getBlock() == g->getBlock() && c->isBeforeInBlock(g)) {
          g.getInputMutable().assign(c.getResult());
          break;
        }
  });
  SmallVector<Conv2DOp> convs;
  f.walk([&](Conv2DOp c) { convs.push_back(c); });
  for (Conv2DOp conv : convs) {
    Value cur = conv.getResult();
    Value bias, residual;
    SmallVector<Operation *> chain;
    std::string act = "none";
    float clipMin = 0, clipMax = 6;
    if (hasOneUse(cur))
      if (auto b = dyn_cast<BiasAddOp>(*cur.getUsers().begin()))
        if (b.getInput() == cur && layoutOf(b) == layoutOf(conv)) {
          bias = b.getBias();
          chain.push_back(b);
          cur = b.getResult();
        }
    if (hasOneUse(cur))
      if (auto a = dyn_cast<AddOp>(*cur.getUsers().begin())) {
        Value other = a.getLhs() == cur ? a.getRhs() : a.getLhs();
        // The residual must exist before the convolution.
        Operation *def = other.getDefiningOp();
        if (other != cur && (!def || def->isBeforeInBlock(conv))) {
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
      continue;
    Operation *last = chain.back();
    OpBuilder b(last);
    SmallVector<NamedAttribute> attrs{
        b.getNamedAttr("strides", conv.getStridesAttr()),
        b.getNamedAttr("padding", conv.getPaddingAttr()),
        b.getNamedAttr("dilations", conv.getDilationsAttr()),
        b.getNamedAttr("groups", conv.getGroupsAttr()),
        b.getNamedAttr("layout", b.getStringAttr(layoutOf(conv))),
        b.getNamedAttr("activation", b.getStringAttr(act)),
        b.getNamedAttr("clip_min", b.getF32FloatAttr(clipMin)),
        b.getNamedAttr("clip_max", b.getF32FloatAttr(clipMax)),
        b.getNamedAttr(
            "operandSegmentSizes",
            b.getDenseI32ArrayAttr({1, 1, bias ? 1 : 0, residual ? 1 : 0}))};
    SmallVector<Value> operands{conv.getInput(), conv.getFilter()};
    if (bias)
      operands.push_back(bias);
    if (residual)
      operands.push_back(residual);
    auto fused = FusedConv2DOp::create(
        b, conv.getLoc(), TypeRange{cur.getType()}, operands, attrs);
    cur.replaceAllUsesWith(fused.getResult());
    for (Operation *op : llvm::reverse(chain))
      op->erase();
    conv->erase();
    count += chain.size() + 1;
  }
}

//===----------------------------------------------------------------------===//
// 2. BN statistics / normalization split, 3. ReLU mask into BN grad
//===----------------------------------------------------------------------===//

/// Builds a fused_elementwise with `inputs` (broadcast kinds `bc`) whose body
/// is made by `body(builder, args) -> yielded values`.
void splitBatchNorm(func::FuncOp f, int &count) {
  SmallVector<BatchNormTrainOp> bns;
  f.walk([&](BatchNormTrainOp o) { bns.push_back(o); });
  for (BatchNormTrainOp bn : bns) {
    OpBuilder b(bn);
    StringRef layout = layoutOf(bn);
    auto f32 = RankedTensorType::get(bn.getSavedMean().getType().getShape(),
                                     b.getF32Type());
    auto stats = BatchNormStatsOp::create(
        b, bn.getLoc(),
        TypeRange{bn.getSavedMean().getType(), bn.getSavedInvstd().getType(),
                  bn.getNewRunningMean().getType(),
                  bn.getNewRunningVar().getType(), f32, f32},
        ValueRange{bn.getInput(), bn.getScale(), bn.getBias(),
                   bn.getRunningMean(), bn.getRunningVar()},
        {b.getNamedAttr("epsilon", bn.getEpsilonAttr()),
         b.getNamedAttr("momentum", bn.getMomentumAttr()),
         b.getNamedAttr("layout", b.getStringAttr(layout))});
    auto norm = makeFusedElementwise(
        b, bn.getLoc(), TypeRange{bn.getResult().getType()},
        ValueRange{bn.getInput(), stats.getAlpha(), stats.getBeta()}, {0, 1, 1},
        layout, [&](ScalarBuilder &s, ValueRange a) {
          // x * alpha + beta: the batch_norm_train kernel's operations.
          return SmallVector<Value>{s.add(s.mul(a[0], a[1]), a[2])};
        });
    bn.getResult().replaceAllUsesWith(norm.getResult(0));
    bn.getSavedMean().replaceAllUsesWith(stats.getSavedMean());
    bn.getSavedInvstd().replaceAllUsesWith(stats.getSavedInvstd());
    bn.getNewRunningMean().replaceAllUsesWith(stats.getNewRunningMean());
    bn.getNewRunningVar().replaceAllUsesWith(stats.getNewRunningVar());
    bn->erase();
    ++count;
  }
}

void fuseReluIntoBatchNormGrad(func::FuncOp f, int &count) {
  SmallVector<BatchNormGradOp> grads;
  f.walk([&](BatchNormGradOp o) { grads.push_back(o); });
  for (BatchNormGradOp g : grads) {
    auto rg = g.getGradOutput().getDefiningOp<ReluGradOp>();
    if (!rg || !rg.getResult().hasOneUse())
      continue;
    OpBuilder b(g);
    auto fused = FusedBatchNormReluGradOp::create(
        b, g.getLoc(), g->getResultTypes(),
        ValueRange{rg.getGradOutput(), rg.getOutput(), g.getInput(),
                   g.getScale(), g.getSavedMean(), g.getSavedInvstd()},
        {b.getNamedAttr("layout", b.getStringAttr(layoutOf(g)))});
    g->replaceAllUsesWith(fused->getResults());
    g->erase();
    rg->erase();
    count += 2;
  }
}

//===----------------------------------------------------------------------===//
// 4. Elementwise chains
//===----------------------------------------------------------------------===//

/// Converts one elementwise cnn op to a single-op fused_elementwise: the
/// op's own scalar body (ElementwiseOpInterface); bias_add, whose bias is
/// per channel of a layout, is the one op with its own form here.
FusedElementwiseOp toElementwise(Operation *op) {
  OpBuilder b(op);
  if (auto e = dyn_cast<ElementwiseOpInterface>(op))
    return wrapElementwise(b, e);
  if (auto o = dyn_cast<BiasAddOp>(op)) {
    bool half = o.getType().getElementType().isF16();
    return makeFusedElementwise(
        b, o.getLoc(), o->getResultTypes(), o->getOperands(), {0, 1},
        layoutOf(o), [&](ScalarBuilder &s, ValueRange a) {
          Value r = s.add(a[0], a[1]);
          return SmallVector<Value>{half ? s.roundToHalf(r) : r};
        });
  }
  return {};
}

/// Merges `consumer` into `producer` (both fused_elementwise, same shape and
/// compatible layouts); every other operand of `consumer` is defined before
/// `producer`, so the merged op takes the producer's place.
FusedElementwiseOp merge(FusedElementwiseOp producer,
                         FusedElementwiseOp consumer) {
  OpBuilder b(producer);
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
  StringRef layout = producer.getLayout();
  if (llvm::is_contained(consumer.getBroadcast(), 1))
    layout = consumer.getLayout();
  auto fused = FusedElementwiseOp::create(
      b, loc, types, inputs,
      {b.getNamedAttr("broadcast", b.getDenseI64ArrayAttr(bc)),
       b.getNamedAttr("layout", b.getStringAttr(layout))});
  Block *block = new Block();
  fused.getBody().push_back(block);
  for (size_t i = 0; i < inputs.size(); ++i)
    block->addArgument(b.getF32Type(), loc);
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
    old.replaceAllUsesWith(now);
  consumer->erase();
  producer->erase();
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

FusedElementwiseOp inlineBroadcast(FusedElementwiseOp producer,
                                   FusedElementwiseOp consumer) {
  OpBuilder b(consumer);
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
  auto fused = FusedElementwiseOp::create(
      b, loc, consumer->getResultTypes(), inputs,
      {b.getNamedAttr("broadcast", b.getDenseI64ArrayAttr(bc)),
       b.getNamedAttr("layout", consumer.getLayoutAttr())});
  Block *block = new Block();
  fused.getBody().push_back(block);
  for (size_t i = 0; i < inputs.size(); ++i)
    block->addArgument(b.getF32Type(), loc);
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
  consumer->replaceAllUsesWith(fused->getResults());
  consumer->erase();
  producer->erase();
  return fused;
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

void fuseElementwise(func::FuncOp f, int &converted, int &merged) {
  SmallVector<Operation *> ops;
  for (Operation &op : f.getBody().front())
    ops.push_back(&op);
  for (Operation *op : ops)
    if (!isa<FusedElementwiseOp>(op))
      if (auto fe = toElementwise(op)) {
        op->replaceAllUsesWith(fe->getResults());
        op->erase();
        ++converted;
      }
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : f.getBody().front()) {
      auto consumer = dyn_cast<FusedElementwiseOp>(&op);
      if (!consumer)
        continue;
      for (Value in : consumer.getInputs()) {
        auto producer = in.getDefiningOp<FusedElementwiseOp>();
        if (!producer)
          continue;
        if (canInlineBroadcast(producer, consumer)) {
          inlineBroadcast(producer, consumer);
          ++merged;
          changed = true;
          break;
        }
        if (!sameSpace(producer, consumer))
          continue;
        bool dominated = llvm::all_of(consumer.getInputs(), [&](Value v) {
          Operation *d = v.getDefiningOp();
          return !d || d == producer.getOperation() ||
                 d->isBeforeInBlock(producer);
        });
        if (!dominated)
          continue;
        merge(producer, consumer);
        ++merged;
        changed = true;
        break;
      }
      if (changed)
        break;
    }
  }
}

struct FusePass : public cnnc::impl::CNNFuseBase<FusePass> {
  void runOnOperation() override {
    int conv = 0, bn = 0, bnGrad = 0, converted = 0, merged = 0;
    getOperation().walk([&](func::FuncOp f) {
      if (f.getBlocks().size() != 1)
        return;
      fuseConvEpilogues(f, conv);
      splitBatchNorm(f, bn);
      fuseReluIntoBatchNormGrad(f, bnGrad);
      fuseElementwise(f, converted, merged);
    });
    auto *ctx = &getContext();
    getOperation()->setAttr(
        "cnn.fusion_stats",
        DictionaryAttr::get(
            ctx,
            {NamedAttribute(StringAttr::get(ctx, "conv_epilogue_ops"),
                            IntegerAttr::get(IntegerType::get(ctx, 64), conv)),
             NamedAttribute(StringAttr::get(ctx, "bn_split"),
                            IntegerAttr::get(IntegerType::get(ctx, 64), bn)),
             NamedAttribute(
                 StringAttr::get(ctx, "bn_relu_grad_ops"),
                 IntegerAttr::get(IntegerType::get(ctx, 64), bnGrad)),
             NamedAttribute(
                 StringAttr::get(ctx, "elementwise_ops"),
                 IntegerAttr::get(IntegerType::get(ctx, 64), converted)),
             NamedAttribute(
                 StringAttr::get(ctx, "elementwise_merges"),
                 IntegerAttr::get(IntegerType::get(ctx, 64), merged))}));
  }
};

} // namespace
