//===- NhwcTileLayout.h - the NHWC per-channel kernels' tiles ---*- C++ -*-===//
//
// Host-only C++ (no CUDA, no LLVM), not part of the prelude: how the
// per-channel NHWC kernels of Reductions.cuh (nhwcPartial, nhwcPartial8,
// nhwcShiftedSums8, dualBnGradPartial8, and the unprinted nhwcBnGradSums8,
// dualBnGradSums8, nhwcBnGradApply8, dualBnGradApply8) and PoolingNHWC.cuh's
// poolBnGradPartial8 split M rows of C channels into blocks. EmitCUDA.cpp
// launches the printed ones with it; runtime/test/bn_grad_bench.cu launches
// the old and the new BN-gradient kernels with the same function, so the
// bench's old kernels run as the compiler launches them.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_NHWC_TILE_LAYOUT_H
#define CNNC_KERNELS_NHWC_TILE_LAYOUT_H

#include <algorithm>
#include <cstdint>

namespace cnnc_kernels {

/// `lanes` threads across channels (eight channels each when `vec`),
/// `colBlocks` blocks across channels and `tiles` blocks of `rowsPerTile`
/// rows: grid (colBlocks, tiles), block (lanes, threads / lanes).
struct NhwcTileLayout {
  bool vec;
  int64_t lanes, colBlocks, tiles, rowsPerTile;
};

/// The fewest rows of an apply kernel's tile (nhwcBnGradApply8,
/// dualBnGradApply8, launched by the bench only): ResNet-50's 7 x 7 stages at
/// batch 128 have 6,272 rows, 98 tiles of 64 rows, which leave most SMs one
/// or two blocks.
constexpr int64_t kNhwcApplyMinRows = 32;

/// At most `blocks` blocks (#cnn.launch's partial_blocks for the sums,
/// grid_limit for the apply kernels) and at most `maxTiles` tiles (a
/// partial-sum kernel's scratch holds that many rows of C doubles per sum;
/// the apply kernels have no such bound), at least `minRows` rows a tile
/// (64 for the sums: each tile costs its finish a scratch row).
inline NhwcTileLayout nhwcTileLayout(int64_t M, int64_t C, bool vec,
                                     int64_t blocks, int64_t maxTiles,
                                     int64_t minRows = 64) {
  NhwcTileLayout t;
  t.vec = vec;
  t.lanes = vec ? std::min<int64_t>(C / 8, 32) : 32;
  t.colBlocks = vec ? (C / 8 + t.lanes - 1) / t.lanes : (C + 31) / 32;
  t.tiles = std::max<int64_t>(1, std::min({(M + minRows - 1) / minRows,
                                           blocks / t.colBlocks, maxTiles}));
  t.rowsPerTile = (M + t.tiles - 1) / t.tiles;
  t.tiles = (M + t.rowsPerTile - 1) / t.rowsPerTile;
  return t;
}

} // namespace cnnc_kernels

#endif // CNNC_KERNELS_NHWC_TILE_LAYOUT_H
