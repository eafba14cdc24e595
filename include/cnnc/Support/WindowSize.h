//===- WindowSize.h - output size of a convolution/pooling window -*- C++
//-*-===//
//
// One rule shared by the dialect's shape inference and the reference
// kernels (which must not depend on MLIR): header-only.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_SUPPORT_WINDOWSIZE_H
#define CNNC_SUPPORT_WINDOWSIZE_H

#include <cstdint>

namespace cnnc {

/// Output size of one spatial dimension of a convolution or pooling window,
/// PyTorch's rule including ceil_mode (the last window must start inside the
/// input or the left padding). 0 when the window does not fit.
inline int64_t windowOutputSize(int64_t in, int64_t padBefore, int64_t padAfter,
                                int64_t kernel, int64_t stride,
                                int64_t dilation, bool ceilMode) {
  int64_t span = in + padBefore + padAfter - dilation * (kernel - 1) - 1;
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceilMode && (out - 1) * stride >= in + padBefore)
    --out;
  return out;
}

} // namespace cnnc

#endif // CNNC_SUPPORT_WINDOWSIZE_H
