//===- LoweringLimits.h - bounds shared by lowering choices and the printer ===//
//
// Numbers that cnn-select-lowering decides with and the CUDA target prints
// with: one definition, so the choice and the code it selects cannot drift.
//
//===----------------------------------------------------------------------===//

#ifndef CNNC_TRANSFORMS_LOWERINGLIMITS_H
#define CNNC_TRANSFORMS_LOWERINGLIMITS_H

#include <cstdint>

namespace cnnc {

/// Doubles per partial sum in the prelude's `nhwcScratch` (it holds two):
/// tiles x channels of an NHWC per-channel reduction (`channel_sum`,
/// BatchNorm statistics) must fit. The generated code sizes the array from
/// this value (CNNC_NHWC_SCRATCH).
constexpr int64_t kNhwcScratchDoubles = int64_t(1) << 18;

} // namespace cnnc

#endif // CNNC_TRANSFORMS_LOWERINGLIMITS_H
