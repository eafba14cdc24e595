//===- Autodiff.cpp - build the training step ----------------------------===//
//
// Reverse-mode differentiation of the forward function into one train_step
// function: forward (training semantics), loss, backward, optimizer update.
// Keeping the whole step in one function lets the later passes (fusion,
// layout, precision, memory planning) optimize across its parts.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <optional>

namespace cnnc {
#define GEN_PASS_DEF_CNNAUTODIFF
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

NamedAttribute boolAttr(OpBuilder &b, StringRef name, bool v) {
  return b.getNamedAttr(name, b.getBoolAttr(v));
}
NamedAttribute f32Attr(OpBuilder &b, StringRef name, double v) {
  return b.getNamedAttr(name, b.getF32FloatAttr(v));
}

Value zeros(OpBuilder &b, Location loc, Type type) {
  auto t = cast<RankedTensorType>(type);
  return ConstantOp::create(
      b, loc, t, DenseElementsAttr::get(t, b.getZeroAttr(t.getElementType())));
}

/// One parameter's optimizer settings (its torch param group).
struct ParamSettings {
  int64_t group;
  std::optional<double> lr; ///< set: the group's LR is run-time state
  double weightDecay, momentum, dampening;
  bool nesterov;
  double beta1, beta2, epsilon;
};

std::string groupLRName(int64_t group) {
  return "optimizer.group" + std::to_string(group) + ".lr";
}

struct AutodiffPass : public cnnc::impl::CNNAutodiffBase<AutodiffPass> {
  using CNNAutodiffBase::CNNAutodiffBase;
  void runOnOperation() override;

  /// Adds `g` to the gradient accumulated for `v` (values used twice, such as
  /// ResNet's skip connections, receive the sum of their users' gradients).
  void addGrad(OpBuilder &b, Location loc, Value v, Value g) {
    auto it = grads.find(v);
    if (it == grads.end())
      grads[v] = g;
    else
      it->second = AddOp::create(b, loc, it->second, g);
  }
  LogicalResult backprop(OpBuilder &b, Operation *op);

  DenseMap<Value, Value> grads;
  DenseSet<Value> needsGrad;
};

/// The driver's side of GradientOpInterface for one op: the gradients of its
/// results so far, which operands need one, and where each goes.
struct Emitter : GradientEmitter {
  Emitter(AutodiffPass &pass, OpBuilder &b, Operation *op)
      : pass(pass), b(b), op(op) {}
  Value resultGrad(unsigned index) override {
    return pass.grads.lookup(op->getResult(index));
  }
  bool wants(Value operand) override {
    return pass.needsGrad.contains(operand);
  }
  void accumulate(Value operand, Value grad) override {
    pass.addGrad(b, op->getLoc(), operand, grad);
  }
  AutodiffPass &pass;
  OpBuilder &b;
  Operation *op;
};

LogicalResult AutodiffPass::backprop(OpBuilder &b, Operation *op) {
  Emitter emitter(*this, b, op);
  return cnn::buildGradient(b, op, emitter);
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto forward = module.lookupSymbol<func::FuncOp>(forwardName);
  if (!forward) {
    module.emitError("cnn-autodiff: no function named '") << forwardName << "'";
    return signalPassFailure();
  }
  if (module.lookupSymbol("train_step")) {
    module.emitError("cnn-autodiff: the module already has a 'train_step'");
    return signalPassFailure();
  }
  // One N x C logits tensor (classification) or N x C x H x W (dense
  // prediction: one class per pixel, labels N x H x W), or the main logits
  // followed by auxiliary classifiers' logits (GoogLeNet, Inception-v3 in
  // training mode; torchvision's segmentation models' 'aux'), all of one rank
  // over the same batch (and pixels: the labels are shared).
  auto mainType = forward.getNumResults()
                      ? dyn_cast<RankedTensorType>(forward.getResultTypes()[0])
                      : RankedTensorType();
  auto isLogits = [&](Type t) {
    auto r = dyn_cast<RankedTensorType>(t);
    if (!r || !mainType || r.getRank() != mainType.getRank() ||
        (r.getRank() != 2 && r.getRank() != 4) ||
        r.getDimSize(0) != mainType.getDimSize(0))
      return false;
    return r.getRank() == 2 || (r.getDimSize(2) == mainType.getDimSize(2) &&
                                r.getDimSize(3) == mainType.getDimSize(3));
  };
  if (forward.getNumResults() < 1 ||
      !llvm::all_of(forward.getResultTypes(), isLogits)) {
    forward.emitError("cnn-autodiff: '")
        << forwardName
        << "' must return N x C logits tensors, or N x C x H x W per-pixel "
           "logits (the main classifier's, then any auxiliary classifiers' "
           "of the same rank, batch and H x W), got "
        << forward.getFunctionType();
    return signalPassFailure();
  }
  const bool dense = mainType.getRank() == 4;
  if (!(auxLossWeight >= 0)) {
    module.emitError("cnn-autodiff: aux-loss-weight must be >= 0, got ")
        << auxLossWeight;
    return signalPassFailure();
  }
  if (optimizer != "sgd" && optimizer != "adam" && optimizer != "adamw" &&
      optimizer != "none") {
    module.emitError("cnn-autodiff: unknown optimizer '")
        << optimizer << "' (expected sgd, adam, adamw or none)";
    return signalPassFailure();
  }

  if (!(clipGradNorm >= 0)) {
    module.emitError("cnn-autodiff: clip-grad-norm must be > 0 (0: no "
                     "clipping), got ")
        << clipGradNorm;
    return signalPassFailure();
  }
  if (accumulate < 1) {
    module.emitError("cnn-autodiff: accumulate must be >= 1, got ")
        << accumulate;
    return signalPassFailure();
  }
  if (optimizer == "none" && (clipGradNorm > 0 || accumulate > 1)) {
    module.emitError("cnn-autodiff: clip-grad-norm and accumulate act on the "
                     "optimizer update; optimizer 'none' has none");
    return signalPassFailure();
  }

  MLIRContext *ctx = &getContext();
  OpBuilder b(ctx);
  Location loc = forward.getLoc();
  auto logitsType = cast<RankedTensorType>(forward.getResultTypes()[0]);
  auto scalarType = RankedTensorType::get({}, Float32Type::get(ctx));
  // One label per image, or per pixel (N x H x W) for N x C x H x W logits.
  SmallVector<int64_t> labelsShape{logitsType.getDimSize(0)};
  if (dense)
    labelsShape.append({logitsType.getDimSize(2), logitsType.getDimSize(3)});
  auto labelsType =
      RankedTensorType::get(labelsShape, IntegerType::get(ctx, 32));

  // Classify the forward arguments. A frozen parameter (cnn.frozen: torch's
  // requires_grad=False) stays an argument of the step, read like a buffer:
  // it gets no gradient, no update, no optimizer state and is not returned,
  // so nothing that only it needs (e.g. its weight-gradient convolution) is
  // built at all.
  SmallVector<unsigned> inputs, params, frozen, buffers;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    if (forward.getArgAttr(i, kParamAttr))
      (forward.getArgAttr(i, kFrozenAttr) ? frozen : params).push_back(i);
    else if (forward.getArgAttr(i, kBufferAttr))
      buffers.push_back(i);
    else
      inputs.push_back(i);
    if (forward.getArgAttr(i, kFrozenAttr) &&
        !forward.getArgAttr(i, kParamAttr)) {
      forward.emitError("cnn-autodiff: argument #")
          << i << " is cnn.frozen but not a cnn.param";
      return signalPassFailure();
    }
  }
  if (params.empty()) {
    forward.emitError("cnn-autodiff: '")
        << forwardName
        << (frozen.empty() ? "' has no parameters (arguments tagged cnn.param)"
                           : "' has only frozen parameters (cnn.frozen)")
        << ": nothing to train";
    return signalPassFailure();
  }
  // Each parameter's optimizer settings: the pass options, overridden by its
  // cnn.param_options (its torch param group); no-bn-weight-decay is the
  // group {weight_decay = 0} of the 1-D parameters that set none.
  SmallVector<ParamSettings> settings;
  std::map<int64_t, double> groupLR; // group -> initial LR (a run-time state)
  for (unsigned i : params) {
    ParamSettings ps{/*group=*/0,      /*lr=*/std::nullopt,
                     weightDecay,      momentum,
                     dampening,        nesterov,
                     beta1,            beta2,
                     epsilon};
    DictionaryAttr o = forward.getArgAttrOfType<DictionaryAttr>(
        i, kParamOptionsAttr);
    StringRef pname =
        cast<StringAttr>(forward.getArgAttr(i, kParamAttr)).getValue();
    auto bad = [&](const Twine &msg) {
      forward.emitError("cnn-autodiff: cnn.param_options of '")
          << pname << "': " << msg;
      return failure();
    };
    bool explicitDecay = false;
    for (NamedAttribute a : o ? o.getValue() : ArrayRef<NamedAttribute>()) {
      StringRef key = a.getName().getValue();
      auto f = dyn_cast<FloatAttr>(a.getValue());
      bool sgdKey = llvm::is_contained(
          {StringRef("momentum"), StringRef("dampening"), StringRef("nesterov")},
          key);
      bool adamKey = llvm::is_contained(
          {StringRef("beta1"), StringRef("beta2"), StringRef("epsilon")}, key);
      if (!sgdKey && !adamKey &&
          !llvm::is_contained({StringRef("group"), StringRef("lr"),
                               StringRef("weight_decay")},
                              key)) {
        (void)bad("unknown setting '" + key +
                  "' (expected group, lr, weight_decay, momentum, dampening, "
                  "nesterov, beta1, beta2 or epsilon)");
        return signalPassFailure();
      }
      if ((sgdKey && optimizer != "sgd") ||
          (adamKey && optimizer != "adam" && optimizer != "adamw")) {
        (void)bad("'" + key + "' is not a setting of optimizer '" + optimizer +
                  "'");
        return signalPassFailure();
      }
      if (key == "group") {
        auto g = dyn_cast<IntegerAttr>(a.getValue());
        if (!g || g.getInt() < 0) {
          (void)bad("'group' must be a non-negative integer");
          return signalPassFailure();
        }
        ps.group = g.getInt();
      } else if (key == "nesterov") {
        auto bv = dyn_cast<BoolAttr>(a.getValue());
        if (!bv) {
          (void)bad("'nesterov' must be a bool");
          return signalPassFailure();
        }
        ps.nesterov = bv.getValue();
      } else if (!f) {
        (void)bad("'" + key + "' must be a float");
        return signalPassFailure();
      } else if (key == "lr") {
        ps.lr = f.getValueAsDouble();
      } else if (key == "weight_decay") {
        ps.weightDecay = f.getValueAsDouble();
        explicitDecay = true;
      } else if (key == "momentum") {
        ps.momentum = f.getValueAsDouble();
      } else if (key == "dampening") {
        ps.dampening = f.getValueAsDouble();
      } else if (key == "beta1") {
        ps.beta1 = f.getValueAsDouble();
      } else if (key == "beta2") {
        ps.beta2 = f.getValueAsDouble();
      } else {
        ps.epsilon = f.getValueAsDouble();
      }
    }
    if (noBNWeightDecay && !explicitDecay &&
        cast<RankedTensorType>(forward.getArgument(i).getType()).getRank() <=
            1)
      ps.weightDecay = 0.0;
    if (optimizer == "sgd" && ps.nesterov &&
        (ps.momentum <= 0 || ps.dampening != 0)) {
      (void)bad("nesterov needs momentum > 0 and dampening 0");
      return signalPassFailure();
    }
    if (ps.lr) {
      if (ps.group == 0) {
        (void)bad("an 'lr' of its own needs a 'group' >= 1 (group 0 is the "
                  "step's run-time learning rate)");
        return signalPassFailure();
      }
      auto [it, fresh] = groupLR.try_emplace(ps.group, *ps.lr);
      if (!fresh && it->second != *ps.lr) {
        (void)bad("group " + Twine(ps.group) + " has lr " +
                  std::to_string(*ps.lr) + " here and " +
                  std::to_string(it->second) + " elsewhere");
        return signalPassFailure();
      }
    }
    settings.push_back(ps);
  }
  // Groups that set an LR read it from run-time state written before each
  // step (a scheduler may change every group's LR); the others read `lr`.
  for (const ParamSettings &ps : settings)
    if (!ps.lr && groupLR.count(ps.group)) {
      forward.emitError("cnn-autodiff: parameters of group ")
          << ps.group << " disagree on whether the group has an 'lr'";
      return signalPassFailure();
    }

  // Per parameter: the optimizer's state, then with accumulation the sum of
  // the micro-steps' gradients so far.
  const bool accumulating = accumulate > 1;
  int stateSlots = (optimizer == "none"  ? 0
                    : optimizer == "sgd" ? 1
                                         : 2) +
                   (accumulating ? 1 : 0);
  auto stateNames = [&](StringRef param) -> SmallVector<std::string> {
    SmallVector<std::string> names;
    if (optimizer == "sgd")
      names.push_back((param + ".momentum_buffer").str());
    else if (optimizer != "none")
      names.append({(param + ".exp_avg").str(), (param + ".exp_avg_sq").str()});
    if (accumulating)
      names.push_back((param + ".grad_accum").str());
    return names;
  };

  // Signature: inputs, labels, lr, step, params, buffers, optimizer state.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  auto named = [&](StringRef key, Attribute value) {
    return b.getDictionaryAttr(b.getNamedAttr(key, value));
  };
  for (unsigned i : inputs) {
    argTypes.push_back(forward.getArgument(i).getType());
    argAttrs.push_back(forward.getArgAttrDict(i)
                           ? forward.getArgAttrDict(i)
                           : named(kInputAttr, b.getUnitAttr()));
  }
  argTypes.append({labelsType, scalarType, scalarType});
  argAttrs.append({named(kLabelsAttr, b.getUnitAttr()),
                   named(kLRAttr, b.getUnitAttr()),
                   named(kStepAttr, b.getUnitAttr())});
  for (unsigned i : llvm::concat<unsigned>(params, buffers, frozen)) {
    argTypes.push_back(forward.getArgument(i).getType());
    argAttrs.push_back(forward.getArgAttrDict(i));
  }
  for (unsigned i : params)
    for (const std::string &n : stateNames(
             cast<StringAttr>(forward.getArgAttr(i, kParamAttr)).getValue())) {
      argTypes.push_back(forward.getArgument(i).getType());
      argAttrs.push_back(named(kStateAttr, b.getStringAttr(n)));
    }
  unsigned numOptState = argTypes.size();
  if (optimizer != "none")
    for (auto [g, init] : groupLR) {
      argTypes.push_back(scalarType);
      argAttrs.push_back(b.getDictionaryAttr(
          {b.getNamedAttr(kStateAttr, b.getStringAttr(groupLRName(g))),
           b.getNamedAttr("cnn.init", b.getF32FloatAttr(init))}));
    }

  b.setInsertionPointAfter(forward);
  auto step = func::FuncOp::create(b, loc, "train_step",
                                   b.getFunctionType(argTypes, {}));
  Block *entry = step.addEntryBlock();
  for (auto [i, attrs] : llvm::enumerate(argAttrs))
    if (attrs)
      step.setArgAttrs(i, attrs);

  // Map forward arguments to train_step arguments.
  IRMapping map;
  unsigned pos = 0;
  for (unsigned i : inputs)
    map.map(forward.getArgument(i), entry->getArgument(pos++));
  Value labels = entry->getArgument(pos++), lr = entry->getArgument(pos++),
        stepArg = entry->getArgument(pos++);
  for (unsigned i : llvm::concat<unsigned>(params, buffers, frozen))
    map.map(forward.getArgument(i), entry->getArgument(pos++));
  unsigned stateBase = pos;

  // Forward pass in training semantics.
  b.setInsertionPointToStart(entry);
  DenseMap<Value, Value> newRunningStats; // buffer arg -> updated value
  int64_t dropoutSeed = 0;
  SmallVector<Value> allLogits; // the main logits, then the auxiliary ones
  for (Operation &op : forward.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        allLogits.push_back(map.lookup(v));
      break;
    }
    if (auto bn = dyn_cast<BatchNormOp>(op)) {
      // A module in eval mode: the step normalizes with the running
      // statistics and does not update them, as PyTorch does (its gradient
      // is BatchNormOp's rule).
      if (bn.getUseRunningStats()) {
        b.clone(op, map);
        continue;
      }
      auto t = BatchNormTrainOp::create(
          b, bn.getLoc(),
          ValueRange{map.lookup(bn.getInput()), map.lookup(bn.getScale()),
                     map.lookup(bn.getBias()), map.lookup(bn.getMean()),
                     map.lookup(bn.getVar())},
          {b.getNamedAttr("epsilon", bn.getEpsilonAttr()),
           b.getNamedAttr("momentum", bn.getMomentumAttr())});
      map.map(bn.getResult(), t.getResult());
      newRunningStats[map.lookup(bn.getMean())] = t.getNewRunningMean();
      newRunningStats[map.lookup(bn.getVar())] = t.getNewRunningVar();
      continue;
    }
    if (auto d = dyn_cast<DropoutOp>(op)) {
      Value x = map.lookup(d.getInput());
      if (d.getRatio().convertToFloat() == 0.0f) {
        map.map(d.getResult(), x);
        continue;
      }
      auto mask = DropoutMaskOp::create(
          b, d.getLoc(), TypeRange{x.getType()}, ValueRange{stepArg},
          {b.getNamedAttr("ratio", d.getRatioAttr()),
           b.getNamedAttr("seed", b.getI64IntegerAttr(dropoutSeed++))});
      map.map(d.getResult(), MulOp::create(b, d.getLoc(), x, mask));
      continue;
    }
    b.clone(op, map);
  }
  if (allLogits.empty()) {
    forward.emitError("cnn-autodiff: '") << forwardName << "' has no return";
    return signalPassFailure();
  }
  Location lossLoc = NameLoc::get(b.getStringAttr("loss"), loc);
  // Per-pixel logits N x C x H x W become (N*H*W) x C rows, each pixel's
  // classes contiguous (transpose to N x H x W x C, then reshape), so the loss
  // and its GPU kernels stay 2-D; the N x H x W labels are read in the same
  // row order. These two ops are differentiated like the forward ops (the
  // seeds below start at the 2-D logits), and under cnn-layout the transpose
  // cancels against the NHWC network's last transpose.
  if (dense)
    for (Value &l : allLogits) {
      auto t = cast<RankedTensorType>(l.getType());
      Value nhwc = TransposeOp::create(
          b, lossLoc, ValueRange{l},
          {b.getNamedAttr("permutation",
                          b.getDenseI64ArrayAttr({0, 2, 3, 1}))});
      l = ReshapeOp::create(
          b, lossLoc,
          RankedTensorType::get(
              {t.getDimSize(0) * t.getDimSize(2) * t.getDimSize(3),
               t.getDimSize(1)},
              t.getElementType()),
          nhwc);
    }
  Value logits = allLogits.front();
  // loss = CE(main) + aux-loss-weight * sum CE(aux), as torchvision's
  // reference training scripts compute it for GoogLeNet and Inception-v3
  // (and, with weight 0.5, for its segmentation models).
  DenseSet<Operation *> lossOps; // not differentiated: the seeds start below
  auto lossOp = [&](Value v) {
    lossOps.insert(v.getDefiningOp());
    return v;
  };
  auto crossEntropy = [&](Value l) -> Value {
    return lossOp(SoftmaxCrossEntropyOp::create(
        b, lossLoc, ValueRange{l, labels},
        {f32Attr(b, "label_smoothing", labelSmoothing),
         b.getNamedAttr("ignore_index", b.getI64IntegerAttr(ignoreIndex))}));
  };
  Value loss = crossEntropy(logits);
  if (allLogits.size() > 1) {
    Value aux;
    for (Value l : ArrayRef<Value>(allLogits).drop_front()) {
      Value ce = crossEntropy(l);
      aux = aux ? lossOp(AddOp::create(b, lossLoc, aux, ce)) : ce;
    }
    aux = lossOp(ScaleOp::create(b, lossLoc, TypeRange{scalarType},
                                 ValueRange{aux},
                                 {f32Attr(b, "factor", auxLossWeight)}));
    loss = lossOp(AddOp::create(b, lossLoc, loss, aux));
  }

  // Which values depend on a parameter (and so need a gradient)?
  for (unsigned i = 0; i < params.size(); ++i)
    needsGrad.insert(entry->getArgument(inputs.size() + 3 + i));
  SmallVector<Operation *> forwardOps;
  for (Operation &op : *entry) {
    forwardOps.push_back(&op);
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return needsGrad.contains(v); }))
      for (Value r : op.getResults())
        needsGrad.insert(r);
  }
  if (!llvm::all_of(allLogits,
                    [&](Value v) { return needsGrad.contains(v); })) {
    forward.emitError("cnn-autodiff: the logits of '")
        << forwardName << "' do not depend on any parameter";
    return signalPassFailure();
  }

  // Backward pass, in reverse order of the forward ops.
  Value one = ConstantOp::create(b, lossLoc, scalarType,
                                 DenseElementsAttr::get(scalarType, 1.0f));
  // Every seed reads the constant 1.0 (cnn-precision turns it into the loss
  // scale); an auxiliary logits gradient is then scaled by its weight.
  for (auto [k, l] : llvm::enumerate(allLogits)) {
    Value g = SoftmaxCrossEntropyGradOp::create(
        b, lossLoc, ValueRange{l, labels, one},
        {f32Attr(b, "label_smoothing", labelSmoothing),
         b.getNamedAttr("ignore_index", b.getI64IntegerAttr(ignoreIndex))});
    if (k > 0)
      g = ScaleOp::create(b, lossLoc, TypeRange{g.getType()}, ValueRange{g},
                          {f32Attr(b, "factor", auxLossWeight)});
    addGrad(b, lossLoc, l, g);
  }
  for (Operation *op : llvm::reverse(forwardOps)) {
    if (lossOps.contains(op) || op->getNumResults() == 0 ||
        !llvm::any_of(op->getResults(),
                      [&](Value r) { return grads.count(r); }))
      continue;
    if (!llvm::any_of(op->getOperands(),
                      [&](Value v) { return needsGrad.contains(v); }))
      continue;
    // Results without a gradient (e.g. BN statistics) contribute nothing;
    // the first result is the differentiated one for every rule above.
    if (!grads.count(op->getResult(0))) {
      op->emitError("cnn-autodiff: only the first result of '")
          << op->getName() << "' can be differentiated";
      return signalPassFailure();
    }
    if (failed(backprop(b, op)))
      return signalPassFailure();
  }

  // Each parameter's gradient; with accumulation the running sum of the
  // micro-steps' (divided by their count), which the update applies on the
  // last micro-step only.
  Location optLoc = NameLoc::get(b.getStringAttr("optimizer"), loc);
  Value apply, optStep = stepArg;
  if (accumulating) {
    auto a = AccumulationStepOp::create(
        b, optLoc, TypeRange{scalarType, scalarType}, ValueRange{stepArg},
        {b.getNamedAttr("every", b.getI64IntegerAttr(accumulate))});
    apply = a.getApply();
    optStep = a.getOptimizerStep();
  }
  SmallVector<Value> paramGrads, newAcc;
  for (auto [k, i] : llvm::enumerate(params)) {
    Value p = entry->getArgument(inputs.size() + 3 + k);
    Value g = grads.lookup(p);
    if (!g)
      g = zeros(b, p.getLoc(), p.getType());
    if (accumulating) {
      Value acc = entry->getArgument(stateBase + (k + 1) * stateSlots - 1);
      auto a = AccumulateGradOp::create(
          b, optLoc, TypeRange{p.getType(), p.getType()},
          ValueRange{acc, g, stepArg},
          {b.getNamedAttr("every", b.getI64IntegerAttr(accumulate))});
      g = a.getSum();
      newAcc.push_back(a.getNewAcc());
    }
    paramGrads.push_back(g);
  }
  // Clipping by the global norm of all trained gradients: the updates divide
  // by the clip divisor (their loss-scaling operands; cnn-precision puts the
  // loss scale into the divisor and its finite flag into the updates).
  SmallVector<Value> scaling;
  if (clipGradNorm > 0 || accumulating) {
    Value one = ConstantOp::create(b, optLoc, scalarType,
                                   DenseElementsAttr::get(scalarType, 1.0f));
    Value divisor = one;
    if (clipGradNorm > 0)
      divisor = ClipDivisorOp::create(
          b, NameLoc::get(b.getStringAttr("clip_grad_norm"), loc),
          TypeRange{scalarType},
          llvm::to_vector(llvm::concat<const Value>(ArrayRef<Value>{one},
                                                    ArrayRef<Value>(paramGrads))),
          {f32Attr(b, "max_norm", clipGradNorm)});
    scaling = {divisor, accumulating ? apply : one};
  }

  // Optimizer update of every parameter; BN running statistics pass through.
  SmallVector<Value> results{loss}, newState;
  SmallVector<DictionaryAttr> resultAttrs{named(kLossAttr, b.getUnitAttr())};
  for (auto [k, i] : llvm::enumerate(params)) {
    Value p = entry->getArgument(inputs.size() + 3 + k);
    Value g = paramGrads[k];
    Location ploc = NameLoc::get(
        b.getStringAttr(
            "optimizer." +
            cast<StringAttr>(forward.getArgAttr(i, kParamAttr)).getValue()),
        loc);
    unsigned s = stateBase + k * stateSlots;
    StringRef pname =
        cast<StringAttr>(forward.getArgAttr(i, kParamAttr)).getValue();
    const ParamSettings &ps = settings[k];
    const double decay = ps.weightDecay;
    Value plr = lr;
    if (ps.lr)
      plr = entry->getArgument(
          numOptState +
          std::distance(groupLR.begin(), groupLR.find(ps.group)));
    if (optimizer == "none") {
      // Gradients only (for testing against torch.autograd).
      results.push_back(g);
      resultAttrs.push_back(named(kGradAttr, b.getStringAttr(pname)));
      continue;
    }
    if (optimizer == "sgd") {
      auto u = SGDUpdateOp::create(
          b, ploc,
          llvm::to_vector(llvm::concat<const Value>(
              ValueRange{p, g, entry->getArgument(s), plr, optStep},
              ArrayRef<Value>(scaling))),
          {f32Attr(b, "momentum", ps.momentum),
           f32Attr(b, "dampening", ps.dampening),
           f32Attr(b, "weight_decay", decay),
           boolAttr(b, "nesterov", ps.nesterov)});
      results.push_back(u.getNewParam());
      newState.push_back(u.getNewMomentumBuffer());
    } else {
      auto u = AdamUpdateOp::create(
          b, ploc,
          llvm::to_vector(llvm::concat<const Value>(
              ValueRange{p, g, entry->getArgument(s),
                         entry->getArgument(s + 1), plr, optStep},
              ArrayRef<Value>(scaling))),
          {f32Attr(b, "beta1", ps.beta1), f32Attr(b, "beta2", ps.beta2),
           f32Attr(b, "epsilon", ps.epsilon), f32Attr(b, "weight_decay", decay),
           boolAttr(b, "decoupled", optimizer == "adamw")});
      results.push_back(u.getNewParam());
      newState.append({u.getNewExpAvg(), u.getNewExpAvgSq()});
    }
    if (accumulating)
      newState.push_back(newAcc[k]);
    resultAttrs.push_back(forward.getArgAttrDict(i));
  }
  for (auto [k, i] : llvm::enumerate(buffers)) {
    Value arg = entry->getArgument(inputs.size() + 3 + params.size() + k);
    Value updated = newRunningStats.lookup(arg);
    results.push_back(updated ? updated : arg);
    resultAttrs.push_back(forward.getArgAttrDict(i));
  }
  for (auto [k, v] : llvm::enumerate(newState)) {
    results.push_back(v);
    resultAttrs.push_back(step.getArgAttrDict(stateBase + k));
  }
  func::ReturnOp::create(b, loc, results);
  step.setFunctionType(
      b.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [i, attrs] : llvm::enumerate(resultAttrs))
    step.setResultAttrs(i, attrs);

  // @forward is the evaluation function: auxiliary classifiers only train
  // (torchvision's models return the main logits alone in eval mode), so it
  // keeps the main logits and drops what only the others used.
  if (forward.getNumResults() > 1) {
    auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    ret->setOperands(ret.getOperand(0));
    forward.setFunctionType(b.getFunctionType(forward.getArgumentTypes(),
                                              ret.getOperand(0).getType()));
    for (Operation &op :
         llvm::make_early_inc_range(llvm::reverse(forward.getBody().front())))
      if (isOpTriviallyDead(&op))
        op.erase();
  }
}

} // namespace
