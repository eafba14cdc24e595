//===- Nccl.h - NCCL all-reduce of data-parallel steps ----------*- C++ -*-===//
//
// What the generated code of a data-parallel step (cnn.all_reduce, made by
// cnn-data-parallel) calls, and the communicator behind it. Only such
// executables reference these functions, so only they link libnccl
// (cnnc adds it to the nvcc line). See docs/data-parallel.md.
//
// Per bucket, in the captured step:
//   cnnrt::dist::begin(ctx, k);        // comm stream waits for the compute
//                                      // stream here (gradients are final)
//   cnnrt::dist::allReduce(ctx, p, n, dtype, op, loc);   // in place, each
//   cnnrt::dist::end(ctx, k);          // tensor of the bucket, one group
//   ... the rest of the backward pass runs on the compute stream ...
//   cnnrt::dist::join(ctx, k);         // before the first reader
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_NCCL_H
#define CNNRT_NCCL_H

#include "cnnrt/Distributed.h"
#include "cnnrt/cnnrt.h"

#include <cuda_runtime.h>
#include <string>

namespace cnnrt::dist {

enum Reduction : int { kAvg = 0, kSum = 1, kMax = 2, kMin = 3 };

/// Called by the generated prepareModel of a data-parallel step (before any
/// capture): resolves the launch from the environment (Distributed.h),
/// creates the NCCL communicator, the communication stream and one event
/// pair per bucket. World size 1 runs through NCCL too (a one-rank
/// communicator). Errors are thrown as cnnrt::Error (trainMain: exit 1
/// with the message).
void prepare(Context &ctx, int numBuckets);
/// The communicator alone (non-blocking, polled with `timeoutSeconds`; on
/// timeout or error the communicator is aborted): false with `err`.
/// Exposed for the device checks (runtime/test/nccl_check.cu).
bool initComm(const LaunchInfo &li, double timeoutSeconds, std::string &err);
/// The launch prepare() resolved (one rank before).
const LaunchInfo &launch();

void begin(Context &ctx, int bucket);
/// In place: `count` elements of `dtype` (DType) at `buf`, reduced with `op`.
void allReduce(Context &ctx, void *buf, size_t count, int dtype, int op,
               const char *loc);
void end(Context &ctx, int bucket);
void join(Context &ctx, int bucket);

/// Pipeline stages (docs/pipeline-parallel.md): `bytes` at `buf` to / from
/// stage `peer` (the communicator's rank), on the compute stream, so that
/// the transfer is ordered with the step's kernels (a sent buffer is not
/// reused before NCCL has read it). NCCL pairs a send with the peer's
/// recv by their order, which cnn-pipeline-schedule fixes on both sides.
void send(Context &ctx, const void *buf, size_t bytes, int peer,
          const char *what);
void recv(Context &ctx, void *buf, size_t bytes, int peer, const char *what);
/// Asynchronous transfers (cnn-pipeline-async-transfers): prepareTransfers
/// (the step's prepareModel) splits the stages into neighbour pairs (a
/// communicator and a stream per link) and creates `numEvents` events;
/// sendAsync / recvAsync issue the transfer with `peer` on the stream of
/// `link` (the op's `link`, the compiler's choice: 0 the link to the stage
/// before, 1 to the stage after, 2 between the first and the last stage)
/// once the compute stream has reached them, and transferWait(event) makes
/// the compute stream wait for it. `wrapLink` (interleaved stages,
/// --pipeline-chunks): link 2 exists; every stage of the pipeline must pass
/// the same.
void prepareTransfers(Context &ctx, int numEvents, bool wrapLink = false);
void sendAsync(Context &ctx, const void *buf, size_t bytes, int peer, int event,
               int link, const char *what);
void recvAsync(Context &ctx, void *buf, size_t bytes, int peer, int event,
               int link, const char *what);
void transferWait(Context &ctx, int event);
/// The transfers between them run as one NCCL group (cnn.transfers: 1F1B's
/// sends and receives in both directions, posted before any waits).
void groupStart(Context &ctx);
void groupEnd(Context &ctx);
/// As allReduce (inside a begin/end bucket), over the stages of this
/// process's pipeline replica: the loss-scale flag of pipeline stages.
void allReduceAcrossStages(Context &ctx, void *buf, size_t count, int dtype,
                           int op, const char *loc);
/// Pipeline x data parallel: with CNNC_PIPELINE_STAGES=S set (the pipeline
/// driver sets it) and a world of S x D ranks (rank = replica x S + stage),
/// prepare() splits the world into the S stages of each replica (send,
/// recv, allReduceAcrossStages; rank = stage) and the D replicas of each
/// stage (allReduce: the stage's gradients; rank = replica).

/// Waits for `stream` like cudaStreamSynchronize, but polls the
/// communicator: after $CNNC_DIST_TIMEOUT seconds without completion, or on
/// an NCCL error (a peer died), aborts the communicator and throws
/// Error(DataParallel) "cnnrt: error: rank R of N: <what>: ..." (trainMain:
/// exit 1).
void waitStream(Context &ctx, cudaStream_t stream, const char *what);

/// Aborts and frees the communicator (at exit).
void shutdown();

/// What the generated ModelSpec of a data-parallel step points at
/// (ModelSpec::dist): the training driver's collectives.
extern const DistHooks kHooks;

} // namespace cnnrt::dist

#endif // CNNRT_NCCL_H
