//===- FuzzONNX.cpp - the ONNX importer from protobuf bytes ---------------===//
//
// importONNXBuffer on the input with external data looked up in an empty
// folder (locations outside the model folder are rejected before any file is
// opened). A model that imports must verify.
//
// Two targets share this file: `onnx` mutates the bytes (libFuzzer's own
// mutations), `onnx-model` (CNNC_FUZZ_STRUCTURED) parses the input as a
// ModelProto and mutates its structure (ONNXMutator.cpp, shared with the
// reference and train-step targets): dims (0, negative, huge, unknown),
// initializers (data type, size, duplicated, removed, external data outside
// the folder), nodes (dangling and cyclic inputs, op types, dropped and extra
// inputs), attributes (wrong types, huge or negative values) and the opset.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

#include "cnnc/Frontend/ONNXImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdlib>

#if CNNC_FUZZ_STRUCTURED
#include "ONNXMutator.h"

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  return cnnc::fuzz::mutateONNXModel(data, size, maxSize, seed, {});
}
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::DialectRegistry registry;
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  bool sawError = false;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error) {
      sawError = true;
      // The importer's safety net for a handler that failed silently: still
      // a bug to find.
      if (llvm::StringRef(d.str()).contains("failed without a diagnostic"))
        std::abort();
    }
    return mlir::success();
  });
  llvm::MemoryBufferRef buffer(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.onnx");
  cnnc::ONNXImportOptions options;
  cnnc::TensorMap weights;
  // CNNC_FUZZ_ONNX_DATA_DIR: where external data lives (the regressions set
  // it to their folder); by default an empty, nonexistent one.
  static const char *dataDir = [] {
    const char *d = std::getenv("CNNC_FUZZ_ONNX_DATA_DIR");
    return d ? d : "/nonexistent-cnnc-fuzz";
  }();
  auto module =
      cnnc::importONNXBuffer(buffer, dataDir, context, options, weights);
  if (!module) {
    if (!sawError) // a failure must come with a diagnostic
      std::abort();
    return 0;
  }
  if (mlir::failed(mlir::verify(*module)))
    std::abort();
  return 0;
}
