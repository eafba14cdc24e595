//===- TensorEntry.cpp - reference tensors <-> runtime tensor files -------===//
#include "cnnc/Reference/TensorEntry.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace cnnc;
using namespace cnnc::reference;

float cnnc::reference::halfToFloat(uint16_t h) {
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0)
    return sign * std::ldexp(static_cast<float>(mant), -24);
  if (exp == 31)
    return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
}

uint16_t cnnc::reference::floatToHalf(float f) {
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

Tensor cnnc::reference::fromEntry(const cnnrt::TensorEntry &e) {
  Tensor t;
  t.shape = e.shape;
  // Readers validate shapes against the data (cnnrt::checkShape); an entry
  // built elsewhere with a bad shape or short data converts only what it has.
  int64_t n = e.numel();
  size_t elemSize = cnnrt::dtypeSize(e.dtype);
  if (n < 0 || elemSize == 0 || e.data.size() / elemSize < size_t(n))
    n = elemSize ? int64_t(e.data.size() / elemSize) : 0;
  t.data.resize(n);
  switch (e.dtype) {
  case cnnrt::DType::F32:
    t.kind = ElemKind::F32;
    if (n > 0)
      std::memcpy(t.data.data(), e.data.data(), n * sizeof(float));
    break;
  case cnnrt::DType::F16:
    t.kind = ElemKind::F16;
    for (int64_t i = 0; i < n; ++i)
      t.data[i] = halfToFloat(e.as<uint16_t>()[i]);
    break;
  case cnnrt::DType::I32:
    t.kind = ElemKind::I32;
    for (int64_t i = 0; i < n; ++i)
      t.data[i] = float(e.as<int32_t>()[i]);
    break;
  case cnnrt::DType::I64:
    t.kind = ElemKind::I64;
    for (int64_t i = 0; i < n; ++i)
      t.data[i] = float(e.as<int64_t>()[i]);
    break;
  }
  return t;
}

cnnrt::TensorEntry cnnc::reference::toEntry(const std::string &name,
                                            const Tensor &t) {
  cnnrt::DType dt = cnnrt::DType::F32;
  switch (t.kind) {
  case ElemKind::F32:
    dt = cnnrt::DType::F32;
    break;
  case ElemKind::F16:
    dt = cnnrt::DType::F16;
    break;
  case ElemKind::I32:
    dt = cnnrt::DType::I32;
    break;
  case ElemKind::I64:
    dt = cnnrt::DType::I64;
    break;
  }
  cnnrt::TensorEntry e = cnnrt::TensorEntry::zeros(name, dt, t.shape);
  int64_t n = std::min<int64_t>(e.numel(), t.data.size());
  for (int64_t i = 0; i < n; ++i) {
    switch (dt) {
    case cnnrt::DType::F32:
      e.as<float>()[i] = t.data[i];
      break;
    case cnnrt::DType::F16:
      e.as<uint16_t>()[i] = floatToHalf(t.data[i]);
      break;
    case cnnrt::DType::I32:
      e.as<int32_t>()[i] = int32_t(t.data[i]);
      break;
    case cnnrt::DType::I64:
      e.as<int64_t>()[i] = int64_t(t.data[i]);
      break;
    }
  }
  return e;
}
