//===- NvccCompile.h - building the generated CUDA with nvcc ----*- C++ -*-===//
//
// The nvcc invocation of the driver: finds nvcc and the runtime (headers +
// libcnnrt.a), links cuDNN, cuBLASLt, NCCL and the runtime's host libraries,
// and publishes the executable (or shared library) with its source and
// weights beside it only when nvcc succeeded.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_DRIVER_NVCCCOMPILE_H
#define CNNC_DRIVER_NVCCCOMPILE_H

#include "cnnc/Driver/Driver.h"

#include <string>

namespace cnnc::driver {

/// What the nvcc build needs besides the CUDA source.
struct NvccOptions {
  std::string arch;       ///< the resolved --arch (sm_80, ..., sm_90a)
  std::string runtimeDir; ///< --runtime-dir (include/ + libcnnrt.a)
  std::string argv0;      ///< this executable: finds the build tree's runtime
  bool library = false;   ///< --emit lib: a shared library (cnnrt_c.h)
  /// The text as one translation unit (pipeline stages: SplitCUDA's cut
  /// assumes one step's text).
  bool wholeUnit = false;
};

/// Compiles the CUDA source `cu` with nvcc into `exePath`, with
/// "<exePath>.cu" and the weights "<exePath>.cnnw" (c.weights) beside it.
/// All three are staged and published together after nvcc succeeded.
mlir::LogicalResult buildWithNvcc(Compilation &c, const std::string &cu,
                                  const NvccOptions &options,
                                  const std::string &exePath);

/// The jobs from which the host code gets units of its own by default.
constexpr unsigned kHostUnitsFromJobs = 8;

/// How many units the host code compiles in when CNNC_NVCC_HOST_UNITS is
/// not set, with `jobs` parallel nvcc processes: a quarter of the jobs (at
/// most 8) from kHostUnitsFromJobs on, the kernels taking the other jobs;
/// one below (each unit repeats the prelude and the runtime header, work
/// that fewer cores than units would queue).
unsigned defaultHostUnits(unsigned jobs);

/// $CNNC_NVCC, /usr/local/cuda/bin/nvcc or nvcc on PATH; "" if none.
std::string findNvcc();

} // namespace cnnc::driver

#endif
