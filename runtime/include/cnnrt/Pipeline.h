//===- Pipeline.h - the training driver of pipeline stages ------*- C++ -*-===//
//
// An executable compiled with `cnnc --train --pipeline-stages S` holds S
// step units (one ModelSpec per stage, docs/pipeline-parallel.md). Its main
// calls trainPipelineMain, which, started by hand, runs S processes of
// itself, one per stage and GPU (runLocalRanks: a stage that fails stops
// the others and the run ends with one error), and, in such a process
// (CNNC_RANK = the stage), trains the stage's ModelSpec: every stage reads
// the same batch stream, sends its activations forward and its gradients
// backward through NCCL inside its captured step, and the last stage
// prints the loss (the mean of its micro-batches').
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_PIPELINE_H
#define CNNRT_PIPELINE_H

#include "cnnrt/cnnrt.h"

namespace cnnrt {

int trainPipelineMain(int argc, char **argv, const ModelSpec *const *stages,
                      int numStages);
/// Pipeline x data parallel (cnnc --pipeline-stages S --gpus D): S x D
/// processes, rank = replica x S + stage on GPU `rank`; each replica trains
/// on its shard of the batch stream, each stage's gradients are averaged
/// over its D replicas, replica 0's last stage reports.
int trainPipelineMain(int argc, char **argv, const ModelSpec *const *stages,
                      int numStages, int replicas);

} // namespace cnnrt

#endif
