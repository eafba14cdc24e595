//===- cnnc-opt.cpp - the cnnc test driver --------------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Transforms/Pipeline.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  cnnc::registerCNNPasses();
  cnnc::registerCNNPipelines();
  mlir::DialectRegistry registry;
  registry.insert<cnnc::cnn::CNNDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "cnnc optimizer driver\n", registry));
}
