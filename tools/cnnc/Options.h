//===- Options.h - the cnnc command line ------------------------*- C++ -*-===//
#ifndef CNNC_TOOLS_CNNC_OPTIONS_H
#define CNNC_TOOLS_CNNC_OPTIONS_H

#include "cnnc/Driver/Driver.h"

namespace cnnc::driver {
/// Parses argv with llvm::cl (exits on --help, --version, unknown flags,
/// --print-pipeline-options-json), then exits 1 with validateOptions'
/// message if a value is out of range. The pipeline's flags are derived
/// from CNNPipelineOptions (cnnc/Transforms/Pipeline.h).
DriverOptions parseCommandLine(int argc, char **argv);
} // namespace cnnc::driver

#endif
