//===- FusedOps.h - reference execution of cnn-fuse's ops ------*- C++ -*-===//
#ifndef CNNC_LIB_REFERENCE_FUSEDOPS_H
#define CNNC_LIB_REFERENCE_FUSEDOPS_H

#include "cnnc/Reference/Interpreter.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace cnnc::reference {
/// True for fused_conv2d, fused_elementwise, batch_norm_stats and
/// fused_batch_norm_relu_grad (in NCHW and NHWC).
bool isFusedOp(mlir::Operation *op);
/// Executes one of them: `get` returns an operand's tensor, `def` creates a
/// result's (zero-filled) tensor.
mlir::LogicalResult
executeFused(mlir::Operation *op,
             llvm::function_ref<const Tensor &(mlir::Value)> get,
             llvm::function_ref<Tensor &(mlir::Value)> def);
} // namespace cnnc::reference

#endif
