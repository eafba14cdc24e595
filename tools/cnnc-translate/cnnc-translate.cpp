//===- cnnc-translate.cpp - cnn IR -> CUDA C++, as a translation ----------===//
//
// The CUDA target is a printer: every lowering choice (cnn-select-lowering)
// and the arena plan (cnn-memory-plan) are in the IR it reads. This tool
// runs it on its own, like mlir-translate, so that its lit tests need
// neither the ONNX importer nor the cnnc driver:
//
//   cnnc-opt step.mlir --cnn-autodiff --cnn-gpu-pipeline |
//     cnnc-translate --cnn-to-cuda            (the executable's .cu)
//   cnnc-translate --cnn-to-cuda-lib          (the shared library's .cu)
//   cnnc-translate --cnn-memory-plan-text     (cnnc --dump-plan's table)
//
// A module the pipeline has not prepared is refused with a diagnostic
// (-verify-diagnostics checks them).
//
//===----------------------------------------------------------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Target/CUDA/EmitCUDA.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"

using namespace mlir;

static llvm::cl::opt<std::string>
    modelName("model-name", llvm::cl::desc("The model's name in the .cu"),
              llvm::cl::init("model"));

static void registerDialects(DialectRegistry &registry) {
  registry.insert<cnnc::cnn::CNNDialect, func::FuncDialect, arith::ArithDialect,
                  math::MathDialect>();
}

int main(int argc, char **argv) {
  auto emit = [](bool library) {
    return [library](ModuleOp module, llvm::raw_ostream &os) {
      cnnc::CUDAEmitOptions options;
      options.modelName = modelName;
      options.library = library;
      return cnnc::emitCUDA(module, os, options);
    };
  };
  TranslateFromMLIRRegistration toCUDA(
      "cnn-to-cuda", "the training step as CUDA C++ (an executable's main)",
      emit(false), registerDialects);
  TranslateFromMLIRRegistration toCUDALib(
      "cnn-to-cuda-lib",
      "the training step as CUDA C++ for a shared library (cnnrt_c.h)",
      emit(true), registerDialects);
  TranslateFromMLIRRegistration planText(
      "cnn-memory-plan-text", "the arena plan as cnnc --dump-plan prints it",
      [](ModuleOp module, llvm::raw_ostream &os) {
        return cnnc::dumpBufferPlan(module, os);
      },
      registerDialects);
  return failed(mlirTranslateMain(argc, argv, "cnnc translation driver\n"));
}
