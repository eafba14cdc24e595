//===- Elementwise.cuh - the elementwise kernels' loops -------------------===//
//
// The loop structure of every elementwise kernel cnnc generates (fused
// elementwise bodies, BatchNorm's apply and gradient, convolution epilogues,
// optimizer updates outside a multi-tensor group, ...), as templates over
// the kernel's operands and a per-kernel functor, as PyTorch's gpu_kernel
// and Apex's multi_tensor_apply separate the two: the printer emits a
// `__global__` kernel per model whose one statement calls `ew::elementwise`
// or `ew::elementwiseVec8` with a lambda (the fused `arith` body, and the
// loads of operands whose index is model-specific) and the operands' kinds.
// The kernel keeps its own parameters so that they stay `__restrict__` (a
// pointer in a struct argument loses it, and with it the read-only loads)
// and its own name (model.cu's split into units declares kernels by name).
//
// The functor is called as fn(i, x): `i` the flat element index, `x` a
// float[sizeof...(Xs)] holding the inputs' values (in operand order) on
// entry, to which it writes the outputs' values (their slots, in order).
//
// Part of the kernel prelude (see Prelude.cuh): cnnc prints the lines
// between the cnnc-prelude markers; the rest makes this file compile
// on its own.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_ELEMENTWISE_CUH
#define CNNC_KERNELS_ELEMENTWISE_CUH

#include "Common.cuh"

namespace {
// cnnc-prelude-begin
namespace ew {
// The kinds of an elementwise kernel's operands: how element i is read
// (load), how the eight elements of vector v (elements 8v..8v+7) are read
// (load8, after begin8 once per thread with the thread's first vector), and
// for an output how they are written.

// What an input kind does not do: it is not written, and only a hoisted
// per-channel input keeps a vector from before the loop.
struct Input {
  template <typename P>
  static __device__ void begin8(P, int64_t, float (&)[8]) {}
  template <typename P> static __device__ void store(P, int64_t, float) {}
  template <typename P>
  static __device__ void store8(P, int64_t, const float (&)[8]) {}
};

// An input read at element i (16-byte aligned for the vector form).
template <typename T> struct In : Input {
  template <typename P> static __device__ float load(P p, int64_t i) {
    return ld(p + i);
  }
  template <typename P>
  static __device__ void load8(P p, int64_t v, const float (&)[8],
                               float (&x)[8]) {
    ldv8(p + v * 8, x);
  }
};

// An output written at element i (16-byte aligned for the vector form).
template <typename T> struct Out {
  template <typename P> static __device__ float load(P, int64_t) { return 0.f; }
  template <typename P>
  static __device__ void begin8(P, int64_t, float (&)[8]) {}
  template <typename P>
  static __device__ void load8(P, int64_t, const float (&)[8], float (&)[8]) {}
  template <typename P> static __device__ void store(P p, int64_t i, float v) {
    st(p + i, v);
  }
  template <typename P>
  static __device__ void store8(P p, int64_t v, const float (&x)[8]) {
    stv8(p + v * 8, x);
  }
};

// How the vector form reads a per-channel operand of a channels-last
// tensor: element by element (Lanes), the eight consecutive channels in one
// 16-byte load (Vector: C % 8 == 0, 16-byte aligned), or that load once per
// thread before the loop (Hoisted: also the grid's stride a multiple of
// C / 8 vectors, so that a thread sees the same channels in every
// iteration).
enum class ChannelLoad { Lanes, Vector, Hoisted };

// A per-channel operand of a channels-last tensor of C channels: element
// i % C.
template <typename T, int64_t C, ChannelLoad L = ChannelLoad::Lanes>
struct ChannelsLast : Input {
  template <typename P> static __device__ float load(P p, int64_t i) {
    return ld(p + i % C);
  }
  template <typename P>
  static __device__ void begin8(P p, int64_t v, float (&x)[8]) {
    if constexpr (L == ChannelLoad::Hoisted)
      ldv8(p + (v * 8) % C, x);
  }
  template <typename P>
  static __device__ void load8(P p, int64_t v, const float (&h)[8],
                               float (&x)[8]) {
    if constexpr (L == ChannelLoad::Hoisted) {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        x[e] = h[e];
    } else if constexpr (L == ChannelLoad::Vector) {
      ldv8(p + (v * 8) % C, x);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        x[e] = ld(p + (v * 8 + e) % C);
    }
  }
};

// A per-channel operand of a channels-first tensor of C channels of Inner
// elements each: element (i / Inner) % C; with Inner % 8 == 0 the eight
// elements of a vector share one channel, read once.
template <typename T, int64_t Inner, int64_t C> struct ChannelsFirst : Input {
  template <typename P> static __device__ float load(P p, int64_t i) {
    return ld(p + (i / Inner) % C);
  }
  template <typename P>
  static __device__ void load8(P p, int64_t v, const float (&)[8],
                               float (&x)[8]) {
    if constexpr (Inner % 8 == 0) {
      const float s = ld(p + ((v * 8) / Inner) % C);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        x[e] = s;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        x[e] = ld(p + ((v * 8 + e) / Inner) % C);
    }
  }
};

// A one-element operand (a step counter, a learning rate, a loss scale):
// element 0 for every i.
template <typename T> struct Scalar : Input {
  template <typename P> static __device__ float load(P p, int64_t) {
    return ld(p);
  }
  template <typename P>
  static __device__ void load8(P p, int64_t, const float (&)[8],
                               float (&x)[8]) {
    const float s = ld(p);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      x[e] = s;
  }
};

// An input whose index the functor computes (a numpy broadcast, a pooled
// gradient's i / (H * W)): the functor loads it; its slot of x is unset.
template <typename T> struct Gathered : Input {
  template <typename P> static __device__ float load(P, int64_t) { return 0.f; }
  template <typename P>
  static __device__ void load8(P, int64_t, const float (&)[8], float (&)[8]) {}
};

// 0, 1, ..., N - 1 as a type: the operands' slots.
template <int... K> struct Slots {};
template <int N, int... K> struct MakeSlots : MakeSlots<N - 1, N - 1, K...> {};
template <int... K> struct MakeSlots<0, K...> { using type = Slots<K...>; };

// One element per thread and iteration of a grid-stride loop over N
// elements (blocks of 256 threads).
template <int64_t N, typename... Xs, typename Fn, typename... Ps, int... K>
__device__ __forceinline__ void elementwiseSlots(Slots<K...>, Fn fn, Ps... ps) {
  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < N;
       i += (int64_t)gridDim.x * 256) {
    float x[] = {Xs::load(ps, i)...};
    fn(i, x);
    (Xs::store(ps, i, x[K]), ...);
  }
}
template <int64_t N, typename... Xs, typename Fn, typename... Ps>
__device__ __forceinline__ void elementwise(Fn fn, Ps... ps) {
  static_assert(sizeof...(Xs) == sizeof...(Ps), "one kind per operand");
  elementwiseSlots<N, Xs...>(typename MakeSlots<sizeof...(Xs)>::type{}, fn,
                             ps...);
}

// Eight elements per thread and iteration (16-byte loads and stores of the
// operands that allow them) of a grid-stride loop over Vectors vectors of
// eight elements; the functor runs once per element, unrolled.
template <int64_t Vectors, typename... Xs, typename Fn, typename... Ps,
          int... K>
__device__ __forceinline__ void elementwiseVec8Slots(Slots<K...>, Fn fn,
                                                     Ps... ps) {
  constexpr int N = sizeof...(Xs);
  const int64_t first = blockIdx.x * 256ll + threadIdx.x;
  // The hoisted per-channel vectors (unused slots are optimized away).
  float hoisted[N][8];
  (Xs::begin8(ps, first, hoisted[K]), ...);
  for (int64_t v = first; v < Vectors; v += (int64_t)gridDim.x * 256) {
    float x8[N][8];
    (Xs::load8(ps, v, hoisted[K], x8[K]), ...);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float x[N] = {x8[K][e]...};
      fn(v * 8 + e, x);
      ((x8[K][e] = x[K]), ...);
    }
    (Xs::store8(ps, v, x8[K]), ...);
  }
}
template <int64_t Vectors, typename... Xs, typename Fn, typename... Ps>
__device__ __forceinline__ void elementwiseVec8(Fn fn, Ps... ps) {
  static_assert(sizeof...(Xs) == sizeof...(Ps), "one kind per operand");
  elementwiseVec8Slots<Vectors, Xs...>(
      typename MakeSlots<sizeof...(Xs)>::type{}, fn, ps...);
}
} // namespace ew
// cnnc-prelude-end
} // namespace

#endif // CNNC_KERNELS_ELEMENTWISE_CUH
