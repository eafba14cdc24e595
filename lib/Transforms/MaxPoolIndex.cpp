//===- MaxPoolIndex.cpp - cnn-max-pool-index: pooling keeps its argmax ----===//
//
// max_pool2d_grad(dy, x) finds each window's first maximum again in x, so a
// training step keeps the pooled input x from the forward pass to the
// backward pass (ResNet's stem: 128x112x112x64 f16, 196 MiB at batch 128)
// and reads it again there. This pass makes the forward pooling record
// where each window's maximum is (one byte per pooled element) and the
// gradient route by that record:
//
//   max_pool2d(x)          -> fused_max_pool2d(x): (result, window_index)
//   max_pool2d_grad(dy, x) -> max_pool2d_index_grad(dy, window_index)
//
// x's last reader is then the forward pooling. Where x is the BatchNorm
// apply + ReLU that cnn-fuse leaves (a scale-shift-ReLU fused_elementwise)
// and nothing else reads it, it becomes the pooling's prologue, and the
// normalized tensor is neither written nor stored (ResNet's stem).
//
// In the backward pass the same stem reads the pooling gradient once more,
// in the BatchNorm + ReLU gradient (fused_batch_norm_affine_relu_grad, from
// cnn-fuse); where that op is its only reader, the two become one
// fused_max_pool2d_batch_norm_relu_grad, which gathers the pooling gradient
// where it reads it, so the full-size gradient (196 MiB for ResNet-50 at
// batch 128) is neither written nor read back twice.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNMAXPOOLINDEX
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

/// Whether `grad` is the gradient of `pool`: the same input, attributes and
/// pooled type, `pool` before it in one block.
bool isGradientOf(MaxPool2DGradOp grad, MaxPool2DOp pool) {
  return grad.getInput() == pool.getInput() &&
         grad.getKernel() == pool.getKernel() &&
         grad.getStrides() == pool.getStrides() &&
         grad.getPadding() == pool.getPadding() &&
         grad.getCeilMode() == pool.getCeilMode() &&
         grad.getLayout() == pool.getLayout() &&
         grad.getGradOutput().getType() == pool.getType() &&
         pool->getBlock() == grad->getBlock() && pool->isBeforeInBlock(grad);
}

struct MaxPoolIndexPass : cnnc::impl::CNNMaxPoolIndexBase<MaxPoolIndexPass> {
  using CNNMaxPoolIndexBase::CNNMaxPoolIndexBase;

  void runOnOperation() override {
    // Each forward pooling with the gradients that re-read its input.
    llvm::MapVector<Operation *, SmallVector<MaxPool2DGradOp>> grads;
    getOperation().walk([&](MaxPool2DGradOp grad) {
      for (Operation *user : grad.getInput().getUsers()) {
        auto pool = dyn_cast<MaxPool2DOp>(user);
        if (pool && isGradientOf(grad, pool)) {
          grads[pool].push_back(grad);
          break;
        }
      }
    });
    for (auto &[op, gs] : grads) {
      auto pool = cast<MaxPool2DOp>(op);
      ArrayRef<int64_t> k = pool.getKernel();
      if (k[0] * k[1] > 255) // the index is one byte per window
        continue;
      rewrite(pool, gs);
    }
  }

  void rewrite(MaxPool2DOp pool, ArrayRef<MaxPool2DGradOp> gradOps) {
    OpBuilder b(pool);
    auto y = pool.getType();
    auto indexType = RankedTensorType::get(
        y.getShape(),
        IntegerType::get(&getContext(), 8, IntegerType::Unsigned));
    auto fused = FusedMaxPool2DOp::create(
        b, pool.getLoc(), TypeRange{y, indexType}, pool.getInput(),
        /*scale=*/Value(), /*shift=*/Value(), pool.getKernelAttr(),
        pool.getStridesAttr(), pool.getPaddingAttr(), pool.getCeilModeAttr(),
        pool.getLayoutAttr());
    pool.replaceAllUsesWith(fused.getResult());
    pool.erase();
    for (MaxPool2DGradOp grad : gradOps) {
      OpBuilder gb(grad);
      auto indexed = MaxPool2DIndexGradOp::create(
          gb, grad.getLoc(), grad.getType(), grad.getGradOutput(),
          fused.getWindowIndex(), grad.getKernelAttr(), grad.getStridesAttr(),
          grad.getPaddingAttr(), grad.getCeilModeAttr(), grad.getLayoutAttr());
      grad.replaceAllUsesWith(indexed.getResult());
      grad.erase();
      ++numIndexed;
      if (gradFusion)
        fuseIntoBatchNormGrad(indexed);
    }
    // The normalization that only this pooling reads becomes its prologue.
    auto e = fused.getInput().getDefiningOp<FusedElementwiseOp>();
    if (!prologue || !e || !e->hasOneUse() || !e.isScaleShiftRelu() ||
        e.getLayout() != fused.getLayout() ||
        e.getInputs()[0].getType() != e.getResult(0).getType())
      return;
    fused.getInputMutable().assign(e.getInputs()[0]);
    fused.getScaleMutable().assign(e.getInputs()[1]);
    fused.getShiftMutable().assign(e.getInputs()[2]);
    e.erase();
    ++numPrologues;
  }

  /// Folds `indexed` into the BatchNorm + ReLU gradient that is its only
  /// reader (as its grad_output). The CUDA target gathers eight channels at
  /// a time (NHWC, C % 8 == 0: the pooling gradient's vec8 form) with 32-bit
  /// indices (fewer than 2^30 such vectors), so only that case is folded.
  void fuseIntoBatchNormGrad(MaxPool2DIndexGradOp indexed) {
    auto t = indexed.getType();
    if (!indexed->hasOneUse() || !indexed.isNHWC() || t.getRank() != 4 ||
        t.getDimSize(3) % 8 != 0 || t.getNumElements() / 8 >= (1ll << 30))
      return;
    auto bn =
        dyn_cast<FusedBatchNormAffineReluGradOp>(*indexed->getUsers().begin());
    if (!bn || bn.getGradOutput() != indexed.getResult() ||
        bn.getInput() == indexed.getResult() ||
        bn.getLayout() != indexed.getLayout() || bn.getInput().getType() != t)
      return;
    OpBuilder b(bn);
    auto fused = FusedMaxPool2DBatchNormReluGradOp::create(
        b, bn.getLoc(), bn.getResultTypes(), indexed.getGradOutput(),
        indexed.getWindowIndex(), bn.getInput(), bn.getScale(),
        bn.getSavedMean(), bn.getSavedInvstd(), bn.getAlpha(), bn.getBeta(),
        indexed.getKernelAttr(), indexed.getStridesAttr(),
        indexed.getPaddingAttr(), indexed.getCeilModeAttr(),
        indexed.getLayoutAttr());
    bn.replaceAllUsesWith(fused.getResults());
    bn.erase();
    indexed.erase();
    ++numGradFusions;
  }
};

} // namespace
