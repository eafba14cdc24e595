//===- ParamFormat.cpp - cnn-param-format ---------------------------------===//
//
// Stores each convolution filter as the NHWC convolution reads it (K, R, S,
// C' with the channels zero-padded): the per-step transpose (and pad) of the
// weight before the forward and the transpose (and slice) of its gradient
// before the optimizer disappear. Passes.td says more.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNPARAMFORMAT
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

constexpr const char *kPublicShapeAttr = "cnn.public_shape";
constexpr int64_t kToNHWC[] = {0, 2, 3, 1}, kToNCHW[] = {0, 3, 1, 2};

/// The filter's conversion in front of the convolutions: an optional cast to
/// f16, the transpose to K, R, S, C and an optional zero pad of C at its end.
struct ForwardChain {
  CastOp cast;
  TransposeOp transpose;
  PadOp pad;
  Value end() { return pad ? pad.getResult() : transpose.getResult(); }
};

/// The chain from `param` when every use of `param` but `allowed` (the
/// optimizer updates) is that one chain.
std::optional<ForwardChain> forwardChain(Value param,
                                         ArrayRef<Operation *> allowed) {
  ForwardChain c;
  Value v = param;
  Operation *first = nullptr;
  for (Operation *user : param.getUsers()) {
    if (llvm::is_contained(allowed, user))
      continue;
    if (first)
      return std::nullopt;
    first = user;
  }
  if (!first)
    return std::nullopt;
  if (auto cast = dyn_cast<CastOp>(first)) {
    if (!cast->hasOneUse())
      return std::nullopt;
    c.cast = cast;
    v = cast.getResult();
    first = *v.getUsers().begin();
  }
  auto tr = dyn_cast<TransposeOp>(first);
  if (!tr || tr.getPermutation() != ArrayRef<int64_t>(kToNHWC))
    return std::nullopt;
  c.transpose = tr;
  if (tr->hasOneUse())
    if (auto pad = dyn_cast<PadOp>(*tr->getUsers().begin());
        pad && pad.isTrailingZeroPadOfLastDim())
      c.pad = pad;
  return c;
}

/// True when the channels the filter's pad adds meet zero input channels in
/// every forward convolution: their gradient is then exactly zero and the
/// stored filter's padded channels stay zero under any optimizer (the
/// gradient of a zero input channel, w.r.t. its filter taps, is zero).
bool padLanesStayZero(PadOp pad) {
  for (Operation *user : pad->getUsers()) {
    auto conv = dyn_cast<Conv2DOp>(user);
    if (!conv || conv.getFilter() != pad.getResult())
      continue;
    Value x = conv.getInput();
    if (auto xpad = x.getDefiningOp<PadOp>())
      if (xpad.isTrailingZeroPadOfLastDim() &&
          cast<RankedTensorType>(xpad.getInput().getType()).getDimSize(3) <=
              cast<RankedTensorType>(pad.getInput().getType()).getDimSize(3))
        continue;
    // The image argument that cnn-input-format padded: the runtime writes
    // zeros past the images' channels.
    if (auto arg = dyn_cast<BlockArgument>(x)) {
      auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      auto shape = f ? f.getArgAttrOfType<DenseI64ArrayAttr>(arg.getArgNumber(),
                                                             "cnn.image_shape")
                     : DenseI64ArrayAttr();
      if (shape &&
          shape[1] <=
              cast<RankedTensorType>(pad.getInput().getType()).getDimSize(3))
        continue;
    }
    return false;
  }
  return true;
}

/// The update's gradient in the stored format: the value whose slice (when
/// padded) and transpose back to K, C, R, S the update reads.
Value storedGradient(Value grad, RankedTensorType stored) {
  auto tr = grad.getDefiningOp<TransposeOp>();
  if (!tr || tr.getPermutation() != ArrayRef<int64_t>(kToNCHW))
    return {};
  Value v = tr.getInput();
  if (auto slice = v.getDefiningOp<SliceOp>()) {
    if (!llvm::all_of(slice.getOffsets(), [](int64_t o) { return o == 0; }))
      return {};
    v = slice.getInput();
  }
  auto t = cast<RankedTensorType>(v.getType());
  return t.getShape() == stored.getShape() ? v : Value();
}

/// The optimizer's per-parameter state operands (momentum, Adam's moments).
SmallVector<OpOperand *> stateOperands(Operation *update) {
  SmallVector<OpOperand *> s;
  if (auto sgd = dyn_cast<SGDUpdateOp>(update))
    s.push_back(&sgd.getMomentumBufferMutable());
  else if (auto adam = dyn_cast<AdamUpdateOp>(update)) {
    s.push_back(&adam.getExpAvgMutable());
    s.push_back(&adam.getExpAvgSqMutable());
  }
  return s;
}

void eraseIfDead(Value v) {
  while (Operation *op = v.getDefiningOp()) {
    if (!op->use_empty() || op->getNumOperands() == 0 ||
        !isa<TransposeOp, SliceOp, CastOp>(op))
      return;
    v = op->getOperand(0);
    op->erase();
  }
}

void updateFunctionType(func::FuncOp f) {
  auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
  f.setFunctionType(FunctionType::get(
      f.getContext(), f.front().getArgumentTypes(), ret.getOperandTypes()));
}

struct ParamFormatPass : cnnc::impl::CNNParamFormatBase<ParamFormatPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step || step.isExternal())
      return;
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    // Parameter name -> (public type, stored type), for @forward.
    llvm::StringMap<std::pair<RankedTensorType, RankedTensorType>> stored;
    for (BlockArgument p : step.getArguments()) {
      auto name =
          step.getArgAttrOfType<StringAttr>(p.getArgNumber(), kParamAttr);
      auto type = dyn_cast<RankedTensorType>(p.getType());
      if (!name || !type || type.getRank() != 4)
        continue;
      SmallVector<Operation *> updates;
      for (Operation *user : p.getUsers())
        if (isa<SGDUpdateOp, AdamUpdateOp>(user) && user->getOperand(0) == p)
          updates.push_back(user);
      if (updates.size() != 1)
        continue;
      Operation *update = updates.front();
      std::optional<ForwardChain> chain = forwardChain(p, updates);
      if (!chain || (chain->pad && !padLanesStayZero(chain->pad)))
        continue;
      auto end = cast<RankedTensorType>(chain->end().getType());
      auto newType = end.clone(type.getElementType());
      Value grad = storedGradient(update->getOperand(1), newType);
      if (!grad)
        continue;
      // The update's state arguments and its results (returned as they
      // are) take the stored type too.
      bool ok = llvm::all_of(update->getResults(), [&](Value r) {
        return r.hasOneUse() && *r.getUsers().begin() == ret.getOperation();
      });
      SmallVector<BlockArgument> states;
      for (OpOperand *o : stateOperands(update)) {
        auto a = dyn_cast<BlockArgument>(o->get());
        ok = ok && a && a.getOwner() == &step.front() && a.hasOneUse() &&
             a.getType() == type;
        if (a)
          states.push_back(a);
      }
      if (!ok)
        continue;

      // Rewrite: the argument, its state and the update's results take
      // the stored type; the forward chain becomes the cast alone (or
      // nothing in f32); the update reads the filter gradient as computed.
      auto publicShape = DenseI64ArrayAttr::get(&getContext(), type.getShape());
      p.setType(newType);
      step.setArgAttr(p.getArgNumber(), kPublicShapeAttr, publicShape);
      for (BlockArgument a : states) {
        a.setType(newType);
        step.setArgAttr(a.getArgNumber(), kPublicShapeAttr, publicShape);
      }
      foldChain(*chain, p, newType);
      Value oldGrad = update->getOperand(1);
      update->setOperand(1, grad);
      // The loss-scale check reads every gradient, whatever its layout
      // (the padded channels are zero, hence finite).
      oldGrad.replaceUsesWithIf(grad, [](OpOperand &use) {
        return isa<AllFiniteOp>(use.getOwner());
      });
      eraseIfDead(oldGrad);
      for (OpResult r : update->getResults()) {
        r.setType(newType);
        for (OpOperand &use : r.getUses())
          step.setResultAttr(use.getOperandNumber(), kPublicShapeAttr,
                             publicShape);
      }
      if (!stored.try_emplace(name.getValue(), type, newType).second) {
        step.emitError("cnn-param-format: two parameters of @train_step are "
                       "named '")
            << name.getValue() << "'";
        return signalPassFailure();
      }
      ++numParams;
    }
    if (stored.empty())
      return;
    updateFunctionType(step);
    if (auto fwd = module.lookupSymbol<func::FuncOp>("forward"))
      if (failed(rewriteOtherFunction(fwd, stored)))
        return signalPassFailure();
  }

  /// Replaces the chain's end by `param` (f32) or its cast (f16).
  void foldChain(ForwardChain chain, Value param, RankedTensorType newType) {
    Value end = chain.end();
    Value replacement = param;
    if (chain.cast) {
      chain.cast.getResult().setType(
          newType.clone(chain.cast.getType().getElementType()));
      replacement = chain.cast.getResult();
    }
    end.replaceAllUsesWith(replacement);
    if (chain.pad)
      chain.pad->erase();
    chain.transpose->erase();
    numFolded += 1 + (chain.pad ? 1 : 0);
  }

  /// @forward shares the parameters: the same chain folds; any other use
  /// reads the public form, rebuilt from the stored one at the entry.
  LogicalResult rewriteOtherFunction(
      func::FuncOp f,
      const llvm::StringMap<std::pair<RankedTensorType, RankedTensorType>>
          &stored) {
    for (BlockArgument p : f.getArguments()) {
      auto name = f.getArgAttrOfType<StringAttr>(p.getArgNumber(), kParamAttr);
      if (!name || !stored.count(name.getValue()))
        continue;
      auto [publicType, newType] = stored.lookup(name.getValue());
      auto type = cast<RankedTensorType>(p.getType());
      // The functions share the parameter by name: one tensor, one type.
      if (type.getShape() != publicType.getShape())
        return f.emitError("cnn-param-format: parameter '")
               << name.getValue() << "' is " << type << " in @"
               << f.getName() << " but " << publicType << " in @train_step";
      std::optional<ForwardChain> chain = forwardChain(p, {});
      if (chain && cast<RankedTensorType>(chain->end().getType()).getShape() ==
                       newType.getShape()) {
        p.setType(newType);
        foldChain(*chain, p, newType);
      } else {
        p.setType(newType);
        OpBuilder b(&f.front(), f.front().begin());
        Value v = p;
        if (newType.getDimSize(3) != type.getDimSize(1)) {
          SmallVector<int64_t> sizes(newType.getShape());
          sizes[3] = type.getDimSize(1);
          v = SliceOp::create(b, p.getLoc(), v,
                              b.getDenseI64ArrayAttr({0, 0, 0, 0}),
                              b.getDenseI64ArrayAttr(sizes));
        }
        v = TransposeOp::create(b, p.getLoc(), v,
                                b.getDenseI64ArrayAttr(kToNCHW));
        // The first op of the entry (the slice, else the transpose) is
        // the one use of the stored form.
        p.replaceAllUsesExcept(v, &*f.front().begin());
      }
      f.setArgAttr(p.getArgNumber(), kPublicShapeAttr,
                   DenseI64ArrayAttr::get(&getContext(), type.getShape()));
    }
    updateFunctionType(f);
    return success();
  }
};

} // namespace
