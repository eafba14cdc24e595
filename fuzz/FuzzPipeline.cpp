//===- FuzzPipeline.cpp - the cnn dialect through cnnc's pass pipeline ----===//
//
// Parses MLIR text with the cnn and func dialects (as cnnc-opt does), and a
// module that verifies runs the passes of `cnnc model.mlir -o exe`:
// cnn-train-pipeline (buildCNNTrainPipeline, the CUDA target's defaults;
// cnn-autodiff, CSE and the step's passes; no import clean-up, as cnnc
// compiles a .mlir file as written), then the CUDA emitter. Every failure must
// come with a diagnostic.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Target/CUDA/EmitCUDA.h"
#include "cnnc/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <string>

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static DialectRegistry registry = [] {
    DialectRegistry r;
    r.insert<cnnc::cnn::CNNDialect, func::FuncDialect>();
    return r;
  }();
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  bool sawError = false;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error)
      sawError = true;
    return success();
  });
  // MLIR's lexer expects a NUL after the buffer (files are read so); the
  // fuzzer's bytes are not followed by one: a copy is.
  const std::string text(reinterpret_cast<const char *>(data), size);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(text, ParserConfig(&context), "fuzz.mlir");
  if (!module)
    return 0;
  PassManager pm(&context);
  pm.enableVerifier(true);
  // The registered cnn-train-pipeline (one pipeline for cnnc, cnnc-opt and
  // this target).
  static const cnnc::CNNPipelineOptions *options = [] {
    auto *o = new cnnc::CNNPipelineOptions();
    o->importCleanup = false;
    return o;
  }();
  cnnc::buildCNNTrainPipeline(pm, *options);
  if (failed(pm.run(*module))) {
    if (!sawError)
      std::abort();
    return 0;
  }
  std::string cu;
  llvm::raw_string_ostream os(cu);
  cnnc::CUDAEmitOptions eo;
  if (failed(cnnc::emitCUDA(*module, os, eo)) && !sawError)
    std::abort();
  return 0;
}
