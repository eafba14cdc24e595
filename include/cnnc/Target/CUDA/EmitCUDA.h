//===- EmitCUDA.h - cnn train step -> CUDA C++ ------------------*- C++ -*-===//
#ifndef CNNC_TARGET_CUDA_EMITCUDA_H
#define CNNC_TARGET_CUDA_EMITCUDA_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace cnnc {

struct CUDAEmitOptions {
  std::string modelName = "model";
  float defaultLR = 0.01f;
  int64_t defaultSteps = 100;
  /// A shared library instead of an executable (`cnnc --emit lib`): the file
  /// ends with `extern "C" const void *cnnrt_model_spec(void)` returning the
  /// model spec for the runtime's C API (cnnrt_c.h) instead of `main`.
  bool library = false;
};

/// Emits one `.cu` file for a module holding `@train_step` (and optionally
/// `@forward`, compiled as the evaluation step): buffer plan in one arena,
/// generated kernels, cuDNN/cuBLASLt calls through libcnnrt, the tensor
/// table and `main` (or, with options.library, the C API's model accessor). On
/// failure a diagnostic is emitted at the op.
mlir::LogicalResult emitCUDA(mlir::ModuleOp module, llvm::raw_ostream &os,
                             const CUDAEmitOptions &options);

/// A human-readable buffer plan of `@train_step` (cnnc --dump-plan).
mlir::LogicalResult dumpBufferPlan(mlir::ModuleOp module,
                                   llvm::raw_ostream &os);

} // namespace cnnc

#endif
