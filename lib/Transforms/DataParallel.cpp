//===- DataParallel.cpp - cnn-data-parallel: bucketed gradient all-reduce -===//
//
// Routes every parameter gradient of @train_step through cnn.all_reduce
// (average over the data-parallel ranks) before its optimizer update, in
// buckets filled in the order the gradients become final in the backward
// schedule; averages the reported loss. See the pass description in
// Passes.td and docs/data-parallel.md.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "cnnc/Dialect/CNN/ScalarBuilder.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNDATAPARALLEL
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

int64_t bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getNumElements() * (t.getElementType().isF16() ? 2 : 4);
}

/// The value to reduce for an optimizer update's gradient operand: under
/// loss scaling the update reads cnn.cast(f16 -> f32) of the gradient; the
/// f16 value is reduced (half the bytes, as the GPU step computes it).
Value reducedValueOf(Value g) {
  if (auto c = g.getDefiningOp<CastOp>())
    if (cast<RankedTensorType>(c.getInput().getType()).getElementType().isF16())
      return c.getInput();
  return g;
}

/// One fused_elementwise with result type `type` over `inputs` (broadcast
/// kinds `bc`: 0 = full, 1 = per channel of `layout`).
Value elementwise(OpBuilder &b, Location loc, Type type, ValueRange inputs,
                  ArrayRef<int64_t> bc, Layout layout,
                  function_ref<Value(ScalarBuilder &, ValueRange)> body) {
  return makeFusedElementwise(b, loc, TypeRange{type}, inputs, bc, layout,
                              [&](ScalarBuilder &s, ValueRange a) {
                                return SmallVector<Value>{body(s, a)};
                              })
      .getResult(0);
}

/// A placeholder all-reduce of `values` (`reduction` avg or sum); its
/// bucket number is given when every collective of the step is in place
/// (the renumbering at the end of runOn).
AllReduceOp reduceOverRanks(OpBuilder &b, Location loc, ArrayRef<Value> values,
                            StringRef reduction = "avg") {
  int64_t bytes = 0;
  for (Value v : values)
    bytes += bytesOf(v);
  return AllReduceOp::create(
      b, loc, ValueRange(values).getTypes(), values,
      {b.getNamedAttr("reduction", b.getStringAttr(reduction)),
       b.getNamedAttr("bucket", b.getI64IntegerAttr(-1)),
       b.getNamedAttr("bytes", b.getI64IntegerAttr(bytes))});
}

/// The position right after the last definition of `values` in `block`
/// (its start if none is defined there).
Block::iterator afterDefinitions(Block &block, ValueRange values) {
  Operation *last = nullptr;
  for (Value v : values)
    if (Operation *d = v.getDefiningOp())
      if (d->getBlock() == &block && (!last || last->isBeforeInBlock(d)))
        last = d;
  return last ? std::next(last->getIterator()) : block.begin();
}

/// --sync-bn: every batch_norm_train of the step normalizes with the
/// statistics of the global batch, and its batch_norm_grad uses the global
/// sums of the gradient, as PyTorch's SyncBatchNorm:
///   forward   s, ss = batch_norm_sums(x)           the rank's sums, f32
///             S, SS = all_reduce sum (s, ss)       one collective
///             batch_norm_finalize(S, SS, count = n) the global batch's
///                      statistics, running statistics (unbiased over n)
///                      and the normalization's alpha, beta
///             y = x * alpha + beta                 (as cnn-fuse splits a
///                                                   batch_norm_train)
///   backward  g1, g2 = batch_norm_grad_sums(dy, x, mean, invstd)
///             G1, G2 = all_reduce sum (g1, g2)     one collective
///             dx = scale * invstd * (dy - G1 / n - xhat * G2 / n)
///             dscale, dbias = G2 / world, G1 / world: already the average
///             of the ranks' own sums that the gradient buckets would
///             compute, so they stay out of the buckets (`averaged`).
/// n = world size x the rank's count per channel: with equal shards the
/// sums over the ranks are the global batch's, so N ranks x batch B compute
/// what one rank with batch N*B does. The statistics are f32 sums whatever
/// the activations' type, as the single-GPU pipeline's (cnn-conv-stats
/// then moves batch_norm_sums into the producing convolution's epilogue,
/// as it does batch_norm_stats). Returns how many were rewritten.
FailureOr<int64_t> syncBatchNorm(func::FuncOp f, int64_t worldSize,
                                 llvm::DenseSet<Value> &averaged) {
  SmallVector<BatchNormTrainOp> bns;
  f.walk([&](BatchNormTrainOp bn) { bns.push_back(bn); });
  OpBuilder b(f.getContext());
  for (BatchNormTrainOp bn : bns) {
    Location loc = bn.getLoc();
    Layout layout = bn.getLayout();
    auto xt = bn.getInput().getType();
    int64_t cd = channelDim(xt, layout);
    if (cd != bn.getChannelDim(xt))
      return bn.emitError("cnn-data-parallel --sync-bn: the channel dimension "
                          "of this batch_norm_train is not its layout's");
    int64_t count = xt.getNumElements() / xt.getDimSize(cd);
    int64_t n = count * worldSize;
    auto vec = RankedTensorType::get({xt.getDimSize(cd)}, b.getF32Type());
    b.setInsertionPoint(bn);
    auto local =
        BatchNormSumsOp::create(b, loc, TypeRange{vec, vec}, bn.getInput(),
                                {b.getNamedAttr("layout", bn.getLayoutAttr())});
    AllReduceOp global =
        reduceOverRanks(b, loc, {local.getSum(), local.getSumSq()}, "sum");
    auto stats = BatchNormFinalizeOp::create(
        b, loc,
        TypeRange{vec, vec, bn.getNewRunningMean().getType(),
                  bn.getNewRunningVar().getType(), vec, vec},
        ValueRange{global.getResult(0), global.getResult(1), bn.getScale(),
                   bn.getBias(), bn.getRunningMean(), bn.getRunningVar()},
        {b.getNamedAttr("count", b.getI64IntegerAttr(n)),
         b.getNamedAttr("epsilon", bn.getEpsilonAttr()),
         b.getNamedAttr("momentum", bn.getMomentumAttr())});
    Value mean = stats.getSavedMean(), invstd = stats.getSavedInvstd();
    Value y =
        elementwise(b, loc, bn.getResult().getType(),
                    {bn.getInput(), stats.getAlpha(), stats.getBeta()},
                    {0, 1, 1}, layout, [](ScalarBuilder &s, ValueRange a) {
                      return s.add(s.mul(a[0], a[1]), a[2]);
                    });

    // The backward of this BN: every batch_norm_grad reading its saved
    // statistics (cnn-autodiff made one).
    SmallVector<BatchNormGradOp> grads;
    for (Operation *u : bn.getSavedMean().getUsers())
      if (auto g = dyn_cast<BatchNormGradOp>(u))
        grads.push_back(g);
    for (BatchNormGradOp g : grads) {
      if (g.getSavedMean() != bn.getSavedMean() ||
          g.getSavedInvstd() != bn.getSavedInvstd() ||
          g.getInput() != bn.getInput())
        return g.emitError("cnn-data-parallel --sync-bn: this batch_norm_grad "
                           "does not read its batch_norm_train's input and "
                           "statistics");
      Location gl = g.getLoc();
      Value dy = g.getGradOutput();
      // The sums and their collective as early as dy allows: autodiff put
      // the gradient after the weight gradient of the convolution that
      // made dy, which then runs while the collective is in flight (the
      // join stays at the first reader, the input gradient below). Where
      // dy is a ReLU's gradient, cnn-fuse moves them up again once the
      // sums read the unmasked gradient (RecomputeReluMaskOfGradSums).
      Block &block = *g->getBlock();
      b.setInsertionPoint(&block, afterDefinitions(block, {dy, g.getInput(),
                                                           mean, invstd}));
      auto sums = BatchNormGradSumsOp::create(
          b, gl, TypeRange{vec, vec},
          ValueRange{dy, g.getInput(), mean, invstd},
          {b.getNamedAttr("layout", g.getLayoutAttr())});
      AllReduceOp total =
          reduceOverRanks(b, gl, {sums.getSumDy(), sums.getSumDyXhat()}, "sum");
      b.setInsertionPoint(g);
      Value sumDy = total.getResult(0), sumDyXhat = total.getResult(1);
      double inv = 1.0 / static_cast<double>(n);
      Value dx = elementwise(
          b, gl, g.getGradInput().getType(),
          {dy, g.getInput(), mean, invstd, g.getScale(), sumDy, sumDyXhat},
          {0, 0, 1, 1, 1, 1, 1}, layout, [&](ScalarBuilder &s, ValueRange a) {
            Value xhat = s.mul(s.sub(a[1], a[2]), a[3]);
            Value centered = s.sub(s.sub(a[0], s.mul(a[5], s.c(inv))),
                                   s.mul(xhat, s.mul(a[6], s.c(inv))));
            return s.mul(s.mul(a[4], a[3]), centered);
          });
      // Both parameters' gradients in one kernel: G2 / world, G1 / world.
      auto perRank = makeFusedElementwise(
          b, gl,
          TypeRange{g.getGradScale().getType(), g.getGradBias().getType()},
          ValueRange{sumDyXhat, sumDy}, {0, 0}, layout,
          [&](ScalarBuilder &s, ValueRange a) {
            Value w = s.c(1.0 / worldSize);
            return SmallVector<Value>{s.mul(a[0], w), s.mul(a[1], w)};
          });
      Value dscale = perRank.getResult(0), dbias = perRank.getResult(1);
      averaged.insert(dscale);
      averaged.insert(dbias);
      g.getGradInput().replaceAllUsesWith(dx);
      g.getGradScale().replaceAllUsesWith(dscale);
      g.getGradBias().replaceAllUsesWith(dbias);
      g.erase();
    }
    if (!bn.getSavedMean().use_empty() || !bn.getSavedInvstd().use_empty()) {
      bn.getSavedMean().replaceAllUsesWith(mean);
      bn.getSavedInvstd().replaceAllUsesWith(invstd);
    }
    bn.getResult().replaceAllUsesWith(y);
    bn.getNewRunningMean().replaceAllUsesWith(stats.getNewRunningMean());
    bn.getNewRunningVar().replaceAllUsesWith(stats.getNewRunningVar());
    bn.erase();
  }
  return static_cast<int64_t>(bns.size());
}

struct DataParallelPass
    : public cnnc::impl::CNNDataParallelBase<DataParallelPass> {
  using CNNDataParallelBase::CNNDataParallelBase;
  void runOnOperation() override;
  LogicalResult runOn(func::FuncOp f);
};

LogicalResult DataParallelPass::runOn(func::FuncOp f) {
  if (f->hasAttr("cnn.data_parallel"))
    return f.emitError("cnn-data-parallel: @")
           << f.getName() << " already has its all-reduces";
  if (!(bucketMB >= 0))
    return f.emitError("cnn-data-parallel: bucket-mb must be >= 0, got ")
           << bucketMB;
  if (syncBN && worldSize < 1)
    return f.emitError("cnn-data-parallel: sync-bn needs world-size >= 1 "
                       "(the global batch's element count), got ")
           << worldSize;
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // Gradients the sync-bn rewrite computed from all-reduced sums: the same
  // on every rank already.
  llvm::DenseSet<Value> averaged;
  if (syncBN) {
    FailureOr<int64_t> n = syncBatchNorm(f, worldSize, averaged);
    if (failed(n))
      return failure();
    if (*n == 0)
      f.emitWarning("cnn-data-parallel: sync-bn given, but @")
          << f.getName()
          << " has no training-mode BatchNorm: nothing to synchronize";
    numSyncBN += *n;
  }

  // The gradients: operand `grad` of every optimizer update and every
  // cnn.grad result (optimizer none).
  llvm::SetVector<Value> grads;
  for (Operation &op : body)
    if (isa<SGDUpdateOp, AdamUpdateOp>(op))
      if (Value g = reducedValueOf(op.getOperand(1)); !averaged.contains(g))
        grads.insert(g);
  int lossResult = -1;
  for (unsigned r = 0; r < f.getNumResults(); ++r) {
    if (f.getResultAttr(r, kGradAttr) && !averaged.contains(ret.getOperand(r)))
      grads.insert(ret.getOperand(r));
    if (f.getResultAttr(r, kLossAttr))
      lossResult = r;
  }
  if (grads.empty() && averaged.empty())
    return f.emitError("cnn-data-parallel: @")
           << f.getName()
           << " has neither optimizer updates nor gradient results (run "
              "cnn-autodiff first)";
  // A pipeline stage before the last (cnn-pipeline-stage) has no loss:
  // only its gradients are averaged over the replicas.
  if (lossResult < 0 && !f->hasAttr("cnn.pipeline_stages"))
    return f.emitError("cnn-data-parallel: @")
           << f.getName() << " has no cnn.loss result";

  // In the order they become final: the position of the defining op.
  SmallVector<Value> order;
  for (Value g : grads) {
    Operation *d = g.getDefiningOp();
    if (!d)
      return f.emitError("cnn-data-parallel: a gradient of @")
             << f.getName() << " is a function argument";
    if (d->getBlock() != &body)
      return d->emitError("cnn-data-parallel: a gradient is not defined at "
                          "the top level of the function");
    if (isa<ConstantOp>(d))
      continue; // zeros of an unused parameter: equal on every rank
    order.push_back(g);
  }
  llvm::stable_sort(order, [](Value a, Value b) {
    return a.getDefiningOp()->isBeforeInBlock(b.getDefiningOp());
  });

  // Buckets: gradients of one element type each (an f16 step's f32
  // BatchNorm gradients would otherwise cut its f16 gradients into a bucket
  // per layer: ResNet-50 made 108 collectives, each an NCCL kernel holding
  // SMs the backward pass needs), up to bucket-mb, packed from the last
  // gradient back: the bucket that closes when the backward pass ends, whose
  // all-reduce nothing can hide, holds at most kTailMiB; every earlier one
  // overlaps the rest of the backward pass.
  constexpr double kTailMiB = 1.0;
  const int64_t limit = static_cast<int64_t>(bucketMB * (1 << 20));
  const int64_t tailLimit =
      std::min(limit, static_cast<int64_t>(kTailMiB * (1 << 20)));
  llvm::MapVector<Type, SmallVector<Value>> byType;
  for (Value g : order)
    byType[cast<RankedTensorType>(g.getType()).getElementType()].push_back(g);
  SmallVector<SmallVector<Value>> buckets;
  for (auto &entry : byType) {
    SmallVector<SmallVector<Value>> packed; // packed[0]: the last bucket
    int64_t fill = 0;
    for (Value g : llvm::reverse(entry.second)) {
      int64_t cap = packed.size() <= 1 ? tailLimit : limit;
      if (packed.empty() || fill + bytesOf(g) > cap) {
        packed.emplace_back();
        fill = 0;
      }
      packed.back().push_back(g);
      fill += bytesOf(g);
    }
    for (SmallVector<Value> &bucket : llvm::reverse(packed)) {
      std::reverse(bucket.begin(), bucket.end()); // finishing order
      buckets.push_back(std::move(bucket));
    }
  }
  // In the order their last gradients become final.
  llvm::stable_sort(buckets, [](ArrayRef<Value> a, ArrayRef<Value> b) {
    return a.back().getDefiningOp()->isBeforeInBlock(b.back().getDefiningOp());
  });

  OpBuilder b(f.getContext());
  int64_t index = 0;
  auto allReduce = [&](ArrayRef<Value> values, Location loc) {
    ++index;
    AllReduceOp op = reduceOverRanks(b, loc, values);
    // Uses after the collective read the reduced value (the updates, the
    // f32 casts feeding them, cnn.all_finite, the return).
    // cnn-precision casts a gradient to f32 right where it is computed; such
    // a cast, read only by optimizer updates, moves after the collective.
    // (Only uses after the collective read the reduced value.)
    Operation *at = op.getOperation();
    SmallVector<Operation *> moved;
    for (auto [cv, r] : llvm::zip(values, op.getResults()))
      Value(cv).replaceUsesWithIf(r, [&](OpOperand &use) {
        Operation *user = use.getOwner();
        if (user == at || user->getBlock() != &body)
          return false;
        if (isa<CastOp>(user) && !user->use_empty() &&
            llvm::all_of(user->getUsers(), [](Operation *u) {
              return isa<SGDUpdateOp, AdamUpdateOp>(u);
            })) {
          moved.push_back(user);
          return true;
        }
        return at->isBeforeInBlock(user);
      });
    // Right before its first reader (an update at the end of the step), so
    // that the compute stream does not wait for the bucket any earlier.
    for (Operation *c : moved) {
      Operation *first = nullptr;
      for (Operation *u : c->getUsers())
        if (!first || u->isBeforeInBlock(first))
          first = u;
      c->moveBefore(first);
    }
    return op;
  };
  for (ArrayRef<Value> bucket : buckets) {
    Operation *last = bucket.back().getDefiningOp();
    b.setInsertionPointAfter(last);
    allReduce(bucket,
              NameLoc::get(b.getStringAttr("all_reduce.bucket" + Twine(index)),
                           last->getLoc()));
  }
  numBuckets += buckets.size();
  numGradients += order.size();

  // The reported loss: the average over the ranks, last.
  b.setInsertionPoint(ret);
  if (lossResult >= 0)
    allReduce({ret.getOperand(lossResult)},
              NameLoc::get(b.getStringAttr("all_reduce.loss"), f.getLoc()));
  // Buckets are numbered in issue order (the sync-bn collectives of the
  // forward pass come first, the backward's interleave with the gradients').
  int64_t issued = 0;
  for (Operation &op : body)
    if (auto a = dyn_cast<AllReduceOp>(op))
      a.setBucketAttr(b.getI64IntegerAttr(issued++));
  f->setAttr(
      "cnn.data_parallel",
      b.getDictionaryAttr(
          {b.getNamedAttr("buckets", b.getI64IntegerAttr(buckets.size())),
           b.getNamedAttr("bucket_mb", b.getF64FloatAttr(bucketMB)),
           b.getNamedAttr("collectives", b.getI64IntegerAttr(issued)),
           b.getNamedAttr("sync_bn", b.getBoolAttr(syncBN))}));
  return success();
}

void DataParallelPass::runOnOperation() {
  auto step = getOperation().lookupSymbol<func::FuncOp>("train_step");
  if (!step) {
    getOperation().emitError(
        "cnn-data-parallel: the module has no @train_step (run cnn-autodiff "
        "first)");
    return signalPassFailure();
  }
  if (failed(runOn(step)))
    signalPassFailure();
}

} // namespace
