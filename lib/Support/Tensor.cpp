//===- Tensor.cpp - host tensors and f16/bf16 conversions -----------------===//
#include "cnnc/Support/Tensor.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace cnnc;

static int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Tensor::Tensor(ElemKind kind, std::vector<int64_t> shape, float fill)
    : kind(kind), shape(std::move(shape)) {
  data.assign(product(this->shape), fill);
}

int64_t Tensor::numel() const { return product(shape); }

Tensor Tensor::zeros(RankedTensorType type, float fill) {
  return Tensor(
      elemKindOf(type.getElementType()),
      std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
      fill);
}

bool Tensor::matches(RankedTensorType type) const {
  return kind == elemKindOf(type.getElementType()) &&
         llvm::equal(shape, type.getShape()) &&
         static_cast<int64_t>(data.size()) == numel();
}

ElemKind cnnc::elemKindOf(Type elementType) {
  if (elementType.isF16())
    return ElemKind::F16;
  if (auto it = dyn_cast<IntegerType>(elementType))
    return it.getWidth() <= 32 ? ElemKind::I32 : ElemKind::I64;
  return ElemKind::F32;
}

float cnnc::roundToHalf(float x) {
  if (std::isnan(x))
    return x;
  const float a = std::fabs(x);
  // 65504 is the largest half; 65520 lies halfway to 2^16 and rounds to even,
  // i.e. up, so it and everything above overflows to infinity.
  if (a >= 65520.0f)
    return std::copysign(INFINITY, x);
  float r;
  if (a < 6.103515625e-05f) { // 2^-14: subnormal halves, spacing 2^-24
    // Scaling by 2^24 is exact; nearbyint rounds to nearest even.
    r = std::nearbyint(a * 16777216.0f) * (1.0f / 16777216.0f);
  } else { // normal: keep 10 of the 23 mantissa bits, round to nearest even
    uint32_t u;
    std::memcpy(&u, &a, sizeof u);
    u += 0xFFFu + ((u >> 13) & 1u);
    u &= ~0x1FFFu;
    std::memcpy(&r, &u, sizeof r);
  }
  return std::copysign(r, x);
}

float cnnc::halfToFloat(uint16_t h) {
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0)
    return sign * std::ldexp(static_cast<float>(mant), -24);
  if (exp == 31)
    return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
}

uint16_t cnnc::floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000) // inf or nan
    return sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0);
  if (absx >= 0x477ff000) // rounds to >= 65520: inf
    return sign | 0x7c00;
  if (absx < 0x38800000) { // subnormal or zero in f16
    float a;
    std::memcpy(&a, &absx, 4);
    // a * 2^24 rounded to nearest even gives the subnormal mantissa.
    return sign | uint16_t(std::nearbyint(a * 16777216.0f));
  }
  uint32_t mant = absx & 0x7fffff;
  uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    ++h;
  return sign | h;
}

float cnnc::bfloat16ToFloat(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
