//===- CudnnFusionForm.h - convolutions cuDNN's runtime fusion takes ------===//
//
// cnn-conv-stats and cnn-dgrad-epilogue rewrite a convolution into a fused op
// only where the CUDA target's cuDNN graphs (runtime fusion engines) can run
// it; the runtime keeps a split form for shapes the engines still refuse.
// The form those engines take is written down here once.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_TRANSFORMS_CUDNNFUSIONFORM_H
#define CNNC_TRANSFORMS_CUDNNFUSIONFORM_H

#include "cnnc/Dialect/CNN/CNNOps.h"

namespace cnnc {

/// Whether a convolution between the activations `x` (its input side) and
/// `y` (its output side) with filter element type `filterElement` has the
/// form cuDNN's runtime fusion engines take: NHWC, one group, 4-D, one
/// element type for all three, f16 unless `anyPrecision` (the reference
/// interpreter runs the fused ops in f32 too), and channel counts that keep
/// every pixel's row aligned: `y`'s a multiple of 8 (16 bytes of f16), `x`'s
/// a multiple of `xAlign` (8; 4 for a conv + GenStats graph, whose RGB stem
/// is padded to 4 channels).
inline bool isCudnnFusionForm(cnn::Layout layout, int64_t groups,
                              mlir::RankedTensorType x,
                              mlir::RankedTensorType y,
                              mlir::Type filterElement, bool anyPrecision,
                              int64_t xAlign = 8) {
  mlir::Type et = x.getElementType();
  return layout == cnn::Layout::NHWC && groups == 1 && x.getRank() == 4 &&
         y.getRank() == 4 && (et.isF16() || anyPrecision) &&
         y.getElementType() == et && filterElement == et &&
         x.getDimSize(3) % xAlign == 0 && y.getDimSize(3) % 8 == 0;
}

} // namespace cnnc

#endif // CNNC_TRANSFORMS_CUDNNFUSIONFORM_H
