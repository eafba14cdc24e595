//===- BufferPlan.h - arena plan of a train step ----------------*- C++ -*-===//
//
// The arena plan of @train_step (and @forward, the evaluation step) as the
// CUDA emitter uses it: every tensor value's byte range in one device arena,
// persistent tensors (parameters, BN statistics, optimizer state, inputs,
// loss) with their names and runtime roles, then temporaries. The plan is
// cnn-memory-plan's, read back from the IR (MemoryPlanReader.cpp); the
// target plans nothing itself.
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
  /// cnn.public_shape of a parameter (or its optimizer state) stored in the
  /// convolution's format K, R, S, C' (cnn-param-format); empty otherwise.
  llvm::SmallVector<int64_t, 4> publicShape;
};

struct BufferPlan {
  std::vector<PlannedBuffer> buffers;
  llvm::DenseMap<mlir::Value, int> bufferOf;
  /// Results of @train_step that must be copied into their persistent
  /// buffer at the end of the step (result index -> destination buffer).
  std::vector<std::pair<unsigned, int>> copiesAtEnd;
  size_t persistentBytes = 0, trainTempBytes = 0, evalTempBytes = 0;
  size_t arenaBytes = 0, sumTempBytes = 0;
  /// The workspace region in the arena, where temporaries start, the lower
  /// bounds of the temporary peaks (max over time of live bytes).
  size_t workspaceOffset = 0, workspaceBytes = 0, tempOffset = 0;
  size_t trainLowerBound = 0, evalLowerBound = 0;
  /// --workspace-mb gave the workspace (cnn.workspace_is_cap).
  bool workspaceIsCap = false;
  unsigned numInPlace = 0;
  std::string strategy;

  size_t offsetOf(mlir::Value v) const {
    return buffers[bufferOf.lookup(v)].offset;
  }
  void print(llvm::raw_ostream &os) const;
};

size_t bytesOf(mlir::RankedTensorType t);

/// The persistent tensors of `trainStep` (arguments by role and name, the
/// loss) and, if non-null, `forward` (its logits), at provisional offsets:
/// names and roles for the plan reader. Fails with a diagnostic on an
/// argument whose role cannot be determined.
mlir::FailureOr<BufferPlan> persistentBuffers(mlir::func::FuncOp trainStep,
                                              mlir::func::FuncOp forward);

/// The plan recorded by cnn-memory-plan (checked: every value placed, no two
/// live temporaries overlap); an error if the module carries none.
mlir::FailureOr<BufferPlan> getBufferPlan(mlir::func::FuncOp trainStep,
                                          mlir::func::FuncOp forward);

} // namespace cnnc

#endif
