//===- TensorEntry.cpp - reference tensors <-> runtime tensor files -------===//
#include "cnnc/Reference/TensorEntry.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace cnnc;
using namespace cnnc::reference;

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
