//===- Distributed.h - data-parallel launch: ranks, rendezvous --*- C++ -*-===//
//
// Pure C++17 (no CUDA, no NCCL; part of cnnrt_host): which rank this process
// is, from the launcher's environment or the flags, and the exchange of the
// NCCL unique id through a file or a TCP rendezvous with rank 0. See
// docs/data-parallel.md.
//
// Sources, in order of precedence:
//   --dist-init file:///path|tcp://HOST:PORT
//              + CNNC_RANK/CNNC_WORLD_SIZE/CNNC_LOCAL_RANK/
//                CNNC_LOCAL_WORLD_SIZE  (set by `./train --gpus N [--nnodes
//                                        M --node-rank R]` for the processes
//                                        it forks, or by hand)
//   torchrun:  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
//              MASTER_PORT
//   OpenMPI:   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//              OMPI_COMM_WORLD_LOCAL_RANK
//   Slurm:     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
//   otherwise: one rank.
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_DISTRIBUTED_H
#define CNNRT_DISTRIBUTED_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cnnrt {

struct LaunchInfo {
  int rank = 0, worldSize = 1, localRank = 0;
  /// Ranks on this node; -1 when the launcher does not say.
  int localWorldSize = -1;
  /// "single", "cnnc" (CNNC_* / --gpus), "torchrun", "mpirun", "slurm".
  std::string source = "single";
  /// Where the NCCL unique id travels: a file path (from --dist-init
  /// file://..., or derived for a single-host launcher job), or rank 0's
  /// TCP rendezvous (--dist-init tcp://HOST:PORT, or MASTER_ADDR and
  /// MASTER_PORT + 1 for torchrun across nodes). One of the two is set in a
  /// distributed launch.
  std::string idFile;
  std::string tcpHost;
  int tcpPort = -1;
  std::string masterAddr; ///< torchrun
  int masterPort = -1;    ///< torchrun
  bool distributed() const { return worldSize > 1; }
  /// "rank 1 of 2 (local rank 1, torchrun)"
  std::string describe() const;
};

/// Reads an environment variable (std::getenv in production, a map in
/// tests); nullptr when unset.
using EnvFn = std::function<const char *(const char *)>;

/// A parsed --dist-init URL.
struct DistInit {
  std::string path; ///< file:///path
  std::string host; ///< tcp://HOST:PORT (HOST may be [v6 address])
  int port = -1;
  bool tcp() const { return port > 0; }
  /// The URL again ("file:///x", "tcp://h:1").
  std::string url() const;
};
/// "file:///shared/dir/id" -> path "/shared/dir/id"; "tcp://node0:29500"
/// -> host "node0", port 29500. Other schemes, a missing host or a port
/// outside [1, 65535] are an error that says what is supported.
bool parseDistInit(const std::string &url, DistInit &out, std::string &err);

/// Resolves this process's rank from `distInit` (the --dist-init flag, may
/// be empty; else $CNNC_DIST_INIT) and the environment. Errors: malformed
/// or inconsistent variables (rank outside [0, world size), world size <
/// 1), a distributed launch without any way to share the NCCL id. Without
/// --dist-init: one host meets in a file in $TMPDIR keyed by the job;
/// torchrun across nodes (WORLD_SIZE != LOCAL_WORLD_SIZE) meets at
/// tcp://MASTER_ADDR:(MASTER_PORT+1) (torchrun's own store holds
/// MASTER_PORT); Slurm or OpenMPI across nodes is an error asking for
/// --dist-init tcp://<first node>:<port>.
bool resolveLaunch(const EnvFn &env, const std::string &distInit,
                   LaunchInfo &out, std::string &err);

/// Rank 0 writes `id` to `path` atomically (temp file + rename); the other
/// ranks wait for the file (polling, at most `timeoutSeconds`) and read it.
/// Every rank gets the same bytes. Errors name the rank, the path and how
/// long it waited ("rank 1: no NCCL id from rank 0 in /x after 30 s").
bool exchangeId(const LaunchInfo &li, const std::string &path,
                std::vector<char> &id, size_t idBytes, double timeoutSeconds,
                std::string &err);

/// TCP rendezvous (--dist-init tcp://HOST:PORT). Rank 0 listens on `port`
/// (all interfaces) and sends `id` to every other rank that connects, until
/// all worldSize - 1 have it; the others connect to host:port, retrying
/// until `timeoutSeconds` have passed. Protocol (network byte order): the
/// rank sends "CNNC", version, world size, rank (4 x 4 bytes); rank 0
/// answers "CNNC", version, status, its world size, a payload length and
/// the payload (the id when the status is 0). A world size that differs
/// from rank 0's, a rank out of range or twice, or a peer that does not
/// speak this protocol is an error on both sides; a connection that sends
/// something else to rank 0 is ignored with a warning on stderr. Errors
/// name the rank, the address and the timeout; rank 0's names the ranks
/// that never came ("... ranks 2-3 of 4 never connected ...").
bool exchangeIdTcp(const LaunchInfo &li, const std::string &host, int port,
                   std::vector<char> &id, size_t idBytes,
                   double timeoutSeconds, std::string &err);

/// The ranks one host's launcher starts: `./train --gpus N --nnodes M
/// --node-rank R`: N local ranks, world size M * N, global rank R * N +
/// local rank.
struct NodeLayout {
  int gpusPerNode = 1, nnodes = 1, nodeRank = 0;
  int worldSize() const { return gpusPerNode * nnodes; }
  int globalRank(int localRank) const {
    return nodeRank * gpusPerNode + localRank;
  }
};
/// Checks the launcher's flags: N >= 1, M >= 1, R in [0, M); M > 1 needs
/// --node-rank (`nodeRankGiven`) and a --dist-init (flag or
/// $CNNC_DIST_INIT, `distInit`); R > 0 needs M > 1. Errors name the flag.
bool checkNodeLayout(const NodeLayout &n, bool nodeRankGiven,
                     const std::string &distInit, std::string &err);

/// The environment of the child a launcher forks for `localRank`:
/// CNNC_RANK (global), CNNC_WORLD_SIZE, CNNC_LOCAL_RANK,
/// CNNC_LOCAL_WORLD_SIZE, CNNC_DIST_INIT (`distInitUrl`).
std::vector<std::pair<std::string, std::string>>
childEnvironment(const NodeLayout &n, int localRank,
                 const std::string &distInitUrl);

/// `./train --gpus N [--nnodes M --node-rank R]` on one host: runs `argv`
/// (argv[0] a path) N times, local rank l with childEnvironment(n, l, url)
/// on top of this process's environment, and waits for all. The first rank
/// that fails (non-zero exit or a signal) stops the others (SIGTERM,
/// SIGKILL after `graceSeconds`): no rank is left waiting for a dead one.
/// Returns 0 when every rank exits 0, else the first failure's code (128 +
/// signal for a signal), with `err` naming the rank.
int runLocalRanks(const std::vector<std::string> &argv, const NodeLayout &n,
                  const std::string &distInitUrl, double graceSeconds,
                  std::string &err);

/// Rank r's contiguous slice [begin, end) of a global batch of `global`
/// samples split over `worldSize` ranks (equal slices; false when `global`
/// is not a multiple of the world size).
bool shardOfBatch(int64_t global, int rank, int worldSize, int64_t &begin,
                  int64_t &end);

/// Collective timeout: $CNNC_DIST_TIMEOUT seconds (default 300).
double distTimeoutSeconds(const EnvFn &env);

/// The most thread blocks (CTAs) an NCCL collective may occupy:
/// $CNNC_NCCL_MAX_CTAS (0: NCCL's own choice), default 8; 0 as well when
/// the user set NCCL_MAX_CTAS or NCCL_MAX_NCHANNELS (NCCL's knobs win).
/// The gradient buckets are all-reduced while the backward pass computes;
/// NCCL's kernels hold their SMs while they wait for the slower rank, and
/// a few CTAs carry a ResNet's gradients over NVLink in well under a
/// millisecond.
int ncclMaxCTAs(const EnvFn &env);

} // namespace cnnrt

#endif // CNNRT_DISTRIBUTED_H
