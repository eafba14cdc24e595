//===- cnnc.cpp - the cnnc compiler driver --------------------------------===//
//
// cnnc model.onnx|model.mlir [options]; see Driver.h for the actions.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "llvm/Support/InitLLVM.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cnnc::driver::DriverOptions options =
      cnnc::driver::parseCommandLine(argc, argv);
  return cnnc::driver::runDriver(options);
}
