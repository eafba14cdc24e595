//===- Tensor.h - host tensors of the importer and interpreter --*- C++ -*-===//
//
// The host-side dense tensor cnnc hands between its layers: the importer
// returns a model's weights in it, the reference interpreter computes on it,
// the driver reads and writes it as runtime tensor files. It lives here, not
// in lib/Reference, so that the importer does not depend on the interpreter.
// The IEEE half and bfloat16 conversions that both need are here too.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_SUPPORT_TENSOR_H
#define CNNC_SUPPORT_TENSOR_H

#include "mlir/IR/BuiltinTypes.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cnnc {

enum class ElemKind { F32, F16, I32, I64 };

/// A dense row-major tensor. Integer tensors (labels) are held as floats,
/// exact up to 2^24.
struct Tensor {
  ElemKind kind = ElemKind::F32;
  std::vector<int64_t> shape;
  std::vector<float> data;

  Tensor() = default;
  Tensor(ElemKind kind, std::vector<int64_t> shape, float fill = 0.0f);
  int64_t numel() const;
  /// A tensor of the given MLIR tensor type, filled with `fill`.
  static Tensor zeros(mlir::RankedTensorType type, float fill = 0.0f);
  /// True when shape and element kind match `type`.
  bool matches(mlir::RankedTensorType type) const;
};

/// Named tensors: model weights, BN running statistics, optimizer state.
using TensorMap = std::map<std::string, Tensor>;

ElemKind elemKindOf(mlir::Type elementType);
/// Rounds to the nearest f16 value (round-to-nearest-even), as f32.
float roundToHalf(float x);
/// IEEE half bits to float (exact).
float halfToFloat(uint16_t bits);
/// Float to IEEE half bits, rounding to nearest even (overflow -> inf).
uint16_t floatToHalf(float f);
/// bfloat16 bits to float (exact).
float bfloat16ToFloat(uint16_t bits);

} // namespace cnnc

#endif
