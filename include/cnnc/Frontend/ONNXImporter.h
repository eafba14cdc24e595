//===- ONNXImporter.h - ONNX -> cnn dialect ----------------------*- C++
//-*-===//
#ifndef CNNC_FRONTEND_ONNXIMPORTER_H
#define CNNC_FRONTEND_ONNXIMPORTER_H

#include "cnnc/Support/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>
#include "llvm/Support/MemoryBuffer.h"

namespace cnnc {

struct ONNXImportOptions {
  /// Batch size for a dynamic (or any) batch dimension; 0 keeps the file's.
  int64_t batch = 0;
  /// The model will be trained (--train): a graph exported for inference
  /// (BatchNormalization folded or in inference form, Dropout removed) gets
  /// one warning saying how to export it for training.
  bool forTraining = false;
  /// @forward is run as imported (--run-reference without --train): nodes in
  /// training mode must keep their meaning, so BatchNormalization with
  /// training_mode=1 normalizes with batch statistics and Dropout with
  /// training_mode=1 (and a non-zero ratio) is refused. Otherwise the
  /// training flags are dropped: @forward has inference semantics and
  /// cnn-autodiff derives the training form.
  bool runForward = false;
};

/// Documentation of one entry of the importer's op table (docs/ops.md).
struct ONNXOpDoc {
  std::string opType;
  int minOpset = 1, maxOpset = 1; ///< of the default domain (ai.onnx)
  std::string gradient;           ///< "yes", "no", or "n/a" (import-time)
  std::string gpuKernel;          ///< "yes", "no", or "n/a"
  std::string notes;              ///< restrictions, the cnn ops it becomes
};

/// The importer's op table, sorted by op type.
std::vector<ONNXOpDoc> onnxOpTable();

/// Prints the op table as Markdown (docs/ops.md) or as plain text.
void printONNXOpTable(llvm::raw_ostream &os, bool markdown);

/// Imports an ONNX model as `func.func @forward(%input {cnn.input},
/// %params {cnn.param = "<initializer name>"}..., %bn_stats {cnn.buffer =
/// "<name>"}...) -> logits` with inference semantics. Weight values go to
/// `weights`, keyed by the same names, never into the IR. Locations are
/// `NameLoc("<node name>", FileLineColLoc(<file>, 0, 0))`. On failure one
/// diagnostic is emitted (naming node, op type and file) and null returned.
mlir::OwningOpRef<mlir::ModuleOp> importONNX(llvm::StringRef path,
                                             mlir::MLIRContext &context,
                                             const ONNXImportOptions &options,
                                             TensorMap &weights);

/// Imports a model held in memory (the protobuf bytes of `buffer`, named in
/// diagnostics by its identifier). External data is read from `dataDir`
/// (which may be empty: the current directory).
mlir::OwningOpRef<mlir::ModuleOp>
importONNXBuffer(llvm::MemoryBufferRef buffer, llvm::StringRef dataDir,
                 mlir::MLIRContext &context, const ONNXImportOptions &options,
                 TensorMap &weights);

} // namespace cnnc

#endif
