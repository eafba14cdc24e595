//===- ThroughputTest.cpp - steady img/s and start-up of a run -----------===//
#include "cnnrt/TrainLoop.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace cnnrt;

namespace {

// A run that starts at t = 0, issues its first step at t = 2 (data, weights,
// NCCL), and logs every 10 steps of 100 images. The first interval also
// pays 3 s of autotuning and graph capture; then a step takes 0.1 s.
ThroughputMeter typicalRun(int intervals) {
  ThroughputMeter m;
  m.start(0.0, 2.0);
  double t = 2.0 + 3.0 + 1.0; // 3 s of warm-up + 10 steps at 0.1 s
  m.mark(t, 1000);
  for (int i = 1; i < intervals; ++i) {
    t += 1.0;
    m.mark(t, 1000);
  }
  return m;
}

TEST(Throughput, SteadyRateExcludesTheFirstInterval) {
  ThroughputMeter m = typicalRun(5);
  ASSERT_TRUE(m.hasSteady());
  EXPECT_DOUBLE_EQ(m.steadyRate(), 1000.0);
  // Start-up: 6 s until the end of the first interval, of which its 1000
  // images at the steady rate take 1 s.
  EXPECT_DOUBLE_EQ(m.startupSeconds(), 5.0);
  // The whole run: 5000 images from the first step (t = 2) to t = 10.
  EXPECT_DOUBLE_EQ(m.wholeRunRate(), 5000.0 / 8.0);
  EXPECT_EQ(m.images(), 5000);
  EXPECT_DOUBLE_EQ(m.secondsPerImage(), 1e-3);
}

TEST(Throughput, MarkReturnsTheIntervalsRate) {
  ThroughputMeter m;
  m.start(0.0, 1.0);
  EXPECT_DOUBLE_EQ(m.mark(3.0, 100), 50.0);  // 100 images in 2 s
  EXPECT_DOUBLE_EQ(m.mark(3.5, 100), 200.0); // 100 images in 0.5 s
  EXPECT_DOUBLE_EQ(m.mark(4.5, 100), 100.0);
  EXPECT_DOUBLE_EQ(m.steadyRate(), 200.0 / 1.5);
}

TEST(Throughput, OneIntervalHasNoSteadyRate) {
  ThroughputMeter m = typicalRun(1);
  EXPECT_FALSE(m.hasSteady());
  // The rate falls back to the whole run's, the start-up to the time
  // before the first step.
  EXPECT_DOUBLE_EQ(m.steadyRate(), 1000.0 / 4.0);
  EXPECT_DOUBLE_EQ(m.steadyRate(), m.wholeRunRate());
  EXPECT_DOUBLE_EQ(m.startupSeconds(), 2.0);
}

TEST(Throughput, NoMarkAtAll) {
  ThroughputMeter m;
  m.start(0.0, 0.5);
  EXPECT_FALSE(m.hasSteady());
  EXPECT_EQ(m.wholeRunRate(), 0.0);
  EXPECT_EQ(m.secondsPerImage(), 0.0);
  EXPECT_DOUBLE_EQ(m.startupSeconds(), 0.5);
}

TEST(Throughput, ValidationPausesAreNotTrainingTime) {
  ThroughputMeter m;
  m.start(0.0, 0.0);
  m.mark(2.0, 100);
  m.pause(5.0); // a validation pass of 5 s
  EXPECT_DOUBLE_EQ(m.mark(8.0, 100), 100.0);
  m.mark(9.0, 100);
  EXPECT_DOUBLE_EQ(m.steadyRate(), 100.0);
  EXPECT_DOUBLE_EQ(m.wholeRunRate(), 300.0 / 4.0);
  EXPECT_DOUBLE_EQ(m.startupSeconds(), 1.0);
}

TEST(Throughput, StartupIsNeverNegative) {
  // A first interval faster than the rest (e.g. a later checkpoint write).
  ThroughputMeter m;
  m.start(0.0, 0.0);
  m.mark(1.0, 1000);
  m.mark(3.0, 1000);
  EXPECT_DOUBLE_EQ(m.steadyRate(), 500.0);
  EXPECT_EQ(m.startupSeconds(), 0.0);
}

RunSummary summaryOf(bool steady) {
  RunSummary s;
  s.steps = 50;
  s.finalLoss = 0.5;
  s.hasSteady = steady;
  s.steadyImagesPerSecond = steady ? 2000.4 : 1500.2;
  s.startupSeconds = 5.04;
  s.meanImagesPerSecond = 1500.2;
  s.peakGpuMiB = 321;
  s.worldSize = 2;
  if (steady)
    s.steadyPerRank = {1000.4, 1000.2};
  s.meanPerRank = {750.2, 749.6};
  s.startupPerRank = {5.04, 4.9};
  return s;
}

TEST(Throughput, DoneLines) {
  EXPECT_EQ(doneLine(summaryOf(true)),
            "done: 50 steps, final loss 0.5, steady img/s 2000, start-up 5.0 "
            "s, mean img/s 1500 (whole run), peak GPU memory 321 MiB");
  EXPECT_EQ(doneLine(summaryOf(false)),
            "done: 50 steps, final loss 0.5, steady img/s n/a, start-up 5.0 "
            "s, mean img/s 1500 (whole run), peak GPU memory 321 MiB");
  // The totals are the sums of the printed per-rank figures.
  EXPECT_EQ(dataParallelLine(summaryOf(true)),
            "data parallel: steady img/s per rank [1000, 1000], total 2000; "
            "whole run per rank [750, 750], total 1500; start-up 5.0 s "
            "(slowest rank)");
  EXPECT_EQ(dataParallelLine(summaryOf(false)),
            "data parallel: steady img/s per rank n/a; whole run per rank "
            "[750, 750], total 1500; start-up 5.0 s (slowest rank)");
}

TEST(Throughput, DoneJson) {
  EXPECT_EQ(doneJson(summaryOf(true)),
            "{\"type\": \"done\", \"steps\": 50, \"final_loss\": 0.5, "
            "\"steady_img_per_s\": 2000.4, \"startup_s\": 5.04, "
            "\"mean_img_per_s\": 1500.2, \"peak_gpu_mib\": 321, "
            "\"world_size\": 2, \"steady_img_per_s_per_rank\": [1000.4, "
            "1000.2]}");
  RunSummary s = summaryOf(false);
  s.finalLoss = NAN; // --steps 0: no loss; JSON has no NaN
  EXPECT_EQ(doneJson(s),
            "{\"type\": \"done\", \"steps\": 50, \"final_loss\": null, "
            "\"steady_img_per_s\": null, \"startup_s\": 5.04, "
            "\"mean_img_per_s\": 1500.2, \"peak_gpu_mib\": 321, "
            "\"world_size\": 2, \"steady_img_per_s_per_rank\": null}");
}

} // namespace
