//===- ReproProbe.cu - does a GPU computation repeat itself bitwise? ------===//

#include "ReproProbe.h"

#include <cuda_fp16.h>

#include <algorithm>

namespace cnnrt::repro {

namespace {

__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fillKernel(__half *p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned long long h = mix64(i * 0x2545f4914f6cdd1dull + seed);
    // 24 random bits -> [-1, 1): exactly representable steps of 2^-23,
    // rounded to f16 like any activation.
    float v = float(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
    p[i] = __float2half_rn(v);
  }
}

__global__ void digestKernel(const unsigned char *p, size_t bytes,
                             unsigned long long *out) {
  size_t words = bytes / 8;
  const unsigned long long *w = reinterpret_cast<const unsigned long long *>(p);
  unsigned long long acc = 0;
  size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (size_t i = tid; i < words; i += (size_t)gridDim.x * blockDim.x)
    acc ^= mix64(w[i] ^ mix64(i));
  if (tid == 0 && bytes % 8) {
    // The tail: the last bytes % 8 bytes as one zero-padded word.
    unsigned long long t = 0;
    for (size_t b = words * 8; b < bytes; ++b)
      t |= (unsigned long long)p[b] << (8 * (b - words * 8));
    acc ^= mix64(t ^ mix64(words));
  }
  for (int o = 16; o > 0; o /= 2)
    acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0 && acc)
    atomicXor(out, acc);
}

/// Keeps its SMs busy for about `cycles` clock cycles.
__global__ void spinKernel(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

unsigned gridOf(size_t n) {
  return static_cast<unsigned>(std::min<size_t>((n + 255) / 256, 4096));
}

} // namespace

void fillHalves(cudaStream_t s, void *p, size_t bytes, uint32_t seed) {
  size_t n = bytes / 2;
  if (n)
    fillKernel<<<gridOf(n), 256, 0, s>>>(static_cast<__half *>(p), n, seed);
}

void digest(cudaStream_t s, const void *p, size_t bytes,
            unsigned long long *out) {
  cudaMemsetAsync(out, 0, sizeof(*out), s);
  if (bytes)
    digestKernel<<<gridOf(bytes / 8 + 1), 256, 0, s>>>(
        static_cast<const unsigned char *>(p), bytes, out);
}

Verdict probe(cudaStream_t s, const std::vector<Buffer> &bufs, void *workspace,
              size_t workspaceBytes, int runs,
              const std::function<bool()> &run) {
  Verdict v;
  std::vector<const Buffer *> outs;
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (bufs[i].output)
      outs.push_back(&bufs[i]);
    else
      fillHalves(s, bufs[i].ptr, bufs[i].bytes, 0x5eed0000u + (uint32_t)i);
  }
  int device = 0, sms = 1;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  int clockKHz = 1000000;
  cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, device);
  cudaStream_t side = nullptr;
  cudaEvent_t ready = nullptr;
  unsigned long long *dig = nullptr;
  auto cudaFailed = [&](cudaError_t e, const char *what) {
    if (e == cudaSuccess)
      return false;
    if (v.why.empty())
      v.why = std::string(what) + ": " + cudaGetErrorString(e);
    return true;
  };
  std::vector<unsigned long long> first(outs.size()), cur(outs.size());
  // From the third run on, the computation replays as a CUDA graph
  // captured once: the training step runs it so (captured at its third
  // step), and a plan could differ between eager launches and replays.
  cudaGraphExec_t exec = nullptr;
  bool captureFailed = false;
  auto capture = [&]() {
    cudaGraph_t graph = nullptr;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) !=
        cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    bool ok = run();
    cudaError_t e = cudaStreamEndCapture(s, &graph);
    if (ok && e == cudaSuccess && graph &&
        cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
      exec = nullptr;
    if (graph)
      cudaGraphDestroy(graph);
    cudaGetLastError();
    return exec != nullptr;
  };
  auto how = [&](int r) {
    return r >= 2 && exec ? " (graph replay)" : " (eager)";
  };
  if (!cudaFailed(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking),
                  "probe stream") &&
      !cudaFailed(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming),
                  "probe event") &&
      !cudaFailed(cudaMalloc(&dig, std::max<size_t>(outs.size(), 1) * 8),
                  "probe digests")) {
    for (int r = 0; r < runs; ++r) {
      // A different pattern in every output byte and workspace byte.
      for (const Buffer *b : outs)
        cudaMemsetAsync(b->ptr, 0x11 * (r + 1), b->bytes, s);
      if (workspace && workspaceBytes)
        cudaMemsetAsync(workspace, 0xa5 ^ (r * 0x1f), workspaceBytes, s);
      if (r % 2) {
        // Every other run: about 50 us of spinning blocks on a quarter,
        // half or three quarters of the SMs, started with the run.
        cudaEventRecord(ready, s);
        cudaStreamWaitEvent(side, ready, 0);
        int blocks = std::max(1, sms * (1 + (r / 2) % 3) / 4);
        spinKernel<<<blocks, 64, 0, side>>>((long long)clockKHz * 50 / 1000);
      }
      bool ok =
          r >= 2 && exec ? cudaGraphLaunch(exec, s) == cudaSuccess : run();
      if (!ok) {
        v.why = "run " + std::to_string(r + 1) + how(r) + " failed to enqueue";
        break;
      }
      for (size_t j = 0; j < outs.size(); ++j)
        digest(s, outs[j]->ptr, outs[j]->bytes, dig + j);
      if (cudaFailed(cudaMemcpyAsync(cur.data(), dig, outs.size() * 8,
                                     cudaMemcpyDeviceToHost, s),
                     "probe digest copy") ||
          cudaFailed(cudaStreamSynchronize(s), "probe run"))
        break;
      if (r == 0) {
        first = cur;
      } else {
        for (size_t j = 0; j < outs.size() && v.why.empty(); ++j)
          if (cur[j] != first[j])
            v.why = std::string(outs[j]->name) + " of run " +
                    std::to_string(r + 1) + how(r) + " differs from run 1's";
        if (!v.why.empty())
          break;
      }
      v.runs = r + 1;
      // The stream is idle here: capture before the first replay. A plan
      // that cannot be captured is probed eagerly only (the step would
      // report the capture failure itself).
      if (r == 1 && !captureFailed && !capture())
        captureFailed = true;
    }
  }
  if (side) {
    cudaStreamSynchronize(side);
    cudaStreamDestroy(side);
  }
  if (ready)
    cudaEventDestroy(ready);
  if (exec)
    cudaGraphExecDestroy(exec);
  cudaFree(dig);
  // A failed run, copy or capture leaves a (non-sticky) error behind:
  // clear it so that the caller's next check does not report ours.
  cudaGetLastError();
  v.reproduced = v.why.empty() && v.runs == runs;
  return v;
}

} // namespace cnnrt::repro
