//===- ReproProbe.h - does a GPU computation repeat itself bitwise? -------===//
//
// cuDNN notes none of its conv+GenStats plans as nondeterministic, yet on
// an H100 two processes running the same cached plan gave different
// statistics (session 25). Which plans do so cannot be read from cuDNN:
// the probe runs a candidate several times on the real shapes and compares
// its outputs bitwise. Passing is evidence, not proof (docs/runtime.md,
// "Determinism"): a plan that, say, adds partial sums with atomics in an
// order the scheduler decides could agree by chance every time it is
// probed. The probe makes that unlikely by changing what it can between
// runs: the outputs and the workspace hold a different byte pattern before
// each run (a plan that reads instead of overwriting them differs), every
// other run another stream keeps a varying share of the SMs busy (a plan
// whose reduction order follows the CTA schedule differs), and the runs
// after the second replay a CUDA graph of the computation, as the captured
// training step does.
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_SRC_REPROPROBE_H
#define CNNRT_SRC_REPROPROBE_H

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cnnrt::repro {

/// One buffer of a probed computation: inputs are filled once with
/// pseudo-random f16 values in [-1, 1) (zeros would make every sum exact),
/// outputs are compared.
struct Buffer {
  void *ptr = nullptr;
  size_t bytes = 0;
  bool output = false;
  const char *name = "";
};

struct Verdict {
  bool reproduced = false;
  /// Runs done (== runs when reproduced).
  int runs = 0;
  /// Why not: which run differed in which output, or what failed.
  std::string why;
};

/// Fills `bytes` at `p` with f16 values in [-1, 1) from a hash of the
/// element index and `seed` (stream-ordered on `s`).
void fillHalves(cudaStream_t s, void *p, size_t bytes, uint32_t seed);

/// An order-independent 64-bit digest of `bytes` at `p`, written to the
/// device word `out` (zeroed first): each 8-byte word is mixed with its
/// index and the mixes XOR-combined, so any differing bit changes it (up
/// to a 2^-64 chance) and thread order does not.
void digest(cudaStream_t s, const void *p, size_t bytes,
            unsigned long long *out);

/// Runs `run` (which enqueues the computation on `s` and says whether
/// the enqueue succeeded) `runs` times over `bufs` with `workspaceBytes`
/// of `workspace` poisoned before each run, and compares each run's output
/// digests with the first's.
Verdict probe(cudaStream_t s, const std::vector<Buffer> &bufs, void *workspace,
              size_t workspaceBytes, int runs,
              const std::function<bool()> &run);

} // namespace cnnrt::repro

#endif // CNNRT_SRC_REPROPROBE_H
