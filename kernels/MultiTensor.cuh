//===- MultiTensor.cuh - one kernel over many tensors ---------------------===//
//
// The multi-tensor kernels (cnn.update_group: the optimizer updates of a
// parameter group; cnn.cast_group: parameter casts; cnn.all_finite; the
// gradient clipping norm), as Apex's multi_tensor_apply: the tensors are cut
// into chunks that never straddle two tensors, and a block walks chunks
// (grid-stride) while its threads walk a chunk's units (one element, or
// eight in the "vec8" form). cnnc prints, per model, the chunk table
// (`__device__ const` {tensor, first unit, end unit} triples, int or int64_t
// entries) and the per-tensor tables (arena offsets, element types), and for
// an update group the kernel whose one statement calls mt::forEachUnit with
// a lambda: the update rule's arithmetic and the per-tensor loads and stores
// through the tables (mt::load/load8/store/store8, mt::eachLane). The
// finiteness check and the norm are whole templates here.
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_MULTITENSOR_CUH
#define CNNC_KERNELS_MULTITENSOR_CUH

#include "Common.cuh"
#include "Elementwise.cuh"

namespace {
// cnnc-prelude-begin
namespace mt {
// Every unit of the Chunks chunks of `chunk` (blocks of 256 threads):
// fn(tensor, unit), the unit counted from the tensor's start.
template <int Chunks, typename Index, typename Fn>
__device__ __forceinline__ void forEachUnit(const Index *chunk, Fn fn) {
  for (int c = blockIdx.x; c < Chunks; c += gridDim.x) {
    const int lo = chunk[3 * c];
    const Index end = chunk[3 * c + 2];
    for (int64_t at = chunk[3 * c + 1] + threadIdx.x; at < end; at += 256)
      fn(lo, at);
  }
}

// Element i of a tensor at `p` whose element type is Ts[which] (a gradient
// group mixes f16 and f32 tensors; `which` is uniform per tensor).
template <typename T, typename... Rest>
__device__ __forceinline__ float load(int which, const char *p, int64_t i) {
  if constexpr (sizeof...(Rest) == 0)
    return ld(reinterpret_cast<const T *>(p) + i);
  else
    return which == 0 ? ld(reinterpret_cast<const T *>(p) + i)
                      : load<Rest...>(which - 1, p, i);
}
// Elements i..i+7 (16-byte aligned) likewise.
template <typename T, typename... Rest>
__device__ __forceinline__ void load8(int which, const char *p, int64_t i,
                                      float (&v)[8]) {
  if constexpr (sizeof...(Rest) == 0) {
    ldv8(reinterpret_cast<const T *>(p) + i, v);
  } else {
    if (which == 0)
      ldv8(reinterpret_cast<const T *>(p) + i, v);
    else
      load8<Rest...>(which - 1, p, i, v);
  }
}
template <typename T>
__device__ __forceinline__ void store(char *p, int64_t i, float v) {
  st(reinterpret_cast<T *>(p) + i, v);
}
template <typename T>
__device__ __forceinline__ void store8(char *p, int64_t i,
                                       const float (&v)[8]) {
  stv8(reinterpret_cast<T *>(p) + i, v);
}

// The eight elements i0..i0+7 of a "vec8" unit through the per-element rule
// fn(i, x), x[K] one lane of x8 (inputs in, outputs out, as in ew::).
template <int K, typename Fn, int... J>
__device__ __forceinline__ void eachLaneSlots(ew::Slots<J...>, int64_t i0,
                                              float (&x8)[K][8], Fn fn) {
#pragma unroll
  for (int lane = 0; lane < 8; ++lane) {
    float x[K] = {x8[J][lane]...};
    fn(i0 + lane, x);
    ((x8[J][lane] = x[J]), ...);
  }
}
template <int K, typename Fn>
__device__ __forceinline__ void eachLane(int64_t i0, float (&x8)[K][8], Fn fn) {
  eachLaneSlots<K>(typename ew::MakeSlots<K>::type{}, i0, x8, fn);
}

// cnn.all_finite over the tensors (of one element type T) at A + offset[t]:
// *flag = 0 when any element is not finite. Vec: 1, or 8 ("vec8": units of
// eight elements).
template <int Chunks, typename T, int Vec, typename Index>
__device__ __forceinline__ void allFinite(const Index *chunk,
                                          const int64_t *offset, const char *A,
                                          float *flag) {
  bool bad = false;
  forEachUnit<Chunks>(chunk, [&](const int lo, const int64_t at) {
    const T *p = reinterpret_cast<const T *>(A + offset[lo]);
    if constexpr (Vec == 8) {
      float v[8];
      ldv8(p + at * 8, v);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        bad |= !isfinite(v[k]);
    } else {
      bad |= !isfinite(ld(p + at));
    }
  });
  if (__syncthreads_or(bad) && threadIdx.x == 0)
    *flag = 0.0f;
}

// The gradient clipping norm's first pass: each block's sum of the squares
// of its chunks' elements (tensor t at A + offset[t], f16 where half[t],
// else f32) into partial[blockIdx.x]. The slots are added in a fixed order
// by clipDivisorFinish: the norm (and so a clipped step) is the same in
// every run and process, which an atomicAdd of the block sums is not (a
// resumed run must repeat the uninterrupted one's losses to the printed
// digit).
template <int Chunks, typename Index>
__device__ __forceinline__ void
sumSquares(const Index *chunk, const int64_t *offset, const int64_t *half,
           const char *A, double *partial) {
  float s = 0.f;
  forEachUnit<Chunks>(chunk, [&](const int lo, const int64_t at) {
    const char *p = A + offset[lo];
    float v = half[lo] ? ld(reinterpret_cast<const __half *>(p) + at)
                       : ld(reinterpret_cast<const float *>(p) + at);
    s += v * v;
  });
  __shared__ float red[256];
  red[threadIdx.x] = s;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (threadIdx.x < w)
      red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    partial[blockIdx.x] = red[0];
}
} // namespace mt

// torch.nn.utils.clip_grad_norm_ of the gradients scaled by *scale, from
// mt::sumSquares' block sums in a fixed order: *acc = the divisor of the
// scaled gradients (one block of 256 threads).
__global__ void __launch_bounds__(256)
    clipDivisorFinish(const double *partial, int blocks, float *acc,
                      const float *scale, float maxNorm) {
  __shared__ double red[256];
  double t = 0.0;
  for (int b = threadIdx.x; b < blocks; b += 256)
    t += partial[b];
  red[threadIdx.x] = t;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (threadIdx.x < w)
      red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x != 0)
    return;
  float S = *scale, norm = sqrtf((float)red[0]) / S;
  *acc = S / fminf(1.f, maxNorm / (norm + 1e-6f));
}
// cnnc-prelude-end
} // namespace

#endif // CNNC_KERNELS_MULTITENSOR_CUH
