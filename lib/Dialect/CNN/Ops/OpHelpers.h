//===- OpHelpers.h - checks shared by the op families -----------*- C++ -*-===//
//
// Private to lib/Dialect/CNN: the shape checks the verifiers of several op
// families share (defined in CNNOps.cpp) and the small builders of the
// gradient rules. Each family file (Ops/<Family>.cpp) holds what the dialect
// knows about its ops: verifier / shape inference, gradient rule, and the
// kernel-call description of the CUDA lowering.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_LIB_DIALECT_CNN_OPS_OPHELPERS_H
#define CNNC_LIB_DIALECT_CNN_OPS_OPHELPERS_H

#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/IR/Builders.h"

#include <optional>
#include <string>

namespace cnnc::cnn::detail {
std::string str(mlir::Type t);
std::string str(llvm::ArrayRef<int64_t> a);

/// Emits an error at `loc` (if present) and fails.
mlir::LogicalResult fail(std::optional<mlir::Location> loc,
                         const llvm::Twine &msg);

mlir::RankedTensorType ranked(mlir::Value v);

mlir::LogicalResult checkArray(std::optional<mlir::Location> loc,
                               llvm::StringRef name, llvm::ArrayRef<int64_t> a,
                               size_t size, int64_t min);

/// One spatial output size of a window (conv or pooling) computed with
/// checked arithmetic: `in + pads` and the dilated extent may exceed int64
/// for attributes near INT64_MAX, which windowOutputSize would wrap.
mlir::FailureOr<int64_t>
checkedWindowSize(std::optional<mlir::Location> loc, int64_t in,
                  int64_t padBefore, int64_t padAfter, int64_t kernel,
                  int64_t stride, int64_t dilation, bool ceilMode);

/// The `layout` of an adaptor. Result type inference sees the attributes a
/// builder gave, before the defaults are filled in: unset means NCHW.
template <typename AdaptorT> Layout layoutOf(AdaptorT &a) {
  LayoutAttr attr = a.getLayoutAttr();
  return attr ? attr.getValue() : Layout::NCHW;
}

/// The channel dimension of an activation: the last one for NHWC.
int64_t chanDim(mlir::RankedTensorType t, Layout layout);

/// The shape of a 4-D tensor in NCHW (FCHW) order: NHWC (KRSC) is permuted.
llvm::SmallVector<int64_t, 4> nchwShape(mlir::RankedTensorType t, bool nhwc);
/// An N, C, H, W shape as a tensor type of the layout.
mlir::RankedTensorType typeInLayout(llvm::ArrayRef<int64_t> nchw,
                                    mlir::Type elt, bool nhwc);

/// Shared checks and shape computation for conv2d and its gradients. With
/// `nhwc`, `in` is N x H x W x C and `filter` K x R x S x C/groups (KRSC).
mlir::FailureOr<mlir::RankedTensorType>
inferConv(std::optional<mlir::Location> loc, mlir::RankedTensorType in,
          mlir::RankedTensorType filter, llvm::ArrayRef<int64_t> strides,
          llvm::ArrayRef<int64_t> padding, llvm::ArrayRef<int64_t> dilations,
          int64_t groups, bool nhwc = false);

mlir::FailureOr<mlir::RankedTensorType>
inferPool(std::optional<mlir::Location> loc, mlir::RankedTensorType in,
          llvm::ArrayRef<int64_t> kernel, llvm::ArrayRef<int64_t> strides,
          llvm::ArrayRef<int64_t> padding, bool ceil, Layout layout);

/// Checks `layout` and the conv shapes in it (conv2d and its gradients).
mlir::FailureOr<mlir::RankedTensorType>
inferConvIn(std::optional<mlir::Location> loc, mlir::RankedTensorType in,
            mlir::RankedTensorType filter, llvm::ArrayRef<int64_t> strides,
            llvm::ArrayRef<int64_t> padding, llvm::ArrayRef<int64_t> dilations,
            int64_t groups, Layout layout);

mlir::LogicalResult checkChannelVector(std::optional<mlir::Location> loc,
                                       llvm::StringRef name,
                                       mlir::RankedTensorType in,
                                       mlir::RankedTensorType vec,
                                       Layout layout = Layout::NCHW);

mlir::LogicalResult checkSameType(std::optional<mlir::Location> loc,
                                  llvm::StringRef a, mlir::Type ta,
                                  llvm::StringRef b, mlir::Type tb);

/// A reduction's declared result: the inferred type, or f32 of the same
/// shape where the input is f16 (statistics kept in f32 by cnn-precision).
bool compatibleReduce(mlir::TypeRange inferred, mlir::TypeRange declared);

//===----------------------------------------------------------------------===//
// Kernel-call descriptions
//===----------------------------------------------------------------------===//

/// The prelude's PoolParams (kernels/Pooling.cuh) of a window over `x`
/// giving `y`: N, C, H, W, P, Q, the window, strides and pads, whatever the
/// memory layout (Ops/Pooling.cpp).
KernelArg poolParams(mlir::RankedTensorType x, mlir::RankedTensorType y,
                     llvm::ArrayRef<int64_t> k, llvm::ArrayRef<int64_t> s,
                     llvm::ArrayRef<int64_t> p, bool countIncludePad,
                     bool nhwc);
/// Whether cnn-select-lowering chose the "vec8" form for `op` (eight
/// channels a thread, NHWC).
bool isVec8(mlir::Operation *op);

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

inline mlir::NamedAttribute boolAttr(mlir::OpBuilder &b, llvm::StringRef name,
                                     bool v) {
  return b.getNamedAttr(name, b.getBoolAttr(v));
}
inline mlir::NamedAttribute i64ArrayAttr(mlir::OpBuilder &b,
                                         llvm::StringRef name,
                                         llvm::ArrayRef<int64_t> v) {
  return b.getNamedAttr(name, b.getDenseI64ArrayAttr(v));
}
/// The full-shape type of `type` with `dy`'s element type.
inline mlir::RankedTensorType withElementOf(mlir::Type type, mlir::Value dy) {
  return mlir::RankedTensorType::get(
      llvm::cast<mlir::RankedTensorType>(type).getShape(),
      llvm::cast<mlir::RankedTensorType>(dy.getType()).getElementType());
}
} // namespace cnnc::cnn::detail

#endif
