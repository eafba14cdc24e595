//===- Prelude.cuh - the kernels every generated model.cu starts with -----===//
//
// cnnc prints a kernel prelude at the top of each model.cu it emits: for
// every family included below, in this order, the lines between its
// `// cnnc-prelude-begin` and `// cnnc-prelude-end` markers, one empty line
// between two families, and then the `}` of the anonymous namespace that
// Common.cuh's part opens. The prelude defines no mutable namespace-scope
// `__device__` variable (each translation unit of a split build would get
// its own): a kernel's scratch is a pointer argument (SplitCUDATest checks
// the printed prelude).
// lib/Target/CUDA/EmbedPrelude.cmake builds that text into cnnc at build
// time (editing a family rebuilds cnnc); the order of the includes below is
// the printed order, so keep it when adding a family.
//
// The lines outside the markers (guards, includes, the namespace) make each
// family compile on its own (ctest -R kernels.compile) and let the runtime's
// GPU tests include a family or this whole file (runtime/test/
// kernels_check.cu).
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_KERNELS_PRELUDE_CUH
#define CNNC_KERNELS_PRELUDE_CUH

// The printed order, which clang-format's include sorting would change.
// clang-format off
#include "Common.cuh"
#include "BatchNorm.cuh"
#include "Pooling.cuh"
#include "Resize.cuh"
#include "Transpose.cuh"
#include "Reductions.cuh"
#include "PoolingNHWC.cuh"
#include "Softmax.cuh"
#include "Loss.cuh"
#include "LossScale.cuh"
#include "Random.cuh"
#include "Elementwise.cuh"
#include "MultiTensor.cuh"
// clang-format on

#endif // CNNC_KERNELS_PRELUDE_CUH
