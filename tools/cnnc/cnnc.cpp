//===- cnnc.cpp - the cnnc compiler driver --------------------------------===//
//
// cnnc model.onnx|model.mlir [options]; see Driver.h for the actions.
//
//===----------------------------------------------------------------------===//
#include "Options.h"

#include "cnnc/Reference/Interpreter.h"

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
  int rc = cnnc::driver::runDriver(options);
  // The reference interpreter's out-of-memory report exits 2, as the
  // generated executable does when the GPU runs out of memory.
  if (rc == 1 && cnnc::reference::ranOutOfMemory())
    return 2;
  return rc;
}
