//===- PipelinePlan.h - the pipeline-stage plan in the IR -------*- C++ -*-===//
//
// cnn-pipeline-partition records its decision in the IR (IREE style: the
// analysis' result travels as attributes, later passes and the printed plan
// read it):
//
//   op       cnn.stage = <i64>        the stage that runs the op (every op of
//                                     @train_step but the replicated ones:
//                                     constants and others reading nothing
//                                     but arguments, cloned where used)
//   module   cnn.pipeline = {stages, micro_batches, budget_bytes,
//                            cuts (forward op index after which each cut
//                            falls), stage_peak_bytes, stage_saved_bytes,
//                            stage_param_bytes, stage_time_us,
//                            cut_bytes (forward + backward per cut),
//                            cut_tensors[, chunks]}
//
// With `chunks` = V > 1 (interleaved stages) cnn.stage and the per-stage
// arrays count the S x V virtual stages; `stages` is S, the GPUs, and
// virtual stage v runs on stage v mod S.
//
// cnn-pipeline-split reads cnn.stage; printPipelinePlan prints the module
// attribute (cnnc --print-pipeline-plan, the pass's print-plan option).
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_TRANSFORMS_PIPELINEPLAN_H
#define CNNC_TRANSFORMS_PIPELINEPLAN_H

#include "cnnc/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/raw_ostream.h"

namespace cnnc {

constexpr const char *kStageAttr = "cnn.stage";
constexpr const char *kPipelineAttr = "cnn.pipeline";
/// On each function cnn-pipeline-split makes: its stage.
constexpr const char *kPipelineStageAttr = "cnn.pipeline_stage";

/// The plan's chunks per stage (interleaved stages; 1 without `chunks`).
inline int64_t pipelineChunks(mlir::DictionaryAttr plan) {
  auto a = plan ? plan.getAs<mlir::IntegerAttr>("chunks") : mlir::IntegerAttr();
  return a ? a.getInt() : 1;
}

/// The plan's virtual stages (stages x chunks): cnn.stage's range, the
/// functions of cnn-pipeline-split, the entries of the per-stage arrays.
inline int64_t pipelineVirtualStages(mlir::DictionaryAttr plan) {
  auto a = plan ? plan.getAs<mlir::IntegerAttr>("stages") : mlir::IntegerAttr();
  return a ? a.getInt() * pipelineChunks(plan) : 0;
}

/// The `peer` of a cnn.send or cnn.recv.
int64_t transferPeer(mlir::Operation *sendOrRecv);
/// The `tag` of a cnn.send or cnn.recv.
int64_t transferTag(mlir::Operation *sendOrRecv);

/// Prints the plan recorded in `module`'s cnn.pipeline (cuts, per-stage
/// peak memory and time estimate, crossing bytes, GPipe bubble fraction).
/// Fails (without printing) when the module has no plan.
mlir::LogicalResult printPipelinePlan(mlir::ModuleOp module,
                                      llvm::raw_ostream &os);

/// A copy of `module` (with @train_step built for `options.microBatches`
/// micro-steps of accumulation) split into stages: cnn-pipeline-partition
/// with `options` (getPartitionOptions makes them from the pipeline's) +
/// cnn-pipeline-split, the plan printed to `plan` when given. `module`
/// itself is left as it is (the caller binds the step's arguments by
/// @train_step's signature). With a `schedule` ("gpipe" or "1f1b"),
/// cnn-pipeline-schedule then makes one @stage<s>_step per stage
/// (reference::runScheduledPipelineStep).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
splitIntoPipelineStages(mlir::ModuleOp module,
                        const CNNPipelinePartitionOptions &options,
                        llvm::raw_ostream *plan,
                        llvm::StringRef schedule = "",
                        const CNNPipelineSplitOptions &splitOptions = {});

} // namespace cnnc

#endif
