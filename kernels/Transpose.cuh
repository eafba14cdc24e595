//===- Transpose.cuh - cnn.transpose as a batched 2-D transpose -----------===//
//
// A transpose that keeps leading dimensions and swaps two groups of the
// others (NCHW <-> NHWC: batch N, rows C and columns H x W, or the reverse)
// through 32 x 32 shared-memory tiles: both the reads and the writes are
// coalesced. The generic gather (EmitCUDA's printGather: a thread per output
// element) reads at a stride of C or H x W, about 570 GB/s on an H200.
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_TRANSPOSE_CUH
#define CNNC_KERNELS_TRANSPOSE_CUH

#include "Common.cuh"

namespace {
// cnnc-prelude-begin
// ---- cnn.transpose, cnn.lowering = "tiled" ----
// out[b][c][r] = in[b][r][c] for b < batch, r < rows, c < cols: a copy, exact
// for any T. Launched with 256 threads (#cnn.launch's block, which the
// dialect verifies), 32 x 8: threadIdx.x % 32 along the tile's contiguous
// side, threadIdx.x / 32 over its rows, 4 each. A block moves one 32 x 32
// tile at a time, looping over the batch x ceil(rows / 32) x ceil(cols / 32)
// tiles (any count: the grid is the launch's grid ceiling at most, no
// grid.y / grid.z limit). Each thread issues its 4 loads before storing
// any to shared memory, so they are in flight together (a load followed by
// its store waits a round trip each). The tile's rows are padded to an odd
// number of 4-byte words (33 f32 or 34 f16), so the column read of the
// second pass hits 32 distinct banks.
template <typename T>
__global__ void __launch_bounds__(256)
    batchedTranspose2D(const T *__restrict__ in, T *__restrict__ out,
                       int64_t batch, int64_t rows, int64_t cols) {
  constexpr int kTile = 32, kRows = 8;
  constexpr int kPad = sizeof(T) >= 4 ? 1 : 4 / (int)sizeof(T);
  __shared__ T tile[kTile][kTile + kPad];
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  const int64_t tileRows = (rows + kTile - 1) / kTile;
  const int64_t tileCols = (cols + kTile - 1) / kTile;
  const int64_t tiles = batch * tileRows * tileCols;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t tc = t % tileCols, rest = t / tileCols;
    const int64_t tr = rest % tileRows, b = rest / tileRows;
    const int64_t r0 = tr * kTile, c0 = tc * kTile;
    const T *src = in + b * rows * cols;
    T *dst = out + b * rows * cols;
    // Read rows r0.. of the input, each warp along 32 columns: the 4 loads
    // first, then the 4 shared stores.
    T v[kTile / kRows];
#pragma unroll
    for (int j = 0; j < kTile / kRows; ++j) {
      const int i = ty + j * kRows;
      if (r0 + i < rows && c0 + tx < cols)
        v[j] = src[(r0 + i) * cols + c0 + tx];
    }
#pragma unroll
    for (int j = 0; j < kTile / kRows; ++j) {
      const int i = ty + j * kRows;
      if (r0 + i < rows && c0 + tx < cols)
        tile[i][tx] = v[j];
    }
    __syncthreads();
    // Write rows c0.. of the output, each warp along 32 of its columns
    // (the input's rows).
#pragma unroll
    for (int j = 0; j < kTile / kRows; ++j) {
      const int i = ty + j * kRows;
      if (c0 + i < cols && r0 + tx < rows)
        dst[(c0 + i) * rows + r0 + tx] = tile[tx][i];
    }
    // The next tile overwrites the shared one.
    __syncthreads();
  }
}
// cnnc-prelude-end
} // namespace

#endif // CNNC_KERNELS_TRANSPOSE_CUH
