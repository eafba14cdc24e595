//===- InputFormat.cpp - cnn-input-format ---------------------------------===//
//
// Folds the image argument's conversion chain (cast to f16, transpose to
// NHWC, zero channel padding) into the argument's type: the runtime's batch
// conversion writes that format directly (Passes.td says more).
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNINPUTFORMAT
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

/// The conversion ops that follow the image argument, in order: at most a
/// cast to f16, then a transpose NCHW -> NHWC, then a zero pad of the
/// channels (NHWC's last dimension) at their end. Each has one use.
SmallVector<Operation *> conversionChain(BlockArgument image) {
  SmallVector<Operation *> chain;
  Value v = image;
  auto next = [&]() -> Operation * {
    return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
  };
  if (auto cast = dyn_cast_or_null<CastOp>(next());
      cast && cast.getType().getElementType().isF16()) {
    chain.push_back(cast);
    v = cast.getResult();
  }
  auto tr = dyn_cast_or_null<TransposeOp>(next());
  if (!tr || tr.getPermutation() != ArrayRef<int64_t>{0, 2, 3, 1})
    return chain;
  chain.push_back(tr);
  v = tr.getResult();
  auto pad = dyn_cast_or_null<PadOp>(next());
  if (!pad || !pad.isTrailingZeroPadOfLastDim())
    return chain; // only zeros at the channels' end fold into the type
  chain.push_back(pad);
  return chain;
}

struct InputFormatPass : cnnc::impl::CNNInputFormatBase<InputFormatPass> {
  void runOnOperation() override {
    // The image argument of each function, and how far its chain goes.
    SmallVector<std::pair<func::FuncOp, BlockArgument>> images;
    size_t depth = SIZE_MAX;
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      for (BlockArgument a : f.getArguments())
        if (f.getArgAttr(a.getArgNumber(), kInputAttr)) {
          auto t = dyn_cast<RankedTensorType>(a.getType());
          if (!t || t.getRank() != 4 || !t.getElementType().isF32())
            return; // not an image batch: leave the step alone
          images.push_back({f, a});
          depth = std::min(depth, conversionChain(a).size());
        }
    }
    if (images.empty() || depth == 0 || depth == SIZE_MAX)
      return;
    for (auto [f, a] : images) {
      SmallVector<Operation *> chain = conversionChain(a);
      chain.resize(depth);
      Value last = chain.back()->getResult(0);
      auto nchw = cast<RankedTensorType>(a.getType());
      unsigned i = a.getArgNumber();
      Builder b(f.getContext());
      f.setArgAttr(i, "cnn.image_shape",
                   b.getDenseI64ArrayAttr(nchw.getShape()));
      bool nhwc = llvm::any_of(
          chain, [](Operation *op) { return isa<TransposeOp>(op); });
      f.setArgAttr(
          i, "cnn.image_layout",
          LayoutAttr::get(f.getContext(), nhwc ? Layout::NHWC : Layout::NCHW));
      a.setType(last.getType());
      last.replaceAllUsesWith(a);
      for (Operation *op : llvm::reverse(chain))
        op->erase();
      numFolded += depth;
      // The function's type follows its argument.
      SmallVector<Type> inputs(f.front().getArgumentTypes());
      f.setFunctionType(
          FunctionType::get(f.getContext(), inputs, f.getResultTypes()));
    }
  }
};

} // namespace
