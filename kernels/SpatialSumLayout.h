//===- SpatialSumLayout.h - how spatialSumTiles covers a sum ----*- C++ -*-===//
//
// Host-only C++ (no CUDA, no LLVM), not part of the prelude: the lanes,
// pixel rows and pixel splits of spatialSumTiles (PoolingNHWC.cuh) over an
// N x pixels x C sum. describeSpatialSum (lib/Dialect/CNN/Ops/Pooling.cpp)
// decides the launch with it; runtime/test/kernels_check.cu and
// spatial_mean_bench.cu launch what the compiler would with the same
// function, so the three cannot drift apart.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_SPATIAL_SUM_LAYOUT_H
#define CNNC_KERNELS_SPATIAL_SUM_LAYOUT_H

#include <algorithm>
#include <cstdint>

namespace cnnc_kernels {

struct SpatialSumLayout {
  int64_t lanes;  // threads across channels (units of 8 channels in vec8)
  int64_t rows;   // pixel rows a block adds at once (a power of two)
  int64_t splits; // blocks sharing one (image, channel chunk)'s pixels
  int64_t outer;  // (image, channel chunk) pairs
  int64_t blocks() const { return outer * splits; }
};

/// Pixels a thread keeps in flight per round (16-byte loads hold 8
/// channels, so fewer pixels a round).
inline int64_t spatialPixelsPerThread(bool vec8) { return vec8 ? 4 : 8; }

/// `gridLimit` and `block` are #cnn.launch's (32 blocks per SM, 256).
inline SpatialSumLayout spatialSumLayout(int64_t n, int64_t pixels,
                                         int64_t channels, bool vec8,
                                         int64_t gridLimit, int64_t block) {
  int64_t units = vec8 ? channels / 8 : channels;
  // The fewest lanes whose pixel row is a whole 64-byte stretch (f16; 128
  // bytes in f32), so a warp reads several pixels at once; with few pixels
  // the lanes widen until the rows no longer outnumber the pixels.
  int64_t lanes = std::min<int64_t>(units, vec8 ? 4 : 32);
  while (lanes * 2 <= std::min(units, block) && block / lanes > pixels)
    lanes *= 2;
  int64_t rows = 1;
  while (rows * 2 * lanes <= block)
    rows *= 2;
  int64_t outer = n * ((units + lanes - 1) / lanes);
  // Split the pixels until about four blocks per SM run, each thread
  // keeping a round of loads to add.
  int64_t target = std::max<int64_t>(1, gridLimit / 8);
  int64_t splits = std::clamp<int64_t>(
      (target + outer - 1) / outer, 1,
      std::max<int64_t>(1, pixels / (rows * spatialPixelsPerThread(vec8))));
  return {lanes, rows, splits, outer};
}

} // namespace cnnc_kernels

#endif // CNNC_KERNELS_SPATIAL_SUM_LAYOUT_H
