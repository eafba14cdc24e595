//===- MemoryPlan.h - the arena plan recorded by cnn-memory-plan -*- C++
//-*-===//
//
// cnn-memory-plan records the arena plan of @train_step and @forward in the
// IR; the CUDA target reads it back. This header names the attributes and
// exposes the liveness analysis both sides share, so what `cnnc --dump-plan`
// prints is exactly what the pass planned.
//
//   function argument   cnn.offset = <i64>            byte offset in the arena
//   op                  cnn.offset = array<i64: ...>  one per result
//   op                  cnn.in_place = array<i64: ...> one per result: the
//                       operand whose buffer the result reuses, or -1
//   module              cnn.arena_bytes, cnn.persistent_bytes,
//                       cnn.workspace_offset, cnn.workspace_bytes,
//                       cnn.temp_offset (start of the temporaries),
//                       cnn.train_peak_bytes, cnn.train_lower_bound_bytes,
//                       cnn.eval_peak_bytes, cnn.eval_lower_bound_bytes
//                       (temporaries of each function: planned peak and the
//                       max over time of live bytes), cnn.plan_strategy
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_TRANSFORMS_MEMORYPLAN_H
#define CNNC_TRANSFORMS_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <vector>

namespace cnnc {

constexpr const char *kOffsetAttr = "cnn.offset";
constexpr const char *kInPlaceAttr = "cnn.in_place";
constexpr const char *kArenaBytesAttr = "cnn.arena_bytes";
constexpr const char *kPersistentBytesAttr = "cnn.persistent_bytes";
constexpr const char *kWorkspaceOffsetAttr = "cnn.workspace_offset";
constexpr const char *kWorkspaceBytesAttr = "cnn.workspace_bytes";
/// Set when the workspace was given (--workspace-mb): the runtime then picks
/// only algorithms within it. Without it the planned size is a default the
/// runtime may exceed, outside the arena, for a convolution plan at least
/// twice as fast (ModelSpec::workspaceIsCap).
constexpr const char *kWorkspaceIsCapAttr = "cnn.workspace_is_cap";
constexpr const char *kTempOffsetAttr = "cnn.temp_offset";
constexpr const char *kTrainPeakAttr = "cnn.train_peak_bytes";
constexpr const char *kTrainLowerBoundAttr = "cnn.train_lower_bound_bytes";
constexpr const char *kEvalPeakAttr = "cnn.eval_peak_bytes";
constexpr const char *kEvalLowerBoundAttr = "cnn.eval_lower_bound_bytes";
constexpr const char *kPlanStrategyAttr = "cnn.plan_strategy";

/// @forward when the CUDA target evaluates it (its evalStep, planned with
/// @train_step): one block returning the logits, N x C (classification) or
/// N x C x H x W / N x H x W x C (dense prediction; cnn-autodiff has dropped
/// any auxiliary heads from @forward, as torchvision's eval mode does);
/// null otherwise. The memory plan, the plan reader and the emitter ask this
/// one predicate, so they agree on whether a model has an eval step.
mlir::func::FuncOp evaluatedForward(mlir::func::FuncOp forward);

/// Byte size of a tensor type (at least one element).
uint64_t tensorBytes(mlir::Type type);

/// Ops whose result is a view of operand 0's buffer (reshape, flatten).
bool isBufferView(mlir::Operation *op);

/// Operands of `op` that its result may overwrite element by element (read
/// at index i by the thread that writes index i): all operands of relu, add,
/// mul, scale, clip, cast, dropout, relu_grad, clip_grad; operand 0 of
/// bias_add; the inputs of cnn.fused_elementwise with broadcast 0.
llvm::SmallVector<unsigned> inPlaceCandidates(mlir::Operation *op);

/// The temporaries of one function: one buffer per value that needs its own
/// memory; views and in-place results share their source's buffer and
/// extend its live range. Op indices count the ops of the body in order
/// (the schedule), the terminator included.
struct BufferLiveness {
  struct Buffer {
    mlir::Value root;  ///< the value that allocates the buffer
    int64_t first = 0; ///< index of the defining op
    int64_t last = 0;  ///< index of the last use of any alias
    uint64_t bytes = 0;
    unsigned numInPlace = 0; ///< results written in place into it
  };
  std::vector<Buffer> buffers;
  /// Every temporary value (roots, views, in-place results) -> buffer.
  llvm::DenseMap<mlir::Value, int> bufferOf;
  /// Per op with an in-place result: operand reused per result (-1: none).
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<int64_t>> inPlace;
  unsigned numInPlace = 0;
};

enum class InPlaceMode {
  None,           ///< every non-view result gets its own buffer
  Decide,         ///< reuse an operand's buffer where inPlaceCandidates allow
                  ///< it, the operand's last use is this op, sizes match
  FromAttributes, ///< as recorded in cnn.in_place (checked as for Decide)
};

/// Liveness of the temporaries of `func` (one block). `isPersistent` says
/// which values (besides block arguments, always persistent) have their own
/// place outside the temporaries; views of persistent values are persistent.
mlir::FailureOr<BufferLiveness>
analyzeBufferLiveness(mlir::func::FuncOp func,
                      llvm::function_ref<bool(mlir::Value)> isPersistent,
                      InPlaceMode mode);

} // namespace cnnc

#endif
