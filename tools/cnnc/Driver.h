//===- Driver.h - the cnnc compiler driver ----------------------*- C++ -*-===//
//
// The driver loads a model (ONNX or cnn-dialect MLIR with its weights) into a
// Compilation and then runs the requested actions on it, each a separate
// function: emitting MLIR, running the reference interpreter; training and
// CUDA emission are added the same way.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_TOOLS_CNNC_DRIVER_H
#define CNNC_TOOLS_CNNC_DRIVER_H

#include "cnnc/Reference/Interpreter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <string>

namespace cnnc::driver {

/// Everything the command line asks for.
struct DriverOptions {
  std::string inputFile;  ///< model.onnx or model.mlir
  std::string outputFile; ///< -o; empty or "-" means stdout
  std::string emit;       ///< --emit: "mlir" (default when no other action)
  int64_t batch = 0;      ///< --batch
  bool printLocations = false;
  // --run-reference
  bool runReference = false;
  std::string inputTensor;  ///< --input x.npy|x.bin
  std::string outputTensor; ///< --output y.npy|y.bin
  std::string weightsFile;  ///< --weights FILE.cnnw (overrides cnn.weights)
};

/// Parses argv with llvm::cl (exits on --help, --version, unknown flags).
DriverOptions parseCommandLine(int argc, char **argv);

/// The model being compiled: the IR and the values of its parameters.
struct Compilation {
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  reference::TensorMap weights;
};

/// Module attribute naming the weights file that belongs to a .mlir file.
constexpr const char *kWeightsAttr = "cnn.weights";

/// Loads `options.inputFile` (ONNX import or MLIR parse) and its weights.
mlir::LogicalResult loadInput(const DriverOptions &options, Compilation &c);
/// Writes the IR to -o (atomically, weights to "<-o>.cnnw") or stdout.
mlir::LogicalResult emitMLIR(const DriverOptions &options, Compilation &c);
/// Runs @forward on --input with the reference interpreter; writes --output.
mlir::LogicalResult runReference(const DriverOptions &options, Compilation &c);

/// Runs the whole pipeline; returns the process exit code.
int runDriver(const DriverOptions &options);

/// Weights file I/O (.cnnw through cnnrt::TensorFile).
mlir::LogicalResult readWeights(const std::string &path,
                                reference::TensorMap &weights,
                                std::string &err);
mlir::LogicalResult writeWeights(const std::string &path,
                                 const reference::TensorMap &weights,
                                 std::string &err);
/// A single tensor from/to .npy or raw CNNT (.bin), chosen by extension.
mlir::LogicalResult readTensor(const std::string &path, reference::Tensor &t,
                               std::string &err);
mlir::LogicalResult writeTensor(const std::string &path,
                                const reference::Tensor &t, std::string &err);

} // namespace cnnc::driver

#endif
