//===- CNNGradients.cpp - each op's reverse-mode rule ----------------------===//
//
// GradientOpInterface: the rule that turns the gradient of an op's results
// into the gradients of its operands lives here, one function per op, next to
// nothing but other rules. cnn-autodiff (lib/Transforms/Autodiff.cpp) walks
// the forward ops in reverse and asks each op; it names no op.
//
// Elementwise ops need no rule: their scalar derivative (ODS) builds one
// (`elementwiseGradient`). The rules below for relu, clip, add, mul, scale
// and cast produce the ops the later passes look for (relu_grad, which
// cnn-fuse merges with bias_grad; a plain sum for add).
//
//===----------------------------------------------------------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {
NamedAttribute boolAttr(OpBuilder &b, StringRef name, bool v) {
  return b.getNamedAttr(name, b.getBoolAttr(v));
}
NamedAttribute i64ArrayAttr(OpBuilder &b, StringRef name,
                            ArrayRef<int64_t> v) {
  return b.getNamedAttr(name, b.getDenseI64ArrayAttr(v));
}
/// The full-shape type of `type` with `dy`'s element type.
RankedTensorType withElementOf(Type type, Value dy) {
  return RankedTensorType::get(
      cast<RankedTensorType>(type).getShape(),
      cast<RankedTensorType>(dy.getType()).getElementType());
}
} // namespace

//===----------------------------------------------------------------------===//
// Shared helpers and the driver's entry point
//===----------------------------------------------------------------------===//

Value cnnc::cnn::sumToShape(OpBuilder &b, Location loc, Value g, Type type) {
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

Value cnnc::cnn::broadcastTo(OpBuilder &b, Location loc, Value dy, Type type,
                             double factor) {
  auto full = withElementOf(type, dy);
  return makeFusedElementwise(
             b, loc, TypeRange{full}, ValueRange{dy},
             {broadcastKind(dy.getType(), full)}, Layout::NCHW,
             [&](ScalarBuilder &s, ValueRange a) {
               return SmallVector<Value>{
                   factor == 1.0 ? a[0] : s.mul(a[0], s.c(factor))};
             })
      .getResult(0);
}

Value cnnc::cnn::elementwiseGradient(OpBuilder &b, ElementwiseOpInterface e,
                                     Value dy, unsigned index) {
  Operation *op = e.getOperation();
  Location loc = op->getLoc();
  Value result = op->getResult(0);
  unsigned n = op->getNumOperands();
  SmallVector<Value> inputs(op->getOperands());
  inputs.append({result, dy});
  SmallVector<int64_t> bc;
  for (Value v : inputs)
    bc.push_back(broadcastKind(v.getType(), result.getType()));
  auto full = withElementOf(result.getType(), dy);
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
    return none ? Value()
                : sumToShape(b, loc, dy, op->getOperand(index).getType());
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

LogicalResult cnnc::cnn::buildGradient(OpBuilder &b, Operation *op,
                                       GradientEmitter &g) {
  if (auto rule = dyn_cast<GradientOpInterface>(op))
    return rule.buildGradient(b, g);
  if (auto e = dyn_cast<ElementwiseOpInterface>(op)) {
    Value dy = g.resultGrad(0);
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      if (!g.wants(v))
        continue;
      Value grad = elementwiseGradient(b, e, dy, i);
      if (!grad)
        return op->emitError("cnn-autodiff: '")
               << op->getName() << "' has no gradient for operand #" << i;
      g.accumulate(v, grad);
    }
    return success();
  }
  return op->emitError("cnn-autodiff: no gradient rule for '")
         << op->getName()
         << "', which lies between the parameters and the loss";
}

//===----------------------------------------------------------------------===//
// Convolutions and matrix products
//===----------------------------------------------------------------------===//

LogicalResult Conv2DOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0);
  if (g.wants(getInput()))
    g.accumulate(getInput(), Conv2DBwdDataOp::create(
                                 b, loc, TypeRange{getInput().getType()},
                                 ValueRange{dy, getFilter()}, (*this)->getAttrs()));
  if (g.wants(getFilter()))
    g.accumulate(getFilter(),
                 Conv2DBwdFilterOp::create(
                     b, loc, TypeRange{getFilter().getType()},
                     ValueRange{getInput(), dy}, (*this)->getAttrs()));
  return success();
}

// A transposed convolution (ONNX ConvTranspose) is the adjoint of conv2d: its
// input's gradient is the convolution of dy, its filter's that of the
// convolution with input dy and output gradient x.
LogicalResult Conv2DBwdDataOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0);
  auto attrs = (*this)->getAttrs();
  if (g.wants(getGradOutput()))
    g.accumulate(getGradOutput(),
                 Conv2DOp::create(b, loc, TypeRange{getGradOutput().getType()},
                                  ValueRange{dy, getFilter()}, attrs));
  if (g.wants(getFilter()))
    g.accumulate(getFilter(),
                 Conv2DBwdFilterOp::create(b, loc,
                                           TypeRange{getFilter().getType()},
                                           ValueRange{dy, getGradOutput()},
                                           attrs));
  return success();
}

LogicalResult BiasAddOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Value dy = g.resultGrad(0);
  if (g.wants(getInput()))
    g.accumulate(getInput(), dy);
  if (g.wants(getBias()))
    g.accumulate(getBias(), BiasGradOp::create(b, getLoc(), dy));
  return success();
}

// C = op(A) op(B); each case below is dC/dA and dC/dB written as matmuls with
// transposed operands (no explicit transposes).
LogicalResult MatmulOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0);
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  Value a = getLhs(), bm = getRhs();
  auto mm = [&](Value x, Value y, bool tx, bool ty) -> Value {
    return MatmulOp::create(b, loc, ValueRange{x, y},
                            {boolAttr(b, "transpose_lhs", tx),
                             boolAttr(b, "transpose_rhs", ty)});
  };
  if (g.wants(a))
    g.accumulate(a, !ta ? mm(dy, bm, false, !tb)
                        : (tb ? mm(bm, dy, true, true)
                              : mm(bm, dy, false, true)));
  if (g.wants(bm))
    g.accumulate(bm, !tb ? (ta ? mm(a, dy, false, false)
                               : mm(a, dy, true, false))
                         : (ta ? mm(dy, a, true, true)
                               : mm(dy, a, true, false)));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise ops whose rule is not their scalar derivative
//===----------------------------------------------------------------------===//

LogicalResult ReluOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(),
               ReluGradOp::create(b, getLoc(), g.resultGrad(0), getResult()));
  return success();
}

LogicalResult ClipOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Value dy = g.resultGrad(0);
  g.accumulate(getInput(), ClipGradOp::create(b, getLoc(),
                                              TypeRange{dy.getType()},
                                              ValueRange{dy, getInput()},
                                              (*this)->getAttrs()));
  return success();
}

LogicalResult AddOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Value dy = g.resultGrad(0);
  for (Value v : {getLhs(), getRhs()})
    if (g.wants(v))
      g.accumulate(v, sumToShape(b, getLoc(), dy, v.getType()));
  return success();
}

LogicalResult MulOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0);
  if (g.wants(getLhs()))
    g.accumulate(getLhs(),
                 sumToShape(b, loc, MulOp::create(b, loc, dy, getRhs()),
                            getLhs().getType()));
  if (g.wants(getRhs()))
    g.accumulate(getRhs(),
                 sumToShape(b, loc, MulOp::create(b, loc, dy, getLhs()),
                            getRhs().getType()));
  return success();
}

LogicalResult ScaleOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Value dy = g.resultGrad(0);
  g.accumulate(getInput(),
               ScaleOp::create(b, getLoc(), TypeRange{dy.getType()},
                               ValueRange{dy}, (*this)->getAttrs()));
  return success();
}

LogicalResult CastOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(), CastOp::create(b, getLoc(), getInput().getType(),
                                          g.resultGrad(0)));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization, pooling, softmax
//===----------------------------------------------------------------------===//

LogicalResult BatchNormTrainOp::buildGradient(OpBuilder &b,
                                              GradientEmitter &g) {
  auto grad = BatchNormGradOp::create(b, getLoc(), g.resultGrad(0), getInput(),
                                      getScale(), getSavedMean(),
                                      getSavedInvstd());
  if (g.wants(getInput()))
    g.accumulate(getInput(), grad.getGradInput());
  if (g.wants(getScale()))
    g.accumulate(getScale(), grad.getGradScale());
  if (g.wants(getBias()))
    g.accumulate(getBias(), grad.getGradBias());
  return success();
}

// The inference form in a training step (use_running_stats: a BatchNorm
// module in eval mode): the running statistics are constants of the step, so
// y = x * a + c per channel with a = scale / sqrt(var + eps). Written with
// ops every target already runs in both layouts: dx is the same
// normalization of dy with zero mean and bias, x's normalized value
// (x - mean) / sqrt(var + eps) is one with unit scale, and the per-channel
// sums are bias_grad.
LogicalResult BatchNormOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0);
  auto channelType = cast<RankedTensorType>(getVar().getType());
  auto splat = [&](double v) -> Value {
    return ConstantOp::create(
        b, loc, channelType,
        DenseElementsAttr::get(
            channelType, b.getFloatAttr(channelType.getElementType(), v)));
  };
  Value zero = splat(0.0);
  auto normalize = [&](Value x, Value scale, Value mean) -> Value {
    return BatchNormOp::create(
        b, loc, TypeRange{withElementOf(x.getType(), dy)},
        ValueRange{x, scale, zero, mean, getVar()},
        {b.getNamedAttr("epsilon", getEpsilonAttr()),
         b.getNamedAttr("momentum", getMomentumAttr()),
         b.getNamedAttr("layout", getLayoutAttr())});
  };
  if (g.wants(getInput()))
    g.accumulate(getInput(), normalize(dy, getScale(), zero));
  if (g.wants(getScale())) {
    Value xhat = normalize(getInput(), splat(1.0), getMean());
    g.accumulate(getScale(),
                 BiasGradOp::create(b, loc, MulOp::create(b, loc, dy, xhat),
                                    getLayoutAttr()));
  }
  if (g.wants(getBias()))
    g.accumulate(getBias(), BiasGradOp::create(b, loc, dy, getLayoutAttr()));
  return success();
}

LogicalResult MaxPool2DOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(), MaxPool2DGradOp::create(
                               b, getLoc(), TypeRange{getInput().getType()},
                               ValueRange{g.resultGrad(0), getInput()},
                               (*this)->getAttrs()));
  return success();
}

LogicalResult AvgPool2DOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(), AvgPool2DGradOp::create(
                               b, getLoc(), TypeRange{getInput().getType()},
                               ValueRange{g.resultGrad(0)},
                               (*this)->getAttrs()));
  return success();
}

LogicalResult ResizeOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  // The adjoint with the same attributes (size, scales, modes, layout).
  g.accumulate(getInput(), ResizeGradOp::create(b, getLoc(),
                                                TypeRange{getInput().getType()},
                                                ValueRange{g.resultGrad(0)},
                                                (*this)->getAttrs()));
  return success();
}

LogicalResult GlobalAvgPoolOp::buildGradient(OpBuilder &b,
                                             GradientEmitter &g) {
  g.accumulate(getInput(),
               GlobalAvgPoolGradOp::create(b, getLoc(), getInput().getType(),
                                           g.resultGrad(0)));
  return success();
}

// y = softmax(x) along `axis`: dx = y * (dy - sum(dy * y, axis)), written with
// ops the GPU target already runs (a product, a sum over one axis, a fused
// elementwise).
LogicalResult SoftmaxOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0), y = getResult();
  auto type = cast<RankedTensorType>(y.getType());
  int64_t axis = static_cast<int64_t>(getAxis());
  Value dot = ReduceSumOp::create(b, loc, MulOp::create(b, loc, dy, y),
                                  b.getDenseI64ArrayAttr({axis}));
  auto full = withElementOf(type, dy);
  Value dx = makeFusedElementwise(
                 b, loc, TypeRange{full}, ValueRange{y, dy, dot},
                 {0, 0, broadcastKind(dot.getType(), full)}, Layout::NCHW,
                 [&](ScalarBuilder &s, ValueRange a) {
                   return SmallVector<Value>{s.mul(a[0], s.sub(a[1], a[2]))};
                 })
                 .getResult(0);
  g.accumulate(getInput(), dx);
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

// The sum's gradient is dy repeated over the reduced dimensions.
LogicalResult ReduceSumOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(), broadcastTo(b, getLoc(), g.resultGrad(0),
                                       getInput().getType(), 1.0));
  return success();
}

LogicalResult ReduceMeanOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  auto in = cast<RankedTensorType>(getInput().getType());
  int64_t count = 1;
  for (int64_t a : getAxes())
    count *= in.getDimSize(a);
  g.accumulate(getInput(), broadcastTo(b, getLoc(), g.resultGrad(0), in,
                                       1.0 / (double)count));
  return success();
}

// PyTorch's rule for amax/max over dimensions: dy goes to the elements equal
// to the maximum, split evenly among ties (mask / count).
LogicalResult ReduceMaxOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0), x = getInput(), y = getResult();
  auto full = withElementOf(x.getType(), dy);
  int64_t bcY = broadcastKind(y.getType(), full);
  Value mask = makeFusedElementwise(
                   b, loc, TypeRange{full}, ValueRange{x, y}, {0, bcY},
                   Layout::NCHW,
                   [&](ScalarBuilder &s, ValueRange a) {
                     return SmallVector<Value>{s.select(
                         s.cmp(arith::CmpFPredicate::OEQ, a[0], a[1]), s.c(1),
                         s.c(0))};
                   })
                   .getResult(0);
  Value count = ReduceSumOp::create(b, loc, mask, getAxesAttr());
  Value dx = makeFusedElementwise(
                 b, loc, TypeRange{full}, ValueRange{mask, dy, count},
                 {0, broadcastKind(dy.getType(), full),
                  broadcastKind(count.getType(), full)},
                 Layout::NCHW,
                 [&](ScalarBuilder &s, ValueRange a) {
                   return SmallVector<Value>{
                       s.div(s.mul(a[0], a[1]), a[2])};
                 })
                 .getResult(0);
  g.accumulate(x, dx);
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult FlattenOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(), ReshapeOp::create(b, getLoc(), getInput().getType(),
                                             g.resultGrad(0)));
  return success();
}

LogicalResult ReshapeOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  g.accumulate(getInput(), ReshapeOp::create(b, getLoc(), getInput().getType(),
                                             g.resultGrad(0)));
  return success();
}

LogicalResult TransposeOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  auto perm = getPermutation();
  SmallVector<int64_t> inv(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inv[p] = i;
  g.accumulate(getInput(),
               TransposeOp::create(b, getLoc(), ValueRange{g.resultGrad(0)},
                                   {i64ArrayAttr(b, "permutation", inv)}));
  return success();
}

LogicalResult ConcatOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Value dy = g.resultGrad(0);
  int64_t axis = getAxis(), offset = 0;
  auto dyType = cast<RankedTensorType>(dy.getType());
  for (Value in : getInputs()) {
    auto t = cast<RankedTensorType>(in.getType());
    if (g.wants(in)) {
      SmallVector<int64_t> offs(dyType.getRank(), 0);
      offs[axis] = offset;
      g.accumulate(in, SliceOp::create(b, getLoc(), ValueRange{dy},
                                       {i64ArrayAttr(b, "offsets", offs),
                                        i64ArrayAttr(b, "sizes",
                                                     t.getShape())}));
    }
    offset += t.getDimSize(axis);
  }
  return success();
}

// A constant pad only moves the input: its gradient is the interior of dy.
// Reflect/edge pads copy input elements several times (pad_grad sums them).
LogicalResult PadOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  Location loc = getLoc();
  Value dy = g.resultGrad(0), grad;
  if (getMode() == "constant") {
    auto in = getInput().getType();
    auto offs = getPads().take_front(in.getRank());
    grad = SliceOp::create(b, loc, ValueRange{dy},
                           {i64ArrayAttr(b, "offsets", offs),
                            i64ArrayAttr(b, "sizes", in.getShape())});
  } else {
    grad = PadGradOp::create(b, loc, ValueRange{dy},
                             {b.getNamedAttr("pads", getPadsAttr()),
                              b.getNamedAttr("mode", getModeAttr())});
  }
  g.accumulate(getInput(), grad);
  return success();
}

// Zeros around dy: a constant pad to the input's shape.
LogicalResult SliceOp::buildGradient(OpBuilder &b, GradientEmitter &g) {
  auto in = getInput().getType();
  int64_t rank = in.getRank();
  SmallVector<int64_t> pads(2 * rank);
  for (int64_t d = 0; d < rank; ++d) {
    pads[d] = getOffsets()[d];
    pads[rank + d] = in.getDimSize(d) - getOffsets()[d] - getSizes()[d];
  }
  g.accumulate(getInput(),
               PadOp::create(b, getLoc(), ValueRange{g.resultGrad(0)},
                             {i64ArrayAttr(b, "pads", pads),
                              b.getNamedAttr("mode", b.getStringAttr("constant")),
                              b.getNamedAttr("value", b.getF32FloatAttr(0.0))}));
  return success();
}
