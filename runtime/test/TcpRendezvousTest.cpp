//===- TcpRendezvousTest.cpp - the NCCL id over tcp://HOST:PORT ----------===//
//
// Ranks as threads of this process over 127.0.0.1; no GPU, no NCCL.
//
//===----------------------------------------------------------------------===//
#include "cnnrt/Distributed.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace cnnrt;

namespace {

constexpr size_t kIdBytes = 128; // sizeof(ncclUniqueId)

/// A port nobody listens on now (the kernel's choice for port 0).
int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

LaunchInfo rankOf(int rank, int world, int localWorld = -1) {
  LaunchInfo li;
  li.rank = rank;
  li.worldSize = world;
  li.localWorldSize = localWorld;
  return li;
}

std::vector<char> someId() {
  std::vector<char> id(kIdBytes);
  for (size_t i = 0; i < kIdBytes; ++i)
    id[i] = static_cast<char>(i * 7 + 3);
  return id;
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

struct Result {
  bool ok = false;
  std::string err;
  std::vector<char> id;
};

/// Rank `rank` of `world` fetching the id in a thread.
std::thread fetchIn(Result &r, int port, int rank, int world,
                    double timeout = 10) {
  return std::thread([&r, port, rank, world, timeout] {
    r.ok = exchangeIdTcp(rankOf(rank, world), "127.0.0.1", port, r.id,
                         kIdBytes, timeout, r.err);
  });
}

TEST(TcpRendezvous, EveryRankGetsRankZerosId) {
  int port = freePort();
  const int world = 4;
  std::vector<Result> got(world);
  std::vector<std::thread> ranks;
  // The other ranks start first: they retry until rank 0 listens.
  for (int r = 1; r < world; ++r)
    ranks.push_back(fetchIn(got[r], port, r, world));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<char> id = someId();
  std::string err;
  EXPECT_TRUE(exchangeIdTcp(rankOf(0, world), "", port, id, kIdBytes, 10, err))
      << err;
  for (std::thread &t : ranks)
    t.join();
  for (int r = 1; r < world; ++r) {
    EXPECT_TRUE(got[r].ok) << got[r].err;
    EXPECT_EQ(got[r].id, id) << "rank " << r;
  }
}

TEST(TcpRendezvous, AWrongWorldSizeIsRefusedOnBothSides) {
  int port = freePort();
  Result r0;
  std::thread t([&] {
    r0.id = someId();
    r0.ok = exchangeIdTcp(rankOf(0, 2), "", port, r0.id, kIdBytes, 10, r0.err);
  });
  Result r1;
  fetchIn(r1, port, 1, 3).join();
  t.join();
  EXPECT_FALSE(r1.ok);
  EXPECT_EQ(r1.err, "rank 1 of 3: rank 0 at tcp://127.0.0.1:" +
                        std::to_string(port) +
                        " has world size 2, this rank 3: give every node the "
                        "same --gpus and --nnodes");
  EXPECT_FALSE(r0.ok);
  EXPECT_EQ(r0.err, "rank 0 of 2: rank 1 on 127.0.0.1 was started with world "
                    "size 3, rank 0 with 2: give every node the same --gpus "
                    "and --nnodes")
      << r0.err;
}

TEST(TcpRendezvous, AMissingRankZeroTimesOut) {
  int port = freePort();
  auto t0 = std::chrono::steady_clock::now();
  Result r1;
  fetchIn(r1, port, 1, 2, 0.5).join();
  EXPECT_LT(secondsSince(t0), 3.0);
  EXPECT_FALSE(r1.ok);
  std::string want = "rank 1 of 2: no NCCL id from rank 0 at tcp://127.0.0.1:" +
                     std::to_string(port) +
                     " after 0.5 s (CNNC_DIST_TIMEOUT): rank 0 did not start, "
                     "or this node cannot reach it (last attempt: connect: ";
  EXPECT_EQ(r1.err.substr(0, want.size()), want) << r1.err;
}

TEST(TcpRendezvous, RankZeroNamesTheNodeThatNeverCame) {
  // 2 nodes of 2 ranks; only node 0 (ranks 0 and 1) started.
  int port = freePort();
  Result r1;
  std::thread t = fetchIn(r1, port, 1, 4);
  std::vector<char> id = someId();
  std::string err;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(
      exchangeIdTcp(rankOf(0, 4, 2), "", port, id, kIdBytes, 0.8, err));
  EXPECT_LT(secondsSince(t0), 3.0);
  t.join();
  EXPECT_TRUE(r1.ok) << r1.err;
  EXPECT_EQ(err, "rank 0 of 4: ranks 2-3 never connected to port " +
                     std::to_string(port) +
                     " in 0.8 s (CNNC_DIST_TIMEOUT); node(s) 1 of 2 (2 ranks "
                     "each) never came: a node did not start, or cannot reach "
                     "this host on port " +
                     std::to_string(port));
}

TEST(TcpRendezvous, OneRankPerNode) {
  // --gpus 1 --nnodes 2 with node 1 missing: rank 1 is node 1.
  int port = freePort();
  std::vector<char> id = someId();
  std::string err;
  EXPECT_FALSE(
      exchangeIdTcp(rankOf(0, 2, 1), "", port, id, kIdBytes, 0.3, err));
  EXPECT_EQ(err, "rank 0 of 2: rank 1 never connected to port " +
                     std::to_string(port) +
                     " in 0.3 s (CNNC_DIST_TIMEOUT); node(s) 1 of 2 (1 rank "
                     "each) never came: a node did not start, or cannot reach "
                     "this host on port " +
                     std::to_string(port));
}

TEST(TcpRendezvous, AStrayConnectionIsIgnored) {
  int port = freePort();
  Result r0;
  std::thread t([&] {
    r0.id = someId();
    r0.ok = exchangeIdTcp(rankOf(0, 2), "", port, r0.id, kIdBytes, 10, r0.err);
  });
  // Something that is not a rank connects first and sends HTTP.
  int fd = -1;
  for (int i = 0; i < 100 && fd < 0; ++i) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
      close(fd);
      fd = -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_GE(fd, 0);
  const char http[] = "GET / HTTP/1.0\r\n\r\n";
  EXPECT_EQ(send(fd, http, sizeof(http) - 1, 0), (ssize_t)sizeof(http) - 1);
  Result r1;
  fetchIn(r1, port, 1, 2).join();
  t.join();
  close(fd);
  EXPECT_TRUE(r0.ok) << r0.err;
  EXPECT_TRUE(r1.ok) << r1.err;
  EXPECT_EQ(r1.id, r0.id);
}

TEST(TcpRendezvous, APortOfAnotherServiceIsAnError) {
  int port = freePort();
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(lfd, 4), 0);
  std::thread server([&] {
    int c = accept(lfd, nullptr, nullptr);
    const char banner[] = "SSH-2.0-OpenSSH_9.6\r\n";
    send(c, banner, sizeof(banner) - 1, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    close(c);
  });
  Result r1;
  fetchIn(r1, port, 1, 2, 5).join();
  server.join();
  close(lfd);
  EXPECT_FALSE(r1.ok);
  EXPECT_EQ(r1.err, "rank 1 of 2: tcp://127.0.0.1:" + std::to_string(port) +
                        " is not a cnnc rendezvous (it answered something "
                        "else): is the port another service's?");
}

TEST(TcpRendezvous, TheSameRankTwiceIsRefused) {
  int port = freePort();
  Result r0;
  std::thread t([&] {
    r0.id = someId();
    r0.ok = exchangeIdTcp(rankOf(0, 3), "", port, r0.id, kIdBytes, 10, r0.err);
  });
  Result first, second;
  fetchIn(first, port, 1, 3).join();
  fetchIn(second, port, 1, 3).join();
  t.join();
  EXPECT_TRUE(first.ok) << first.err;
  EXPECT_FALSE(second.ok);
  EXPECT_NE(second.err.find("another process already is rank 1: two nodes "
                            "with the same --node-rank?"),
            std::string::npos)
      << second.err;
  EXPECT_FALSE(r0.ok);
  EXPECT_NE(r0.err.find("rank 1 connected twice"), std::string::npos)
      << r0.err;
}

} // namespace
