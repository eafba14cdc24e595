//===- Random.cuh - the counter-based random numbers ----------------------===//
//
// splitmix64, shared with the reference interpreter (dropout masks).
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_RANDOM_CUH
#define CNNC_KERNELS_RANDOM_CUH

#include "Common.cuh"

namespace {
// cnnc-prelude-begin
// Counter-based uniform in [0, 1) shared with the reference interpreter.
__device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// cnnc-prelude-end
} // namespace

#endif // CNNC_KERNELS_RANDOM_CUH
