//===- CNNGradients.cpp - the gradient driver's entry point ---------------===//
//
// GradientOpInterface: each op's rule that turns the gradient of its results
// into the gradients of its operands lives with the op, in its family's file
// (Ops/<Family>.cpp). cnn-autodiff (lib/Transforms/Autodiff.cpp) walks the
// forward ops in reverse and calls cnn::buildGradient below; it names no op.
//
// Elementwise ops need no rule: their scalar derivative (ODS) builds one
// (`elementwiseGradient`). The rules for relu, clip, add, mul, scale and
// cast (Ops/Elementwise.cpp) produce the ops the later passes look for
// (relu_grad, which cnn-fuse merges with bias_grad; a plain sum for add).
//
//===----------------------------------------------------------------------===//
#include "Ops/OpHelpers.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;
using namespace cnnc::cnn::detail;

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
