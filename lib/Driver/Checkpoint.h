//===- Checkpoint.h - checkpoints and JSON records of the CPU loop -*- C++
//-*-===//
//
// The reference interpreter's training loop (Train.cpp) writes and resumes
// the checkpoints the generated executable writes (runtime/src/TrainMain.cu,
// docs/runtime.md): the persistent state of @train_step (parameters,
// buffers, optimizer state, loss scale) under its names, plus "__step__"
// (i64 [1], the last step done) and "__loader__" (i64 [3]: data seed, epoch,
// sample within the epoch). The format follows the path: .safetensors, else
// .cnnw. Its --log-json records are built with llvm::json.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_LIB_DRIVER_CHECKPOINT_H
#define CNNC_LIB_DRIVER_CHECKPOINT_H

#include "cnnc/Driver/Driver.h"

#include "cnnrt/Dataset.h"
#include "cnnrt/TrainLoop.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>
#include <string>

namespace cnnc::driver {

/// What --resume restores.
struct ReferenceCheckpoint {
  reference::TensorMap state;
  int64_t step = 0;
  cnnrt::LoaderState loader;
};

/// "{step}" in a checkpoint path replaced by the step number.
std::string checkpointPathAt(std::string pattern, int64_t step);

/// Reads `path` and checks that it is a checkpoint of `step`: the
/// __step__/__loader__ entries (non-negative), and every parameter, buffer
/// and optimizer state @train_step carries. Each problem is one error.
mlir::LogicalResult readReferenceCheckpoint(Compilation &c,
                                            const std::string &path,
                                            mlir::func::FuncOp step,
                                            ReferenceCheckpoint &out);

/// Writes the persistent state of @train_step (in argument order) from
/// `state`, with __step__ = `k` and __loader__ = `loader`, atomically.
mlir::LogicalResult writeReferenceCheckpoint(Compilation &c,
                                             const std::string &pattern,
                                             mlir::func::FuncOp step,
                                             const reference::TensorMap &state,
                                             int64_t k,
                                             const cnnrt::LoaderState &loader);

/// The --log-json records of the CPU loop, with the keys and number formats
/// of cnnrt::progressJson/evalJson (the executable's), built with llvm::json.
std::string progressRecord(const cnnrt::Progress &p);
std::string evalRecord(const cnnrt::EvalResult &e);

} // namespace cnnc::driver

#endif
