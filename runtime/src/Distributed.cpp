//===- Distributed.cpp - data-parallel launch: ranks, rendezvous ----------===//
#include "cnnrt/Distributed.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
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

std::string DistInit::url() const {
  if (!tcp())
    return "file://" + path;
  bool v6 = host.find(':') != std::string::npos;
  return "tcp://" + (v6 ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

bool parseDistInit(const std::string &url, DistInit &out, std::string &err) {
  out = DistInit();
  const std::string file = "file://", tcp = "tcp://";
  auto bad = [&](const std::string &why) {
    err = "--dist-init '" + url + "': " + why +
          "; expected file:///absolute/path (a file on a filesystem every "
          "rank sees; rank 0 writes the NCCL id there) or tcp://HOST:PORT "
          "(rank 0's host, which listens on PORT)";
    return false;
  };
  if (url.compare(0, file.size(), file) == 0) {
    if (url.size() <= file.size() || url[file.size()] != '/')
      return bad("not an absolute path");
    out.path = url.substr(file.size());
    return true;
  }
  if (url.compare(0, tcp.size(), tcp) != 0)
    return bad("unknown scheme");
  std::string rest = url.substr(tcp.size());
  size_t colon;
  if (!rest.empty() && rest[0] == '[') { // [v6 address]:port
    size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() ||
        rest[close + 1] != ':')
      return bad("a [v6 address] must be followed by :PORT");
    out.host = rest.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = rest.rfind(':');
    if (colon == std::string::npos)
      return bad("no :PORT");
    out.host = rest.substr(0, colon);
    if (out.host.find(':') != std::string::npos)
      return bad("write a v6 address as [ADDRESS]");
  }
  if (out.host.empty())
    return bad("no host");
  std::string port = rest.substr(colon + 1);
  char *end = nullptr;
  errno = 0;
  long v = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || errno || v < 1 || v > 65535)
    return bad("the port '" + port + "' is not in [1, 65535]");
  out.port = static_cast<int>(v);
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

/// One launcher's variables: rank, size, local rank, local size (the last
/// two optional; nullptr: the launcher has none).
struct Vars {
  const char *source, *rank, *size, *local, *localSize;
};
const Vars kLaunchers[] = {
    {"cnnc", "CNNC_RANK", "CNNC_WORLD_SIZE", "CNNC_LOCAL_RANK",
     "CNNC_LOCAL_WORLD_SIZE"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
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
    if (const char *ls = v.localSize ? env(v.localSize) : nullptr) {
      if (!parseInt(ls, 1, out.localWorldSize) ||
          out.localWorldSize > out.worldSize) {
        err = std::string(v.localSize) + "='" + ls +
              "' is not a local world size in [1, " +
              std::to_string(out.worldSize) + "]";
        return false;
      }
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
    DistInit di;
    if (!parseDistInit(distInit, di, err))
      return false;
    out.idFile = di.path;
    out.tcpHost = di.host;
    out.tcpPort = di.port;
    return true;
  }
  if (!out.distributed())
    return true;
  // Several nodes: a file in $TMPDIR is not seen by the other nodes.
  int nodes = 1;
  if (out.source == "slurm") {
    const char *n = env("SLURM_STEP_NUM_NODES");
    if (!n)
      n = env("SLURM_NNODES");
    if (n && !parseInt(n, 1, nodes))
      nodes = 1;
  } else if (out.localWorldSize > 0 && out.localWorldSize < out.worldSize) {
    nodes = 2; // at least
  }
  if (nodes > 1) {
    if (out.source == "torchrun") {
      // torchrun's own rendezvous store listens on MASTER_PORT; rank 0
      // listens on the next port.
      if (out.masterAddr.empty() || out.masterPort < 1 ||
          out.masterPort >= 65535) {
        err = out.describe() +
              ": torchrun across nodes without --dist-init needs "
              "MASTER_ADDR and MASTER_PORT (< 65535) to meet at "
              "tcp://MASTER_ADDR:(MASTER_PORT+1); or pass --dist-init "
              "tcp://HOST:PORT";
        return false;
      }
      out.tcpHost = out.masterAddr;
      out.tcpPort = out.masterPort + 1;
      return true;
    }
    err = out.describe() + ": a " + out.source +
          " job across nodes needs --dist-init tcp://<first node>:<port> "
          "(rank 0's host and a free port; or CNNC_DIST_INIT), or "
          "--dist-init file:///path on a filesystem every node sees";
    return false;
  }
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

//===--- TCP rendezvous -------------------------------------------------===//

namespace {
using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x434e4e43; // "CNNC"
constexpr uint32_t kVersion = 1;
enum Status : uint32_t {
  kOk = 0,
  kWrongWorldSize = 1,
  kBadRank = 2,
  kDuplicateRank = 3,
  kWrongVersion = 4,
};

std::string seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

double secondsLeft(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

/// Closes the socket when it goes out of scope.
struct Socket {
  int fd = -1;
  Socket() = default;
  explicit Socket(int f) : fd(f) {}
  Socket(const Socket &) = delete;
  Socket &operator=(const Socket &) = delete;
  ~Socket() { reset(); }
  void reset(int f = -1) {
    if (fd >= 0)
      ::close(fd);
    fd = f;
  }
};

void putU32(std::vector<char> &out, uint32_t v) {
  uint32_t n = htonl(v);
  const char *p = reinterpret_cast<const char *>(&n);
  out.insert(out.end(), p, p + 4);
}
uint32_t getU32(const char *p) {
  uint32_t n;
  std::memcpy(&n, p, 4);
  return ntohl(n);
}

bool sendAll(int fd, const std::vector<char> &buf, std::string &why) {
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t n = ::send(fd, buf.data() + done, buf.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      why = std::string("send: ") + std::strerror(errno);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

/// Reads exactly `n` bytes before `deadline`; false with `why` on end of
/// stream, an error or the deadline.
bool recvAll(int fd, char *p, size_t n, Clock::time_point deadline,
             std::string &why) {
  size_t done = 0;
  while (done < n) {
    double left = secondsLeft(deadline);
    if (left <= 0) {
      why = "no answer in time";
      return false;
    }
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
    if (r < 0 && errno != EINTR) {
      why = std::string("poll: ") + std::strerror(errno);
      return false;
    }
    if (r <= 0)
      continue;
    ssize_t k = ::recv(fd, p + done, n - done, 0);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0) {
      why = std::string("recv: ") + std::strerror(errno);
      return false;
    }
    if (k == 0) {
      why = "the connection was closed after " + std::to_string(done) +
            " of " + std::to_string(n) + " bytes";
      return false;
    }
    done += static_cast<size_t>(k);
  }
  return true;
}

std::string peerName(const sockaddr_storage &a) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in &>(a).sin_addr,
              host, sizeof(host));
  else if (a.ss_family == AF_INET6) {
    const in6_addr &v6 = reinterpret_cast<const sockaddr_in6 &>(a).sin6_addr;
    // An IPv4 peer of the dual-stack socket: its IPv4 address.
    if (IN6_IS_ADDR_V4MAPPED(&v6))
      inet_ntop(AF_INET, v6.s6_addr + 12, host, sizeof(host));
    else
      inet_ntop(AF_INET6, &v6, host, sizeof(host));
  }
  return host;
}

/// "2-3, 5" for the ranks in [1, n) not in `served`.
std::string missingRanks(const std::vector<bool> &served, int &count) {
  std::string s;
  count = 0;
  int n = static_cast<int>(served.size());
  for (int r = 0; r < n;) {
    if (served[r]) {
      ++r;
      continue;
    }
    int e = r;
    while (e + 1 < n && !served[e + 1])
      ++e;
    s += (s.empty() ? "" : ", ") + std::to_string(r) +
         (e > r ? "-" + std::to_string(e) : "");
    count += e - r + 1;
    r = e + 1;
  }
  return s;
}

/// Rank 0's listening socket on every interface (IPv6 with v4-mapped
/// addresses, else IPv4). A port in use is retried for a few seconds (a
/// previous run's rank 0 may still be closing it).
bool listenOn(int port, Socket &out, Clock::time_point deadline,
              std::string &err) {
  auto busyUntil = std::min(deadline, Clock::now() + std::chrono::seconds(5));
  for (;;) {
    int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool v6 = fd >= 0;
    if (!v6)
      fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = std::string("socket: ") + std::strerror(errno);
      return false;
    }
    Socket s(fd);
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc;
    if (v6) {
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_any;
      a.sin6_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a));
      if (rc != 0 && errno == EADDRNOTAVAIL) {
        // IPv6 disabled on this host: IPv4 only.
        s.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        fd = s.fd;
        v6 = false;
        if (fd < 0) {
          err = std::string("socket: ") + std::strerror(errno);
          return false;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      }
    }
    if (!v6) {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a));
    }
    if (rc == 0 && ::listen(fd, 1024) == 0) {
      out.reset(s.fd);
      s.fd = -1;
      return true;
    }
    int e = errno;
    if (e == EADDRINUSE && Clock::now() < busyUntil) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    err = "cannot listen on port " + std::to_string(port) + ": " +
          std::strerror(e);
    return false;
  }
}

bool serveId(const LaunchInfo &li, int port, const std::vector<char> &id,
             double timeoutSeconds, std::string &err) {
  const std::string who = "rank 0 of " + std::to_string(li.worldSize);
  const std::string where = "port " + std::to_string(port);
  if (li.worldSize <= 1)
    return true;
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(
                                         timeoutSeconds));
  Socket listener;
  if (!listenOn(port, listener, deadline, err)) {
    err = who + ": " + err + " (--dist-init tcp://HOST:" +
          std::to_string(port) + ": a free port on rank 0's host)";
    return false;
  }
  std::vector<bool> served(li.worldSize, false);
  served[0] = true;
  int left = li.worldSize - 1;
  auto reply = [&](int fd, uint32_t status, const std::vector<char> &payload) {
    std::vector<char> b;
    putU32(b, kMagic);
    putU32(b, kVersion);
    putU32(b, status);
    putU32(b, static_cast<uint32_t>(li.worldSize));
    putU32(b, static_cast<uint32_t>(payload.size()));
    b.insert(b.end(), payload.begin(), payload.end());
    std::string why;
    return sendAll(fd, b, why);
  };
  while (left > 0) {
    double remaining = secondsLeft(deadline);
    if (remaining <= 0) {
      int count = 0;
      std::string missing = missingRanks(served, count);
      err = who + ": rank" + (count > 1 ? "s " : " ") + missing +
            " never connected to " + where + " in " +
            seconds(timeoutSeconds) + " s (CNNC_DIST_TIMEOUT)";
      int per = li.localWorldSize;
      if (per > 0 && li.worldSize % per == 0 && per < li.worldSize) {
        std::string nodes;
        for (int n = 0; n < li.worldSize / per; ++n) {
          bool all = true;
          for (int r = n * per; r < (n + 1) * per; ++r)
            all = all && !served[r];
          if (all)
            nodes += (nodes.empty() ? "" : ", ") + std::to_string(n);
        }
        if (!nodes.empty())
          err += "; node(s) " + nodes + " of " +
                 std::to_string(li.worldSize / per) + " (" +
                 std::to_string(per) + (per > 1 ? " ranks" : " rank") +
                 " each) never came";
      }
      err += ": a node did not start, or cannot reach this host on " + where;
      return false;
    }
    pollfd pfd{listener.fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(std::min(remaining, 1.0) * 1000) +
                                1);
    if (r <= 0)
      continue;
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    Socket c(::accept4(listener.fd, reinterpret_cast<sockaddr *>(&peer), &len,
                       SOCK_CLOEXEC));
    if (c.fd < 0)
      continue;
    const std::string from = peerName(peer);
    char req[16];
    std::string why;
    // A connection that says nothing is not a rank: give it a few seconds.
    auto reqDeadline =
        std::min(deadline, Clock::now() + std::chrono::seconds(5));
    if (!recvAll(c.fd, req, sizeof(req), reqDeadline, why) ||
        getU32(req) != kMagic) {
      std::fprintf(stderr,
                   "cnnrt: warning: %s: ignored a connection from %s to %s "
                   "that is not a cnnc rank (%s)\n",
                   who.c_str(), from.c_str(), where.c_str(),
                   why.empty() ? "no CNNC magic" : why.c_str());
      continue;
    }
    uint32_t version = getU32(req + 4), ws = getU32(req + 8),
             rank = getU32(req + 12);
    if (version != kVersion) {
      reply(c.fd, kWrongVersion, {});
      err = who + ": a rank on " + from + " speaks rendezvous version " +
            std::to_string(version) + ", this one " +
            std::to_string(kVersion) +
            ": every node must run the same executable";
      return false;
    }
    if (ws != static_cast<uint32_t>(li.worldSize)) {
      reply(c.fd, kWrongWorldSize, {});
      err = who + ": rank " + std::to_string(rank) + " on " + from +
            " was started with world size " + std::to_string(ws) +
            ", rank 0 with " + std::to_string(li.worldSize) +
            ": give every node the same --gpus and --nnodes";
      return false;
    }
    if (rank == 0 || rank >= static_cast<uint32_t>(li.worldSize) ||
        served[rank]) {
      bool twice = rank != 0 && rank < static_cast<uint32_t>(li.worldSize);
      reply(c.fd, twice ? kDuplicateRank : kBadRank, {});
      err = who + ": " +
            (twice ? "rank " + std::to_string(rank) + " connected twice (the "
                     "second from " + from +
                         "): two nodes with the same --node-rank?"
                   : "a rank on " + from + " says it is rank " +
                         std::to_string(rank) +
                         ": two nodes with --node-rank 0?");
      return false;
    }
    if (!reply(c.fd, kOk, id))
      continue; // the rank will retry
    served[rank] = true;
    --left;
  }
  return true;
}

bool fetchId(const LaunchInfo &li, const std::string &host, int port,
             std::vector<char> &id, size_t idBytes, double timeoutSeconds,
             std::string &err) {
  const std::string who = "rank " + std::to_string(li.rank) + " of " +
                          std::to_string(li.worldSize);
  DistInit di;
  di.host = host;
  di.port = port;
  const std::string where = di.url();
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(
                                         timeoutSeconds));
  std::string last = "nothing tried";
  std::vector<char> request;
  putU32(request, kMagic);
  putU32(request, kVersion);
  putU32(request, static_cast<uint32_t>(li.worldSize));
  putU32(request, static_cast<uint32_t>(li.rank));
  bool first = true;
  for (;; first = false) {
    if (!first)
      std::this_thread::sleep_for(std::chrono::milliseconds(
          static_cast<int>(std::max(0.0, std::min(0.1, secondsLeft(deadline))) *
                           1000)));
    if (secondsLeft(deadline) <= 0) {
      err = who + ": no NCCL id from rank 0 at " + where + " after " +
            seconds(timeoutSeconds) +
            " s (CNNC_DIST_TIMEOUT): rank 0 did not start, or this node "
            "cannot reach it (last attempt: " +
            last + ")";
      return false;
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    std::string portStr = std::to_string(port);
    int g = ::getaddrinfo(host.c_str(), portStr.c_str(), &hints, &res);
    if (g != 0) {
      last = "cannot resolve '" + host + "': " + gai_strerror(g);
      continue;
    }
    Socket c;
    for (addrinfo *a = res; a && c.fd < 0; a = a->ai_next) {
      Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                        a->ai_protocol));
      if (s.fd < 0) {
        last = std::string("socket: ") + std::strerror(errno);
        continue;
      }
      // Non-blocking connect: an unreachable host must not block past the
      // deadline.
      int flags = fcntl(s.fd, F_GETFL, 0);
      fcntl(s.fd, F_SETFL, flags | O_NONBLOCK);
      int rc = ::connect(s.fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        double left = std::min(secondsLeft(deadline), 5.0);
        pollfd pfd{s.fd, POLLOUT, 0};
        rc = -1;
        errno = ETIMEDOUT;
        if (left > 0 &&
            ::poll(&pfd, 1, static_cast<int>(left * 1000) + 1) > 0) {
          int e = 0;
          socklen_t len = sizeof(e);
          getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &e, &len);
          rc = e == 0 ? 0 : -1;
          errno = e;
        }
      }
      if (rc != 0) {
        last = std::string("connect: ") + std::strerror(errno);
        continue;
      }
      fcntl(s.fd, F_SETFL, flags);
      c.reset(s.fd);
      s.fd = -1;
    }
    ::freeaddrinfo(res);
    if (c.fd < 0)
      continue;
    std::string why;
    char head[20];
    if (!sendAll(c.fd, request, why) ||
        !recvAll(c.fd, head, sizeof(head), deadline, why)) {
      last = why; // rank 0 busy or going away: try again
      continue;
    }
    if (getU32(head) != kMagic) {
      err = who + ": " + where +
            " is not a cnnc rendezvous (it answered something else): is "
            "the port another service's?";
      return false;
    }
    uint32_t version = getU32(head + 4), status = getU32(head + 8),
             ws = getU32(head + 12), len = getU32(head + 16);
    if (version != kVersion || status == kWrongVersion) {
      err = who + ": rank 0 at " + where + " speaks rendezvous version " +
            std::to_string(version) + ", this one " +
            std::to_string(kVersion) +
            ": every node must run the same executable";
      return false;
    }
    if (status == kWrongWorldSize) {
      err = who + ": rank 0 at " + where + " has world size " +
            std::to_string(ws) + ", this rank " +
            std::to_string(li.worldSize) +
            ": give every node the same --gpus and --nnodes";
      return false;
    }
    if (status != kOk) {
      err = who + ": rank 0 at " + where + " refused this rank (" +
            (status == kDuplicateRank ? "another process already is rank " +
                                            std::to_string(li.rank) +
                                            ": two nodes with the same "
                                            "--node-rank?"
                                      : "not a rank of its world") +
            ")";
      return false;
    }
    if (len != idBytes) {
      err = who + ": rank 0 at " + where + " sent a " + std::to_string(len) +
            "-byte id, expected " + std::to_string(idBytes);
      return false;
    }
    id.assign(idBytes, 0);
    if (!recvAll(c.fd, id.data(), idBytes, deadline, why)) {
      last = why;
      continue;
    }
    return true;
  }
}
} // namespace

bool exchangeIdTcp(const LaunchInfo &li, const std::string &host, int port,
                   std::vector<char> &id, size_t idBytes,
                   double timeoutSeconds, std::string &err) {
  if (li.rank == 0) {
    if (id.size() != idBytes) {
      err = "rank 0: the NCCL id has " + std::to_string(id.size()) +
            " bytes, expected " + std::to_string(idBytes);
      return false;
    }
    return serveId(li, port, id, timeoutSeconds, err);
  }
  return fetchId(li, host, port, id, idBytes, timeoutSeconds, err);
}

//===--- the executable's own launcher -----------------------------------===//

bool checkNodeLayout(const NodeLayout &n, bool nodeRankGiven,
                     const std::string &distInit, std::string &err) {
  const std::string nn = "--nnodes " + std::to_string(n.nnodes);
  if (n.gpusPerNode < 1) {
    err = "--gpus " + std::to_string(n.gpusPerNode) + ": expected >= 1";
    return false;
  }
  if (n.nnodes < 1) {
    err = nn + ": expected >= 1";
    return false;
  }
  if (n.nnodes > 1 && !nodeRankGiven) {
    err = nn + " needs --node-rank R (this node's index, 0 on the node "
               "whose address --dist-init names)";
    return false;
  }
  if (n.nodeRank < 0 || n.nodeRank >= n.nnodes) {
    err = "--node-rank " + std::to_string(n.nodeRank) + " is not in [0, " +
          std::to_string(n.nnodes) + ") (" + nn + ")";
    return false;
  }
  if (n.nnodes > 1 && distInit.empty()) {
    err = nn + " needs --dist-init tcp://HOST:PORT (node 0's address and a "
               "free port there; or CNNC_DIST_INIT)";
    return false;
  }
  return true;
}

std::vector<std::pair<std::string, std::string>>
childEnvironment(const NodeLayout &n, int localRank,
                 const std::string &distInitUrl) {
  return {{"CNNC_RANK", std::to_string(n.globalRank(localRank))},
          {"CNNC_WORLD_SIZE", std::to_string(n.worldSize())},
          {"CNNC_LOCAL_RANK", std::to_string(localRank)},
          {"CNNC_LOCAL_WORLD_SIZE", std::to_string(n.gpusPerNode)},
          {"CNNC_DIST_INIT", distInitUrl}};
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

int runLocalRanks(const std::vector<std::string> &argv, const NodeLayout &node,
                  const std::string &distInitUrl, double graceSeconds,
                  std::string &err) {
  const int localRanks = node.gpusPerNode; // the ranks of this host
  if (argv.empty() || localRanks < 1) {
    err = "nothing to launch";
    return 1;
  }
  // Every child's argv and environment are built before the first fork (no
  // allocation between fork and exec).
  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::vector<std::string>> envStrings(localRanks);
  std::vector<std::vector<char *>> envs(localRanks);
  for (int r = 0; r < localRanks; ++r) {
    auto ours = childEnvironment(node, r, distInitUrl);
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
  std::vector<pid_t> pids(localRanks, -1);
  auto stopAll = [&]() {
    for (pid_t p : pids)
      if (p > 0)
        kill(p, SIGTERM);
  };
  for (int r = 0; r < localRanks; ++r) {
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
      err = std::string("cannot start rank ") +
            std::to_string(node.globalRank(r)) +
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
  int result = 0, left = localRanks;
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
    while (r < localRanks && pids[r] != p)
      ++r;
    if (r == localRanks)
      continue;
    pids[r] = -1;
    --left;
    int code = WIFEXITED(status)     ? WEXITSTATUS(status)
               : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                     : 1;
    if (code != 0 && result == 0) {
      result = code;
      err = "rank " + std::to_string(node.globalRank(r)) + " of " +
            std::to_string(node.worldSize()) +
            (node.nnodes > 1 ? " (local rank " + std::to_string(r) +
                                   " of node " +
                                   std::to_string(node.nodeRank) + ")"
                             : "") +
            (WIFSIGNALED(status)
                 ? " was killed by signal " + std::to_string(WTERMSIG(status))
                 : " exited with code " + std::to_string(code)) +
            (node.nnodes > 1 ? "; the other ranks of this node were stopped"
                             : "; the other ranks were stopped");
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
