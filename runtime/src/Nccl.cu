//===- Nccl.cu - NCCL all-reduce of data-parallel steps -------------------===//
//
// See cnnrt/Nccl.h. One communicator per process (one GPU per process), a
// non-blocking NCCL communicator so that a dead peer is a timeout and an
// abort instead of a hang, and a communication stream forked from and
// joined to the compute stream with events (legal inside stream capture:
// the collectives become nodes of the step's CUDA graph).
//
//===----------------------------------------------------------------------===//
#include "cnnrt/Nccl.h"
#include "Session.h"

#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

namespace cnnrt::dist {
namespace {

struct State {
  LaunchInfo li;
  bool ready = false;
  ncclComm_t comm = nullptr;
  /// Pipeline x data parallel (prepare): the S stages of this replica and
  /// the D replicas of this stage, split from `comm`; null otherwise (both
  /// roles are then `comm`'s).
  ncclComm_t stages_comm = nullptr, replicas_comm = nullptr;
  int stages = 0; ///< the stages_comm's size (0: no split)
  /// Asynchronous pipeline transfers (prepareTransfers): the two splits of
  /// the stages' communicator into neighbour pairs (stages 2k, 2k+1 and
  /// 2k+1, 2k+2), this stage's link to the stage before ([0]) and after
  /// ([1]) (one of the two splits each; null at the ends), a stream per
  /// link, and per transfer event the compute stream's fork and the link
  /// stream's completion. Interleaved stages (prepareTransfers' wrapLink:
  /// chunk c of the last stage sends to chunk c + 1 of the first) add a
  /// third link, [2], between the first and the last stage: its own split
  /// (`wrap_split`, the first stage rank 0) and stream.
  ncclComm_t pair_split[2] = {nullptr, nullptr};
  ncclComm_t wrap_split = nullptr;
  ncclComm_t link_comm[3] = {nullptr, nullptr, nullptr};
  cudaStream_t link_stream[3] = {nullptr, nullptr, nullptr};
  bool links_connected = false; ///< connectLinks ran
  /// DistHooks::stageAlone: the step's asynchronous transfers are off (a
  /// send does nothing, a receive zero-fills its buffer, a wait does
  /// nothing) while the stage's first step runs alone.
  bool transfers_off = false;
  /// Segmented capture (DistHooks::captureSegments): while `segmenting`,
  /// each asynchronous transfer call ends the compute stream's capture into
  /// the next of `segment_execs` (null: nothing captured in that stretch)
  /// and becomes the next of `segment_actions`, issued by replaySegments
  /// between the graphs' launches; capture then begins again.
  bool segmenting = false;
  std::vector<cudaGraphExec_t> segment_execs;
  std::vector<std::function<void(Context &)>> segment_actions;
  /// CNNC_PIPELINE_TRACE=1 (diagnosis of a pipeline that hangs): every
  /// transfer issued and waited for is printed on stderr, and a watchdog
  /// thread prints every 5 s the transfer events still pending (their
  /// description in `xfer_desc`), so that a hang names the transfers it is
  /// stuck on and whether the host or the GPU stopped.
  bool trace = false;
  std::vector<std::string> xfer_desc;
  std::vector<cudaEvent_t> xfer_fork, xfer_done;
  /// The communicator of the bucket being issued (begin .. end): its
  /// ncclGroupEnd is polled on it (a non-blocking group completes on the
  /// communicators it used).
  ncclComm_t bucket_comm = nullptr;
  cudaStream_t comm_stream = nullptr;
  std::vector<cudaEvent_t> ready_ev, done_ev;
  double timeout = 300;
  int64_t *host_sum_buf = nullptr; ///< sumHost's device buffer
  int host_sum_capacity = 0;
  /// CNNC_ALLREDUCE_TIMING=1: timing events around every join, recorded as
  /// event nodes of the captured graph (cudaEventRecordExternal), so the
  /// compute stream's wait for each bucket is measured in every replay.
  bool timing = false;
  std::vector<cudaEvent_t> stall_begin, stall_end;
  /// The same for pipeline transfers: timing events around the compute
  /// stream's wait at each transferWait (per transfer event), so that a
  /// stage's time idle for its neighbours is measured apart from its
  /// compute (docs/pipeline-parallel.md).
  std::vector<cudaEvent_t> xfer_wait_begin, xfer_wait_end;
};
State &S() {
  static State s;
  return s;
}

std::string who() { return S().li.describe(); }

/// A peer died, hangs or NCCL failed: the executable (trainMain,
/// nccl_check) prints the message and exits 1; a library caller (the C API:
/// a Python rank under torchrun) gets it as an Error after the
/// communicator is aborted.
[[noreturn]] void die(const std::string &what) {
  std::string message = "cnnrt: error: " + who() + ": " + what;
  // The aborted communicator's kernels, and the compute stream's waits on
  // them, may never finish: nothing may synchronize with the device now.
  markDeviceStuck();
  if (exitOnStuckDevice()) {
    // The executable: the message first, then the process ends; its exit
    // is what the peers see (their launcher stops them). Neither unwinding
    // (its cudaFrees wait for the device) nor ncclCommAbort (which can
    // wait for a collective stuck in flight) comes first: after f51af17
    // nccl_check's rank 0 printed nothing for 120 s when its peer left.
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(kExitError);
  }
  // A library caller (the C API under torchrun) gets the error; peers
  // blocked on this rank see the abort, not a hang.
  for (ncclComm_t *c : {&S().pair_split[0], &S().pair_split[1],
                        &S().stages_comm, &S().replicas_comm, &S().comm})
    if (*c) {
      ncclCommAbort(*c);
      *c = nullptr;
    }
  throw Error(ErrorKind::DataParallel, message);
}

/// How long the host waits before it polls a non-blocking communicator
/// again, `waited` seconds into the wait. A send or receive on a
/// non-blocking communicator returns ncclInProgress while NCCL finishes
/// enqueuing it, which takes microseconds; a step that issues its transfers
/// from the host (uncaptured, or in segmented capture) polls hundreds of
/// times a step. With a flat 1 ms sleep each poll cost a millisecond:
/// ResNet-50 f16 interleaved S=4 (~190 transfers a stage a step) ran at
/// 2,382 img/s on 4 H200s against plain GPipe's 12,349, whose captured
/// step replays without a host call, and its ~215 ms step is about what
/// 190 sleeps of 1 ms would make. So: yield for the first 2 ms, then 50 us
/// naps, then 1 ms ones after 100 ms (start-up's splits and a hung peer).
std::chrono::microseconds pollInterval(double waited) {
  if (waited < 2e-3)
    return std::chrono::microseconds(0);
  return std::chrono::microseconds(waited < 0.1 ? 50 : 1000);
}

/// Polls a non-blocking communicator until `r` (the result of the last
/// call) is no longer ncclInProgress, with the collective timeout.
bool settle(ncclComm_t comm, ncclResult_t r, double timeout,
            std::string &err, const char *what) {
  auto t0 = std::chrono::steady_clock::now();
  while (r == ncclInProgress) {
    double waited = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
    if (waited > timeout) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%g", timeout);
      err = std::string(what) + " did not complete in " + buf +
            " s (CNNC_DIST_TIMEOUT): a rank died, hangs or never started";
      ncclCommAbort(comm);
      return false;
    }
    auto nap = pollInterval(waited);
    if (nap.count() == 0)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(nap);
    ncclCommGetAsyncError(comm, &r);
  }
  if (r != ncclSuccess) {
    err = std::string(what) + ": " + ncclGetErrorString(r) + " (" +
          ncclGetLastError(comm) + ")";
    ncclCommAbort(comm);
    return false;
  }
  return true;
}

void checkNccl(ncclResult_t r, const char *what) {
  std::string err;
  if (!settle(S().comm, r, S().timeout, err, what)) {
    S().comm = nullptr; // aborted
    die(err);
  }
}

/// As checkNccl, for a call on `comm` (the world or one split from it).
void checkNcclOn(ncclComm_t comm, ncclResult_t r, const char *what) {
  if (comm == S().comm)
    return checkNccl(r, what);
  std::string err;
  if (!settle(comm, r, S().timeout, err, what)) {
    // Aborted: forget it.
    for (ncclComm_t *c : {&S().wrap_split, &S().pair_split[0],
                          &S().pair_split[1], &S().stages_comm,
                          &S().replicas_comm})
      if (*c == comm)
        *c = nullptr;
    for (ncclComm_t &c : S().link_comm)
      if (c == comm)
        c = nullptr;
    die(err);
  }
}

/// Send / recv and the stages' flag: the replica's stages, else the world.
ncclComm_t stagesComm() {
  return S().stages_comm ? S().stages_comm : S().comm;
}
/// Gradient buckets: the stage's replicas, else the world.
ncclComm_t replicasComm() {
  return S().replicas_comm ? S().replicas_comm : S().comm;
}

/// A communicator of the ranks of `parent` that pass the same `color`,
/// ranked by `key` (collective over `parent`; non-blocking, polled within
/// CNNC_DIST_TIMEOUT).
ncclComm_t splitComm(ncclComm_t parent, int color, int key, const char *what) {
  State &s = S();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t out = nullptr;
  ncclResult_t r = ncclCommSplit(parent, color, key, &out, &config);
  if (r != ncclSuccess && r != ncclInProgress)
    die(std::string(what) + ": " + ncclGetErrorString(r));
  // A non-blocking split stores the new communicator from NCCL's own
  // thread when the child's initialization has run (on 4 H200s `out`
  // was still null when the call returned): wait for it, watching the
  // parent for errors, then for the child to settle.
  auto t0 = std::chrono::steady_clock::now();
  while (!__atomic_load_n(&out, __ATOMIC_ACQUIRE)) {
    ncclResult_t pr = ncclSuccess;
    ncclCommGetAsyncError(parent, &pr);
    if (pr != ncclSuccess && pr != ncclInProgress)
      die(std::string(what) + ": " + ncclGetErrorString(pr) + " (" +
          ncclGetLastError(parent) + ")");
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count() > s.timeout)
      die(std::string(what) +
          ": no communicator within CNNC_DIST_TIMEOUT: a rank died, hangs "
          "or never started");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string err;
  if (!settle(out, ncclInProgress, s.timeout, err, what))
    die(err);
  return out;
}

/// Pipeline x data parallel: CNNC_PIPELINE_STAGES=S over a world of S x D
/// ranks (rank = replica x S + stage) splits the world in two ways
/// (collective over all ranks, in this order on each).
void splitForPipeline(const LaunchInfo &li) {
  State &s = S();
  const char *e = std::getenv("CNNC_PIPELINE_STAGES");
  int stages = e ? std::atoi(e) : 0;
  if (stages <= 0 || li.worldSize <= stages)
    return;
  if (li.worldSize % stages != 0)
    die("CNNC_PIPELINE_STAGES=" + std::to_string(stages) +
        " does not divide the world size " + std::to_string(li.worldSize));
  s.stages_comm = splitComm(s.comm, li.rank / stages, li.rank % stages,
                            "ncclCommSplit (the stages of a replica)");
  s.replicas_comm = splitComm(s.comm, li.rank % stages, li.rank / stages,
                              "ncclCommSplit (the replicas of a stage)");
  s.stages = stages;
}

} // namespace

const LaunchInfo &launch() { return S().li; }

namespace {
bool checkDevice(const LaunchInfo &li, std::string &err) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess)
    devices = 0;
  if (li.localRank < devices)
    return true;
  err = "needs GPU " + std::to_string(li.localRank) + " (its local rank) but " +
        std::to_string(devices) + " GPU(s) are visible";
  return false;
}
} // namespace

bool initComm(const LaunchInfo &li, double timeoutSeconds, std::string &err) {
  State &s = S();
  s.li = li;
  s.timeout = timeoutSeconds;
  if (!checkDevice(li, err))
    return false;
  ncclUniqueId id;
  std::vector<char> bytes;
  if (li.rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      err = std::string("ncclGetUniqueId: ") + ncclGetErrorString(r);
      return false;
    }
    bytes.assign(id.internal, id.internal + sizeof(id.internal));
  }
  if (li.tcpPort > 0) {
    // Rank 0 serves the id on its port until every rank has it.
    if (!exchangeIdTcp(li, li.tcpHost, li.tcpPort, bytes, sizeof(id.internal),
                       timeoutSeconds, err)) {
      // The ranks of a node give up at the same moment with the same
      // message: local rank 0 reports, and the launcher (./train --gpus,
      // torchrun) stops the others on its failure while they wait a second.
      if (li.localRank > 0)
        std::this_thread::sleep_for(std::chrono::seconds(1));
      return false;
    }
    std::copy(bytes.begin(), bytes.end(), id.internal);
  } else if (li.worldSize > 1 || !li.idFile.empty()) {
    if (li.idFile.empty()) {
      err = "no --dist-init file:///path or tcp://HOST:PORT to share the "
            "NCCL id";
      return false;
    }
    if (!exchangeId(li, li.idFile, bytes, sizeof(id.internal), timeoutSeconds,
                    err))
      return false;
    std::copy(bytes.begin(), bytes.end(), id.internal);
  }
  // Connections at init, not at a collective's first launch (NCCL >= 2.22
  // connects lazily by default): the step's collectives are captured into a
  // CUDA graph, and setting up connections inside a capture is not allowed.
  // A user's NCCL_RUNTIME_CONNECT wins.
  setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0; // a dead peer is a timeout, not a hang
  if (int ctas = ncclMaxCTAs([](const char *k) { return std::getenv(k); }))
    config.maxCTAs = ctas; // fewer SMs taken from the overlapped backward
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, li.worldSize, id, li.rank,
                                          &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    err = std::string("ncclCommInitRankConfig: ") + ncclGetErrorString(r);
    return false;
  }
  if (!settle(comm, r, timeoutSeconds, err, "NCCL communicator setup"))
    return false;
  s.comm = comm;
  return true;
}

namespace {
void sumHostHook(Context &ctx, int64_t *values, int n);
} // namespace

/// One eager all-reduce of each element type and reduction a step uses
/// (f16/f32; avg, sum, max, min), each at three sizes (NCCL picks its protocol
/// by size), before the step runs: CUDA loads NCCL's kernels lazily, on
/// their first launch, and that happened in the first training step (on 4
/// H200s the first uncaptured ResNet-50 step took ~130 ms instead of ~20,
/// bench/device-dp.sh part T). Now it is start-up, which is what it is.
static void warmUp(Context &ctx) {
  State &s = S();
  const size_t elems = size_t(1) << 20; // 4 MiB of f32
  void *buf = nullptr;
  ctx.check(cudaMalloc(&buf, elems * sizeof(float)),
            "data parallel: warm-up buffer");
  ctx.check(cudaMemsetAsync(buf, 0, elems * sizeof(float), s.comm_stream),
            "data parallel: warm-up buffer");
  for (ncclDataType_t t : {ncclFloat16, ncclFloat32})
    for (ncclRedOp_t op : {ncclAvg, ncclSum, ncclMax, ncclMin})
      for (size_t n : {size_t(256), size_t(32) << 10, elems})
        checkNccl(ncclAllReduce(buf, buf, n, t, op, s.comm, s.comm_stream),
                  "ncclAllReduce (warm-up)");
  waitStream(ctx, s.comm_stream, "data parallel: warm-up");
  cudaFree(buf);
}

namespace {
/// Two events appended to `fork` and `done`: a fork and a join (no timing),
/// or with `timing` the begin and end of a timed wait.
void appendEventPair(Context &ctx, std::vector<cudaEvent_t> &fork,
                     std::vector<cudaEvent_t> &done, const char *what,
                     bool timing = false) {
  const unsigned flags = timing ? cudaEventDefault : cudaEventDisableTiming;
  cudaEvent_t a, b;
  ctx.check(cudaEventCreateWithFlags(&a, flags), what);
  ctx.check(cudaEventCreateWithFlags(&b, flags), what);
  fork.push_back(a);
  done.push_back(b);
}
} // namespace

void prepare(Context &ctx, int numBuckets) {
  State &s = S();
  if (!s.ready) {
    std::string err;
    LaunchInfo li;
    auto env = [](const char *k) { return std::getenv(k); };
    if (!resolveLaunch(env, "", li, err))
      ctx.fail("data parallel", err);
    s.li = li;
    if (!checkDevice(li, err))
      ctx.fail("data parallel", li.describe() + ": " + err);
    int dev = 0;
    cudaGetDevice(&dev);
    if (li.worldSize > 1 && dev != li.localRank)
      ctx.fail("data parallel",
               li.describe() + ": the runtime runs on GPU " +
                   std::to_string(dev) + ", not GPU " +
                   std::to_string(li.localRank) +
                   " (multi-process runs of generated executables are not "
                   "wired into the training driver yet; see "
                   "docs/data-parallel.md)");
    if (!initComm(li, distTimeoutSeconds(env), err))
      die(err);
    ctx.check(cudaStreamCreateWithFlags(&s.comm_stream, cudaStreamNonBlocking),
              "data parallel: communication stream");
    s.ready = true;
    if (const char *t = std::getenv("CNNC_ALLREDUCE_TIMING"))
      s.timing = std::atoi(t) != 0;
    std::atexit(shutdown);
    // A handshake: one eager all-reduce over the ranks before any is
    // captured. It sets up NCCL's connections outside a graph capture (a
    // program whose first collective is captured, as nccl_check's is, hung
    // on two H200s with no message) and checks that every rank is there
    // (CNNC_DIST_TIMEOUT bounds the wait).
    int64_t ranks = 1;
    sumHostHook(ctx, &ranks, 1);
    if (ranks != li.worldSize)
      ctx.fail("data parallel",
               li.describe() + ": the handshake counted " +
                   std::to_string(ranks) + " ranks");
    warmUp(ctx);
    splitForPipeline(li);
  }
  while ((int)s.done_ev.size() < numBuckets) {
    appendEventPair(ctx, s.ready_ev, s.done_ev, "data parallel: events");
    if (s.timing)
      appendEventPair(ctx, s.stall_begin, s.stall_end,
                      "data parallel: timing events", /*timing=*/true);
  }
}

void begin(Context &ctx, int bucket) {
  State &s = S();
  if (!s.ready || bucket >= (int)s.done_ev.size())
    ctx.fail("data parallel", "all-reduce bucket " + std::to_string(bucket) +
                                  " before dist::prepare");
  ctx.check(cudaEventRecord(s.ready_ev[bucket], ctx.stream()),
            "data parallel: fork");
  ctx.check(cudaStreamWaitEvent(s.comm_stream, s.ready_ev[bucket], 0),
            "data parallel: fork");
  checkNccl(ncclGroupStart(), "ncclGroupStart");
}

namespace {
/// Queues one all-reduce of the bucket being issued on `comm`, which its
/// ncclGroupEnd then polls (dist::end).
void queueAllReduce(ncclComm_t comm, void *buf, size_t count, int dtype,
                    int op, const char *what, const char *loc) {
  ncclDataType_t t = dtype == (int)DType::F16 ? ncclFloat16 : ncclFloat32;
  ncclRedOp_t o = op == kAvg   ? ncclAvg
                  : op == kSum ? ncclSum
                  : op == kMax ? ncclMax
                               : ncclMin;
  S().bucket_comm = comm;
  ncclResult_t r = ncclAllReduce(buf, buf, count, t, o, comm, S().comm_stream);
  // Inside a group the call only queues (ncclSuccess or ncclInProgress).
  if (r != ncclSuccess && r != ncclInProgress)
    die(std::string(what) + " at " + loc + ": " + ncclGetErrorString(r));
}
} // namespace

void allReduce(Context &ctx, void *buf, size_t count, int dtype, int op,
               const char *loc) {
  (void)ctx;
  queueAllReduce(replicasComm(), buf, count, dtype, op, "ncclAllReduce", loc);
}

void allReduceAcrossStages(Context &ctx, void *buf, size_t count, int dtype,
                           int op, const char *loc) {
  (void)ctx;
  queueAllReduce(stagesComm(), buf, count, dtype, op,
                 "ncclAllReduce (across the stages)", loc);
}

void end(Context &ctx, int bucket) {
  State &s = S();
  ncclComm_t used = s.bucket_comm ? s.bucket_comm : s.comm;
  s.bucket_comm = nullptr;
  checkNcclOn(used, ncclGroupEnd(), "ncclGroupEnd");
  ctx.check(cudaEventRecord(s.done_ev[bucket], s.comm_stream),
            "data parallel: join");
}

namespace {
/// This process's stage and the stage count of its pipeline.
std::pair<int, int> stageAndCount() {
  State &s = S();
  const int stages = s.stages > 0 ? s.stages : s.li.worldSize;
  const int stage = s.stages > 0 ? s.li.rank % s.stages : s.li.rank;
  return {stage, stages};
}

void checkPeer(Context &ctx, int peer, const char *what) {
  State &s = S();
  if (!s.ready)
    ctx.fail("pipeline", std::string(what) + " before dist::prepare");
  const auto [stage, stages] = stageAndCount();
  if (peer < 0 || peer >= stages || peer == stage)
    die(std::string("pipeline transfer ") + what + ": stage " +
        std::to_string(peer) + " is not another stage of " +
        std::to_string(stages) +
        " (was the executable started with --gpus, not as a pipeline?)");
}
} // namespace

void send(Context &ctx, const void *buf, size_t bytes, int peer,
          const char *what) {
  checkPeer(ctx, peer, what);
  checkNcclOn(stagesComm(),
              ncclSend(buf, bytes, ncclUint8, peer, stagesComm(), ctx.stream()),
              "ncclSend");
}

void recv(Context &ctx, void *buf, size_t bytes, int peer, const char *what) {
  checkPeer(ctx, peer, what);
  checkNcclOn(stagesComm(),
              ncclRecv(buf, bytes, ncclUint8, peer, stagesComm(), ctx.stream()),
              "ncclRecv");
}


namespace {
std::mutex traceMutex; ///< xfer_desc and watchdogStop, with the watchdog
std::condition_variable watchdogWake; ///< stopTraceWatchdog's signal
bool watchdogStop = false;
std::thread watchdog;

/// CNNC_PIPELINE_TRACE's watchdog: a thread until stopTraceWatchdog (at
/// shutdown, before the events and this file's statics go away).
void startTraceWatchdog() {
  watchdog = std::thread([] {
    State &s = S();
    for (int tick = 1;; ++tick) {
      std::string pending;
      int count = 0;
      {
        std::unique_lock<std::mutex> lock(traceMutex);
        if (watchdogWake.wait_for(lock, std::chrono::seconds(5),
                                  [] { return watchdogStop; }))
          return;
        for (size_t e = 0; e < s.xfer_desc.size() && e < s.xfer_done.size();
             ++e)
          if (!s.xfer_desc[e].empty() &&
              cudaEventQuery(s.xfer_done[e]) == cudaErrorNotReady) {
            if (++count <= 16)
              pending += "\n    event " + std::to_string(e) + ": " +
                         s.xfer_desc[e];
          }
      }
      std::fprintf(stderr,
                   "pipeline trace: %s: after %d s, %d transfer(s) pending%s\n",
                   who().c_str(), 5 * tick, count, pending.c_str());
    }
  });
}

void stopTraceWatchdog() {
  if (!watchdog.joinable())
    return;
  {
    std::lock_guard<std::mutex> lock(traceMutex);
    watchdogStop = true;
  }
  watchdogWake.notify_all();
  watchdog.join();
}

/// Connects every link of this stage before the step is issued, one
/// communicator at a time in the same order on every stage (the pairs
/// 2k/2k+1, then 2k+1/2k+2, then the wrap link), each with a grouped 1-byte
/// send and receive to the peer. NCCL connects a peer on the host at the
/// first send or receive on it, and the receive's set-up waits for the
/// peer's first send the other way. A chunked step posts its receives
/// ahead, so that lazy connection formed a cycle on the host: stage 0 waited
/// in its first wrap receive for stage S-1's first send, which came after
/// S-1's own receives from S-2, ... from 0 (the interleaved steps on 4
/// H200s, session 34, hung before their first step). Pairs of one phase are
/// disjoint and the phases are ordered, so these exchanges cannot cycle.
void connectLinks(Context &ctx) {
  State &s = S();
  if (s.links_connected)
    return;
  void *buf = nullptr;
  ctx.check(cudaMalloc(&buf, 2), "pipeline: link connection buffer");
  ctx.check(cudaMemset(buf, 0, 2), "pipeline: link connection buffer");
  for (ncclComm_t comm : {s.pair_split[0], s.pair_split[1], s.wrap_split})
    for (int link = 0; link < 3; ++link) {
      if (!comm || s.link_comm[link] != comm)
        continue;
      int me = 0;
      checkNcclOn(comm, ncclCommUserRank(comm, &me),
                  "ncclCommUserRank (pipeline link)");
      const int peer = 1 - me;
      if (s.trace)
        std::fprintf(stderr,
                     "pipeline trace: %s: connecting link %d (rank %d of 2)\n",
                     who().c_str(), link, me);
      char *bytes = static_cast<char *>(buf);
      checkNccl(ncclGroupStart(), "ncclGroupStart (pipeline link set-up)");
      checkNcclOn(comm,
                  ncclSend(bytes, 1, ncclUint8, peer, comm,
                           s.link_stream[link]),
                  "ncclSend (pipeline link set-up)");
      checkNcclOn(comm,
                  ncclRecv(bytes + 1, 1, ncclUint8, peer, comm,
                           s.link_stream[link]),
                  "ncclRecv (pipeline link set-up)");
      checkNcclOn(comm, ncclGroupEnd(), "ncclGroupEnd (pipeline link set-up)");
      waitStream(ctx, s.link_stream[link], "pipeline: link set-up");
    }
  ctx.check(cudaFree(buf), "pipeline: link connection buffer");
  s.links_connected = true;
}
} // namespace

void prepareTransfers(Context &ctx, int numEvents, bool wrapLink) {
  State &s = S();
  if (!s.ready)
    ctx.fail("pipeline", "dist::prepareTransfers before dist::prepare");
  if (wrapLink && !s.wrap_split) {
    auto [stage, stages] = stageAndCount();
    // With two stages the first and the last are the neighbour pair itself:
    // the wrap communicator then carries the direction from stage 1 to
    // stage 0 and the pair's own the other (issueOnLink), so that no link
    // carries both directions of a phase (with receives posted ahead, a
    // link stream whose head is a receive on both ends deadlocks).
    if (stages < 2)
      ctx.fail("pipeline", "interleaved stages need 2 or more stages, got " +
                               std::to_string(stages));
    // Every stage takes a communicator (the middle ones one of their own,
    // never used): with NCCL_SPLIT_NOCOLOR the middle stages' next split of
    // the same parent failed with 'invalid argument' on 4 H200s (session
    // 33), even after the parent had settled.
    const bool end = stage == 0 || stage == stages - 1;
    s.wrap_split = splitComm(stagesComm(), end ? 0 : 1 + stage,
                             stage == 0 ? 0 : 1,
                             "ncclCommSplit (the first and the last stage)");
    if (end)
      s.link_comm[2] = s.wrap_split;
  }
  if (!s.pair_split[0]) {
    auto [stage, stages] = stageAndCount();
    // Both splits on every stage, in this order (collective over the
    // stages' communicator); ranked by stage: the lower stage of a pair is
    // rank 0.
    s.pair_split[0] = splitComm(stagesComm(), stage / 2, stage,
                                "ncclCommSplit (stages 2k and 2k+1)");
    s.pair_split[1] = splitComm(stagesComm(), (stage + 1) / 2, stage,
                                "ncclCommSplit (stages 2k+1 and 2k+2)");
    if (stage > 0)
      s.link_comm[0] = s.pair_split[(stage - 1) % 2];
    if (stage + 1 < stages)
      s.link_comm[1] = s.pair_split[stage % 2];
    for (cudaStream_t &st : s.link_stream)
      ctx.check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking),
                "pipeline: a link's stream");
  }
  if (const char *t = std::getenv("CNNC_PIPELINE_TRACE");
      t && std::atoi(t) != 0 && !s.trace) {
    s.trace = true;
    startTraceWatchdog();
  }
  connectLinks(ctx);
  while ((int)s.xfer_done.size() < numEvents) {
    appendEventPair(ctx, s.xfer_fork, s.xfer_done,
                    "pipeline: transfer events");
    if (s.timing)
      appendEventPair(ctx, s.xfer_wait_begin, s.xfer_wait_end,
                      "pipeline: timing events", /*timing=*/true);
  }
}

namespace {
/// The captured graph `g` instantiated (null when it has no node: two
/// transfers in a row), `g` destroyed.
cudaGraphExec_t instantiateSegment(Context &ctx, cudaGraph_t g) {
  size_t nodes = 0;
  ctx.check(cudaGraphGetNodes(g, nullptr, &nodes), "segmented capture");
  cudaGraphExec_t exec = nullptr;
  if (nodes > 0)
    ctx.check(cudaGraphInstantiate(&exec, g, 0), "segmented capture");
  cudaGraphDestroy(g);
  return exec;
}

/// Segmented capture: ends the stretch captured so far, keeps `action` to
/// follow it, and begins capturing the next.
void cutSegment(Context &ctx, std::function<void(Context &)> action) {
  State &s = S();
  cudaGraph_t g = nullptr;
  ctx.check(cudaStreamEndCapture(ctx.stream(), &g), "segmented capture");
  s.segment_execs.push_back(instantiateSegment(ctx, g));
  s.segment_actions.push_back(std::move(action));
  ctx.check(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeRelaxed),
            "segmented capture");
}

void dropSegments() {
  State &s = S();
  for (cudaGraphExec_t e : s.segment_execs)
    if (e)
      cudaGraphExecDestroy(e);
  s.segment_execs.clear();
  s.segment_actions.clear();
}
} // namespace

namespace {
/// Issues `transfer` (ncclSend or ncclRecv of `bytes` at `buf` with the
/// neighbour `peer`) on the stream of `link` (the compiler's choice, see
/// sendAsync) once the compute stream has reached this point; `event`
/// records its completion.
void issueOnLink(Context &ctx, void *buf, size_t bytes, int peer, int event,
                 int link, bool isSend, const char *what) {
  State &s = S();
  checkPeer(ctx, peer, what);
  const auto [stage, stages] = stageAndCount();
  if (event < 0 || event >= (int)s.xfer_done.size())
    ctx.fail("pipeline", std::string(what) + ": transfer event " +
                             std::to_string(event) +
                             " beyond dist::prepareTransfers' events");
  // The link must join this stage and `peer`: 0 the stage before, 1 the
  // stage after, 2 the first and the last stage (made by prepareTransfers'
  // wrapLink).
  const bool joins =
      link >= 0 && link <= 2 && s.link_comm[link] &&
      (link == 0   ? peer == stage - 1
       : link == 1 ? peer == stage + 1
                   : (stage == 0 && peer == stages - 1) ||
                         (stage == stages - 1 && peer == 0));
  if (!joins)
    die(std::string("pipeline transfer ") + what + ": link " +
        std::to_string(link) + " does not join stage " +
        std::to_string(stage) + " with stage " + std::to_string(peer));
  cudaStream_t ls = s.link_stream[link];
  ctx.check(cudaEventRecord(s.xfer_fork[event], ctx.stream()),
            "pipeline: transfer fork");
  ctx.check(cudaStreamWaitEvent(ls, s.xfer_fork[event], 0),
            "pipeline: transfer fork");
  // Within a pair the lower stage is rank 0; on the wrap link the first.
  const int peerRank = link == 2 ? (peer == 0 ? 0 : 1) : link == 0 ? 0 : 1;
  ncclComm_t comm = s.link_comm[link];
  std::string desc;
  if (s.trace) {
    desc = std::string(isSend ? "send to" : "receive from") + " stage " +
           std::to_string(peer) + " on link " + std::to_string(link) + ", " +
           std::to_string(bytes) + " bytes (" + what + ")";
    std::fprintf(stderr, "pipeline trace: %s: event %d: %s\n", who().c_str(),
                 event, desc.c_str());
  }
  checkNcclOn(comm,
              isSend ? ncclSend(buf, bytes, ncclUint8, peerRank, comm, ls)
                     : ncclRecv(buf, bytes, ncclUint8, peerRank, comm, ls),
              isSend ? "ncclSend (asynchronous)" : "ncclRecv (asynchronous)");
  ctx.check(cudaEventRecord(s.xfer_done[event], ls), "pipeline: transfer done");
  if (s.trace) {
    std::lock_guard<std::mutex> lock(traceMutex);
    if ((int)s.xfer_desc.size() <= event)
      s.xfer_desc.resize(event + 1);
    s.xfer_desc[event] = desc;
  }
}
} // namespace

void sendAsync(Context &ctx, const void *buf, size_t bytes, int peer,
               int event, int link, const char *what) {
  if (S().transfers_off)
    return;
  void *b = const_cast<void *>(buf);
  if (S().segmenting)
    return cutSegment(ctx, [=](Context &c) {
      issueOnLink(c, b, bytes, peer, event, link, true, what);
    });
  issueOnLink(ctx, b, bytes, peer, event, link, true, what);
}

void recvAsync(Context &ctx, void *buf, size_t bytes, int peer, int event,
               int link, const char *what) {
  // Zeros, not the arena's old bytes: a received i32 tensor (labels) is an
  // index, and zero is always a valid one.
  if (S().transfers_off) {
    ctx.check(cudaMemsetAsync(buf, 0, bytes, ctx.stream()),
              "pipeline: a receive of the stage's step alone");
    return;
  }
  if (S().segmenting)
    return cutSegment(ctx, [=](Context &c) {
      issueOnLink(c, buf, bytes, peer, event, link, false, what);
    });
  issueOnLink(ctx, buf, bytes, peer, event, link, false, what);
}

void recordTiming(Context &ctx, cudaEvent_t ev, cudaStream_t stream);

namespace {
/// The compute stream waits for `done`; with `begin` and `end` (timing
/// events, CNNC_ALLREDUCE_TIMING) the wait is timed in every replay.
void computeWaits(Context &ctx, cudaEvent_t done, const cudaEvent_t *begin,
                  const cudaEvent_t *end, const char *what) {
  if (begin)
    recordTiming(ctx, *begin, ctx.stream());
  ctx.check(cudaStreamWaitEvent(ctx.stream(), done, 0), what);
  if (end)
    recordTiming(ctx, *end, ctx.stream());
}
} // namespace

void transferWait(Context &ctx, int event) {
  State &s = S();
  if (event < 0 || event >= (int)s.xfer_done.size())
    ctx.fail("pipeline", "wait for transfer event " + std::to_string(event) +
                             " beyond dist::prepareTransfers' events");
  if (s.transfers_off)
    return;
  if (s.segmenting)
    return cutSegment(ctx, [event](Context &c) { transferWait(c, event); });
  const bool timed = s.timing && event < (int)s.xfer_wait_begin.size();
  if (s.trace)
    std::fprintf(stderr, "pipeline trace: %s: compute waits for event %d\n",
                 who().c_str(), event);
  computeWaits(ctx, s.xfer_done[event],
               timed ? &s.xfer_wait_begin[event] : nullptr,
               timed ? &s.xfer_wait_end[event] : nullptr,
               "pipeline: transfer wait");
}

void groupStart(Context &ctx) {
  if (!S().ready)
    ctx.fail("pipeline", "a transfer group before dist::prepare");
  checkNccl(ncclGroupStart(), "ncclGroupStart (pipeline transfers)");
}

void groupEnd(Context &ctx) {
  (void)ctx;
  // Non-blocking communicator: the group's calls are issued here, polled
  // on the stages' communicator.
  checkNcclOn(stagesComm(), ncclGroupEnd(), "ncclGroupEnd (pipeline transfers)");
}

/// Records a timing event on `stream`: inside a capture as an event node of
/// the graph (cudaEventRecordExternal, so that every replay records it);
/// outside one (the step's uncaptured first run) plainly, since the
/// external flag is refused there ("cannot be performed in the present
/// state", the first 2-GPU run of CNNC_ALLREDUCE_TIMING=1).
void recordTiming(Context &ctx, cudaEvent_t ev, cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ctx.check(cudaStreamIsCapturing(stream, &status), "data parallel: timing");
  if (status == cudaStreamCaptureStatusActive)
    ctx.check(cudaEventRecordWithFlags(ev, stream, cudaEventRecordExternal),
              "data parallel: timing");
  else
    ctx.check(cudaEventRecord(ev, stream), "data parallel: timing");
}

void join(Context &ctx, int bucket) {
  State &s = S();
  computeWaits(ctx, s.done_ev[bucket],
               s.timing ? &s.stall_begin[bucket] : nullptr,
               s.timing ? &s.stall_end[bucket] : nullptr,
               "data parallel: join");
}

void waitStream(Context &ctx, cudaStream_t stream, const char *what) {
  State &s = S();
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess)
      return;
    if (e != cudaErrorNotReady)
      ctx.check(e, what);
    for (ncclComm_t c : {s.comm, s.stages_comm, s.replicas_comm,
                         s.pair_split[0], s.pair_split[1]}) {
      if (!c)
        continue;
      ncclResult_t r = ncclSuccess;
      ncclCommGetAsyncError(c, &r);
      if (r != ncclSuccess && r != ncclInProgress)
        die(std::string(what) + ": NCCL error " + ncclGetErrorString(r) +
            " (a peer died?)");
    }
    double waited = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
    if (waited > s.timeout) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%g", s.timeout);
      die(std::string(what) + ": no progress in " + buf +
          " s (CNNC_DIST_TIMEOUT): a rank died or hangs");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

namespace {
void broadcastHook(Context &ctx, void *buf, size_t bytes) {
  State &s = S();
  if (!s.ready)
    ctx.fail("data parallel", "broadcast before dist::prepare");
  // Whatever the compute stream wrote (the loaded state) comes first.
  ctx.check(cudaStreamSynchronize(ctx.stream()), "data parallel: broadcast");
  checkNccl(ncclBroadcast(buf, buf, bytes, ncclUint8, 0, s.comm,
                          s.comm_stream),
            "ncclBroadcast");
  waitStream(ctx, s.comm_stream, "broadcast of the initial state");
}

void sumHostHook(Context &ctx, int64_t *values, int n) {
  State &s = S();
  if (!s.ready)
    ctx.fail("data parallel", "sum before dist::prepare");
  if (n <= 0)
    return;
  if (s.host_sum_capacity < n) {
    if (s.host_sum_buf)
      cudaFree(s.host_sum_buf);
    ctx.check(cudaMalloc(&s.host_sum_buf, n * sizeof(int64_t)),
              "data parallel: sum buffer");
    s.host_sum_capacity = n;
  }
  ctx.check(cudaMemcpyAsync(s.host_sum_buf, values, n * sizeof(int64_t),
                            cudaMemcpyHostToDevice, s.comm_stream),
            "data parallel: sum");
  checkNccl(ncclAllReduce(s.host_sum_buf, s.host_sum_buf, n, ncclInt64, ncclSum,
                          s.comm, s.comm_stream),
            "ncclAllReduce (host values)");
  waitStream(ctx, s.comm_stream, "sum over the ranks");
  ctx.check(cudaMemcpy(values, s.host_sum_buf, n * sizeof(int64_t),
                       cudaMemcpyDeviceToHost),
            "data parallel: sum");
}

/// The sum over the buckets of the compute stream's wait at their joins in
/// the last finished replay (the caller has synchronized the stream).
double stallHook(Context &ctx) {
  State &s = S();
  (void)ctx;
  if (!s.timing)
    return -1;
  double total = 0;
  auto add = [&](const std::vector<cudaEvent_t> &b,
                 const std::vector<cudaEvent_t> &e) {
    for (size_t k = 0; k < b.size(); ++k) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, b[k], e[k]) != cudaSuccess) {
        cudaGetLastError(); // not recorded (yet): no measurement
        return false;
      }
      total += ms;
    }
    return true;
  };
  if (!add(s.stall_begin, s.stall_end) ||
      !add(s.xfer_wait_begin, s.xfer_wait_end))
    return -1;
  return total;
}
/// Whether this process is a stage whose step has asynchronous transfers
/// (prepareTransfers made its links): the steps the stage-alone run and
/// segmented capture are for.
bool hasAsyncTransfers() {
  const State &s = S();
  return s.ready && s.pair_split[0];
}

/// DistHooks::stageAlone.
bool stageAloneHook(Context &ctx, bool alone) {
  State &s = S();
  (void)ctx;
  if (!hasAsyncTransfers())
    return false;
  s.transfers_off = alone;
  if (s.trace)
    std::fprintf(stderr, "pipeline trace: %s: transfers %s\n", who().c_str(),
                 alone ? "off (the step alone, for the libraries' set-up)"
                       : "on");
  return true;
}

/// DistHooks::captureSegments.
bool captureSegmentsHook(Context &ctx, const ModelSpec &spec) {
  State &s = S();
  if (!hasAsyncTransfers())
    return false;
  // Pipeline x data parallel: a gradient bucket's all-reduce runs on the
  // side stream across transfers (joined after them), and a capture cannot
  // end with a stream it forked not joined back.
  if (s.replicas_comm) {
    std::fprintf(stderr, "cnnrt: %s: segmented capture is not built for "
                         "pipeline x data parallel steps; every step runs "
                         "uncaptured\n",
                 who().c_str());
    return false;
  }
  dropSegments();
  ctx.check(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeRelaxed),
            "segmented capture");
  s.segmenting = true;
  try {
    captureStep(ctx, spec); // ends the capture if the step throws
  } catch (...) {
    s.segmenting = false;
    dropSegments();
    throw;
  }
  s.segmenting = false;
  cudaGraph_t last = nullptr;
  ctx.check(cudaStreamEndCapture(ctx.stream(), &last), "segmented capture");
  s.segment_execs.push_back(instantiateSegment(ctx, last));
  return true;
}

/// DistHooks::replaySegments.
void replaySegmentsHook(Context &ctx) {
  State &s = S();
  for (size_t i = 0; i < s.segment_execs.size(); ++i) {
    if (s.segment_execs[i])
      ctx.check(cudaGraphLaunch(s.segment_execs[i], ctx.stream()),
                "segmented capture: graph launch");
    if (i < s.segment_actions.size())
      s.segment_actions[i](ctx);
  }
}
} // namespace

const DistHooks kHooks = {launch,          broadcastHook,      sumHostHook,
                          waitStream,      stallHook,          stageAloneHook,
                          captureSegmentsHook, replaySegmentsHook};

void shutdown() {
  State &s = S();
  stopTraceWatchdog();
  // Before the communicators: a segment's graph may hold a captured
  // collective (nccl_check's graph outliving its communicator hung).
  dropSegments();
  // The split communicators first (their parent outlives them), the pairs
  // before the stages' communicator they were split from.
  s.link_comm[0] = s.link_comm[1] = s.link_comm[2] = nullptr;
  for (ncclComm_t *c : {&s.wrap_split, &s.pair_split[0], &s.pair_split[1],
                        &s.stages_comm, &s.replicas_comm}) {
    if (!*c)
      continue;
    std::string err;
    if (settle(*c, ncclCommFinalize(*c), s.timeout, err,
               "NCCL communicator shutdown"))
      ncclCommDestroy(*c);
    *c = nullptr;
  }
  if (!s.comm)
    return;
  // Finalize (flushes the communicator's work, waits for its peers) within
  // the collective time-out, then free; a finalize that does not complete
  // aborts instead, so that exit never hangs on a stuck peer or on a
  // captured collective's graph still alive (nccl_check's did: its graph
  // outlived the communicator until it was destroyed first).
  std::string err;
  if (settle(s.comm, ncclCommFinalize(s.comm), s.timeout, err,
             "NCCL communicator shutdown"))
    ncclCommDestroy(s.comm);
  else
    std::fprintf(stderr, "cnnrt: warning: %s: %s\n", who().c_str(),
                 err.c_str());
  s.comm = nullptr;
}

} // namespace cnnrt::dist
