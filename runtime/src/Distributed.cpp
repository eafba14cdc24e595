//===- Distributed.cpp - data-parallel launch: ranks, rendezvous ----------===//
#include "cnnrt/Distributed.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char **environ;

namespace cnnrt {

std::string LaunchInfo::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(worldSize) +
         " (local rank " + std::to_string(localRank) + ", " + source + ")";
}

bool parseDistInit(const std::string &url, std::string &path,
                   std::string &err) {
  const std::string scheme = "file://";
  if (url.compare(0, scheme.size(), scheme) != 0 ||
      url.size() <= scheme.size() || url[scheme.size()] != '/') {
    err = "--dist-init '" + url +
          "': expected file:///absolute/path (a file on a filesystem every "
          "rank sees; rank 0 writes the NCCL id there)";
    return false;
  }
  path = url.substr(scheme.size());
  return true;
}

namespace {
bool parseInt(const char *s, int min, int &out) {
  if (!s || !*s)
    return false;
  char *end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (*end || errno || v < min || v > 1 << 20)
    return false;
  out = static_cast<int>(v);
  return true;
}

/// One launcher's variables: rank, size, local rank (the last optional).
struct Vars {
  const char *source, *rank, *size, *local;
};
const Vars kLaunchers[] = {
    {"cnnc", "CNNC_RANK", "CNNC_WORLD_SIZE", "CNNC_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};
} // namespace

bool resolveLaunch(const EnvFn &env, const std::string &distInitFlag,
                   LaunchInfo &out, std::string &err) {
  out = LaunchInfo();
  std::string distInit = distInitFlag;
  if (distInit.empty())
    if (const char *e = env("CNNC_DIST_INIT"))
      distInit = e;
  for (const Vars &v : kLaunchers) {
    const char *rank = env(v.rank), *size = env(v.size);
    if (!rank && !size)
      continue;
    if (!rank || !size) {
      err = std::string(v.source) + " launch: " + (rank ? v.size : v.rank) +
            " is not set (" + (rank ? v.rank : v.size) + " is)";
      return false;
    }
    if (!parseInt(size, 1, out.worldSize)) {
      err = std::string(v.size) + "='" + size + "' is not a world size >= 1";
      return false;
    }
    if (!parseInt(rank, 0, out.rank) || out.rank >= out.worldSize) {
      err = std::string(v.rank) + "='" + rank + "' is not a rank in [0, " +
            std::to_string(out.worldSize) + ")";
      return false;
    }
    const char *local = env(v.local);
    if (local) {
      if (!parseInt(local, 0, out.localRank)) {
        err = std::string(v.local) + "='" + local +
              "' is not a local rank >= 0";
        return false;
      }
    } else {
      out.localRank = out.rank; // one host
    }
    out.source = v.source;
    break;
  }
  if (out.source == "torchrun") {
    if (const char *a = env("MASTER_ADDR"))
      out.masterAddr = a;
    if (const char *p = env("MASTER_PORT"))
      parseInt(p, 1, out.masterPort);
  }
  if (!distInit.empty()) {
    if (!parseDistInit(distInit, out.idFile, err))
      return false;
    return true;
  }
  if (!out.distributed())
    return true;
  // No --dist-init: one host only, a file in $TMPDIR keyed by the job.
  std::string key;
  if (out.source == "torchrun") {
    const char *run = env("TORCHELASTIC_RUN_ID");
    key = "torchrun-" + out.masterAddr + "-" +
          std::to_string(out.masterPort) + (run ? std::string("-") + run : "");
  } else if (out.source == "slurm") {
    const char *job = env("SLURM_JOB_ID");
    const char *step = env("SLURM_STEP_ID");
    if (job)
      key = std::string("slurm-") + job + "-" + (step ? step : "0");
  } else if (out.source == "mpirun") {
    const char *job = env("OMPI_MCA_ess_base_jobid");
    if (job)
      key = std::string("mpirun-") + job;
  }
  if (key.empty()) {
    err = out.describe() +
          ": no way to share the NCCL id between the ranks; pass --dist-init "
          "file:///path/on/a/shared/filesystem";
    return false;
  }
  for (char &c : key)
    if (c == '/' || c == ' ')
      c = '_';
  const char *tmp = env("TMPDIR");
  out.idFile = std::string(tmp && *tmp ? tmp : "/tmp") + "/cnnc-nccl-id-" + key;
  return true;
}

bool exchangeId(const LaunchInfo &li, const std::string &path,
                std::vector<char> &id, size_t idBytes, double timeoutSeconds,
                std::string &err) {
  if (li.rank == 0) {
    if (id.size() != idBytes) {
      err = "rank 0: the NCCL id has " + std::to_string(id.size()) +
            " bytes, expected " + std::to_string(idBytes);
      return false;
    }
    std::string tmp = path + ".tmp." + std::to_string(getpid());
    FILE *f = std::fopen(tmp.c_str(), "wb");
    if (!f || std::fwrite(id.data(), 1, id.size(), f) != id.size() ||
        std::fclose(f) != 0) {
      err = "rank 0: cannot write the NCCL id to '" + tmp +
            "': " + std::strerror(errno);
      if (f)
        std::remove(tmp.c_str());
      return false;
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      err = "rank 0: cannot rename '" + tmp + "' to '" + path +
            "': " + std::strerror(errno);
      std::remove(tmp.c_str());
      return false;
    }
    return true;
  }
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 &&
        static_cast<size_t>(st.st_size) == idBytes) {
      std::ifstream in(path, std::ios::binary);
      id.assign(idBytes, 0);
      if (in.read(id.data(), idBytes))
        return true;
    }
    double waited = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    if (waited >= timeoutSeconds) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%g", timeoutSeconds);
      err = "rank " + std::to_string(li.rank) + ": no NCCL id from rank 0 in '" +
            path + "' after " + buf +
            " s (rank 0 did not start, or the path is not shared)";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<std::pair<std::string, std::string>>
childEnvironment(int rank, int worldSize, const std::string &idFile) {
  return {{"CNNC_RANK", std::to_string(rank)},
          {"CNNC_WORLD_SIZE", std::to_string(worldSize)},
          {"CNNC_LOCAL_RANK", std::to_string(rank)},
          {"CNNC_DIST_INIT", "file://" + idFile}};
}

bool shardOfBatch(int64_t global, int rank, int worldSize, int64_t &begin,
                  int64_t &end) {
  if (worldSize < 1 || rank < 0 || rank >= worldSize || global % worldSize)
    return false;
  int64_t n = global / worldSize;
  begin = rank * n;
  end = begin + n;
  return true;
}

int runLocalRanks(const std::vector<std::string> &argv, int worldSize,
                  const std::string &idFile, double graceSeconds,
                  std::string &err) {
  if (argv.empty() || worldSize < 1) {
    err = "nothing to launch";
    return 1;
  }
  // Every child's argv and environment are built before the first fork (no
  // allocation between fork and exec).
  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::vector<std::string>> envStrings(worldSize);
  std::vector<std::vector<char *>> envs(worldSize);
  for (int r = 0; r < worldSize; ++r) {
    auto ours = childEnvironment(r, worldSize, idFile);
    for (char **e = environ; e && *e; ++e) {
      std::string kv = *e;
      bool replaced = false;
      for (auto &[k, v] : ours)
        replaced |= kv.compare(0, k.size() + 1, k + "=") == 0;
      if (!replaced)
        envStrings[r].push_back(kv);
    }
    for (auto &[k, v] : ours)
      envStrings[r].push_back(k + "=" + v);
    for (std::string &kv : envStrings[r])
      envs[r].push_back(const_cast<char *>(kv.c_str()));
    envs[r].push_back(nullptr);
  }
  std::fflush(nullptr);
  std::vector<pid_t> pids(worldSize, -1);
  auto stopAll = [&]() {
    for (pid_t p : pids)
      if (p > 0)
        kill(p, SIGTERM);
  };
  for (int r = 0; r < worldSize; ++r) {
    pid_t p = fork();
    if (p == 0) {
      execve(args[0], args.data(), envs[r].data());
      // Only async-signal-safe calls here.
      const char msg[] = "cnnrt: error: cannot start a rank (execve)\n";
      ssize_t ignored = write(2, msg, sizeof(msg) - 1);
      (void)ignored;
      _exit(127);
    }
    if (p < 0) {
      err = std::string("cannot start rank ") + std::to_string(r) +
            ": fork: " + std::strerror(errno);
      stopAll();
      for (pid_t q : pids)
        if (q > 0)
          waitpid(q, nullptr, 0);
      return 1;
    }
    pids[r] = p;
  }
  // Wait for every rank; the first failure stops the others (they would
  // otherwise wait for the dead rank until CNNC_DIST_TIMEOUT).
  int result = 0, left = worldSize;
  auto deadline = std::chrono::steady_clock::time_point::max();
  bool killed = false;
  while (left > 0) {
    int status = 0;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p == 0) {
      if (std::chrono::steady_clock::now() > deadline && !killed) {
        for (pid_t q : pids)
          if (q > 0)
            kill(q, SIGKILL);
        killed = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (p < 0) {
      if (errno == EINTR)
        continue;
      break; // no children left
    }
    int r = 0;
    while (r < worldSize && pids[r] != p)
      ++r;
    if (r == worldSize)
      continue;
    pids[r] = -1;
    --left;
    int code = WIFEXITED(status)     ? WEXITSTATUS(status)
               : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                     : 1;
    if (code != 0 && result == 0) {
      result = code;
      err = "rank " + std::to_string(r) + " of " + std::to_string(worldSize) +
            (WIFSIGNALED(status)
                 ? " was killed by signal " + std::to_string(WTERMSIG(status))
                 : " exited with code " + std::to_string(code)) +
            "; the other ranks were stopped";
      stopAll();
      deadline = std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(
                     static_cast<int64_t>(graceSeconds * 1000));
    }
  }
  return result;
}

double distTimeoutSeconds(const EnvFn &env) {
  if (const char *e = env("CNNC_DIST_TIMEOUT")) {
    char *end = nullptr;
    double v = std::strtod(e, &end);
    if (end != e && !*end && v > 0)
      return v;
  }
  return 300;
}

int ncclMaxCTAs(const EnvFn &env) {
  if (env("NCCL_MAX_CTAS") || env("NCCL_MAX_NCHANNELS"))
    return 0;
  if (const char *e = env("CNNC_NCCL_MAX_CTAS")) {
    char *end = nullptr;
    long v = std::strtol(e, &end, 10);
    if (end != e && !*end && v >= 0 && v <= 64)
      return static_cast<int>(v);
  }
  return 8;
}

} // namespace cnnrt
