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

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "cnnc/Dialect/CNN/ScalarBuilder.h"
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
    if (cast<RankedTensorType>(c.getInput().getType())
            .getElementType()
            .isF16())
      return c.getInput();
  return g;
}


/// f32 view of `v` for statistics: a cast where the step stores f16.
Value asF32(OpBuilder &b, Location loc, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getElementType().isF32())
    return v;
  return CastOp::create(b, loc, t.clone(b.getF32Type()), v);
}

/// The per-channel mean of `v` over every dimension but the channel, as a
/// 1-D f32 tensor of the channel count (accumulated in f32).
Value channelMean(OpBuilder &b, Location loc, Value v, int64_t channelDim) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (d != channelDim)
      axes.push_back(d);
  Value m = ReduceMeanOp::create(
      b, loc, ValueRange{v},
      {b.getNamedAttr("axes", b.getDenseI64ArrayAttr(axes))});
  return ReshapeOp::create(
      b, loc, RankedTensorType::get({t.getDimSize(channelDim)}, t.getElementType()),
      m);
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

/// A placeholder all-reduce (avg) of `values`; its bucket number is given
/// when every collective of the step is in place (renumberCollectives).
AllReduceOp averageOverRanks(OpBuilder &b, Location loc,
                             ArrayRef<Value> values) {
  int64_t bytes = 0;
  for (Value v : values)
    bytes += bytesOf(v);
  return AllReduceOp::create(
      b, loc, ValueRange(values).getTypes(), values,
      {b.getNamedAttr("reduction", b.getStringAttr("avg")),
       b.getNamedAttr("bucket", b.getI64IntegerAttr(-1)),
       b.getNamedAttr("bytes", b.getI64IntegerAttr(bytes))});
}

/// --sync-bn: every batch_norm_train of the step normalizes with the
/// statistics of the global batch, and its batch_norm_grad uses the global
/// sums of the gradient, as PyTorch's SyncBatchNorm:
///   forward   M = avg_r mean_r(x)               (all-reduce #1)
///             V = avg_r mean_r((x - M)^2)       (all-reduce #2; centered, so
///                                                no E[x^2] - E[x]^2 loss)
///             y = (x - M) * rsqrt(V + eps) * scale + bias
///             running stats with M and V * n / (n - 1), n = the global count
///   backward  G1 = avg_r mean_r(dy), G2 = avg_r mean_r(dy * xhat) (one bucket)
///             dx = scale * invstd * (dy - G1 - xhat * G2)
///             dscale, dbias = the rank's own sums (averaged with the other
///             parameter gradients by the buckets)
/// With equal shards, the mean of the per-rank means is the global mean, so
/// N ranks x batch B compute what one rank with batch N*B does. Statistics
/// are f32 whatever the activations' type. Returns how many were rewritten.
FailureOr<int64_t> syncBatchNorm(func::FuncOp f, int64_t worldSize) {
  SmallVector<BatchNormTrainOp> bns;
  f.walk([&](BatchNormTrainOp bn) { bns.push_back(bn); });
  OpBuilder b(f.getContext());
  for (BatchNormTrainOp bn : bns) {
    Location loc = bn.getLoc();
    Layout layout = bn.getLayout();
    auto xt = bn.getInput().getType();
    int64_t cd = bn.getChannelDim(xt);
    int64_t count = xt.getNumElements() / xt.getDimSize(cd);
    double n = static_cast<double>(count) * worldSize;
    float eps = bn.getEpsilon().convertToFloat();
    float mom = bn.getMomentum().convertToFloat();
    auto vec = RankedTensorType::get({xt.getDimSize(cd)}, b.getF32Type());
    b.setInsertionPoint(bn);
    Value xf = asF32(b, loc, bn.getInput());
    Value mean =
        averageOverRanks(b, loc, {channelMean(b, loc, xf, cd)}).getResult(0);
    Value sq = elementwise(b, loc, xf.getType(), {xf, mean}, {0, 1}, layout,
                           [](ScalarBuilder &s, ValueRange a) {
                             Value d = s.sub(a[0], a[1]);
                             return s.mul(d, d);
                           });
    Value var =
        averageOverRanks(b, loc, {channelMean(b, loc, sq, cd)}).getResult(0);
    Value invstd = elementwise(b, loc, vec, {var}, {0}, layout,
                               [&](ScalarBuilder &s, ValueRange a) {
                                 return s.div(s.c(1.0),
                                              s.sqrt(s.add(a[0], s.c(eps))));
                               });
    Value y = elementwise(
        b, loc, bn.getResult().getType(),
        {bn.getInput(), mean, invstd, bn.getScale(), bn.getBias()},
        {0, 1, 1, 1, 1}, layout, [](ScalarBuilder &s, ValueRange a) {
          return s.add(s.mul(s.mul(s.sub(a[0], a[1]), a[2]), a[3]), a[4]);
        });
    Value newMean = elementwise(
        b, loc, bn.getNewRunningMean().getType(), {bn.getRunningMean(), mean},
        {0, 0}, layout, [&](ScalarBuilder &s, ValueRange a) {
          return s.add(s.mul(s.c(mom), a[1]), s.mul(s.c(1.0 - mom), a[0]));
        });
    double unbias = n > 1 ? n / (n - 1) : 1.0;
    Value newVar = elementwise(
        b, loc, bn.getNewRunningVar().getType(), {bn.getRunningVar(), var},
        {0, 0}, layout, [&](ScalarBuilder &s, ValueRange a) {
          return s.add(s.mul(s.c(mom), s.mul(a[1], s.c(unbias))),
                       s.mul(s.c(1.0 - mom), a[0]));
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
      b.setInsertionPoint(g);
      Value dy = g.getGradOutput();
      Value dyf = asF32(b, gl, dy);
      Value dyXhat = elementwise(
          b, gl, dyf.getType(), {dy, g.getInput(), mean, invstd}, {0, 0, 1, 1},
          layout, [](ScalarBuilder &s, ValueRange a) {
            return s.mul(a[0], s.mul(s.sub(a[1], a[2]), a[3]));
          });
      Value meanDy = channelMean(b, gl, dyf, cd);
      Value meanDyXhat = channelMean(b, gl, dyXhat, cd);
      // The rank's own sums first: the collective is then the local means'
      // last reader, and NCCL reduces them in place.
      auto localSum = [&](Value m, Type type) {
        return elementwise(b, gl, type, {m}, {0}, layout,
                           [&](ScalarBuilder &s, ValueRange a) {
                             return s.mul(a[0], s.c((double)count));
                           });
      };
      Value dscale = localSum(meanDyXhat, g.getGradScale().getType());
      Value dbias = localSum(meanDy, g.getGradBias().getType());
      AllReduceOp sums = averageOverRanks(b, gl, {meanDy, meanDyXhat});
      Value dx = elementwise(
          b, gl, g.getGradInput().getType(),
          {dy, g.getInput(), mean, invstd, g.getScale(), sums.getResult(0),
           sums.getResult(1)},
          {0, 0, 1, 1, 1, 1, 1}, layout, [](ScalarBuilder &s, ValueRange a) {
            Value xhat = s.mul(s.sub(a[1], a[2]), a[3]);
            return s.mul(s.mul(a[4], a[3]),
                         s.sub(s.sub(a[0], a[5]), s.mul(xhat, a[6])));
          });
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
    bn.getNewRunningMean().replaceAllUsesWith(newMean);
    bn.getNewRunningVar().replaceAllUsesWith(newVar);
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
  if (syncBN) {
    FailureOr<int64_t> n = syncBatchNorm(f, worldSize);
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
      grads.insert(reducedValueOf(op.getOperand(1)));
  int lossResult = -1;
  for (unsigned r = 0; r < f.getNumResults(); ++r) {
    if (f.getResultAttr(r, kGradAttr))
      grads.insert(ret.getOperand(r));
    if (f.getResultAttr(r, kLossAttr))
      lossResult = r;
  }
  if (grads.empty())
    return f.emitError("cnn-data-parallel: @")
           << f.getName()
           << " has neither optimizer updates nor gradient results (run "
              "cnn-autodiff first)";
  if (lossResult < 0)
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

  // Buckets: consecutive gradients of one element type, up to bucket-mb.
  const int64_t limit = static_cast<int64_t>(bucketMB * (1 << 20));
  SmallVector<SmallVector<Value>> buckets;
  int64_t fill = 0;
  for (Value g : order) {
    Type elem = cast<RankedTensorType>(g.getType()).getElementType();
    bool fresh =
        buckets.empty() || fill + bytesOf(g) > limit ||
        cast<RankedTensorType>(buckets.back().front().getType())
                .getElementType() != elem;
    if (fresh) {
      buckets.emplace_back();
      fill = 0;
    }
    buckets.back().push_back(g);
    fill += bytesOf(g);
  }

  OpBuilder b(f.getContext());
  int64_t index = 0;
  auto allReduce = [&](ArrayRef<Value> values, Location loc) {
    ++index;
    AllReduceOp op = averageOverRanks(b, loc, values);
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
    allReduce(bucket, NameLoc::get(b.getStringAttr("all_reduce.bucket" +
                                                   Twine(index)),
                                   last->getLoc()));
  }
  numBuckets += buckets.size();
  numGradients += order.size();

  // The reported loss: the average over the ranks, last.
  b.setInsertionPoint(ret);
  allReduce({ret.getOperand(lossResult)},
            NameLoc::get(b.getStringAttr("all_reduce.loss"), f.getLoc()));
  // Buckets are numbered in issue order (the sync-bn collectives of the
  // forward pass come first, the backward's interleave with the gradients').
  int64_t issued = 0;
  for (Operation &op : body)
    if (auto a = dyn_cast<AllReduceOp>(op))
      a.setBucketAttr(b.getI64IntegerAttr(issued++));
  f->setAttr("cnn.data_parallel",
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
