//===- Role.h - what a tensor of the arena is for ---------------*- C++ -*-===//
//
// Plain C++ (no CUDA): shared by the runtime and the compiler's CUDA target,
// which writes each tensor's role into the generated model's tensor table.
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_ROLE_H
#define CNNRT_ROLE_H

#include <cstdint>

namespace cnnrt {

/// What a tensor of the arena is for. The runtime reads/writes:
///  Param, Buffer, OptState: loaded from --weights, saved in checkpoints
///    (a missing OptState entry starts at zero; Param/Buffer are required);
///  LossScale: f32 scalar, saved in checkpoints, printed as " scale <x>";
///  InputImage: written before each step from the batch (x = byte/255);
///  InputLabel: int32 (or int64) class indices of the batch;
///  Loss: f32 (or f16) scalar read on logging steps;
///  Logits: [batch, classes] read by --eval;
///  ScalarLR / ScalarStep: f32 scalars written before each step
///    (ScalarStep is the 1-based global step count);
///  Temp: anything else (activations, gradients, ...).
enum class Role : uint32_t {
  Param = 0,
  Buffer,
  OptState,
  InputImage,
  InputLabel,
  Loss,
  Logits,
  ScalarLR,
  ScalarStep,
  LossScale,
  Temp
};

/// The enumerator's name, as generated code spells it (cnnrt::Role::<name>).
inline const char *roleEnumerator(Role r) {
  static const char *const names[] = {
      "Param",  "Buffer",   "OptState",   "InputImage", "InputLabel", "Loss",
      "Logits", "ScalarLR", "ScalarStep", "LossScale",  "Temp"};
  return names[static_cast<uint32_t>(r)];
}

} // namespace cnnrt

#endif // CNNRT_ROLE_H
