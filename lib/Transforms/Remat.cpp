//===- Remat.cpp - cnn-remat: recompute cheap activations in backward ----===//
//
// A training step keeps every activation the backward pass reads alive from
// the forward pass to its use there; with BatchNorm networks that is the
// convolution output (read by the BatchNorm gradient) *and* the BN-apply +
// ReLU output (read by the next convolution's filter gradient and as the
// ReLU mask). The second is a cheap elementwise function of the first: this
// pass recomputes it where the backward pass needs it, so only the first is
// stored (the memory half of issue 13; NVIDIA's MLPerf ResNet does the same).
//
// A `fused_elementwise` op with one result is rematerialized when
//  - its result has a gap of at least `min-gap` ops between two consecutive
//    uses (the forward/backward distance; `late` uses are those after the
//    largest gap);
//  - each of its full-size inputs (broadcast 0 or 3) is a block argument or
//    a value that is used at or after the first late use anyway, and is not
//    itself rematerialized (so recomputation never extends the life of a
//    large buffer, and never chains: a value a clone reads is kept).
// A 1x1 convolution whose input is at most half its output is a candidate
// too (isRecomputableConv): its input and filter must be used at or after
// the first late use anyway. The clone is inserted right before the first
// late use, which it then feeds, with every later use. A clone computes the
// same function of the same inputs, so the step's results are unchanged bit
// for bit (on the GPU, a convolution clone may run another cuDNN plan than
// the original: equal within the plans' rounding).
//
// Which candidates: without a budget every one, latest first; with
// `budget-mb`, or `budget-percent` of the activations kept across the loss
// (the GPU pipeline's default, with `convolutions-only`), the least traffic
// per byte freed first, then the largest, until the budget is reached.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNREMAT
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

struct RematPass : cnnc::impl::CNNRematBase<RematPass> {
  using CNNRematBase::CNNRematBase;

  void runOnOperation() override {
    // A negative budget would read as "no budget" (every candidate).
    if (budgetMB < 0 || budgetPercent < 0 || budgetPercent > 100 ||
        minGap < 1) {
      getOperation().emitError()
          << "cnn-remat: budget-mb must be >= 0, budget-percent in [0, 100] "
             "and min-gap >= 1, got "
          << int64_t(budgetMB) << ", " << int64_t(budgetPercent) << " and "
          << int64_t(minGap);
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp f) {
      if (!f.getBody().empty())
        runOnBlock(f, f.getBody().front());
    });
  }

  /// Ops whose result is cheap to recompute from its inputs.
  static bool isCheap(Operation *op) {
    if (op->getNumResults() != 1)
      return false;
    // A fused resize + concat reads its small source and the skip and
    // writes the concatenation: a concat's traffic.
    return isa<FusedElementwiseOp, TransposeOp, ConcatOp, FusedResizeConcatOp>(
        op);
  }

  static int64_t bytesOf(Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return t.getNumElements() * t.getElementTypeBitWidth() / 8;
  }

  /// A 1x1 convolution whose input is at most half its output (a
  /// bottleneck's expanding 1x1, ResNet-50's first downsampling shortcut):
  /// recomputing it reads the input and writes the output, at most 1.5 bytes
  /// of traffic per byte freed against an elementwise clone's 3, and with
  /// few input channels its arithmetic (2C per output element) takes less
  /// time than that traffic; a larger filter (the 7x7 stem) would not.
  /// A `fused_conv2d_stats` clone computes its statistics again into
  /// buffers nothing reads (its first result is what is freed).
  static bool isRecomputableConv(Operation *op) {
    if (!isa<FusedConv2DStatsOp, Conv2DOp>(op))
      return false;
    auto w = cast<RankedTensorType>(op->getOperand(1).getType());
    int64_t taps = isNHWC(op) ? w.getDimSize(1) * w.getDimSize(2)
                              : w.getDimSize(2) * w.getDimSize(3);
    return taps == 1 &&
           2 * bytesOf(op->getOperand(0)) <= bytesOf(op->getResult(0));
  }

  /// Bytes a recomputation of `op` moves per byte of its first result: the
  /// full-size operands it reads plus the result it writes.
  static double trafficPerByte(Operation *op) {
    int64_t out = bytesOf(op->getResult(0)), moved = out;
    if (isRecomputableConv(op))
      return double(bytesOf(op->getOperand(0)) + out) / out;
    ArrayRef<int64_t> bcast;
    if (auto f = dyn_cast<FusedElementwiseOp>(op))
      bcast = f.getBroadcast();
    for (auto [k, in] : llvm::enumerate(op->getOperands()))
      if (bcast.empty() || bcast[k] == 0 || bcast[k] == 3)
        moved += bytesOf(in);
    return double(moved) / out;
  }

  /// What recomputing the convolution `op` at `at` reads: its input and
  /// filter must be stored until `at` anyway (or be step arguments); the
  /// per-channel prologue operands (a few bytes) may live longer.
  template <typename UsePositions>
  LogicalResult collectConv(Operation *op, int64_t at,
                            UsePositions &usePositions,
                            SmallVectorImpl<Value> &leaves) {
    for (auto [k, in] : llvm::enumerate(op->getOperands())) {
      if (k >= 2) { // scale and shift of the prologue
        leaves.push_back(in);
        continue;
      }
      if (isa<BlockArgument>(in))
        continue;
      SmallVector<int64_t> inUses = usePositions(in);
      if (inUses.empty() || inUses.back() < at)
        return failure();
      leaves.push_back(in);
    }
    return success();
  }

  /// Collects into `chain` what recomputing `op` at position `at` takes:
  /// `op` itself and, for each full-size input that is not stored until
  /// `at` anyway, that input's cheap producer (recursively, a few levels:
  /// the stem's cast -> transpose -> channel padding). Stored inputs go to
  /// `leaves`. Fails if an input would have to live longer. Sets
  /// `activation` if the chain reads the step's input or a stored
  /// intermediate (not only parameters, state and constants).
  template <typename UsePositions>
  LogicalResult collect(Operation *op, int64_t at, int depth,
                        UsePositions &usePositions,
                        const llvm::DenseSet<Value> &kept,
                        SmallVectorImpl<Operation *> &chain,
                        SmallVectorImpl<Value> &leaves, bool &activation) {
    if (depth > 3 || !isCheap(op))
      return failure();
    chain.push_back(op);
    ArrayRef<int64_t> bcast;
    if (auto f = dyn_cast<FusedElementwiseOp>(op))
      bcast = f.getBroadcast();
    for (auto [k, in] : llvm::enumerate(op->getOperands())) {
      if (!bcast.empty() && (bcast[k] == 1 || bcast[k] == 2))
        continue; // per channel or one scalar: a few bytes
      Operation *def = in.getDefiningOp();
      if (!def || isa<ConstantOp>(def)) {
        // A step argument or a constant: stored for the whole step. Only
        // the input (not a parameter or state) makes this an activation.
        auto arg = dyn_cast<BlockArgument>(in);
        if (arg && isa<func::FuncOp>(arg.getOwner()->getParentOp()) &&
            !isStateArgument(in))
          activation = true;
        continue;
      }
      SmallVector<int64_t> inUses = usePositions(in);
      if (!inUses.empty() && inUses.back() >= at) {
        leaves.push_back(in); // stored until `at` anyway
        activation = true;
        continue;
      }
      if (kept.contains(in))
        return failure(); // a leaf of a later clone; do not extend it
      if (failed(collect(def, at, depth + 1, usePositions, kept, chain, leaves,
                         activation)))
        return failure();
    }
    return success();
  }

  /// A step argument that is not an activation: a parameter, optimizer
  /// state or a buffer.
  static bool isStateArgument(Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    auto f =
        arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
    return f && (f.getArgAttr(arg.getArgNumber(), kParamAttr) ||
                 f.getArgAttr(arg.getArgNumber(), kStateAttr) ||
                 f.getArgAttr(arg.getArgNumber(), kBufferAttr));
  }

  /// The bytes of the activations the backward pass keeps from the forward
  /// pass: values defined before the loss (the step's `cnn.loss` result)
  /// and read after it, other than by the return and other than the
  /// weights' working copies (functions of the parameters alone). 0 for a
  /// function without a loss.
  template <typename UsePositions>
  int64_t storedActivations(func::FuncOp f, Block &block,
                            DenseMap<Operation *, int64_t> &pos,
                            UsePositions &usePositions) {
    auto ret = dyn_cast<func::ReturnOp>(block.getTerminator());
    Value loss;
    for (unsigned r = 0; ret && r < f.getNumResults(); ++r)
      if (f.getResultAttr(r, kLossAttr))
        loss = ret.getOperand(r);
    Operation *lossOp = loss ? loss.getDefiningOp() : nullptr;
    if (!lossOp || !pos.count(lossOp))
      return 0;
    int64_t boundary = pos[lossOp], end = pos[ret];
    int64_t stored = 0;
    for (Operation &op : block) {
      if (pos[&op] >= boundary)
        break;
      if (op.getNumOperands() > 0 &&
          llvm::all_of(op.getOperands(), isStateArgument))
        continue;
      for (Value v : op.getResults()) {
        auto t = dyn_cast<RankedTensorType>(v.getType());
        if (!t || !t.hasStaticShape())
          continue;
        if (llvm::any_of(usePositions(v),
                         [&](int64_t p) { return p > boundary && p < end; }))
          stored += bytesOf(v);
      }
    }
    bytesStored += stored;
    return stored;
  }

  void runOnBlock(func::FuncOp func, Block &block) {
    DenseMap<Operation *, int64_t> pos;
    SmallVector<Operation *> candidates, atPos; // atPos[pos[op]] == op
    int64_t n = 0;
    for (Operation &op : block) {
      pos[&op] = n++;
      atPos.push_back(&op);
      if ((!onlyConvolutions && isCheap(&op)) || isRecomputableConv(&op))
        candidates.push_back(&op);
    }
    // Positions of a value's uses (not by clones, which come later).
    auto usePositions = [&](Value v) {
      SmallVector<int64_t> p;
      for (Operation *u : v.getUsers()) {
        // A use nested in a region counts at its top-level ancestor.
        Operation *top = block.findAncestorOpInBlock(*u);
        if (top && pos.count(top))
          p.push_back(pos[top]);
      }
      llvm::sort(p);
      return p;
    };
    auto resultBytes = [](Operation *op) { return bytesOf(op->getResult(0)); };
    // Latest first: a later activation's clone reads an earlier one (the
    // residual of a ResNet block), which is then kept. With a budget, the
    // least traffic per byte freed first (the convolutions), then the
    // largest (fewest kernels for the bytes), latest among equals.
    SmallVector<Operation *> order(llvm::reverse(candidates));
    int64_t budget = budgetMB * (int64_t(1) << 20), freed = 0;
    if (budget == 0 && budgetPercent > 0) {
      budget = storedActivations(func, block, pos, usePositions) *
               budgetPercent / 100;
      if (budget == 0)
        return; // no forward/backward boundary: nothing to free
    }
    if (budget > 0)
      llvm::stable_sort(order, [&](Operation *a, Operation *b) {
        double ta = trafficPerByte(a), tb = trafficPerByte(b);
        if (ta != tb)
          return ta < tb;
        return resultBytes(a) > resultBytes(b);
      });
    llvm::DenseSet<Value> kept;
    for (Operation *f : order) {
      if (budget > 0 && freed >= budget)
        break;
      Value y = f->getResult(0);
      if (kept.contains(y))
        continue;
      SmallVector<int64_t> uses = usePositions(y);
      if (uses.empty())
        continue;
      // The largest gap between the definition and consecutive uses.
      int64_t prev = pos[f], bestGap = 0, lateFrom = -1;
      for (int64_t p : uses) {
        if (p - prev > bestGap) {
          bestGap = p - prev;
          lateFrom = p;
        }
        prev = p;
      }
      // A gap right after the definition is not one: nothing was stored
      // early that recomputation would free.
      if (bestGap < minGap || lateFrom == uses.front())
        continue;
      // What the clone needs: `chain` (ops to clone, in block order) and
      // `leaves` (stored values it reads, kept from now on).
      SmallVector<Operation *> chain;
      SmallVector<Value> leaves;
      // A function of the parameters alone (a weight's f16 NHWC copy) is
      // small next to the activations: recomputing it costs kernels and
      // frees little.
      bool activation = false;
      if (isRecomputableConv(f)) {
        if (failed(collectConv(f, lateFrom, usePositions, leaves)))
          continue;
        chain.push_back(f);
      } else if (failed(collect(f, lateFrom, /*depth=*/0, usePositions, kept,
                                chain, leaves, activation)) ||
                 !activation) {
        continue;
      }
      Operation *firstLate = atPos[lateFrom];
      // The step's outputs are written to their own buffers: nothing to
      // free by recomputing one.
      if (isa<func::ReturnOp>(firstLate))
        continue;
      llvm::sort(chain,
                 [&](Operation *a, Operation *b) { return pos[a] < pos[b]; });
      chain.erase(std::unique(chain.begin(), chain.end()), chain.end());
      OpBuilder b(firstLate);
      IRMapping map;
      Operation *clone = nullptr;
      for (Operation *op : chain) {
        clone = b.clone(*op, map);
        clone->setAttr("cnn.remat", b.getUnitAttr());
      }
      Value y2 = map.lookup(y);
      llvm::SmallPtrSet<Operation *, 4> clones;
      for (Operation *op : chain)
        clones.insert(map.lookup(op->getResult(0)).getDefiningOp());
      y.replaceUsesWithIf(y2, [&](OpOperand &use) {
        Operation *top = block.findAncestorOpInBlock(*use.getOwner());
        return !clones.contains(top) && pos.count(top) && pos[top] >= lateFrom;
      });
      for (Value v : leaves)
        kept.insert(v);
      for (Operation *op : chain)
        kept.insert(op->getResult(0)); // cloned: never recomputed again
      ++numRemat;
      bytesFreed += resultBytes(f);
      freed += resultBytes(f);
    }
  }
};

} // namespace
