//===- FilterLayout.h - a filter's public and stored layouts ------*- C++ -*-===//
//
// cnn-param-format stores a convolution filter as the NHWC convolution reads
// it, K x R x S x Cs (channels past C zero), while weights files,
// checkpoints and the C API keep PyTorch's K x C x R x S. The runtime and
// the reference interpreter's drivers convert with this one function.
// Header-only, host code: no CUDA, no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_FILTERLAYOUT_H
#define CNNRT_FILTERLAYOUT_H

#include <cstdint>
#include <cstring>

namespace cnnrt {

/// Copies the elements (`es` bytes each) of a filter with public shape
/// `kcrs` = {K, C, R, S} between its public form and its stored form
/// K x R x S x `storedC` (storedC >= C): public -> stored when `toStored`
/// (the stored padding is zeroed), else stored -> public.
inline void convertFilterLayout(const int64_t kcrs[4], int64_t storedC,
                                size_t es, const char *src, char *dst,
                                bool toStored) {
  const int64_t K = kcrs[0], C = kcrs[1], R = kcrs[2], S = kcrs[3];
  const int64_t Cs = storedC > C ? storedC : C;
  if (toStored)
    std::memset(dst, 0, static_cast<size_t>(K * R * S * Cs) * es);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t q = 0; q < S; ++q) {
          size_t pub = static_cast<size_t>(((k * C + c) * R + r) * S + q) * es;
          size_t st = static_cast<size_t>(((k * R + r) * S + q) * Cs + c) * es;
          std::memcpy(dst + (toStored ? st : pub), src + (toStored ? pub : st),
                      es);
        }
}

} // namespace cnnrt

#endif
