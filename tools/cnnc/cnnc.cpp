//===- cnnc.cpp - the cnnc compiler driver --------------------------------===//
//
// cnnc model.onnx|model.mlir [options]; see Driver.h for the actions.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "llvm/Support/InitLLVM.h"

#include <cstring>
#include <vector>

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // `cnnc train model.onnx ...` compiles the training step and runs it.
  std::vector<char *> args(argv, argv + argc);
  bool trainAndRun = argc > 1 && std::strcmp(argv[1], "train") == 0;
  static char trainFlag[] = "--train";
  if (trainAndRun)
    args[1] = trainFlag;
  cnnc::driver::DriverOptions options =
      cnnc::driver::parseCommandLine((int)args.size(), args.data());
  options.trainAndRun = trainAndRun;
  return cnnc::driver::runDriver(options);
}
