//===- ScalarBuilder.h - scalar bodies of elementwise ops -------*- C++ -*-===//
//
// The vocabulary in which elementwise ops write their scalar body and its
// derivative (ElementwiseOpInterface): f32 arith/math ops. Every consumer
// (reference interpreter, CUDA target) understands exactly these ops.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_DIALECT_CNN_SCALARBUILDER_H
#define CNNC_DIALECT_CNN_SCALARBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"

namespace cnnc::cnn {

class ScalarBuilder {
public:
  ScalarBuilder(mlir::OpBuilder &b, mlir::Location loc) : b(b), loc(loc) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() { return loc; }

  mlir::Value c(double v) {
    return mlir::arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  mlir::Value add(mlir::Value x, mlir::Value y) {
    return mlir::arith::AddFOp::create(b, loc, x, y);
  }
  mlir::Value sub(mlir::Value x, mlir::Value y) {
    return mlir::arith::SubFOp::create(b, loc, x, y);
  }
  mlir::Value mul(mlir::Value x, mlir::Value y) {
    return mlir::arith::MulFOp::create(b, loc, x, y);
  }
  mlir::Value div(mlir::Value x, mlir::Value y) {
    return mlir::arith::DivFOp::create(b, loc, x, y);
  }
  mlir::Value neg(mlir::Value x) {
    return mlir::arith::NegFOp::create(b, loc, x);
  }
  /// max/min propagate NaN (IEEE maximum/minimum), as the GPU kernels do.
  mlir::Value max(mlir::Value x, mlir::Value y) {
    return mlir::arith::MaximumFOp::create(b, loc, x, y);
  }
  mlir::Value min(mlir::Value x, mlir::Value y) {
    return mlir::arith::MinimumFOp::create(b, loc, x, y);
  }
  mlir::Value clamp(mlir::Value x, double lo, double hi) {
    return min(max(x, c(lo)), c(hi));
  }
  mlir::Value exp(mlir::Value x) { return mlir::math::ExpOp::create(b, loc, x); }
  mlir::Value log(mlir::Value x) { return mlir::math::LogOp::create(b, loc, x); }
  /// exp(x) - 1 and log(1 + x), exact near 0 (ELU's and softplus' tails).
  mlir::Value expm1(mlir::Value x) {
    return mlir::math::ExpM1Op::create(b, loc, x);
  }
  mlir::Value log1p(mlir::Value x) {
    return mlir::math::Log1pOp::create(b, loc, x);
  }
  mlir::Value tanh(mlir::Value x) {
    return mlir::math::TanhOp::create(b, loc, x);
  }
  mlir::Value erf(mlir::Value x) { return mlir::math::ErfOp::create(b, loc, x); }
  mlir::Value sqrt(mlir::Value x) {
    return mlir::math::SqrtOp::create(b, loc, x);
  }
  mlir::Value pow(mlir::Value x, mlir::Value y) {
    return mlir::math::PowFOp::create(b, loc, x, y);
  }
  mlir::Value sigmoid(mlir::Value x) {
    return div(c(1), add(c(1), exp(neg(x))));
  }
  /// log(1 + exp(x)), x itself above PyTorch's threshold 20 (where it is x
  /// in f32 and exp(x) heads for overflow): cnn.softplus and cnn.mish.
  mlir::Value softplus(mlir::Value x) {
    return select(gt(x, c(20)), x, log1p(exp(x)));
  }
  /// An i1 comparison, and a select between two f32 values on it.
  mlir::Value cmp(mlir::arith::CmpFPredicate p, mlir::Value x, mlir::Value y) {
    return mlir::arith::CmpFOp::create(b, loc, p, x, y);
  }
  mlir::Value gt(mlir::Value x, mlir::Value y) {
    return cmp(mlir::arith::CmpFPredicate::OGT, x, y);
  }
  mlir::Value lt(mlir::Value x, mlir::Value y) {
    return cmp(mlir::arith::CmpFPredicate::OLT, x, y);
  }
  mlir::Value eq(mlir::Value x, mlir::Value y) {
    return cmp(mlir::arith::CmpFPredicate::OEQ, x, y);
  }
  mlir::Value both(mlir::Value p, mlir::Value q) {
    return mlir::arith::AndIOp::create(b, loc, p, q);
  }
  mlir::Value select(mlir::Value cond, mlir::Value x, mlir::Value y) {
    return mlir::arith::SelectOp::create(b, loc, cond, x, y);
  }
  /// 1 where lo < x < hi, else 0 (the mask of a clamp's derivative).
  mlir::Value inside(mlir::Value x, double lo, double hi) {
    return select(both(gt(x, c(lo)), lt(x, c(hi))), c(1), c(0));
  }
  /// Rounds to the nearest f16 and back (what storing to f16 does).
  mlir::Value roundToHalf(mlir::Value x) {
    mlir::Value h = mlir::arith::TruncFOp::create(b, loc, b.getF16Type(), x);
    return mlir::arith::ExtFOp::create(b, loc, b.getF32Type(), h);
  }

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
};

} // namespace cnnc::cnn

#endif
