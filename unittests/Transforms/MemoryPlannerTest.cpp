//===- MemoryPlannerTest.cpp - the arena packing library -----------------===//
#include "cnnc/Transforms/MemoryPlanner.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

using namespace cnnc::memplan;

namespace {

Interval iv(uint64_t size, int64_t first, int64_t last, uint64_t align = 1) {
  Interval i;
  i.size = size;
  i.alignment = align;
  i.first = first;
  i.last = last;
  return i;
}

void expectValid(const std::vector<Interval> &ivs, const Plan &p) {
  EXPECT_EQ(verify(ivs, p.offsets, p.peak), "");
  EXPECT_GE(p.peak + 0, p.lowerBound);
  uint64_t sum = 0;
  for (const Interval &i : ivs)
    sum += i.size;
  EXPECT_EQ(p.sumBytes, sum);
}

TEST(MemoryPlanner, Empty) {
  Plan p = plan({});
  EXPECT_EQ(p.peak, 0u);
  EXPECT_EQ(p.lowerBound, 0u);
  EXPECT_TRUE(p.offsets.empty());
}

TEST(MemoryPlanner, DisjointLifetimesShareMemory) {
  std::vector<Interval> ivs = {iv(100, 0, 1), iv(100, 2, 3), iv(100, 4, 5)};
  Plan p = plan(ivs);
  expectValid(ivs, p);
  EXPECT_EQ(p.peak, 100u);
  EXPECT_EQ(p.lowerBound, 100u);
  EXPECT_EQ(p.offsets, (std::vector<uint64_t>{0, 0, 0}));
}

TEST(MemoryPlanner, OverlappingLifetimesStack) {
  std::vector<Interval> ivs = {iv(100, 0, 2), iv(50, 1, 3), iv(30, 2, 2)};
  Plan p = plan(ivs);
  expectValid(ivs, p);
  EXPECT_EQ(p.lowerBound, 180u);
  EXPECT_EQ(p.peak, 180u);
}

TEST(MemoryPlanner, TouchingEndpointsOverlap) {
  // Live ranges are inclusive: [0, 2] and [2, 4] are both live at step 2.
  std::vector<Interval> ivs = {iv(64, 0, 2), iv(64, 2, 4)};
  Plan p = plan(ivs);
  expectValid(ivs, p);
  EXPECT_EQ(p.peak, 128u);
  EXPECT_EQ(p.lowerBound, 128u);
}

TEST(MemoryPlanner, BestFitFillsTheSmallestGap) {
  // A (0..9) and C (0..9) leave a hole where B (0..3) lived; D (5..9) fits
  // into B's hole, not on top.
  std::vector<Interval> ivs = {iv(1000, 0, 9), iv(300, 0, 3), iv(1000, 0, 9),
                               iv(200, 5, 9)};
  Plan p = placeWith(ivs, Order::SizeDecreasing, Fit::Best);
  expectValid(ivs, p);
  EXPECT_EQ(p.peak, 2300u);
  EXPECT_EQ(p.lowerBound, 2300u);
}

TEST(MemoryPlanner, BestFitPrefersTheTighterGap) {
  // Placed in schedule order, two holes are free at step 5: 500 bytes (X's)
  // and 200 bytes (Y's). A 200-byte buffer goes into the 200-byte hole.
  std::vector<Interval> ivs = {
      iv(1000, 0, 9), // A at 0
      iv(500, 1, 4),  // X at 1000
      iv(900, 2, 9),  // B at 1500
      iv(200, 3, 4),  // Y at 2400
      iv(800, 4, 9),  // C at 2600
      iv(200, 5, 9),  // best fit: Y's hole; first fit: X's
  };
  Plan p = placeWith(ivs, Order::Schedule, Fit::Best);
  expectValid(ivs, p);
  EXPECT_EQ(p.offsets[5], p.offsets[3]);
  Plan f = placeWith(ivs, Order::Schedule, Fit::First);
  expectValid(ivs, f);
  EXPECT_EQ(f.offsets[5], f.offsets[1]);
}

TEST(MemoryPlanner, AlignmentRespected) {
  std::vector<Interval> ivs = {iv(1, 0, 5), iv(3, 0, 5, 256), iv(7, 1, 2, 64),
                               iv(300, 2, 3, 256), iv(5, 0, 0, 1024)};
  Plan p = plan(ivs);
  expectValid(ivs, p);
  for (size_t i = 0; i < ivs.size(); ++i)
    EXPECT_EQ(p.offsets[i] % ivs[i].alignment, 0u) << i;
}

TEST(MemoryPlanner, ZeroSizedBuffersTakeNoSpace) {
  std::vector<Interval> ivs = {iv(0, 0, 9), iv(64, 0, 9), iv(0, 3, 3)};
  Plan p = plan(ivs);
  expectValid(ivs, p);
  EXPECT_EQ(p.peak, 64u);
}

TEST(MemoryPlanner, VerifyCatchesOverlap) {
  std::vector<Interval> ivs = {iv(100, 0, 2), iv(100, 1, 3)};
  EXPECT_NE(verify(ivs, {0, 50}, 150), "");
  EXPECT_EQ(verify(ivs, {0, 100}, 200), "");
  // Disjoint in time: the same memory is fine.
  std::vector<Interval> apart = {iv(100, 0, 1), iv(100, 2, 3)};
  EXPECT_EQ(verify(apart, {0, 0}, 100), "");
  // Misaligned, and a peak too small.
  EXPECT_NE(verify({iv(8, 0, 0, 16)}, {8}, 16), "");
  EXPECT_NE(verify({iv(8, 0, 0)}, {0}, 4), "");
}

TEST(MemoryPlanner, TrainingStepShape) {
  // Forward activations kept for the backward pass, gradients short-lived:
  // the typical staircase. The lower bound is reached.
  std::vector<Interval> ivs;
  const int L = 20;
  for (int l = 0; l < L; ++l)
    ivs.push_back(iv(1000 - 40 * l, l, 2 * L - l)); // activation l
  for (int l = 0; l < L; ++l)
    ivs.push_back(iv(1000 - 40 * (L - 1 - l), L + l, L + l + 1)); // grads
  Plan p = plan(ivs);
  expectValid(ivs, p);
  EXPECT_LE(p.peak, p.lowerBound * 11 / 10);
}

/// Random interval sets of several shapes, seeded: every plan valid, peak at
/// least the lower bound and within a modest factor of it.
struct RandomCase {
  const char *name;
  int maxLen;       // longest live range
  uint64_t maxSize; // largest buffer
  bool skewed;      // a few huge buffers among small ones
  uint64_t align;   // alignment of every buffer; 0: random 1..16
};

class MemoryPlannerRandom : public ::testing::TestWithParam<RandomCase> {};

TEST_P(MemoryPlannerRandom, ValidAndNearTheLowerBound) {
  const RandomCase &rc = GetParam();
  std::mt19937_64 rng(0xC0FFEE + std::string(rc.name).size() * 7919 +
                      rc.maxLen);
  double worst = 1.0, total = 0;
  const int kSets = 300;
  for (int set = 0; set < kSets; ++set) {
    int n = 1 + (int)(rng() % 200);
    int steps = 1 + (int)(rng() % 400);
    std::vector<Interval> ivs, padded;
    for (int i = 0; i < n; ++i) {
      Interval b;
      b.first = (int64_t)(rng() % steps);
      b.last = b.first + (int64_t)(rng() % (rc.maxLen + 1));
      if (rc.skewed && rng() % 10 == 0)
        b.size = rc.maxSize * (1 + rng() % 16);
      else
        b.size = 1 + rng() % rc.maxSize;
      b.alignment = rc.align ? rc.align : (uint64_t)1 << (rng() % 5);
      ivs.push_back(b);
      // With one alignment for all, a buffer takes its size rounded up.
      Interval c = b;
      if (rc.align)
        c.size = alignTo(b.size, rc.align);
      padded.push_back(c);
    }
    Plan p = plan(ivs);
    ASSERT_EQ(verify(ivs, p.offsets, p.peak), "") << rc.name << " set " << set;
    ASSERT_GE(p.peak, p.lowerBound) << rc.name << " set " << set;
    ASSERT_EQ(p.lowerBound, lowerBound(ivs));
    for (size_t i = 0; i < ivs.size(); ++i)
      ASSERT_EQ(p.offsets[i] % ivs[i].alignment, 0u);
    // Each strategy alone is valid too, and plan() keeps the best.
    for (Fit fit : {Fit::Best, Fit::First})
      for (Order o : {Order::SizeDecreasing, Order::SizeTimesLifetime,
                      Order::LifetimeDecreasing, Order::Schedule}) {
        Plan q = placeWith(ivs, o, fit);
        ASSERT_EQ(verify(ivs, q.offsets, q.peak), "")
            << rc.name << " set " << set << " " << q.strategy;
        ASSERT_GE(q.peak, p.peak);
      }
    double ratio = (double)p.peak / (double)lowerBound(padded);
    worst = std::max(worst, ratio);
    total += ratio;
    ASSERT_LE(ratio, 1.75) << rc.name << " set " << set << " (" << p.strategy
                           << ")";
  }
  std::printf("[ %s ] peak / lower bound: mean %.3f, worst %.3f\n", rc.name,
              total / kSets, worst);
  // A modest factor on average.
  EXPECT_LT(total / kSets, 1.25) << rc.name;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MemoryPlannerRandom,
    ::testing::Values(RandomCase{"short_lived", 5, 1 << 16, false, 0},
                      RandomCase{"long_lived", 200, 1 << 16, false, 0},
                      RandomCase{"mixed", 50, 1 << 20, true, 0},
                      RandomCase{"aligned", 30, 1 << 12, false, 256},
                      RandomCase{"tiny", 3, 16, false, 1}),
    [](const ::testing::TestParamInfo<RandomCase> &i) {
      return std::string(i.param.name);
    });

TEST(MemoryPlanner, ThousandsOfBuffers) {
  // One large set (a ResNet-50 train step has ~3000 temporaries).
  std::mt19937_64 rng(42);
  std::vector<Interval> ivs;
  for (int i = 0; i < 4000; ++i) {
    Interval b;
    b.first = i;
    b.last =
        i + (rng() % 4 == 0 ? (int64_t)(rng() % 3000) : (int64_t)(rng() % 8));
    b.size = 256 * (1 + rng() % 4096);
    b.alignment = 256;
    ivs.push_back(b);
  }
  Plan p = plan(ivs);
  EXPECT_EQ(verify(ivs, p.offsets, p.peak), "");
  EXPECT_GE(p.peak, p.lowerBound);
  EXPECT_LE(p.peak, p.lowerBound * 13 / 10) << p.strategy;
}

} // namespace
