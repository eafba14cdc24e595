//===- ShapeLimits.h - the one bound on a tensor's size ---------*- C++ -*-===//
//
// One rule for every tensor shape cnnc makes or accepts (graph inputs, op
// results, the memory planner): the element count and the byte size fit in
// int64 and the element count is at most a ceiling. Header-only, so the
// importer, the dialect's verifiers and the reference interpreter share it
// without depending on each other.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_SUPPORT_SHAPELIMITS_H
#define CNNC_SUPPORT_SHAPELIMITS_H

#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>

namespace cnnc {

/// The default ceiling on a tensor's element count: 2^40 elements (4 TiB of
/// f32) is beyond any accelerator, yet far enough from 2^63 that products
/// of a few such sizes (flatten, matmul, im2col extents) do not overflow.
constexpr int64_t kDefaultMaxTensorElements = int64_t(1) << 40;

/// The element count of `shape` (begin..end, any range of int64_t) if it is
/// non-negative, fits in int64, is at most `maxElements` and its byte size
/// `count * elementBytes` fits in int64; nullopt otherwise. Checked before
/// anything multiplies the dimensions.
template <typename It>
std::optional<int64_t>
boundedNumel(It begin, It end, int64_t elementBytes = 1,
             int64_t maxElements = kDefaultMaxTensorElements) {
  int64_t n = 1;
  bool zero = false;
  for (It it = begin; it != end; ++it) {
    int64_t d = *it;
    if (d < 0)
      return std::nullopt;
    if (d == 0) {
      zero = true;
      continue;
    }
    // Dimensions after a zero still must not be absurd on their own.
    if (n > std::numeric_limits<int64_t>::max() / d)
      return std::nullopt;
    n *= d;
  }
  if (n > maxElements)
    return std::nullopt;
  if (elementBytes > 0 &&
      n > std::numeric_limits<int64_t>::max() / elementBytes)
    return std::nullopt;
  return zero ? 0 : n;
}

template <typename Range>
std::optional<int64_t>
boundedNumel(const Range &shape, int64_t elementBytes = 1,
             int64_t maxElements = kDefaultMaxTensorElements) {
  return boundedNumel(std::begin(shape), std::end(shape), elementBytes,
                      maxElements);
}

} // namespace cnnc

#endif // CNNC_SUPPORT_SHAPELIMITS_H
