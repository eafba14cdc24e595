//===- DistributedTest.cpp - launch environment, id exchange, shards -----===//
#include "cnnrt/Distributed.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>
#include <unistd.h>

using namespace cnnrt;

namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvFn fn() const {
    return [this](const char *k) -> const char * {
      auto it = vars.find(k);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

LaunchInfo resolveOk(const FakeEnv &e, const std::string &distInit = "") {
  LaunchInfo li;
  std::string err;
  EXPECT_TRUE(resolveLaunch(e.fn(), distInit, li, err)) << err;
  return li;
}

std::string resolveErr(const FakeEnv &e, const std::string &distInit = "") {
  LaunchInfo li;
  std::string err;
  EXPECT_FALSE(resolveLaunch(e.fn(), distInit, li, err));
  return err;
}

TEST(Launch, SingleProcess) {
  LaunchInfo li = resolveOk({});
  EXPECT_EQ(li.rank, 0);
  EXPECT_EQ(li.worldSize, 1);
  EXPECT_FALSE(li.distributed());
  EXPECT_EQ(li.source, "single");
  EXPECT_TRUE(li.idFile.empty());
}

TEST(Launch, Torchrun) {
  FakeEnv e{{{"RANK", "3"},
             {"WORLD_SIZE", "4"},
             {"LOCAL_RANK", "1"},
             {"MASTER_ADDR", "10.0.0.1"},
             {"MASTER_PORT", "29500"},
             {"TORCHELASTIC_RUN_ID", "job7"},
             {"TMPDIR", "/scratch"}}};
  LaunchInfo li = resolveOk(e);
  EXPECT_EQ(li.rank, 3);
  EXPECT_EQ(li.worldSize, 4);
  EXPECT_EQ(li.localRank, 1);
  EXPECT_EQ(li.source, "torchrun");
  EXPECT_EQ(li.masterAddr, "10.0.0.1");
  EXPECT_EQ(li.masterPort, 29500);
  EXPECT_EQ(li.idFile, "/scratch/cnnc-nccl-id-torchrun-10.0.0.1-29500-job7");
  EXPECT_EQ(li.describe(), "rank 3 of 4 (local rank 1, torchrun)");
  // --dist-init wins for the id file.
  EXPECT_EQ(resolveOk(e, "file:///shared/id").idFile, "/shared/id");
}

TEST(Launch, OpenMPIAndSlurm) {
  FakeEnv mpi{{{"OMPI_COMM_WORLD_RANK", "1"},
               {"OMPI_COMM_WORLD_SIZE", "2"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}};
  LaunchInfo li = resolveOk(mpi, "file:///nfs/id");
  EXPECT_EQ(li.source, "mpirun");
  EXPECT_EQ(li.rank, 1);
  EXPECT_EQ(li.localRank, 1);
  EXPECT_EQ(li.idFile, "/nfs/id");
  // Without --dist-init and without a job id there is no way to meet.
  EXPECT_NE(resolveErr(mpi).find("pass --dist-init file:///"),
            std::string::npos);

  FakeEnv slurm{{{"SLURM_PROCID", "5"},
                 {"SLURM_NTASKS", "8"},
                 {"SLURM_LOCALID", "1"},
                 {"SLURM_JOB_ID", "123"},
                 {"SLURM_STEP_ID", "0"}}};
  li = resolveOk(slurm);
  EXPECT_EQ(li.source, "slurm");
  EXPECT_EQ(li.rank, 5);
  EXPECT_EQ(li.worldSize, 8);
  EXPECT_EQ(li.localRank, 1);
  EXPECT_EQ(li.idFile, "/tmp/cnnc-nccl-id-slurm-123-0");
}

TEST(Launch, CnncChildrenOfGpusN) {
  FakeEnv e;
  for (auto &[k, v] : childEnvironment(NodeLayout{2, 1, 0}, 1,
                                       "file:///tmp/x-id"))
    e.vars[k] = v;
  LaunchInfo li = resolveOk(e);
  EXPECT_EQ(li.source, "cnnc");
  EXPECT_EQ(li.rank, 1);
  EXPECT_EQ(li.worldSize, 2);
  EXPECT_EQ(li.localRank, 1);
  EXPECT_EQ(li.localWorldSize, 2);
  EXPECT_EQ(li.idFile, "/tmp/x-id");
}

TEST(Launch, CnncChildrenAcrossNodes) {
  // ./train --gpus 4 --nnodes 3 --node-rank 2: local rank 1 is rank 9 of 12.
  NodeLayout n{4, 3, 2};
  EXPECT_EQ(n.worldSize(), 12);
  EXPECT_EQ(n.globalRank(0), 8);
  EXPECT_EQ(n.globalRank(3), 11);
  FakeEnv e;
  for (auto &[k, v] : childEnvironment(n, 1, "tcp://node0:29400"))
    e.vars[k] = v;
  EXPECT_EQ(e.vars["CNNC_RANK"], "9");
  EXPECT_EQ(e.vars["CNNC_WORLD_SIZE"], "12");
  EXPECT_EQ(e.vars["CNNC_LOCAL_RANK"], "1");
  EXPECT_EQ(e.vars["CNNC_LOCAL_WORLD_SIZE"], "4");
  LaunchInfo li = resolveOk(e);
  EXPECT_EQ(li.rank, 9);
  EXPECT_EQ(li.worldSize, 12);
  EXPECT_EQ(li.localRank, 1);
  EXPECT_EQ(li.tcpHost, "node0");
  EXPECT_EQ(li.tcpPort, 29400);
  EXPECT_TRUE(li.idFile.empty());
  // The same children without a --dist-init cannot meet across nodes.
  e.vars.erase("CNNC_DIST_INIT");
  EXPECT_NE(resolveErr(e).find("across nodes needs --dist-init tcp://"),
            std::string::npos);
}

TEST(Launch, NodeLayoutFlags) {
  std::string err;
  EXPECT_TRUE(checkNodeLayout({8, 1, 0}, false, "", err)) << err;
  EXPECT_TRUE(checkNodeLayout({2, 2, 1}, true, "tcp://h:1", err)) << err;
  EXPECT_FALSE(checkNodeLayout({2, 2, 1}, true, "", err));
  EXPECT_EQ(err, "--nnodes 2 needs --dist-init tcp://HOST:PORT (node 0's "
                 "address and a free port there; or CNNC_DIST_INIT)");
  EXPECT_FALSE(checkNodeLayout({2, 2, 0}, false, "tcp://h:1", err));
  EXPECT_EQ(err.rfind("--nnodes 2 needs --node-rank R", 0), 0u) << err;
  EXPECT_FALSE(checkNodeLayout({2, 2, 2}, true, "tcp://h:1", err));
  EXPECT_EQ(err, "--node-rank 2 is not in [0, 2) (--nnodes 2)");
  EXPECT_FALSE(checkNodeLayout({2, 1, 1}, true, "", err));
  EXPECT_EQ(err, "--node-rank 1 is not in [0, 1) (--nnodes 1)");
  EXPECT_FALSE(checkNodeLayout({2, 0, 0}, false, "", err));
  EXPECT_EQ(err, "--nnodes 0: expected >= 1");
}

TEST(Launch, DistInitUrls) {
  DistInit d;
  std::string err;
  ASSERT_TRUE(parseDistInit("tcp://10.0.0.1:29500", d, err)) << err;
  EXPECT_TRUE(d.tcp());
  EXPECT_EQ(d.host, "10.0.0.1");
  EXPECT_EQ(d.port, 29500);
  EXPECT_EQ(d.url(), "tcp://10.0.0.1:29500");
  ASSERT_TRUE(parseDistInit("tcp://[fe80::1]:7", d, err)) << err;
  EXPECT_EQ(d.host, "fe80::1");
  EXPECT_EQ(d.url(), "tcp://[fe80::1]:7");
  ASSERT_TRUE(parseDistInit("file:///x/id", d, err)) << err;
  EXPECT_FALSE(d.tcp());
  EXPECT_EQ(d.path, "/x/id");
  EXPECT_EQ(d.url(), "file:///x/id");
  for (const char *bad : {"tcp://host", "tcp://:80", "tcp://h:0",
                          "tcp://h:65536", "tcp://h:8x", "tcp://fe80::1:80",
                          "http://h:80", "file://relative"}) {
    EXPECT_FALSE(parseDistInit(bad, d, err)) << bad;
    EXPECT_NE(err.find("expected file:///absolute/path"), std::string::npos)
        << err;
  }
}

TEST(Launch, TorchrunAcrossNodesMeetsAfterMasterPort) {
  FakeEnv e{{{"RANK", "5"},
             {"WORLD_SIZE", "8"},
             {"LOCAL_RANK", "1"},
             {"LOCAL_WORLD_SIZE", "4"},
             {"MASTER_ADDR", "node0"},
             {"MASTER_PORT", "29500"}}};
  LaunchInfo li = resolveOk(e);
  EXPECT_EQ(li.tcpHost, "node0");
  EXPECT_EQ(li.tcpPort, 29501);
  EXPECT_EQ(li.localWorldSize, 4);
  EXPECT_TRUE(li.idFile.empty());
  // --dist-init wins.
  EXPECT_EQ(resolveOk(e, "tcp://other:1").tcpHost, "other");
  // One node (LOCAL_WORLD_SIZE = WORLD_SIZE) stays with the file.
  e.vars["LOCAL_WORLD_SIZE"] = "8";
  EXPECT_FALSE(resolveOk(e).idFile.empty());
  e.vars["LOCAL_WORLD_SIZE"] = "4";
  e.vars.erase("MASTER_PORT");
  EXPECT_NE(resolveErr(e).find("needs MASTER_ADDR and MASTER_PORT"),
            std::string::npos);
}

TEST(Launch, SlurmAndMpiAcrossNodesNeedDistInit) {
  FakeEnv slurm{{{"SLURM_PROCID", "5"},
                 {"SLURM_NTASKS", "8"},
                 {"SLURM_LOCALID", "1"},
                 {"SLURM_NNODES", "2"},
                 {"SLURM_JOB_ID", "123"}}};
  EXPECT_EQ(resolveErr(slurm),
            "rank 5 of 8 (local rank 1, slurm): a slurm job across nodes "
            "needs --dist-init tcp://<first node>:<port> (rank 0's host and "
            "a free port; or CNNC_DIST_INIT), or --dist-init file:///path on "
            "a filesystem every node sees");
  EXPECT_EQ(resolveOk(slurm, "tcp://n0:29400").tcpPort, 29400);
  slurm.vars["CNNC_DIST_INIT"] = "tcp://n0:29401"; // the environment's
  EXPECT_EQ(resolveOk(slurm).tcpPort, 29401);
  FakeEnv mpi{{{"OMPI_COMM_WORLD_RANK", "1"},
               {"OMPI_COMM_WORLD_SIZE", "4"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
               {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
               {"OMPI_MCA_ess_base_jobid", "77"}}};
  EXPECT_NE(resolveErr(mpi).find("mpirun job across nodes needs --dist-init "
                                 "tcp://"),
            std::string::npos);
}

TEST(Launch, LocalRankDefaultsToRank) {
  FakeEnv e{{{"RANK", "1"}, {"WORLD_SIZE", "2"}}};
  EXPECT_EQ(resolveOk(e, "file:///a").localRank, 1);
}

TEST(Launch, Errors) {
  EXPECT_EQ(resolveErr({{{"RANK", "2"}, {"WORLD_SIZE", "2"}}}),
            "RANK='2' is not a rank in [0, 2)");
  EXPECT_EQ(resolveErr({{{"RANK", "0"}, {"WORLD_SIZE", "zero"}}}),
            "WORLD_SIZE='zero' is not a world size >= 1");
  EXPECT_EQ(resolveErr({{{"RANK", "0"}}}),
            "torchrun launch: WORLD_SIZE is not set (RANK is)");
  EXPECT_EQ(resolveErr({{{"SLURM_PROCID", "0"},
                         {"SLURM_NTASKS", "2"},
                         {"SLURM_LOCALID", "-1"}}},
                       "file:///a"),
            "SLURM_LOCALID='-1' is not a local rank >= 0");
  EXPECT_NE(resolveErr({}, "ftp://host:1234").find("expected file:///"),
            std::string::npos);
  EXPECT_NE(resolveErr({}, "file://relative").find("expected file:///"),
            std::string::npos);
}

TEST(Launch, IdExchangeThroughAFile) {
  char tmpl[] = "/tmp/cnnrt-dist-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string path = std::string(tmpl) + "/id";
  LaunchInfo r0, r1;
  r0.worldSize = r1.worldSize = 2;
  r1.rank = r1.localRank = 1;
  std::vector<char> got;
  std::string err1;
  bool ok1 = false;
  // Rank 1 starts waiting before rank 0 writes.
  std::thread t([&] { ok1 = exchangeId(r1, path, got, 8, 10, err1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::vector<char> id = {1, 2, 3, 4, 5, 6, 7, 8};
  std::string err0;
  EXPECT_TRUE(exchangeId(r0, path, id, 8, 10, err0)) << err0;
  t.join();
  EXPECT_TRUE(ok1) << err1;
  EXPECT_EQ(got, id);
  std::remove(path.c_str());
  rmdir(tmpl);
}

TEST(Launch, IdExchangeTimesOut) {
  LaunchInfo r1;
  r1.worldSize = 2;
  r1.rank = 1;
  std::vector<char> got;
  std::string err;
  EXPECT_FALSE(exchangeId(r1, "/nonexistent-dir/id", got, 8, 0.1, err));
  EXPECT_EQ(err, "rank 1: no NCCL id from rank 0 in '/nonexistent-dir/id' "
                 "after 0.1 s (rank 0 did not start, or the path is not "
                 "shared)");
}

TEST(Launch, Shards) {
  int64_t b, e;
  ASSERT_TRUE(shardOfBatch(256, 1, 2, b, e));
  EXPECT_EQ(b, 128);
  EXPECT_EQ(e, 256);
  ASSERT_TRUE(shardOfBatch(12, 2, 3, b, e));
  EXPECT_EQ(b, 8);
  EXPECT_EQ(e, 12);
  EXPECT_FALSE(shardOfBatch(10, 0, 3, b, e));
  EXPECT_FALSE(shardOfBatch(10, 2, 2, b, e));
}

//===--- ./train --gpus N: one process per rank ---------------------------===//

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

TEST(LocalRanks, EveryRankRunsWithItsEnvironment) {
  char dir[] = "/tmp/cnnrt-ranks-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string d = dir, err;
  setenv("CNNC_RANK", "99", 1); // the parent's own value is replaced
  int rc = runLocalRanks(
      {"/bin/sh", "-c",
       "echo \"$CNNC_RANK $CNNC_WORLD_SIZE $CNNC_LOCAL_RANK $CNNC_DIST_INIT\" "
       "> " + d + "/r$CNNC_RANK"},
      NodeLayout{3, 1, 0}, "file://" + d + "/id", 1.0, err);
  unsetenv("CNNC_RANK");
  EXPECT_EQ(rc, 0) << err;
  for (int r = 0; r < 3; ++r) {
    std::ifstream f(d + "/r" + std::to_string(r));
    std::string line;
    std::getline(f, line);
    std::string want = std::to_string(r) + " 3 " + std::to_string(r) +
                       " file://" + d + "/id";
    EXPECT_EQ(line, want);
    std::remove((d + "/r" + std::to_string(r)).c_str());
  }
  rmdir(dir);
}

TEST(LocalRanks, TheSecondNodesRanks) {
  // ./train --gpus 2 --nnodes 2 --node-rank 1: ranks 2 and 3 of 4.
  char dir[] = "/tmp/cnnrt-ranks-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string d = dir, err;
  int rc = runLocalRanks(
      {"/bin/sh", "-c",
       "echo \"$CNNC_RANK $CNNC_WORLD_SIZE $CNNC_LOCAL_RANK "
       "$CNNC_LOCAL_WORLD_SIZE $CNNC_DIST_INIT\" > " +
           d + "/r$CNNC_LOCAL_RANK"},
      NodeLayout{2, 2, 1}, "tcp://node0:29400", 1.0, err);
  EXPECT_EQ(rc, 0) << err;
  for (int l = 0; l < 2; ++l) {
    std::ifstream f(d + "/r" + std::to_string(l));
    std::string line;
    std::getline(f, line);
    EXPECT_EQ(line, std::to_string(2 + l) + " 4 " + std::to_string(l) +
                        " 2 tcp://node0:29400");
    std::remove((d + "/r" + std::to_string(l)).c_str());
  }
  rmdir(dir);
  rc = runLocalRanks({"/bin/sh", "-c",
                      "if [ \"$CNNC_LOCAL_RANK\" = 1 ]; then exit 3; fi; "
                      "exec sleep 30"},
                     NodeLayout{2, 2, 1}, "tcp://node0:29400", 1.0, err);
  EXPECT_EQ(rc, 3);
  EXPECT_EQ(err, "rank 3 of 4 (local rank 1 of node 1) exited with code 3; "
                 "the other ranks of this node were stopped");
}

TEST(LocalRanks, AFailingRankStopsTheOthers) {
  // Rank 1 fails at once; ranks 0 and 2 would wait 30 s for it.
  auto t0 = std::chrono::steady_clock::now();
  std::string err;
  int rc = runLocalRanks({"/bin/sh", "-c",
                          "if [ \"$CNNC_RANK\" = 1 ]; then exit 7; fi; "
                          "exec sleep 30"},
                         NodeLayout{3, 1, 0}, "file:///tmp/unused-id", 1.0,
                         err);
  EXPECT_EQ(rc, 7);
  EXPECT_EQ(err, "rank 1 of 3 exited with code 7; the other ranks were "
                 "stopped");
  EXPECT_LT(secondsSince(t0), 10);
}

TEST(LocalRanks, ARankThatIgnoresSigtermIsKilledAfterTheGrace) {
  auto t0 = std::chrono::steady_clock::now();
  std::string err;
  int rc = runLocalRanks({"/bin/sh", "-c",
                          "trap '' TERM; if [ \"$CNNC_RANK\" = 0 ]; then "
                          "exit 5; fi; exec sleep 30"},
                         NodeLayout{2, 1, 0}, "file:///tmp/unused-id", 0.3,
                         err);
  EXPECT_EQ(rc, 5) << err;
  EXPECT_LT(secondsSince(t0), 10);
}

TEST(LocalRanks, ASignalIsReported) {
  std::string err;
  int rc = runLocalRanks({"/bin/sh", "-c",
                          "if [ \"$CNNC_RANK\" = 1 ]; then kill -SEGV $$; "
                          "fi; exec sleep 30"},
                         NodeLayout{2, 1, 0}, "file:///tmp/unused-id", 1.0,
                         err);
  EXPECT_EQ(rc, 128 + 11);
  EXPECT_EQ(err, "rank 1 of 2 was killed by signal 11; the other ranks were "
                 "stopped");
}

TEST(LocalRanks, AProgramThatCannotStart) {
  std::string err;
  EXPECT_EQ(runLocalRanks({"/nonexistent/train"}, NodeLayout{2, 1, 0},
                          "file:///tmp/id", 1.0, err),
            127);
  EXPECT_EQ(err.rfind("rank ", 0), 0u) << err;
}

TEST(Launch, NcclMaxCTAs) {
  EXPECT_EQ(ncclMaxCTAs(FakeEnv{}.fn()), 8);
  EXPECT_EQ(ncclMaxCTAs(FakeEnv{{{"CNNC_NCCL_MAX_CTAS", "16"}}}.fn()), 16);
  EXPECT_EQ(ncclMaxCTAs(FakeEnv{{{"CNNC_NCCL_MAX_CTAS", "0"}}}.fn()), 0);
  EXPECT_EQ(ncclMaxCTAs(FakeEnv{{{"CNNC_NCCL_MAX_CTAS", "lots"}}}.fn()), 8);
  // NCCL's own settings are left alone.
  EXPECT_EQ(ncclMaxCTAs(FakeEnv{{{"NCCL_MAX_CTAS", "32"}}}.fn()), 0);
  EXPECT_EQ(ncclMaxCTAs(FakeEnv{{{"NCCL_MAX_NCHANNELS", "4"}}}.fn()), 0);
}

TEST(Launch, Timeout) {
  EXPECT_EQ(distTimeoutSeconds(FakeEnv{}.fn()), 300);
  EXPECT_EQ(distTimeoutSeconds(FakeEnv{{{"CNNC_DIST_TIMEOUT", "2.5"}}}.fn()),
            2.5);
  EXPECT_EQ(distTimeoutSeconds(FakeEnv{{{"CNNC_DIST_TIMEOUT", "x"}}}.fn()),
            300);
}

} // namespace
