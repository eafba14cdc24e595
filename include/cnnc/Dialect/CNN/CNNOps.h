//===- CNNOps.h - cnn dialect ----------------------------------*- C++ -*-===//
#ifndef CNNC_DIALECT_CNN_CNNOPS_H
#define CNNC_DIALECT_CNN_CNNOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "cnnc/Support/ShapeLimits.h"

#include "cnnc/Dialect/CNN/CNNOpsDialect.h.inc"

namespace cnnc::cnn {
/// CNN_BoundedResults: each result type of `op` passes the shape rule of
/// cnnc/Support/ShapeLimits.h with the dialect's ceiling.
mlir::LogicalResult verifyBoundedResults(mlir::Operation *op);

/// The shape rule for one type (ranked tensors; other types pass): the
/// element count, or a failure after a diagnostic at `loc` naming `what`.
mlir::FailureOr<int64_t> checkBoundedType(std::optional<mlir::Location> loc,
                                          mlir::MLIRContext *ctx,
                                          const llvm::Twine &what,
                                          mlir::Type type);

template <typename ConcreteType>
class CNNBoundedResults
    : public mlir::OpTrait::TraitBase<ConcreteType, CNNBoundedResults> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyBoundedResults(op);
  }
};

/// Runs an op's inferReturnTypes at its location as a verifier, so shape
/// errors are reported there once, with the op's own message.
template <typename ConcreteType>
class CNNVerifyShapes
    : public mlir::OpTrait::TraitBase<ConcreteType, CNNVerifyShapes> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    llvm::SmallVector<mlir::Type> types;
    if (mlir::failed(ConcreteType::inferReturnTypes(
            op->getContext(), op->getLoc(),
            typename ConcreteType::Adaptor(llvm::cast<ConcreteType>(op)),
            types)))
      return mlir::failure();
    for (auto [i, inferred, declared] :
         llvm::enumerate(types, op->getResultTypes()))
      if (inferred != declared &&
          !ConcreteType::isCompatibleReturnTypes(mlir::TypeRange(inferred),
                                                 mlir::TypeRange(declared)))
        return op->emitOpError("result #")
               << i << " has type " << declared << " but the operands give "
               << inferred;
    return mlir::success();
  }
};
} // namespace cnnc::cnn

#include "cnnc/Support/WindowSize.h"
#include "cnnc/Dialect/CNN/ScalarBuilder.h"
#include "cnnc/Dialect/CNN/CNNEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "cnnc/Dialect/CNN/CNNAttrs.h.inc"

namespace cnnc::cnn {
/// The channel dimension of an activation in `layout` (1 for rank < 4).
inline int64_t channelDim(mlir::RankedTensorType t, Layout layout) {
  return layout == Layout::NHWC && t.getRank() == 4 ? 3 : 1;
}
} // namespace cnnc::cnn

#include "cnnc/Dialect/CNN/Gradient.h"
#include "cnnc/Dialect/CNN/KernelCall.h"
namespace cnnc::reference {
class Evaluator; // lib/Reference: ReferenceEvalOpInterface's argument
} // namespace cnnc::reference
#include "cnnc/Dialect/CNN/CNNInterfaces.h.inc"

#define GET_OP_CLASSES
#include "cnnc/Dialect/CNN/CNNOps.h.inc"

namespace cnnc::cnn {
/// Whether `op` is layout-sensitive with `#cnn.layout<NHWC>`.
inline bool isNHWC(mlir::Operation *op) {
  auto sensitive = llvm::dyn_cast<LayoutSensitiveOpInterface>(op);
  return sensitive && sensitive.isNHWC();
}
using cnnc::windowOutputSize;
/// Result type of conv2d for `layout` NCHW (FCHW filter) or NHWC (KRSC
/// filter); emits an error at `loc` and fails on bad shapes.
mlir::FailureOr<mlir::RankedTensorType>
inferConv2DType(mlir::Location loc, mlir::RankedTensorType input,
                mlir::RankedTensorType filter, llvm::ArrayRef<int64_t> strides,
                llvm::ArrayRef<int64_t> padding,
                llvm::ArrayRef<int64_t> dilations, int64_t groups,
                Layout layout);
/// The shape rule of a convolution's gradients (conv2d_bwd_data/_filter
/// and their fused forms): conv2d(`in`, `filter`) in `layout` has the type
/// of `gradOutput`; otherwise one error on `op` naming `in` as `inName`.
mlir::LogicalResult verifyConvGradOutput(
    mlir::Operation *op, mlir::RankedTensorType in,
    mlir::RankedTensorType filter, mlir::RankedTensorType gradOutput,
    llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> padding,
    llvm::ArrayRef<int64_t> dilations, int64_t groups, Layout layout,
    llvm::StringRef inName);
/// The shape rule of a pooling's gradient (avg_pool2d_grad,
/// max_pool2d_index_grad): pooling `result` gives the type of `gradOutput`;
/// returns that pooled type, or fails with one error on `op`.
mlir::FailureOr<mlir::RankedTensorType> verifyPoolGradOutput(
    mlir::Operation *op, mlir::RankedTensorType result,
    mlir::RankedTensorType gradOutput, llvm::ArrayRef<int64_t> kernel,
    llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> padding,
    bool ceilMode, Layout layout);
/// Result type of max_pool2d / avg_pool2d of `input` in `layout`; emits an
/// error at `loc` and fails on bad shapes or attributes.
mlir::FailureOr<mlir::RankedTensorType>
inferPool2DType(mlir::Location loc, mlir::RankedTensorType input,
                llvm::ArrayRef<int64_t> kernel, llvm::ArrayRef<int64_t> strides,
                llvm::ArrayRef<int64_t> padding, bool ceilMode, Layout layout);
/// Builds a cnn.fused_elementwise over `inputs` (indexed per `broadcast`)
/// whose body `body` builds from the input scalars.
FusedElementwiseOp makeFusedElementwise(
    mlir::OpBuilder &b, mlir::Location loc, mlir::TypeRange results,
    mlir::ValueRange inputs, llvm::ArrayRef<int64_t> broadcast, Layout layout,
    llvm::function_ref<llvm::SmallVector<mlir::Value>(ScalarBuilder &,
                                                      mlir::ValueRange)>
        body);
/// The fused_elementwise broadcast kind of an operand of an elementwise op
/// with result type `result`: 0 (same shape) or 3 (numpy broadcast).
int64_t broadcastKind(mlir::Type input, mlir::Type result);
/// The one-op cnn.fused_elementwise computing `op` from its scalar body (the
/// caller replaces and erases `op`, or destroys the new op).
FusedElementwiseOp wrapElementwise(mlir::OpBuilder &b,
                                   ElementwiseOpInterface op);
/// Replaces every elementwise op under `root` by its one-op
/// fused_elementwise (cnn-lower-elementwise); returns how many.
int64_t lowerElementwise(mlir::Operation *root);
/// Argument attribute names marking a function argument's role.
constexpr const char *kParamAttr = "cnn.param";   // trainable parameter
constexpr const char *kBufferAttr = "cnn.buffer"; // BN running statistic
constexpr const char *kInputAttr = "cnn.input";   // data input
constexpr const char *kStateAttr = "cnn.state";   // optimizer state
constexpr const char *kLabelsAttr = "cnn.labels"; // integer class labels
constexpr const char *kLRAttr = "cnn.lr";         // learning rate scalar
constexpr const char *kStepAttr = "cnn.step";     // 1-based step scalar
constexpr const char *kLossAttr = "cnn.loss";     // loss result
constexpr const char *kGradAttr = "cnn.grad";     // gradient result
/// A parameter torch holds with requires_grad=False: read, never updated.
constexpr const char *kFrozenAttr = "cnn.frozen";
/// A parameter's own optimizer settings (its torch param group): a
/// dictionary of overrides of cnn-autodiff's options (see Passes.td).
constexpr const char *kParamOptionsAttr = "cnn.param_options";
/// The CUDA target's GPU (#cnn.target, on the module) and an op's launch
/// decisions (#cnn.launch), both set by cnn-prepare-for-emission.
constexpr const char *kTargetAttr = "cnn.target";
constexpr const char *kLaunchAttr = "cnn.launch";
/// Whether `op` needs #cnn.launch's `reduction` (reduce_sum, reduce_mean and
/// reduce_max other than the "channel_sum" and "spatial_sum" lowerings;
/// softmax).
bool needsReductionStrategy(mlir::Operation *op);
/// Whether `op` sums an NHWC tensor per channel through partial sums over
/// row tiles (#cnn.launch's `partial_blocks`): bias_grad, the BatchNorm
/// statistics, sums and gradients in NHWC, fused_conv2d_stats, and the
/// "channel_sum" reductions.
bool usesChannelPartialSums(mlir::Operation *op);
/// Whether `op` needs #cnn.launch's `partial_blocks`: the channel partial
/// sums above and softmax_cross_entropy (per-block partial sums of the loss).
bool usesPartialBlocks(mlir::Operation *op);
/// Whether `op` needs #cnn.launch's `reduce_block`: it reduces with one
/// block per result (the per-channel sums of an NCHW tensor, a block per
/// channel) or in one block (softmax_cross_entropy_grad's count of the rows
/// not ignored).
bool usesReduceBlock(mlir::Operation *op);
/// The threads of a block the CUDA target's kernels are compiled for
/// (#cnn.launch's `block`).
constexpr int64_t kKernelBlock = 256;
/// softmax_cross_entropy's most partial-sum blocks: the prelude's
/// xentScratch holds this many (kernels/Loss.cuh, CNNC_XENT_BLOCKS).
constexpr int64_t kXentMaxBlocks = 1024;
/// Whether the CUDA lowering of `op` (an op of a function's body) launches
/// a generated kernel, and so needs #cnn.launch: all but library calls
/// (conv2d and its gradients, matmul, all_reduce), views (reshape, flatten)
/// and the return.
bool launchesKernel(mlir::Operation *op);
/// Checks the kernel calls `op` describes under `launch` (verifyKernelCall,
/// KernelCall.h); the dialect's verifier of `cnn.launch` runs it.
mlir::LogicalResult
verifyKernelCalls(KernelCallOpInterface op, LaunchAttr launch,
                  llvm::function_ref<mlir::InFlightDiagnostic()> emitError);
} // namespace cnnc::cnn

#endif
