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
#include "llvm/ADT/TypeSwitch.h"

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

/// `g` summed over the dimensions in which `type` is 1 and `g` is not: the
/// gradient of an operand that a binary op broadcast.
Value sumToShape(OpBuilder &b, Location loc, Value g, Type type) {
  auto gt = cast<RankedTensorType>(g.getType());
  auto t = cast<RankedTensorType>(type);
  if (gt.getShape() == t.getShape())
    return g;
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (t.getDimSize(d) == 1 && gt.getDimSize(d) != 1)
      axes.push_back(d);
  return ReduceSumOp::create(b, loc, g, b.getDenseI64ArrayAttr(axes));
}

/// `factor * dy` repeated over the dimensions where `dy` is 1 and `type` is
/// not (the gradient of a reduction).
Value broadcastTo(OpBuilder &b, Location loc, Value dy, Type type,
                  double factor) {
  auto t = cast<RankedTensorType>(type);
  auto full = RankedTensorType::get(
      t.getShape(), cast<RankedTensorType>(dy.getType()).getElementType());
  return makeFusedElementwise(
             b, loc, TypeRange{full}, ValueRange{dy}, {broadcastKind(dy.getType(), full)},
             Layout::NCHW,
             [&](ScalarBuilder &s, ValueRange a) {
               return SmallVector<Value>{factor == 1.0 ? a[0]
                                                       : s.mul(a[0], s.c(factor))};
             })
      .getResult(0);
}

/// The gradient of operand #`index` of an elementwise op from its scalar
/// derivative: one fused_elementwise over (operands, result, dy), keeping only
/// the inputs the derivative reads, summed to the operand's shape. Null when
/// the op declares no derivative for that operand.
Value elementwiseGradient(OpBuilder &b, ElementwiseOpInterface e, Value dy,
                          unsigned index) {
  Operation *op = e.getOperation();
  Location loc = op->getLoc();
  Value result = op->getResult(0);
  unsigned n = op->getNumOperands();
  SmallVector<Value> inputs(op->getOperands());
  inputs.append({result, dy});
  SmallVector<int64_t> bc;
  for (Value v : inputs)
    bc.push_back(broadcastKind(v.getType(), result.getType()));
  auto full = RankedTensorType::get(
      cast<RankedTensorType>(result.getType()).getShape(),
      cast<RankedTensorType>(dy.getType()).getElementType());
  bool none = false;
  FusedElementwiseOp g = makeFusedElementwise(
      b, loc, TypeRange{full}, inputs, bc, Layout::NCHW,
      [&](ScalarBuilder &s, ValueRange a) {
        Value r = e.buildScalarGradient(s, a.take_front(n), a[n], a[n + 1],
                                        index);
        none = !r;
        return SmallVector<Value>{r ? r : s.c(0)};
      });
  Block &body = g.getBody().front();
  Value yielded = cast<YieldOp>(body.getTerminator()).getValues()[0];
  if (none || yielded == body.getArgument(n + 1)) {
    g->erase();
    return none ? Value() : sumToShape(b, loc, dy, op->getOperand(index).getType());
  }
  // Drop the inputs the derivative does not read (their buffers need not
  // live until the backward pass).
  for (int k = (int)inputs.size() - 1; k >= 0; --k)
    if (body.getArgument(k).use_empty()) {
      body.eraseArgument(k);
      g.getInputsMutable().erase(k);
      bc.erase(bc.begin() + k);
    }
  g.setBroadcast(bc);
  return sumToShape(b, loc, g.getResult(0), op->getOperand(index).getType());
}

struct AutodiffPass : public cnnc::impl::CNNAutodiffBase<AutodiffPass> {
  using CNNAutodiffBase::CNNAutodiffBase;
  void runOnOperation() override;

  /// Adds `g` to the gradient accumulated for `v` (values used twice, such as
  /// ResNet's skip connections, receive the sum of their users' gradients).
  void accumulate(OpBuilder &b, Location loc, Value v, Value g) {
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

LogicalResult AutodiffPass::backprop(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  auto gradOf = [&](Value v) -> Value { return grads.lookup(v); };
  auto wants = [&](Value v) { return needsGrad.contains(v); };
  Value dy = op->getNumResults() ? gradOf(op->getResult(0)) : Value();

  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](Conv2DOp c) {
        if (wants(c.getInput()))
          accumulate(b, loc, c.getInput(),
                     Conv2DBwdDataOp::create(
                         b, loc, TypeRange{c.getInput().getType()},
                         ValueRange{dy, c.getFilter()}, c->getAttrs()));
        if (wants(c.getFilter()))
          accumulate(b, loc, c.getFilter(),
                     Conv2DBwdFilterOp::create(
                         b, loc, TypeRange{c.getFilter().getType()},
                         ValueRange{c.getInput(), dy}, c->getAttrs()));
        return success();
      })
      .Case([&](Conv2DBwdDataOp c) {
        // A transposed convolution (ONNX ConvTranspose) is the adjoint of
        // conv2d: its input's gradient is the convolution of dy, its filter's
        // that of the convolution with input dy and output gradient x.
        auto attrs = c->getAttrs();
        if (wants(c.getGradOutput()))
          accumulate(b, loc, c.getGradOutput(),
                     Conv2DOp::create(b, loc,
                                      TypeRange{c.getGradOutput().getType()},
                                      ValueRange{dy, c.getFilter()}, attrs));
        if (wants(c.getFilter()))
          accumulate(b, loc, c.getFilter(),
                     Conv2DBwdFilterOp::create(
                         b, loc, TypeRange{c.getFilter().getType()},
                         ValueRange{dy, c.getGradOutput()}, attrs));
        return success();
      })
      .Case([&](BiasAddOp o) {
        if (wants(o.getInput()))
          accumulate(b, loc, o.getInput(), dy);
        if (wants(o.getBias()))
          accumulate(b, loc, o.getBias(), BiasGradOp::create(b, loc, dy));
        return success();
      })
      .Case([&](ReluOp o) {
        accumulate(b, loc, o.getInput(),
                   ReluGradOp::create(b, loc, dy, o.getResult()));
        return success();
      })
      .Case([&](ClipOp o) {
        accumulate(b, loc, o.getInput(),
                   ClipGradOp::create(b, loc, TypeRange{dy.getType()},
                                      ValueRange{dy, o.getInput()},
                                      o->getAttrs()));
        return success();
      })
      .Case([&](AddOp o) {
        for (Value v : {o.getLhs(), o.getRhs()})
          if (wants(v))
            accumulate(b, loc, v, sumToShape(b, loc, dy, v.getType()));
        return success();
      })
      .Case([&](MulOp o) {
        if (wants(o.getLhs()))
          accumulate(b, loc, o.getLhs(),
                     sumToShape(b, loc, MulOp::create(b, loc, dy, o.getRhs()),
                                o.getLhs().getType()));
        if (wants(o.getRhs()))
          accumulate(b, loc, o.getRhs(),
                     sumToShape(b, loc, MulOp::create(b, loc, dy, o.getLhs()),
                                o.getRhs().getType()));
        return success();
      })
      .Case([&](ScaleOp o) {
        accumulate(b, loc, o.getInput(),
                   ScaleOp::create(b, loc, TypeRange{dy.getType()},
                                   ValueRange{dy}, o->getAttrs()));
        return success();
      })
      .Case([&](BatchNormTrainOp o) {
        auto g = BatchNormGradOp::create(b, loc, dy, o.getInput(), o.getScale(),
                                         o.getSavedMean(), o.getSavedInvstd());
        if (wants(o.getInput()))
          accumulate(b, loc, o.getInput(), g.getGradInput());
        if (wants(o.getScale()))
          accumulate(b, loc, o.getScale(), g.getGradScale());
        if (wants(o.getBias()))
          accumulate(b, loc, o.getBias(), g.getGradBias());
        return success();
      })
      .Case([&](MaxPool2DOp o) {
        accumulate(b, loc, o.getInput(),
                   MaxPool2DGradOp::create(
                       b, loc, TypeRange{o.getInput().getType()},
                       ValueRange{dy, o.getInput()}, o->getAttrs()));
        return success();
      })
      .Case([&](AvgPool2DOp o) {
        accumulate(b, loc, o.getInput(),
                   AvgPool2DGradOp::create(b, loc,
                                           TypeRange{o.getInput().getType()},
                                           ValueRange{dy}, o->getAttrs()));
        return success();
      })
      .Case([&](GlobalAvgPoolOp o) {
        accumulate(
            b, loc, o.getInput(),
            GlobalAvgPoolGradOp::create(b, loc, o.getInput().getType(), dy));
        return success();
      })
      .Case([&](MatmulOp o) {
        // C = op(A) op(B); each case below is dC/dA and dC/dB written as
        // matmuls with transposed operands (no explicit transposes).
        bool ta = o.getTransposeLhs(), tb = o.getTransposeRhs();
        Value a = o.getLhs(), bm = o.getRhs();
        auto mm = [&](Value x, Value y, bool tx, bool ty) -> Value {
          return MatmulOp::create(b, loc, ValueRange{x, y},
                                  {boolAttr(b, "transpose_lhs", tx),
                                   boolAttr(b, "transpose_rhs", ty)});
        };
        if (wants(a))
          accumulate(
              b, loc, a,
              !ta ? mm(dy, bm, false, !tb)
                  : (tb ? mm(bm, dy, true, true) : mm(bm, dy, false, true)));
        if (wants(bm))
          accumulate(
              b, loc, bm,
              !tb ? (ta ? mm(a, dy, false, false) : mm(a, dy, true, false))
                  : (ta ? mm(dy, a, true, true) : mm(dy, a, true, false)));
        return success();
      })
      .Case<FlattenOp, ReshapeOp>([&](Operation *o) {
        Value in = o->getOperand(0);
        accumulate(b, loc, in, ReshapeOp::create(b, loc, in.getType(), dy));
        return success();
      })
      .Case([&](CastOp o) {
        accumulate(b, loc, o.getInput(),
                   CastOp::create(b, loc, o.getInput().getType(), dy));
        return success();
      })
      .Case([&](TransposeOp o) {
        auto perm = o.getPermutation();
        SmallVector<int64_t> inv(perm.size());
        for (auto [i, p] : llvm::enumerate(perm))
          inv[p] = i;
        accumulate(
            b, loc, o.getInput(),
            TransposeOp::create(
                b, loc, ValueRange{dy},
                {b.getNamedAttr("permutation", b.getDenseI64ArrayAttr(inv))}));
        return success();
      })
      .Case([&](ConcatOp o) {
        int64_t axis = o.getAxis(), offset = 0;
        auto dyType = cast<RankedTensorType>(dy.getType());
        for (Value in : o.getInputs()) {
          auto t = cast<RankedTensorType>(in.getType());
          if (wants(in)) {
            SmallVector<int64_t> offs(dyType.getRank(), 0);
            offs[axis] = offset;
            accumulate(
                b, loc, in,
                SliceOp::create(
                    b, loc, ValueRange{dy},
                    {b.getNamedAttr("offsets", b.getDenseI64ArrayAttr(offs)),
                     b.getNamedAttr("sizes",
                                    b.getDenseI64ArrayAttr(t.getShape()))}));
          }
          offset += t.getDimSize(axis);
        }
        return success();
      })
      .Case([&](ElementwiseOpInterface e) -> LogicalResult {
        // Every other elementwise op: its own scalar derivative.
        for (auto [i, v] : llvm::enumerate(op->getOperands())) {
          if (!wants(v))
            continue;
          Value g = elementwiseGradient(b, e, dy, i);
          if (!g)
            return op->emitError("cnn-autodiff: '")
                   << op->getName() << "' has no gradient for operand #" << i;
          accumulate(b, loc, v, g);
        }
        return success();
      })
      .Case([&](ReduceSumOp o) {
        // The sum's gradient is dy repeated over the reduced dimensions.
        accumulate(b, loc, o.getInput(),
                   broadcastTo(b, loc, dy, o.getInput().getType(), 1.0));
        return success();
      })
      .Case([&](ReduceMeanOp o) {
        auto in = cast<RankedTensorType>(o.getInput().getType());
        int64_t count = 1;
        for (int64_t a : o.getAxes())
          count *= in.getDimSize(a);
        accumulate(b, loc, o.getInput(),
                   broadcastTo(b, loc, dy, in, 1.0 / (double)count));
        return success();
      })
      .Case([&](PadOp o) {
        // A constant pad only moves the input: its gradient is the interior
        // of dy. Reflect/edge pads copy input elements several times.
        Value g;
        if (o.getMode() == "constant") {
          auto in = o.getInput().getType();
          auto offs = o.getPads().take_front(in.getRank());
          g = SliceOp::create(
              b, loc, ValueRange{dy},
              {b.getNamedAttr("offsets", b.getDenseI64ArrayAttr(offs)),
               b.getNamedAttr("sizes", b.getDenseI64ArrayAttr(in.getShape()))});
        } else {
          g = PadGradOp::create(b, loc, ValueRange{dy},
                                {b.getNamedAttr("pads", o.getPadsAttr()),
                                 b.getNamedAttr("mode", o.getModeAttr())});
        }
        accumulate(b, loc, o.getInput(), g);
        return success();
      })
      .Case([&](SliceOp o) {
        // Zeros around dy: a constant pad to the input's shape.
        auto in = o.getInput().getType();
        int64_t rank = in.getRank();
        SmallVector<int64_t> pads(2 * rank);
        for (int64_t d = 0; d < rank; ++d) {
          pads[d] = o.getOffsets()[d];
          pads[rank + d] =
              in.getDimSize(d) - o.getOffsets()[d] - o.getSizes()[d];
        }
        accumulate(
            b, loc, o.getInput(),
            PadOp::create(b, loc, ValueRange{dy},
                          {b.getNamedAttr("pads", b.getDenseI64ArrayAttr(pads)),
                           b.getNamedAttr("mode", b.getStringAttr("constant")),
                           f32Attr(b, "value", 0.0)}));
        return success();
      })
      .Default([&](Operation *o) {
        return o->emitError("cnn-autodiff: no gradient rule for '")
               << o->getName()
               << "', which lies between the parameters and the loss";
      });
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
  // One N x C logits tensor, or the main logits followed by auxiliary
  // classifiers' logits (GoogLeNet, Inception-v3 in training mode), all over
  // the same batch.
  auto isLogits = [&](Type t) {
    auto r = dyn_cast<RankedTensorType>(t);
    return r && r.getRank() == 2 &&
           r.getDimSize(0) ==
               cast<RankedTensorType>(forward.getResultTypes()[0])
                   .getDimSize(0);
  };
  if (forward.getNumResults() < 1 ||
      !llvm::all_of(forward.getResultTypes(), isLogits)) {
    forward.emitError("cnn-autodiff: '")
        << forwardName
        << "' must return N x C logits tensors (the main classifier's, then "
           "any auxiliary classifiers'), got "
        << forward.getFunctionType();
    return signalPassFailure();
  }
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

  MLIRContext *ctx = &getContext();
  OpBuilder b(ctx);
  Location loc = forward.getLoc();
  auto logitsType = cast<RankedTensorType>(forward.getResultTypes()[0]);
  auto scalarType = RankedTensorType::get({}, Float32Type::get(ctx));
  auto labelsType = RankedTensorType::get({logitsType.getDimSize(0)},
                                          IntegerType::get(ctx, 32));

  // Classify the forward arguments.
  SmallVector<unsigned> inputs, params, buffers;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    if (forward.getArgAttr(i, kParamAttr))
      params.push_back(i);
    else if (forward.getArgAttr(i, kBufferAttr))
      buffers.push_back(i);
    else
      inputs.push_back(i);
  }
  if (params.empty()) {
    forward.emitError("cnn-autodiff: '")
        << forwardName
        << "' has no parameters (arguments tagged cnn.param): nothing to train";
    return signalPassFailure();
  }
  int stateSlots = optimizer == "none" ? 0 : optimizer == "sgd" ? 1 : 2;
  auto stateNames = [&](StringRef param) -> SmallVector<std::string> {
    if (optimizer == "none")
      return {};
    if (optimizer == "sgd")
      return {(param + ".momentum_buffer").str()};
    return {(param + ".exp_avg").str(), (param + ".exp_avg_sq").str()};
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
  for (unsigned i : llvm::concat<unsigned>(params, buffers)) {
    argTypes.push_back(forward.getArgument(i).getType());
    argAttrs.push_back(forward.getArgAttrDict(i));
  }
  for (unsigned i : params)
    for (const std::string &n : stateNames(
             cast<StringAttr>(forward.getArgAttr(i, kParamAttr)).getValue())) {
      argTypes.push_back(forward.getArgument(i).getType());
      argAttrs.push_back(named(kStateAttr, b.getStringAttr(n)));
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
  for (unsigned i : llvm::concat<unsigned>(params, buffers))
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
  Value logits = allLogits.front();
  // loss = CE(main) + aux-loss-weight * sum CE(aux), as torchvision's
  // reference training scripts compute it for GoogLeNet and Inception-v3.
  Location lossLoc = NameLoc::get(b.getStringAttr("loss"), loc);
  DenseSet<Operation *> lossOps; // not differentiated: the seeds start below
  auto lossOp = [&](Value v) {
    lossOps.insert(v.getDefiningOp());
    return v;
  };
  auto crossEntropy = [&](Value l) -> Value {
    return lossOp(SoftmaxCrossEntropyOp::create(
        b, lossLoc, ValueRange{l, labels},
        {f32Attr(b, "label_smoothing", labelSmoothing)}));
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
        {f32Attr(b, "label_smoothing", labelSmoothing)});
    if (k > 0)
      g = ScaleOp::create(b, lossLoc, TypeRange{g.getType()}, ValueRange{g},
                          {f32Attr(b, "factor", auxLossWeight)});
    accumulate(b, lossLoc, l, g);
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

  // Optimizer update of every parameter; BN running statistics pass through.
  SmallVector<Value> results{loss}, newState;
  SmallVector<DictionaryAttr> resultAttrs{named(kLossAttr, b.getUnitAttr())};
  for (auto [k, i] : llvm::enumerate(params)) {
    Value p = entry->getArgument(inputs.size() + 3 + k);
    Value g = grads.lookup(p);
    if (!g)
      g = zeros(b, p.getLoc(), p.getType());
    Location ploc = NameLoc::get(
        b.getStringAttr(
            "optimizer." +
            cast<StringAttr>(forward.getArgAttr(i, kParamAttr)).getValue()),
        loc);
    unsigned s = stateBase + k * stateSlots;
    StringRef pname =
        cast<StringAttr>(forward.getArgAttr(i, kParamAttr)).getValue();
    // Per-parameter decay: BN scale/shift and biases (rank <= 1) are exempt
    // with no-bn-weight-decay.
    const double decay =
        noBNWeightDecay && cast<RankedTensorType>(p.getType()).getRank() <= 1
            ? 0.0
            : static_cast<double>(weightDecay);
    if (optimizer == "none") {
      // Gradients only (for testing against torch.autograd).
      results.push_back(g);
      resultAttrs.push_back(named(kGradAttr, b.getStringAttr(pname)));
      continue;
    }
    if (optimizer == "sgd") {
      auto u = SGDUpdateOp::create(
          b, ploc, ValueRange{p, g, entry->getArgument(s), lr, stepArg},
          {f32Attr(b, "momentum", momentum), f32Attr(b, "dampening", dampening),
           f32Attr(b, "weight_decay", decay),
           boolAttr(b, "nesterov", nesterov)});
      results.push_back(u.getNewParam());
      newState.push_back(u.getNewMomentumBuffer());
    } else {
      auto u = AdamUpdateOp::create(
          b, ploc,
          ValueRange{p, g, entry->getArgument(s), entry->getArgument(s + 1), lr,
                     stepArg},
          {f32Attr(b, "beta1", beta1), f32Attr(b, "beta2", beta2),
           f32Attr(b, "epsilon", epsilon), f32Attr(b, "weight_decay", decay),
           boolAttr(b, "decoupled", optimizer == "adamw")});
      results.push_back(u.getNewParam());
      newState.append({u.getNewExpAvg(), u.getNewExpAvgSq()});
    }
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
