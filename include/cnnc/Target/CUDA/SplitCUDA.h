//===- SplitCUDA.h - model.cu as several translation units ------*- C++ -*-===//
//
// nvcc compiles one translation unit on one core; a ResNet-50 step is one
// file of ~650 KB that takes nvcc ~14-20 s. splitCUDATranslationUnits cuts
// the text emitCUDA printed at its kernel boundaries into translation units
// that nvcc compiles in parallel (and that the driver's object cache keys by
// content), with the same kernels and the same host code.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_TARGET_CUDA_SPLITCUDA_H
#define CNNC_TARGET_CUDA_SPLITCUDA_H

#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace cnnc {

/// One translation unit of a split model.cu.
struct CUDATranslationUnit {
  std::string name; ///< "kernels0", ..., "host", "hyper" (file stem)
  std::string text;
  /// A host-only unit (C++, no CUDA): compiled as .cpp.
  bool hostOnly = false;
  /// A unit of the host code's functions (hostUnits > 1): launches and
  /// runtime calls that run when the step is captured, not per step.
  bool hostCode = false;
};

/// Splits `cu`, as emitCUDA prints it, into at most `maxKernelUnits` units
/// of generated kernels (each: the prelude, the `__device__` tables its
/// kernels read, and its kernels), one host unit (the prelude, a declaration
/// of every generated kernel it launches, the epilogues, tensor table, step
/// functions, model spec and main) and, where the text defines the run-time
/// hyperparameters on a line of their own (`cnncDefaultLR`), a host-only
/// unit holding that definition, so that a recompile with another learning
/// rate changes that unit only. Kernels are assigned to units in order, in
/// groups of about equal text size. Text not in the printer's form (no
/// "generated kernels" section, or a top-level construct the splitter does
/// not know) comes back as one unit: the whole text, compiled as before.
///
/// A kernel unit includes <cuda_runtime.h> instead of cnnrt/cnnrt.h where
/// neither the prelude nor its kernels name the runtime (the kernels'
/// text, and so their device code, is unchanged). With `hostUnits` > 1 the
/// host code's `static void` functions (epilogues, prepare, train and eval
/// steps) move, with external linkage, into up to `hostUnits - 1` units
/// "host1", ... of about equal size; the host unit keeps what they do not
/// name (tables, the model spec, main) and declares them. A function that
/// names a top-level table, macro or other non-moving entity of the host
/// code stays in the host unit. The host code stays whole where
/// mutableDeviceVariables(cu) is not empty.
///
/// Where it is empty, the host units launch prelude kernels through the
/// kernel units: a one-line launch `NAME<ARGS><<<cfg>>>(args);` of a prelude
/// kernel becomes a call of `cnncPreludeLaunch<i>`, defined in the one kernel
/// unit that instantiates NAME<ARGS> (cudaLaunchKernel there), with the
/// arguments converted to the kernel's parameter types (`decltype`) as the
/// launch converts them. A host unit then compiles no device code for the
/// prelude's templates. The numbering follows the whole host code, so the
/// kernel units are the same for every `hostUnits`.
std::vector<CUDATranslationUnit>
splitCUDATranslationUnits(llvm::StringRef cu, unsigned maxKernelUnits,
                          unsigned hostUnits = 1);

/// The names of the mutable variables `cu` defines at namespace scope with
/// `__device__` or `__managed__` (not const, constexpr or `__constant__`
/// tables), in order. Each translation unit that repeats such a definition
/// has its own copy, so a kernel launched from one host unit cannot see
/// what a kernel launched from another wrote there: the host code cannot
/// be split while the text has one (the prelude has none; its reductions
/// take their scratch as a pointer, Context::reductionScratch).
std::vector<std::string> mutableDeviceVariables(llvm::StringRef cu);

} // namespace cnnc

#endif
