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

/// The most doubles per partial sum of an NHWC per-channel reduction
/// (`channel_sum`, BatchNorm statistics): tiles x channels must fit. The
/// emitter asks the runtime's reduction scratch (Context::reductionScratch)
/// for what each reduction needs, at most three sums of this.
constexpr int64_t kNhwcScratchDoubles = int64_t(1) << 18;

} // namespace cnnc

#endif // CNNC_TRANSFORMS_LOWERINGLIMITS_H
