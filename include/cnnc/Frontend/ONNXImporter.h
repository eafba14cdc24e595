//===- ONNXImporter.h - ONNX -> cnn dialect ----------------------*- C++
//-*-===//
#ifndef CNNC_FRONTEND_ONNXIMPORTER_H
#define CNNC_FRONTEND_ONNXIMPORTER_H

#include "cnnc/Reference/Interpreter.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

namespace cnnc {

struct ONNXImportOptions {
  /// Batch size for a dynamic (or any) batch dimension; 0 keeps the file's.
  int64_t batch = 0;
};

/// Imports an ONNX model as `func.func @forward(%input {cnn.input},
/// %params {cnn.param = "<initializer name>"}..., %bn_stats {cnn.buffer =
/// "<name>"}...) -> logits` with inference semantics. Weight values go to
/// `weights`, keyed by the same names, never into the IR. Locations are
/// `NameLoc("<node name>", FileLineColLoc(<file>, 0, 0))`. On failure one
/// diagnostic is emitted (naming node, op type and file) and null returned.
mlir::OwningOpRef<mlir::ModuleOp> importONNX(llvm::StringRef path,
                                             mlir::MLIRContext &context,
                                             const ONNXImportOptions &options,
                                             reference::TensorMap &weights);

/// Imports a model held in memory (the protobuf bytes of `buffer`, named in
/// diagnostics by its identifier). External data is read from `dataDir`
/// (which may be empty: the current directory).
mlir::OwningOpRef<mlir::ModuleOp>
importONNXBuffer(llvm::MemoryBufferRef buffer, llvm::StringRef dataDir,
                 mlir::MLIRContext &context, const ONNXImportOptions &options,
                 reference::TensorMap &weights);

} // namespace cnnc

#endif
