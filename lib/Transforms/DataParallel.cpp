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
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

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
    int64_t bytes = 0;
    for (Value v : values)
      bytes += bytesOf(v);
    auto op = AllReduceOp::create(
        b, loc, ValueRange(values).getTypes(), values,
        {b.getNamedAttr("reduction", b.getStringAttr("avg")),
         b.getNamedAttr("bucket", b.getI64IntegerAttr(index++)),
         b.getNamedAttr("bytes", b.getI64IntegerAttr(bytes))});
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
  f->setAttr("cnn.data_parallel",
             b.getDictionaryAttr(
                 {b.getNamedAttr("buckets", b.getI64IntegerAttr(buckets.size())),
                  b.getNamedAttr("bucket_mb", b.getF64FloatAttr(bucketMB))}));
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
