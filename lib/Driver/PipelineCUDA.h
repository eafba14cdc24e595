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
/// With --emit lib the file has no main but cnnrt_pipeline_stages,
/// cnnrt_pipeline_replicas and cnnrt_pipeline_stage_spec (cnnrt_c.h), and
/// builds a shared library whose sessions each run one stage.
mlir::LogicalResult compilePipelineCUDA(const DriverOptions &options,
                                        Compilation &c, std::string &exePath);

/// --emit cuda: the CUDA text to --output (written atomically) or stdout.
mlir::LogicalResult writeCUDASource(const DriverOptions &options,
                                    Compilation &c, const std::string &cu);

} // namespace cnnc::driver

#endif
