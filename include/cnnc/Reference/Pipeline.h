//===- Pipeline.h - pipeline stages on the reference interpreter -*- C++
//-*-===//
//
// Runs a step split by cnn-pipeline-split (@stage<s>_forward,
// @stage<s>_backward) on the CPU: cnn.send / cnn.recv move tensors through
// an in-memory mailbox, one FIFO per (sender, receiver, tag), and the
// stages run in one thread in the GPipe order: the forwards of micro-batch
// 0, 1, ..., M-1 (stages in order), then their backwards (micro-batch 0
// first, stages in reverse order). Every transfer is sent before it is
// received in that order, so a recv that finds its FIFO empty is a broken
// plan, reported as an error naming the tag (never a hang).
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_REFERENCE_PIPELINE_H
#define CNNC_REFERENCE_PIPELINE_H

#include "cnnc/Reference/Interpreter.h"

#include "mlir/IR/BuiltinOps.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

namespace cnnc::reference {

/// The tensors in flight between the stages of one step.
class PipelineMailbox {
public:
  void send(int64_t from, int64_t to, int64_t tag, Tensor t);
  /// False with `err` when nothing from `from` with `tag` is waiting.
  bool recv(int64_t from, int64_t to, int64_t tag, Tensor &out,
            std::string &err);
  /// Transfers sent but never received (0 after a complete step).
  size_t pending() const;

  /// Stages running on threads of their own (runScheduledPipelineStep):
  /// with `threads` > 0, a recv whose FIFO is empty waits for the send
  /// instead of failing, until every running stage waits or has finished:
  /// then nothing can arrive any more (a schedule that deadlocks, or a
  /// stage that failed) and the recv fails with an error naming the tag.
  void setThreads(int threads);
  /// A stage thread is done (finished or failed): waiters recheck.
  void threadDone();

private:
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::deque<Tensor>> fifo_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int threads_ = 0, waiting_ = 0;
  /// The FIFOs the waiting stages wait on.
  std::multiset<std::tuple<int64_t, int64_t, int64_t>> waitingFor_;
};

/// The mailbox cnn.send / cnn.recv use on the calling thread (null: not in
/// a pipeline; the ops are then an error) and the stage running now.
PipelineMailbox *currentMailbox();
void setCurrentMailbox(PipelineMailbox *m);

/// One pipelined training step: `microArgs[m]` are @train_step's arguments
/// for micro-batch m (as the unpartitioned step would take them: its own
/// images, labels and step number, the shared lr, parameters and state).
/// The persistent state (parameters, optimizer state, BN running
/// statistics) threads from one micro-batch to the next as the
/// unpartitioned step's results would. Returns @train_step's results after
/// the last micro-batch; `losses` (if given) gets each micro-batch's loss.
mlir::FailureOr<std::vector<Tensor>>
runPipelineStep(mlir::ModuleOp module,
                llvm::ArrayRef<std::vector<Tensor>> microArgs,
                std::vector<float> *losses = nullptr);

/// The same step run from cnn-pipeline-schedule's @stage<s>_step functions
/// (the M micro-batches unrolled per stage in the schedule's order, GPipe
/// or 1F1B), each stage on a thread of its own as each would run on its
/// own GPU: a recv waits for its send (PipelineMailbox::setThreads). Same
/// arguments and results as runPipelineStep; a failing stage fails the
/// step (the stages waiting on it fail with the tag they wait for).
mlir::FailureOr<std::vector<Tensor>>
runScheduledPipelineStep(mlir::ModuleOp module,
                         llvm::ArrayRef<std::vector<Tensor>> microArgs,
                         std::vector<float> *losses = nullptr);

} // namespace cnnc::reference

#endif
