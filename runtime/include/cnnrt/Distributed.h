//===- Distributed.h - data-parallel launch: ranks, rendezvous --*- C++ -*-===//
//
// Pure C++17 (no CUDA, no NCCL; part of cnnrt_host): which rank this process
// is, from the launcher's environment or the flags, and the exchange of the
// NCCL unique id through a file. See docs/data-parallel.md.
//
// Sources, in order of precedence:
//   --dist-init file:///path + CNNC_RANK/CNNC_WORLD_SIZE/CNNC_LOCAL_RANK
//                                        (set by `./train --gpus N` for the
//                                         processes it forks, or by hand)
//   torchrun:  RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
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
  /// "single", "cnnc" (CNNC_* / --gpus), "torchrun", "mpirun", "slurm".
  std::string source = "single";
  /// Where the NCCL unique id travels: a file path (from --dist-init
  /// file://..., or derived for a single-host launcher job).
  std::string idFile;
  std::string masterAddr; ///< torchrun
  int masterPort = -1;    ///< torchrun
  bool distributed() const { return worldSize > 1; }
  /// "rank 1 of 2 (local rank 1, torchrun)"
  std::string describe() const;
};

/// Reads an environment variable (std::getenv in production, a map in
/// tests); nullptr when unset.
using EnvFn = std::function<const char *(const char *)>;

/// "file:///shared/dir/id" -> "/shared/dir/id". Other schemes are an error
/// that says what is supported.
bool parseDistInit(const std::string &url, std::string &path,
                   std::string &err);

/// Resolves this process's rank from `distInit` (the --dist-init flag, may
/// be empty) and the environment. Errors: malformed or inconsistent
/// variables (rank outside [0, world size), world size < 1), a distributed
/// launch without any way to share the NCCL id (multi-node torchrun/mpirun/
/// srun needs --dist-init file:// on a shared filesystem; on one host a
/// file in $TMPDIR keyed by the job is used).
bool resolveLaunch(const EnvFn &env, const std::string &distInit,
                   LaunchInfo &out, std::string &err);

/// Rank 0 writes `id` to `path` atomically (temp file + rename); the other
/// ranks wait for the file (polling, at most `timeoutSeconds`) and read it.
/// Every rank gets the same bytes. Errors name the rank, the path and how
/// long it waited ("rank 1: no NCCL id from rank 0 in /x after 30 s").
bool exchangeId(const LaunchInfo &li, const std::string &path,
                std::vector<char> &id, size_t idBytes, double timeoutSeconds,
                std::string &err);

/// The environment of the child ranks `./train --gpus N` forks: CNNC_RANK,
/// CNNC_WORLD_SIZE, CNNC_LOCAL_RANK, CNNC_DIST_INIT.
std::vector<std::pair<std::string, std::string>>
childEnvironment(int rank, int worldSize, const std::string &idFile);

/// `./train --gpus N` on one host: runs `argv` (argv[0] a path) N times,
/// rank r with childEnvironment(r, N, idFile) on top of this process's
/// environment, and waits for all. The first rank that fails (non-zero exit
/// or a signal) stops the others (SIGTERM, SIGKILL after `graceSeconds`):
/// no rank is left waiting for a dead one. Returns 0 when every rank exits
/// 0, else the first failure's code (128 + signal for a signal), with `err`
/// naming the rank.
int runLocalRanks(const std::vector<std::string> &argv, int worldSize,
                  const std::string &idFile, double graceSeconds,
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
