//===- CommunicatorTest.cpp - the reference interpreter's all-reduce ------===//
#include "cnnc/Reference/Communicator.h"
#include "cnnc/Reference/Interpreter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

using namespace cnnc::reference;

namespace {

/// Runs `body(rank)` on `n` threads and joins them.
template <typename F> void onRanks(int n, F body) {
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r)
    t.emplace_back(body, r);
  for (auto &x : t)
    x.join();
}

TEST(Communicator, ReductionsAreTheSameOnEveryRank) {
  for (auto [kind, want] :
       {std::pair{ReduceKind::Avg, 2.0f}, {ReduceKind::Sum, 6.0f},
        {ReduceKind::Max, 3.0f}, {ReduceKind::Min, 1.0f}}) {
    LocalGroup g(3, 10);
    std::vector<std::vector<float>> data(3);
    std::vector<char> ok(3, 0);
    onRanks(3, [&](int r) {
      data[r] = {float(r + 1), -float(r + 1)};
      std::string err;
      ok[r] = g.member(r)->allReduce(data[r].data(), 2, kind, false, err);
    });
    for (int r = 0; r < 3; ++r) {
      EXPECT_TRUE(ok[r]);
      EXPECT_EQ(data[r][0], want) << "rank " << r;
    }
    EXPECT_EQ(data[0][1], data[2][1]);
  }
}

TEST(Communicator, ManyCollectivesInARow) {
  LocalGroup g(4, 10);
  std::vector<float> last(4);
  onRanks(4, [&](int r) {
    for (int k = 0; k < 200; ++k) {
      float x = float(r * k);
      std::string err;
      ASSERT_TRUE(g.member(r)->allReduce(&x, 1, ReduceKind::Sum, false, err))
          << err;
      ASSERT_EQ(x, float(6 * k)); // (0 + 1 + 2 + 3) * k
    }
  });
}

TEST(Communicator, F16SumIsRoundedToHalf) {
  LocalGroup g(2, 10);
  std::vector<float> v(2);
  onRanks(2, [&](int r) {
    // 2048 + 1 is not an f16 value: the sum rounds to 2048 (ties to even).
    v[r] = r == 0 ? 2048.0f : 1.0f;
    std::string err;
    g.member(r)->allReduce(&v[r], 1, ReduceKind::Sum, true, err);
  });
  EXPECT_EQ(v[0], 2048.0f);
  EXPECT_EQ(v[1], 2048.0f);
}

TEST(Communicator, InfOnOneRankReachesAll) {
  LocalGroup g(2, 10);
  std::vector<float> v(2);
  onRanks(2, [&](int r) {
    v[r] = r == 1 ? INFINITY : 1.0f;
    std::string err;
    g.member(r)->allReduce(&v[r], 1, ReduceKind::Avg, true, err);
  });
  EXPECT_TRUE(std::isinf(v[0]));
  EXPECT_TRUE(std::isinf(v[1]));
}

TEST(Communicator, MissingRankTimesOut) {
  LocalGroup g(3, 0.2);
  std::string err0;
  bool ok0 = true;
  auto t0 = std::chrono::steady_clock::now();
  onRanks(2, [&](int r) {
    float x = 1;
    std::string err;
    bool ok = g.member(r)->allReduce(&x, 1, ReduceKind::Sum, false, err);
    if (r == 0) {
      ok0 = ok;
      err0 = err;
    }
  });
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                 .count();
  EXPECT_FALSE(ok0);
  EXPECT_NE(err0.find("timed out after 0.2 s: rank 2 of 3 never arrived"),
            std::string::npos)
      << err0;
  EXPECT_LT(s, 5.0);
  // Later collectives fail at once.
  float x = 0;
  std::string err;
  EXPECT_FALSE(g.member(0)->allReduce(&x, 1, ReduceKind::Sum, false, err));
}

TEST(Communicator, AbortWakesTheWaiters) {
  LocalGroup g(2, 60);
  std::string err;
  bool ok = true;
  std::thread waiter([&] {
    float x = 1;
    ok = g.member(0)->allReduce(&x, 1, ReduceKind::Sum, false, err);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  g.abort(1, "bad data");
  waiter.join();
  EXPECT_FALSE(ok);
  EXPECT_EQ(err, "rank 1 failed: bad data");
}

TEST(Communicator, DifferentSizesAreAnError) {
  LocalGroup g(2, 10);
  std::vector<std::string> errs(2);
  std::vector<char> oks(2);
  onRanks(2, [&](int r) {
    std::vector<float> x(r + 1, 1.0f);
    oks[r] = g.member(r)->allReduce(x.data(), x.size(), ReduceKind::Sum,
                                    false, errs[r]);
  });
  EXPECT_FALSE(oks[0]);
  EXPECT_FALSE(oks[1]);
  EXPECT_NE(errs[0].find("the ranks run different steps"), std::string::npos)
      << errs[0];
}

TEST(Communicator, ThreadLocalCurrent) {
  LocalGroup g(2, 1);
  EXPECT_EQ(currentCommunicator(), nullptr);
  setCurrentCommunicator(g.member(1));
  EXPECT_EQ(currentCommunicator()->rank(), 1);
  std::thread([] { EXPECT_EQ(currentCommunicator(), nullptr); }).join();
  setCurrentCommunicator(nullptr);
}

} // namespace
