//===- Gradient.h - what cnn-autodiff gives a gradient rule ----*- C++ -*-===//
//
// Each op's reverse-mode rule lives with the op (GradientOpInterface, rules in
// lib/Dialect/CNN/CNNOps.cpp); cnn-autodiff only walks the ops and keeps the
// gradients. This header is the contract between the two, and the helpers
// the rules share.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_DIALECT_CNN_GRADIENT_H
#define CNNC_DIALECT_CNN_GRADIENT_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace cnnc::cnn {

class ElementwiseOpInterface;

/// The driver's side of a gradient rule.
class GradientEmitter {
public:
  virtual ~GradientEmitter() = default;
  /// The gradient of result #`index` of the op being differentiated (null
  /// when no gradient reaches that result).
  virtual mlir::Value resultGrad(unsigned index) = 0;
  /// True when `operand` lies between a parameter and the loss.
  virtual bool wants(mlir::Value operand) = 0;
  /// Adds `grad` to the gradient of `operand` (a value used twice receives
  /// the sum of its users' gradients).
  virtual void accumulate(mlir::Value operand, mlir::Value grad) = 0;
};

/// `g` summed over the dimensions in which `type` is 1 and `g` is not: the
/// gradient of an operand that a broadcasting op repeated.
mlir::Value sumToShape(mlir::OpBuilder &b, mlir::Location loc, mlir::Value g,
                       mlir::Type type);
/// `factor * dy` repeated over the dimensions where `dy` is 1 and `type` is
/// not (the gradient of a reduction).
mlir::Value broadcastTo(mlir::OpBuilder &b, mlir::Location loc, mlir::Value dy,
                        mlir::Type type, double factor);
/// The gradient of operand #`index` of an elementwise op from its scalar
/// derivative (summed to the operand's shape); null when the op declares no
/// derivative for that operand.
mlir::Value elementwiseGradient(mlir::OpBuilder &b, ElementwiseOpInterface e,
                                mlir::Value dy, unsigned index);
/// The driver's rule for an op: its GradientOpInterface, or for an
/// elementwise op without one its scalar derivative. Fails with a
/// diagnostic at the op when it has no rule.
mlir::LogicalResult buildGradient(mlir::OpBuilder &b, mlir::Operation *op,
                                  GradientEmitter &g);

} // namespace cnnc::cnn

#endif
