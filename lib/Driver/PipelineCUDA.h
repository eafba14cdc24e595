//===- PipelineCUDA.h - pipeline stages for the CUDA target -----*- C++ -*-===//
#ifndef CNNC_DRIVER_PIPELINECUDA_H
#define CNNC_DRIVER_PIPELINECUDA_H

#include "cnnc/Driver/Driver.h"

namespace cnnc::driver {

/// compileCUDA of a pipelined step (--pipeline-stages): the module holds
/// @train_step after cnn-autodiff (accumulation over the M micro-batches);
/// splits it (cnn-pipeline-partition/-split/-schedule, GPipe; the plan
/// printed), compiles each stage's step (cnn-pipeline-stage, then the CUDA
/// target's step pipeline) and prints them into one CUDA file whose main
/// runs the stages (cnnrt/Pipeline.h), then builds it like compileCUDA.
mlir::LogicalResult compilePipelineCUDA(const DriverOptions &options,
                                        Compilation &c, std::string &exePath);

/// --emit cuda: the CUDA text to --output (written atomically) or stdout.
mlir::LogicalResult writeCUDASource(const DriverOptions &options,
                                    Compilation &c, const std::string &cu);

} // namespace cnnc::driver

#endif
