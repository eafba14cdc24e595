//===- BufferPlan.h - arena plan of a train step ----------------*- C++ -*-===//
//
// Assigns every tensor value of @train_step (and @forward, the evaluation
// step) a byte range in one device arena: persistent tensors (parameters,
// BN statistics, optimizer state, inputs, loss) first, then temporaries
// packed first-fit by live range. Values that only reinterpret their input
// (reshape, flatten) share its buffer; optimizer updates and BN running
// statistics are written in place into their persistent buffers.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_LIB_TARGET_CUDA_BUFFERPLAN_H
#define CNNC_LIB_TARGET_CUDA_BUFFERPLAN_H

#include "cnnrt/Role.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace cnnc {

/// The runtime's roles (the generated tensor table carries them).
using BufferRole = cnnrt::Role;

struct PlannedBuffer {
  std::string name;
  BufferRole role = BufferRole::Temp;
  mlir::RankedTensorType type;
  size_t offset = 0, bytes = 0;
  int firstUse = 0, lastUse = 0; // op indices (temps only)
  std::string defOp;             // defining op name (temps only)
  unsigned numInPlace = 0;       // results written in place into it (temps)
};

struct BufferPlan {
  std::vector<PlannedBuffer> buffers;
  llvm::DenseMap<mlir::Value, int> bufferOf;
  /// Results of @train_step that must be copied into their persistent
  /// buffer at the end of the step (result index -> destination buffer).
  std::vector<std::pair<unsigned, int>> copiesAtEnd;
  size_t persistentBytes = 0, trainTempBytes = 0, evalTempBytes = 0;
  size_t arenaBytes = 0, sumTempBytes = 0;
  /// Set when the plan comes from cnn-memory-plan (attributes in the IR):
  /// the workspace region in the arena, where temporaries start, the lower
  /// bounds of the temporary peaks, and today's first-fit arena to compare.
  bool fromPass = false;
  size_t workspaceOffset = 0, workspaceBytes = 0, tempOffset = 0;
  size_t trainLowerBound = 0, evalLowerBound = 0, firstFitArenaBytes = 0;
  unsigned numInPlace = 0;
  std::string strategy;

  size_t offsetOf(mlir::Value v) const {
    return buffers[bufferOf.lookup(v)].offset;
  }
  void print(llvm::raw_ostream &os) const;
};

size_t bytesOf(mlir::RankedTensorType t);

/// Plans `trainStep` and, if non-null, `forward`. Fails with a diagnostic
/// on an argument whose role cannot be determined.
mlir::FailureOr<BufferPlan> planBuffers(mlir::func::FuncOp trainStep,
                                        mlir::func::FuncOp forward);

/// The plan recorded by cnn-memory-plan when the module carries it (checked:
/// every value placed, no two live temporaries overlap), otherwise
/// planBuffers' first-fit plan.
mlir::FailureOr<BufferPlan> getBufferPlan(mlir::func::FuncOp trainStep,
                                          mlir::func::FuncOp forward);

} // namespace cnnc

#endif
