//===- PipelineEmit.h - CUDA text of the pipeline-stage ops -----*- C++ -*-===//
//
// What a pipeline stage's step (cnn-pipeline-stage) adds to the printer:
// cnn.micro_batch, cnn.send and cnn.recv. Kept out of EmitCUDA.cpp; the
// emitter hands over the op, its operands' and results' arena offsets and
// its location string. See docs/pipeline-parallel.md ("CUDA side").
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_TARGET_CUDA_PIPELINEEMIT_H
#define CNNC_TARGET_CUDA_PIPELINEEMIT_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <string>

namespace cnnc {

/// True for the ops printPipelineOp prints.
bool isPipelineOp(mlir::Operation *op);
/// True for the ops that talk to another stage (the step then creates the
/// stage communicator in prepareModel and links NCCL).
bool isPipelineTransfer(mlir::Operation *op);

/// Appends the host code of `op` (an isPipelineOp op) to `out`:
/// - cnn.micro_batch: a device copy of rows [index * B, (index + 1) * B) of
///   its operand (a contiguous byte range: the batch is the outer
///   dimension) into its result's buffer;
/// - cnn.send / cnn.recv: cnnrt::dist::send / recv of the buffer's bytes to
///   / from stage `peer` on the compute stream (Nccl.h): the transfer is
///   ordered with the step's kernels, so a sent buffer is not reused by the
///   arena plan before NCCL has read it, and a received one is not read
///   before it arrived.
/// `offsetOf` gives a value's arena offset, `loc` the op's location string
/// (already escaped for a C string).
mlir::LogicalResult
printPipelineOp(mlir::Operation *op,
                llvm::function_ref<int64_t(mlir::Value)> offsetOf,
                const std::string &loc, std::string &out);

} // namespace cnnc

#endif
