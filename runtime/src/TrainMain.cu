//===- TrainMain.cu - the training driver of generated executables --------===//

#include "Session.h"
#include "cnnrt/Distributed.h"
#include "cnnrt/HyperParams.h"
#include "cnnrt/Pipeline.h"

#include "cnnrt/TrainLoop.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unistd.h>

namespace cnnrt {

namespace {

/// Pipeline stages (trainPipelineMain): this process's stage and the
/// stage count; stages == 0 outside a pipeline. Every stage of a replica
/// reads the replica's shard of the batch stream (all of it with one
/// replica); replica 0's last stage reports. Pipeline x data parallel:
/// rank = replica x stages + stage.
struct PipelineRun {
  int stage = 0, stages = 0, replica = 0, replicas = 1;
};
PipelineRun gPipeline;

struct Options {
  std::string data;
  TrainFlags train; ///< --steps, --lr, --epochs, schedules, logging, data
  std::string weights;
  std::string checkpoint;
  int64_t checkpointEvery = 0;
  std::string resume;
  bool eval = false;
  uint64_t seed = 0;
  bool graph = true;
  int gpus = 0;         ///< --gpus N (0: not given)
  int nnodes = 1;       ///< --nnodes M
  int nodeRank = 0;     ///< --node-rank R
  bool nodeRankGiven = false;
  std::string distInit; ///< --dist-init file:///path | tcp://HOST:PORT
};

const char *kUsage =
    "usage: %s --data DIR|FILE|synthetic [options]\n"
    "  --data DIR|FILE|synthetic  training data (required), recognized by\n"
    "                        itself: an ImageFolder (DIR/<class>/*.jpg|png,\n"
    "                        or DIR/train + DIR/val of class folders), images\n"
    "                        with PNG masks for a dense model (DIR/images +\n"
    "                        DIR/masks, or DIR/train/... + DIR/val/...), .npy\n"
    "                        arrays (FILE.npy with --labels, or DIR with\n"
    "                        train_x.npy train_y.npy [val_x.npy val_y.npy]),\n"
    "                        CIFAR-10 binary (DIR with data_batch_*.bin /\n"
    "                        test_batch.bin, or one file), or synthetic data\n"
    "  --steps N             train until global step N (default %lld)\n"
    "  --lr X                learning rate (default %g)\n"
    "  --weights FILE        initial weights (default <executable>.cnnw)\n"
    "  --checkpoint FILE     write a checkpoint at the end (atomically);\n"
    "                        \"{step}\" in FILE is replaced by the step;\n"
    "                        FILE.safetensors: safetensors (PyTorch's\n"
    "                        state_dict names), else .cnnw; --weights and\n"
    "                        --resume read either\n"
    "  --checkpoint-every K  also write it every K steps\n"
    "  --resume FILE         continue from a checkpoint (exact resume)\n"
    "  --eval                evaluate on the validation split after training\n"
    "  --seed S              data order / augmentation seed (default 0)\n"
    "  --no-graph            do not capture the step into a CUDA graph\n"
    "  --gpus N              data parallel on N GPUs of this host (a step\n"
    "                        compiled with cnnc --gpus): one process per GPU,\n"
    "                        the batch is per GPU, rank 0 logs and writes\n"
    "                        checkpoints (docs/data-parallel.md); under\n"
    "                        torchrun/mpirun/srun the launcher's ranks are used\n"
    "  --nnodes M --node-rank R\n"
    "                        with --gpus N: this host is node R of M (ranks\n"
    "                        R*N .. R*N+N-1 of M*N); needs --dist-init tcp://\n"
    "  --dist-init URL       how the ranks get rank 0's NCCL id:\n"
    "                        tcp://HOST:PORT (rank 0 on HOST listens on PORT;\n"
    "                        across nodes) or file:///path (a shared file);\n"
    "                        default: $CNNC_DIST_INIT, else a file in $TMPDIR\n"
    "%s"
    "  --help                this text\n"
    "environment: CNNRT_ALLOW_TF32=0|1 CNNRT_DETERMINISTIC=1|0 "
    "CNNRT_ALGO_CACHE=FILE\n"
    "             CNNRT_SYNC_CHECK=1 CNNRT_VERBOSE=1 CNNC_DIST_INIT=URL\n"
    "             CNNC_DIST_TIMEOUT=seconds (rendezvous and collectives, "
    "default 300)\n"
    "             CNNC_PIPELINE_TRACE=1 (pipeline stages: every transfer on "
    "stderr, and the pending ones every 5 s)\n"
    "             CNNRT_SEGMENTED_CAPTURE=0 (interleaved pipeline stages: "
    "uncaptured, not CUDA graphs between the transfers)\n"
    "exit codes: 0 ok, 1 error, 2 out of GPU memory, 3 no GPU\n";

[[noreturn]] void usageError(const std::string &msg) {
  std::fprintf(stderr, "cnnrt: %s (see --help)\n", msg.c_str());
  std::exit(kExitError);
}

// Integers in [min, max]: ranks and node counts are kept in an int, so
// their flags stop at INT_MAX instead of wrapping.
int64_t parseInt(const std::string &flag, const std::string &v, int64_t min,
                 int64_t max = INT64_MAX) {
  int64_t x = 0;
  if (!parseIntInRange(v, min, max, x))
    usageError("invalid value '" + v + "' for " + flag +
               " (expected an integer in [" + std::to_string(min) + ", " +
               std::to_string(max) + "])");
  return x;
}

// The rules of cnnrt/HyperParams.h, as cnnc applies them at compile time.
double parseFloat(const std::string &flag, const std::string &v,
                  const ParamRange &range) {
  double x = 0;
  std::string err;
  if (!parseParam(flag, v, range, x, err))
    usageError(err);
  return x;
}

Options parseArgs(int argc, char **argv, const ModelSpec &spec) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], v;
    bool hasInline = false;
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
      hasInline = true;
    }
    auto value = [&]() -> std::string {
      if (hasInline)
        return v;
      if (i + 1 >= argc)
        usageError("missing value for " + a);
      return argv[++i];
    };
    auto noValue = [&]() {
      if (hasInline)
        usageError(a + " takes no value");
    };
    if (a == "--help" || a == "-h") {
      std::printf(kUsage, argv[0], (long long)spec.defaultSteps,
                  (double)spec.defaultLR, TrainFlags::help());
      std::exit(0);
    } else if (a == "--data") {
      o.data = value();
    } else if (a == "--steps") {
      o.train.steps = parseInt(a, value(), 0);
    } else if (a == "--lr") {
      o.train.lr = parseFloat(a, value(), lrRange());
    } else if (a == "--weights") {
      o.weights = value();
    } else if (a == "--checkpoint") {
      o.checkpoint = value();
    } else if (a == "--checkpoint-every") {
      o.checkpointEvery = parseInt(a, value(), 1);
    } else if (a == "--resume") {
      o.resume = value();
    } else if (a == "--eval") {
      noValue();
      o.eval = true;
    } else if (TrainFlags::isFlag(a)) {
      std::string err;
      if (o.train.parse(a, value(), err) < 0)
        usageError(err);
    } else if (a == "--seed") {
      o.seed = static_cast<uint64_t>(parseInt(a, value(), 0));
    } else if (a == "--no-graph") {
      noValue();
      o.graph = false;
    } else if (a == "--gpus") {
      o.gpus = static_cast<int>(parseInt(a, value(), 1, INT32_MAX));
    } else if (a == "--nnodes") {
      o.nnodes = static_cast<int>(parseInt(a, value(), 1, INT32_MAX));
    } else if (a == "--node-rank") {
      o.nodeRank = static_cast<int>(parseInt(a, value(), 0, INT32_MAX));
      o.nodeRankGiven = true;
    } else if (a == "--dist-init") {
      o.distInit = value();
    } else {
      usageError("unknown flag '" + std::string(argv[i]) + "'");
    }
  }
  if (o.data.empty())
    usageError("--data DIR|FILE|synthetic is required");
  if (o.checkpointEvery > 0 && o.checkpoint.empty())
    usageError("--checkpoint-every needs --checkpoint FILE");
  return o;
}

bool fileExists(const std::string &p) { return access(p.c_str(), R_OK) == 0; }

std::string defaultWeights(const char *argv0) {
  std::string a = std::string(argv0) + ".cnnw";
  if (fileExists(a))
    return a;
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) {
    buf[n] = 0;
    std::string b = std::string(buf) + ".cnnw";
    if (fileExists(b))
      return b;
  }
  return a;
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Double-buffered input pipeline: pinned host slots, device staging slots,
/// copies on the copy stream ordered by events. The host slots are filled by
/// a StreamLoader, whose workers decode a few batches ahead.
struct InputPipeline {
  Context &ctx;
  size_t imgBytes = 0, labBytes = 0;
  void *hImg[2] = {nullptr, nullptr};
  int32_t *hLab[2] = {nullptr, nullptr};
  void *dImg[2] = {nullptr, nullptr};
  int32_t *dLab[2] = {nullptr, nullptr};
  cudaEvent_t copied[2] = {nullptr, nullptr};
  cudaEvent_t consumed[2] = {nullptr, nullptr};
  LoaderState before[2]; ///< loader state before the batch in each slot
  InputFormat format;

  InputPipeline(Context &c, size_t sampleBytes, const InputFormat &f,
                size_t labelsPerSample)
      : ctx(c), format(f) {
    const ModelSpec &s = c.spec();
    imgBytes = (size_t)s.batch * sampleBytes;
    // One label per image, or a mask per image (dense prediction).
    labBytes = (size_t)s.batch * labelsPerSample * sizeof(int32_t);
    for (int k = 0; k < 2; ++k) {
      c.check(cudaMallocHost(&hImg[k], imgBytes), "input pipeline");
      c.check(cudaMallocHost(&hLab[k], labBytes), "input pipeline");
      c.check(cudaMalloc(&dImg[k], imgBytes), "input pipeline");
      c.check(cudaMalloc(&dLab[k], labBytes), "input pipeline");
      c.check(cudaEventCreateWithFlags(&copied[k], cudaEventDisableTiming),
              "input pipeline");
      c.check(cudaEventCreateWithFlags(&consumed[k], cudaEventDisableTiming),
              "input pipeline");
    }
  }
  ~InputPipeline() {
    cudaDeviceSynchronize();
    for (int k = 0; k < 2; ++k) {
      cudaFreeHost(hImg[k]);
      cudaFreeHost(hLab[k]);
      cudaFree(dImg[k]);
      cudaFree(dLab[k]);
      cudaEventDestroy(copied[k]);
      cudaEventDestroy(consumed[k]);
    }
  }
  /// Fills host slot k from the loader and starts its copy to the device.
  /// A sample that cannot be read (corrupt image) ends the run: exit 1.
  void produce(int k, StreamLoader &loader) {
    ctx.check(cudaEventSynchronize(copied[k]), "input pipeline");
    before[k] = loader.state();
    std::string err;
    if (!loader.next(hImg[k], hLab[k], err)) {
      std::fprintf(stderr, "cnnrt: %s\n", err.c_str());
      std::exit(kExitError);
    }
    ctx.check(cudaStreamWaitEvent(ctx.copyStream(), consumed[k], 0),
              "input pipeline");
    ctx.check(cudaMemcpyAsync(dImg[k], hImg[k], imgBytes,
                              cudaMemcpyHostToDevice, ctx.copyStream()),
              "input copy");
    ctx.check(cudaMemcpyAsync(dLab[k], hLab[k], labBytes,
                              cudaMemcpyHostToDevice, ctx.copyStream()),
              "input copy");
    ctx.check(cudaEventRecord(copied[k], ctx.copyStream()), "input pipeline");
  }
  /// Converts slot k into the input tensors on the compute stream.
  void consume(int k) {
    ctx.check(cudaStreamWaitEvent(ctx.stream(), copied[k], 0),
              "input pipeline");
    launchInputConvert(ctx, dImg[k], dLab[k], format);
    ctx.check(cudaEventRecord(consumed[k], ctx.stream()), "input pipeline");
  }
};

size_t usedGPUMemory() {
  size_t f = 0, t = 0;
  if (cudaMemGetInfo(&f, &t) != cudaSuccess)
    return 0;
  return t - f;
}

/// "{step}" in a checkpoint path is replaced by the step number.
std::string checkpointPath(std::string p, int64_t step) {
  size_t k = p.find("{step}");
  if (k != std::string::npos)
    p.replace(k, 6, std::to_string(step));
  return p;
}

void writeCheckpoint(Context &ctx, const std::string &pathPattern, int64_t step,
                     const LoaderState &ls) {
  std::string path = checkpointPath(pathPattern, step);
  std::vector<TensorEntry> entries = readStateFromArena(ctx);
  TensorEntry s = TensorEntry::zeros("__step__", DType::I64, {1});
  s.as<int64_t>()[0] = step;
  entries.push_back(std::move(s));
  TensorEntry l = TensorEntry::zeros("__loader__", DType::I64, {3});
  l.as<int64_t>()[0] = static_cast<int64_t>(ls.seed);
  l.as<int64_t>()[1] = ls.epoch;
  l.as<int64_t>()[2] = ls.cursor;
  entries.push_back(std::move(l));
  std::string err;
  if (!writeTensorFileAtomic(path, entries, err))
    ctx.fail("checkpoint", err);
}

/// A checkpoint of pipeline stages: every stage writes its own tensors
/// (`<path>.stage<s>`, atomically), and once all have (a sum over the
/// stages), the last stage writes their union with the step and the data
/// position to `path` and removes the parts. The file is the one an
/// unpartitioned step writes; each stage resumes from it by loading its own
/// tensors.
void writePipelineCheckpoint(Context &ctx, const ModelSpec &spec,
                             const std::string &pathPattern, int64_t step,
                             const LoaderState &ls) {
  std::string path = checkpointPath(pathPattern, step), err;
  auto part = [&](int s) { return path + ".stage" + std::to_string(s); };
  if (!writeTensorFileAtomic(part(gPipeline.stage), readStateFromArena(ctx),
                             err))
    ctx.fail("checkpoint", err);
  // (Replica 0's stages write; every rank takes part in the sum.)
  int64_t written = gPipeline.replica == 0 ? 1 : 0;
  if (written == 0) {
    spec.dist->sumHost(ctx, &written, 1);
    return;
  }
  spec.dist->sumHost(ctx, &written, 1);
  if (written != gPipeline.stages)
    ctx.fail("checkpoint", "only " + std::to_string(written) + " of " +
                               std::to_string(gPipeline.stages) +
                               " stages wrote their part of " + path);
  if (gPipeline.stage != gPipeline.stages - 1)
    return;
  std::vector<TensorEntry> all;
  for (int s = 0; s < gPipeline.stages; ++s) {
    std::vector<TensorEntry> entries;
    if (!readTensorFile(part(s), entries, err))
      ctx.fail("checkpoint", err);
    for (TensorEntry &e : entries)
      if (!findEntry(all, e.name))
        all.push_back(std::move(e));
  }
  TensorEntry st = TensorEntry::zeros("__step__", DType::I64, {1});
  st.as<int64_t>()[0] = step;
  all.push_back(std::move(st));
  TensorEntry l = TensorEntry::zeros("__loader__", DType::I64, {3});
  l.as<int64_t>()[0] = static_cast<int64_t>(ls.seed);
  l.as<int64_t>()[1] = ls.epoch;
  l.as<int64_t>()[2] = ls.cursor;
  all.push_back(std::move(l));
  if (!writeTensorFileAtomic(path, all, err))
    ctx.fail("checkpoint", err);
  for (int s = 0; s < gPipeline.stages; ++s)
    unlink(part(s).c_str());
}

/// The host-side checks of loadStateIntoArena, run before the GPU is used:
/// every persistent tensor in the file has the model's element count and a
/// convertible dtype.
bool checkInitialState(const ModelSpec &spec,
                       const std::vector<TensorEntry> &entries,
                       const std::string &source, std::string &err) {
  for (int i = 0; i < spec.numTensors; ++i) {
    const TensorSpec &t = spec.tensors[i];
    if (t.role != Role::Param && t.role != Role::Buffer &&
        t.role != Role::OptState && t.role != Role::LossScale)
      continue;
    // (Missing parameters are reported by loadStateIntoArena, also before
    // the first step.)
    const TensorEntry *e = findEntry(entries, t.name);
    if (!e)
      continue;
    int64_t numel = 1;
    for (int r = 0; r < t.rank; ++r)
      numel *= t.dims[r];
    if (e->numel() != numel) {
      std::string have = "[", want = "[";
      for (size_t r = 0; r < e->shape.size(); ++r)
        have += (r ? "," : "") + std::to_string(e->shape[r]);
      for (int r = 0; r < t.rank; ++r)
        want += (r ? "," : "") + std::to_string(t.dims[r]);
      err = "tensor '" + std::string(t.name) + "' in " + source +
            " has shape " + have + "] but the model expects " + want + "]";
      return false;
    }
    bool floats = (e->dtype == DType::F32 || e->dtype == DType::F16) &&
                  (t.dtype == DType::F32 || t.dtype == DType::F16);
    if (e->dtype != t.dtype && !floats) {
      err = "tensor '" + std::string(t.name) + "' in " + source + " is " +
            dtypeName(e->dtype) + " but the model expects " +
            dtypeName(t.dtype);
      return false;
    }
  }
  return true;
}

[[noreturn]] void dataError(const std::string &err) {
  std::fprintf(stderr, "cnnrt: %s\n", err.c_str());
  std::exit(kExitError);
}

int visibleGPUs() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess)
    devices = 0;
  return devices;
}

[[noreturn]] void tooFewGPUs(int gpus, int devices) {
  std::fprintf(stderr,
               "cnnrt: error: --gpus %d: only %d GPU(s) are visible "
               "(CUDA_VISIBLE_DEVICES=%s)\n",
               gpus, devices,
               std::getenv("CUDA_VISIBLE_DEVICES")
                   ? std::getenv("CUDA_VISIBLE_DEVICES")
                   : "<unset>");
  std::exit(kExitError);
}

/// --dist-init, else $CNNC_DIST_INIT (empty when neither is set).
std::string distInitOf(const Options &o) {
  if (!o.distInit.empty())
    return o.distInit;
  const char *e = std::getenv("CNNC_DIST_INIT");
  return e ? e : "";
}

/// `./train --gpus N [--nnodes M --node-rank R]` (no launcher around it):
/// this process starts N copies of itself, one rank per GPU (CNNC_RANK/
/// WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE and --dist-init in their
/// environment), waits for them and exits with the first failure's code; a
/// rank that fails stops the others of this node (those of other nodes
/// fail in their collectives or the rendezvous, within CNNC_DIST_TIMEOUT).
int launchRanks(const Options &o, const ModelSpec &spec, int argc,
                char **argv) {
  if (o.gpus < 1)
    usageError("--nnodes " + std::to_string(o.nnodes) +
               " needs --gpus N (the ranks of each node)");
  NodeLayout node{o.gpus, o.nnodes, o.nodeRank};
  const std::string distInit = distInitOf(o);
  std::string err, idFile, tmpDir, url;
  if (!checkNodeLayout(node, o.nodeRankGiven, distInit, err))
    usageError(err);
  DistInit di;
  if (!distInit.empty() && !parseDistInit(distInit, di, err))
    usageError(err);
  if (!spec.dist)
    usageError("--gpus " + std::to_string(o.gpus) +
               ": this step has no all-reduces; compile it with cnnc --gpus " +
               std::to_string(node.worldSize()) + " (data parallel)");
  requireGPU();
  int devices = visibleGPUs();
  if (o.gpus > devices)
    tooFewGPUs(o.gpus, devices);
  if (di.tcp()) {
    url = di.url(); // rank 0 (on node 0) listens; nothing to clean up
  } else if (!distInit.empty()) {
    idFile = di.path;
    url = di.url();
    // A stale id from an earlier run would send the ranks to a dead group.
    // Only node 0 removes it: another node could remove the new one.
    if (o.nodeRank == 0)
      unlink(idFile.c_str());
  } else {
    const char *t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/cnnc-ranks-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    if (!mkdtemp(buf.data())) {
      std::fprintf(stderr, "cnnrt: error: cannot create %s: %s\n",
                   tmpl.c_str(), std::strerror(errno));
      return kExitError;
    }
    tmpDir = buf.data();
    idFile = tmpDir + "/nccl-id";
    url = "file://" + idFile;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    std::fprintf(stderr, "cnnrt: error: cannot find this executable "
                         "(/proc/self/exe) to start the ranks\n");
    return kExitError;
  }
  self[n] = 0;
  std::vector<std::string> args = {self};
  for (int i = 1; i < argc; ++i)
    args.push_back(argv[i]);
  if (node.nnodes > 1)
    std::printf("data parallel: node %d of %d: starting %d processes, one "
                "per GPU (ranks %d..%d of %d, rendezvous %s); rank 0 "
                "reports\n",
                node.nodeRank, node.nnodes, o.gpus, node.globalRank(0),
                node.globalRank(o.gpus - 1), node.worldSize(), url.c_str());
  else
    std::printf("data parallel: starting %d processes, one per GPU (ranks "
                "0..%d); rank 0 reports\n",
                o.gpus, o.gpus - 1);
  int rc = runLocalRanks(args, node, url, 10.0, err);
  if (!idFile.empty() && o.nodeRank == 0)
    unlink(idFile.c_str());
  if (!tmpDir.empty())
    rmdir(tmpDir.c_str());
  if (rc == 0)
    return kExitOk;
  std::fprintf(stderr, "cnnrt: error: data-parallel run failed: %s\n",
               err.c_str());
  // Out of memory / no GPU keep their codes; anything else is an error.
  return rc == kExitOutOfMemory || rc == kExitNoGPU ? rc : kExitError;
}

/// The validation pass: the whole Test split through evalStep, in order,
/// decoded by its own loader; top-1/top-5 over every image once.
struct Evaluator {
  Context &ctx;
  const ModelSpec &spec;
  const SampleSource &src;
  std::unique_ptr<StreamLoader> loader;
  std::unique_ptr<InputPipeline> pipe;
  const TensorSpec *logitsT = nullptr;

  Evaluator(Context &c, const SampleSource &s, int workers,
            const InputFormat &fmt)
      : ctx(c), spec(c.spec()), src(s) {
    LoaderOptions lo;
    lo.batch = spec.batch;
    lo.shuffle = false;
    lo.workers = workers;
    loader.reset(new StreamLoader(src, lo));
    pipe.reset(
        new InputPipeline(ctx, src.sampleBytes(), fmt, src.labelsPerSample()));
    logitsT = findTensor(spec, Role::Logits);
  }

  /// Dense prediction: the Logits tensor is N x C x H x W (or N x H x W x C)
  /// over the masks' H x W; false (err) when it is neither.
  bool denseLayout(bool &channelsLast, std::string &err) const {
    const int64_t *d = logitsT->dims;
    const int C = spec.numClasses;
    if (logitsT->rank == 4 && d[0] == spec.batch && d[1] == C &&
        d[2] == src.labelH && d[3] == src.labelW) {
      channelsLast = false;
      return true;
    }
    if (logitsT->rank == 4 && d[0] == spec.batch && d[3] == C &&
        d[1] == src.labelH && d[2] == src.labelW) {
      channelsLast = true;
      return true;
    }
    err = "the validation of '" + std::string(spec.name) +
          "' needs its logits as " + std::to_string(spec.batch) + " x " +
          std::to_string(C) + " x " + std::to_string(src.labelH) + " x " +
          std::to_string(src.labelW) + " (the masks' size), but the step's "
          "Logits tensor has rank " + std::to_string(logitsT->rank);
    return false;
  }

  /// One validation batch through the step: the loader's next images and
  /// labels (kept in `labels`) copied in and converted, evalStep, and the
  /// Logits tensor copied back into `logits` (sized by the caller).
  void stepBatch(std::vector<char> &logits, std::vector<int32_t> &labels) {
    std::string err;
    if (!loader->next(pipe->hImg[0], pipe->hLab[0], err))
      dataError(err);
    std::copy(pipe->hLab[0], pipe->hLab[0] + labels.size(), labels.begin());
    ctx.check(cudaMemcpyAsync(pipe->dImg[0], pipe->hImg[0], pipe->imgBytes,
                              cudaMemcpyHostToDevice, ctx.stream()),
              "eval input");
    ctx.check(cudaMemcpyAsync(pipe->dLab[0], pipe->hLab[0], pipe->labBytes,
                              cudaMemcpyHostToDevice, ctx.stream()),
              "eval input");
    launchInputConvert(ctx, pipe->dImg[0], pipe->dLab[0], pipe->format);
    spec.evalStep(ctx);
    ctx.check(cudaMemcpyAsync(logits.data(), ctx.arena() + logitsT->offset,
                              logits.size(), cudaMemcpyDeviceToHost,
                              ctx.stream()),
              "eval logits");
    ctx.check(cudaStreamSynchronize(ctx.stream()), "eval");
  }

  /// Element k of the host copy of the logits, in f32.
  float logit(const std::vector<char> &logits, size_t k) const {
    return logitsT->dtype == DType::F16
               ? __half2float(((const __half *)logits.data())[k])
               : ((const float *)logits.data())[k];
  }

  /// mIoU over the whole Test split (dense prediction).
  EvalResult runDense(int64_t step, double epoch) {
    EvalResult r;
    r.step = step;
    r.epoch = epoch;
    beginDenseEval(spec.numClasses, r);
    bool channelsLast = false;
    std::string err;
    if (!denseLayout(channelsLast, err))
      dataError(err);
    loader->setState({0, 0, 0});
    const size_t perImage =
        (size_t)src.labelH * src.labelW * (size_t)spec.numClasses;
    std::vector<char> logits((size_t)spec.batch * perImage *
                             dtypeSize(logitsT->dtype));
    std::vector<float> batch((size_t)spec.batch * perImage);
    std::vector<int32_t> labels((size_t)spec.batch * src.labelsPerSample());
    int64_t total = src.size(), seen = 0;
    while (seen < total) {
      stepBatch(logits, labels);
      int64_t valid = std::min<int64_t>(spec.batch, total - seen);
      for (size_t k = 0; k < (size_t)valid * perImage; ++k)
        batch[k] = logit(logits, k);
      accumulateConfusionBatch(batch.data(), valid, channelsLast, src.labelH,
                               src.labelW, labels.data(), spec.ignoreIndex, r);
      seen += valid;
    }
    return r;
  }

  EvalResult run(int64_t step, double epoch) {
    if (src.labelH > 0)
      return runDense(step, epoch);
    EvalResult r;
    r.step = step;
    r.epoch = epoch;
    loader->setState({0, 0, 0});
    std::vector<char> logits((size_t)spec.batch * spec.numClasses *
                             dtypeSize(logitsT->dtype));
    std::vector<float> row(spec.numClasses);
    std::vector<int32_t> labels(spec.batch);
    int64_t total = src.size(), seen = 0;
    while (seen < total) {
      stepBatch(logits, labels);
      int64_t valid = std::min<int64_t>(spec.batch, total - seen);
      for (int64_t b = 0; b < valid; ++b) {
        for (int c = 0; c < spec.numClasses; ++c)
          row[c] = logit(logits, (size_t)b * spec.numClasses + c);
        accumulateTopK(row.data(), spec.numClasses, labels[b], r);
      }
      seen += valid;
    }
    return r;
  }
};

/// trainMain's work; a runtime error (cnnrt::Error) propagates to trainMain.
int runTraining(int argc, char **argv, const ModelSpec &spec) {
  // The start-up the summary reports counts from here (docs/runtime.md).
  const double tProcess = now();
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o = parseArgs(argc, argv, spec);
  // The environment's options are checked (exit 1 on a bad value) before the
  // GPU is looked for, like the flags.
  const ContextOptions contextOptions = ContextOptions::fromEnv();

  // Data parallelism: this process is one rank when a launcher says so
  // (./train --gpus N's own children, torchrun, mpirun, srun); otherwise
  // --gpus N > 1 makes it the launcher of N ranks.
  LaunchInfo launchInfo;
  {
    std::string lerr;
    if (!resolveLaunch([](const char *k) { return std::getenv(k); },
                       o.distInit, launchInfo, lerr))
      usageError(lerr);
  }
  const bool launcherFlags = o.nnodes > 1 || o.nodeRankGiven;
  // (Not in the launcher's own children: with a world of one they would
  // launch again.)
  if ((o.gpus > 1 || launcherFlags) && !launchInfo.distributed() &&
      launchInfo.source != "cnnc")
    return launchRanks(o, spec, argc, argv);
  if (launcherFlags && launchInfo.source != "cnnc")
    usageError("--nnodes/--node-rank are the executable's own launcher's; "
               "under " +
               launchInfo.source + " its ranks are used (" +
               launchInfo.describe() + ")");
  const int rank = launchInfo.distributed() ? launchInfo.rank : 0;
  const int world = launchInfo.distributed() ? launchInfo.worldSize : 1;
  if (world > 1) {
    if (!spec.dist)
      usageError(launchInfo.describe() +
                 ": this step has no all-reduces; compile it with cnnc "
                 "--gpus " +
                 std::to_string(world) + " (data parallel)");
    // --gpus is the ranks of one node.
    const int local =
        launchInfo.localWorldSize > 0 ? launchInfo.localWorldSize : world;
    if (o.gpus > 0 && o.gpus != local)
      usageError("--gpus " + std::to_string(o.gpus) + " but the launcher (" +
                 launchInfo.source + ") started " + std::to_string(local) +
                 " ranks on this node");
    if (launchInfo.source == "cnnc" && o.gpus > 0 &&
        o.gpus * o.nnodes != world)
      usageError("--gpus " + std::to_string(o.gpus) + " --nnodes " +
                 std::to_string(o.nnodes) + " but CNNC_WORLD_SIZE is " +
                 std::to_string(world));
    // Rank 0 reports (a pipeline's last stage: it has the loss); the
    // others' errors still reach stderr.
    const int reporter = gPipeline.stages > 0 ? gPipeline.stages - 1 : 0;
    if (rank != reporter && !std::freopen("/dev/null", "w", stdout))
      std::fclose(stdout);
  }
  // The global batch: every rank trains on its slice of it (pipeline
  // stages each on all of it: their batch is the M micro-batches).
  const bool piped = gPipeline.stages > 0;
  // (Pipeline stages: the replicas each train on a shard; one replica on
  // all of it.)
  const int shards = piped ? gPipeline.replicas : world;
  const int64_t globalBatch = static_cast<int64_t>(spec.batch) * shards;


  const DataFormat format = detectFormat(o.data);
  bool synthetic = format == DataFormat::Synthetic;
  std::string err;
  // Initial state.
  std::vector<TensorEntry> init;
  std::string initSource;
  int64_t startStep = 0;
  LoaderState ls{o.seed, 0, 0};
  if (!o.resume.empty()) {
    initSource = o.resume;
    if (!readTensorFile(o.resume, init, err)) {
      std::fprintf(stderr, "cnnrt: cannot resume: %s\n", err.c_str());
      return kExitError;
    }
    const TensorEntry *st = findEntry(init, "__step__");
    const TensorEntry *ld = findEntry(init, "__loader__");
    if (!st || st->dtype != DType::I64 || st->numel() != 1 || !ld ||
        ld->dtype != DType::I64 || ld->numel() != 3) {
      std::fprintf(stderr,
                   "cnnrt: cannot resume: %s is not a checkpoint (no "
                   "__step__/__loader__ entries)\n",
                   o.resume.c_str());
      return kExitError;
    }
    startStep = st->as<int64_t>()[0];
    ls.seed = static_cast<uint64_t>(ld->as<int64_t>()[0]);
    ls.epoch = ld->as<int64_t>()[1];
    ls.cursor = ld->as<int64_t>()[2];
    if (ls.seed != o.seed)
      std::fprintf(
          stderr, "cnnrt: note: using the checkpoint's data seed %" PRIu64 "\n",
          ls.seed);
  }
  // The data (synthetic data is generated from the checkpoint's seed). All
  // data errors are reported before the GPU is touched.
  SourceOptions sopts;
  sopts.C = spec.imageC;
  sopts.H = spec.imageH;
  sopts.W = spec.imageW;
  sopts.numClasses = spec.numClasses;
  // Synthetic data: one global batch, of which each rank takes its slice.
  sopts.batch = static_cast<int>(globalBatch);
  sopts.seed = ls.seed;
  sopts.labels = o.train.labels;
  // A dense-prediction step (labels N x H x W): the loaders yield a mask per
  // image, checked against the classes and the step's ignore_index.
  if (const TensorSpec *lab = findTensor(spec, Role::InputLabel);
      lab && lab->rank == 3) {
    sopts.labelH = static_cast<int>(lab->dims[1]);
    sopts.labelW = static_cast<int>(lab->dims[2]);
  }
  sopts.ignoreIndex = spec.ignoreIndex;
  std::unique_ptr<SampleSource> train, test;
  if (!openSource(o.data, Split::Train, sopts, train, err))
    dataError(err);
  if (train->size() < 1)
    dataError("no training images in " + o.data);
  RunPlan plan;
  if (!planRun(o.train, train->size(), globalBatch, spec.defaultSteps,
               spec.defaultLR, 10, plan, err))
    usageError(err);
  Normalization norm;
  if (!resolveNormalization(o.train, *train, norm, err))
    usageError(err);
  InputFormat inputFormat;
  inputFormat.f32 = train->type() == SampleType::F32;
  if (!norm.identity()) {
    if (spec.imageC > InputFormat::kMaxChannels)
      usageError("--mean/--std support at most 16 channels");
    inputFormat.numNorm = spec.imageC;
    for (int c = 0; c < spec.imageC; ++c) {
      inputFormat.mean[c] = norm.mean[c];
      inputFormat.std[c] = norm.std[c];
    }
  }
  const bool wantEval = o.eval || plan.evalEvery > 0;
  if (piped && wantEval)
    usageError("--eval/--eval-every: a pipelined step has no evaluation "
               "step yet (docs/pipeline-parallel.md)");
  if (wantEval) {
    if (!spec.evalStep || !findTensor(spec, Role::Logits))
      usageError("--eval/--eval-every: this model has no evalStep/Logits");
    if (!openSource(o.data, Split::Test, sopts, test, err))
      dataError(err);
    if (test->size() < world)
      dataError("the validation split has " + std::to_string(test->size()) +
                " images, fewer than the " + std::to_string(world) + " ranks");
  }
  const int workers =
      o.train.workers >= 0 ? o.train.workers : defaultWorkers(format);
  if (o.resume.empty()) {
    initSource = o.weights.empty() ? defaultWeights(argv[0]) : o.weights;
    if (!readTensorFile(initSource, init, err)) {
      std::fprintf(stderr, "cnnrt: cannot load weights: %s\n", err.c_str());
      return kExitError;
    }
  }
  JsonLog json;
  if (rank == (piped ? gPipeline.stages - 1 : 0) && !o.train.logJson.empty() &&
      !json.open(o.train.logJson, err))
    dataError(err);
  // A corrupt or mismatched weights file or checkpoint is rejected here,
  // before the GPU is touched or a step runs.
  if (!checkInitialState(spec, init, initSource, err)) {
    std::fprintf(stderr, "cnnrt: cannot %s: %s\n",
                 o.resume.empty() ? "load weights" : "resume", err.c_str());
    return kExitError;
  }
  if (startStep < 0 || ls.epoch < 0 || ls.cursor < 0) {
    std::fprintf(stderr,
                 "cnnrt: cannot resume: %s has a negative step or data "
                 "position (step %lld, epoch %lld, cursor %lld)\n",
                 o.resume.c_str(), (long long)startStep, (long long)ls.epoch,
                 (long long)ls.cursor);
    return kExitError;
  }
  if (ls.cursor > train->size()) {
    std::fprintf(stderr,
                 "cnnrt: cannot resume: %s is at sample %lld of an epoch but "
                 "the data has %lld samples\n",
                 o.resume.c_str(), (long long)ls.cursor,
                 (long long)train->size());
    return kExitError;
  }
  requireGPU();
  // Data parallelism: the launch is resolved from the environment by the
  // step's dist::prepare (cnnrt/Nccl.h); --dist-init reaches it there.
  if (!o.distInit.empty()) {
    DistInit di;
    std::string err;
    if (!parseDistInit(o.distInit, di, err))
      usageError(err);
    setenv("CNNC_DIST_INIT", o.distInit.c_str(), 1);
  }
  if (o.gpus == 1 && visibleGPUs() < 1)
    tooFewGPUs(1, 0);

  std::fputs(
      runHeader(*train, test.get(), workers, norm, plan, globalBatch).c_str(),
      stdout);
  if (piped && gPipeline.replicas > 1)
    std::printf("pipeline: %d stages x %d data-parallel replicas (%s), one "
                "per GPU (rank = replica x %d + stage), each replica on a "
                "batch of %d (its micro-batches) = global batch %lld; stage "
                "%d of replica 0 reports the loss\n",
                gPipeline.stages, gPipeline.replicas,
                launchInfo.source.c_str(), gPipeline.stages, spec.batch,
                (long long)globalBatch, gPipeline.stages - 1);
  else if (piped)
    std::printf("pipeline: %d stages (%s), one per GPU, each on the batch of "
                "%d (its micro-batches); stage %d reports the loss\n",
                world, launchInfo.source.c_str(), spec.batch, world - 1);
  else if (world > 1)
    std::printf("data parallel: %d ranks (%s) x batch %d = global batch "
                "%lld; BatchNorm statistics per rank; rank 0's are "
                "checkpointed\n",
                world, launchInfo.source.c_str(), spec.batch,
                (long long)globalBatch);

  LoaderOptions lopts;
  lopts.batch = spec.batch;
  lopts.seed = ls.seed;
  lopts.shuffle = !synthetic;
  lopts.workers = workers;
  lopts.shard = piped ? gPipeline.replica : rank;
  lopts.shards = shards;
  StreamLoader loader(*train, lopts);
  if (ls.epoch != 0 || ls.cursor != 0)
    loader.setState(ls);

  // Memory is reported net of what was in use on this process's GPU once
  // its CUDA context existed (Context measures it after selecting the GPU:
  // measured here, before, it read device 0 for every rank and stage): the
  // context itself and other processes do not count (comparable to
  // PyTorch's max_memory_reserved).
  Context ctx(spec, contextOptions);
  const size_t baseUsed = ctx.memoryInUseAtStart();
  const TensorSpec *lossT = findTensor(spec, Role::Loss);
  const TensorSpec *scaleT = findTensor(spec, Role::LossScale);
  // A pipeline stage before the last has no loss.
  if (!lossT && !(piped && gPipeline.stage < gPipeline.stages - 1))
    ctx.fail("model spec", "the model has no Loss tensor");
  if (!spec.trainStep)
    ctx.fail("model spec", "the model has no trainStep");
  if (spec.prepare)
    spec.prepare(ctx);
  ctx.finishPrepare();
  if (!loadStateIntoArena(ctx, init, initSource, err)) {
    std::fprintf(stderr, "cnnrt: %s\n", err.c_str());
    return kExitError;
  }
  init.clear();
  init.shrink_to_fit();
  if (world > 1 && !piped) {
    // DDP's start: every rank holds rank 0's state (they read the same file;
    // the broadcast makes it so whatever the files were).
    for (int i = 0; i < spec.numTensors; ++i) {
      const TensorSpec &t = spec.tensors[i];
      if (persistent(t.role))
        spec.dist->broadcast(ctx, ctx.arena() + t.offset, t.bytes);
    }
  }
  // A wait that gives up when a peer died (a plain synchronize would hang
  // on the all-reduce it never joins).
  auto waitForStep = [&](const char *what) {
    if (spec.dist)
      spec.dist->waitStream(ctx, ctx.stream(), what);
    ctx.check(cudaStreamSynchronize(ctx.stream()), what);
  };

  std::unique_ptr<InputPipeline> pipe(
      new InputPipeline(ctx, train->sampleBytes(), inputFormat,
                        train->labelsPerSample()));
  if (synthetic) {
    // One fixed batch, copied to the device once; no copies per step.
    if (!loader.next(pipe->hImg[0], pipe->hLab[0], err))
      dataError(err);
    ctx.check(cudaMemcpy(pipe->dImg[0], pipe->hImg[0], pipe->imgBytes,
                         cudaMemcpyHostToDevice),
              "synthetic data");
    ctx.check(cudaMemcpy(pipe->dLab[0], pipe->hLab[0], pipe->labBytes,
                         cudaMemcpyHostToDevice),
              "synthetic data");
    pipe->before[0] = pipe->before[1] = ls;
  }
  std::unique_ptr<Evaluator> evaluator;
  // Each rank evaluates every world-th image; the counts are summed.
  std::unique_ptr<SampleSource> testShard;
  if (test && world > 1)
    testShard = makeStridedSource(*test, rank, world);
  if (test)
    evaluator.reset(new Evaluator(ctx, testShard ? *testShard : *test, workers,
                                  inputFormat));

  int64_t first = startStep + 1, last = plan.totalSteps, runSteps = 0;
  // The profile is of this run's second step: a run of fewer would end
  // without it (and without the CNNRT_PROFILE_JSON file) and say nothing.
  if (ctx.options().profile && last - first + 1 < 2)
    ctx.fail("CNNRT_PROFILE",
             "the profile times this run's second step, and the run has " +
                 std::to_string(std::max<int64_t>(last - first + 1, 0)) +
                 ": run at least 2 steps",
             ErrorKind::Config);
  if (first > last && !o.eval)
    std::fprintf(stderr,
                 "cnnrt: nothing to do: the checkpoint is at step %lld and "
                 "the run ends at step %lld\n",
                 (long long)startStep, (long long)last);
  StepRunner runner(o.graph);
  if (o.graph && rank == 0)
    noteUncapturedStep(ctx, spec);
  size_t peak = usedGPUMemory();
  auto ownMemory = [&](size_t used) {
    return used > baseUsed ? used - baseUsed : 0;
  };
  // This rank's images; the progress line multiplies by the world size
  // (the ranks step together).
  ThroughputMeter meter;
  // The ranks start training together: a rank that finished its start-up
  // early would otherwise count its wait for the slowest one (at the first
  // collective) as training time, not as the start-up it is.
  if (world > 1) {
    int64_t ready = 1;
    spec.dist->sumHost(ctx, &ready, 1);
  }
  meter.start(tProcess, now());
  int64_t logSince = 0;
  double stallMsSum = 0; // CNNC_ALLREDUCE_TIMING: sampled waits for buckets
  int stallSamples = 0;
  float lastLoss = NAN;
  double lastMIoU = NAN, lastPixelAcc = NAN; // dense validation
  auto epochAt = [&](int64_t step) {
    return step * (double)globalBatch / (double)train->size();
  };
  auto evaluate = [&](int64_t step) {
    double t0 = now();
    EvalResult r = evaluator->run(step, epochAt(step));
    if (world > 1 && r.dense()) {
      // Each rank counted its shard of the pixels.
      std::vector<int64_t> counts(r.confusion);
      counts.push_back(r.total);
      spec.dist->sumHost(ctx, counts.data(), (int)counts.size());
      r.total = counts.back();
      counts.pop_back();
      r.confusion = counts;
    } else if (world > 1) {
      int64_t counts[3] = {r.total, r.top1, r.top5};
      spec.dist->sumHost(ctx, counts, 3);
      r.total = counts[0];
      r.top1 = counts[1];
      r.top5 = counts[2];
    }
    std::printf("%s\n", evalLine(r).c_str());
    json.write(evalJson(r));
    if (r.dense()) {
      lastMIoU = meanIoU(r);
      lastPixelAcc = pixelAccuracy(r);
    }
    // Validation time is not training time.
    meter.pause(now() - t0);
  };
  if (first <= last && !synthetic)
    pipe->produce(first % 2, loader);

  for (int64_t step = first; step <= last; ++step) {
    int slot = static_cast<int>(step % 2);
    ++runSteps;
    if (synthetic)
      launchInputConvert(ctx, pipe->dImg[0], pipe->dLab[0], inputFormat);
    else
      pipe->consume(slot);
    const double lr = plan.lr.at(step);
    launchSetScalars(ctx, static_cast<float>(lr), step);
    // Captured after one uncaptured step, which does the libraries' first
    // calls (their lazy set-up cannot be captured); with CNNRT_PROFILE the
    // second runs uncaptured too, timed per launch.
    bool profileThis = ctx.options().profile && runSteps == 2;
    if (profileThis)
      ctx.beginProfile();
    runner.enqueue(ctx, spec, ctx.options().profile ? 3 : 2);
    if (profileThis)
      ctx.endProfile("training step 2");
    // Prefetch the next batch while this step runs.
    if (!synthetic && step < last)
      pipe->produce(1 - slot, loader);
    ++logSince;
    bool isLog = step % plan.logEvery == 0 || step == last;
    bool isCkpt =
        o.checkpointEvery > 0 && step % o.checkpointEvery == 0 && step != last;
    if (isLog) {
      if (world > 1)
        waitForStep("training step");
      lastLoss = lossT ? readScalar(ctx, *lossT) : NAN;
      // The step has finished: its joins' timing events are final.
      if (spec.dist && runner.wholeGraph() && runSteps > 2) {
        double ms = spec.dist->stallMs(ctx);
        if (ms >= 0) {
          stallMsSum += ms;
          ++stallSamples;
        }
      }
      double t = now();
      peak = std::max(peak, usedGPUMemory());
      Progress p;
      p.step = step;
      p.totalSteps = last;
      p.epoch = epochAt(step);
      p.loss = lastLoss;
      p.lr = lr;
      // All ranks: they step together.
      p.imagesPerSecond =
          shards * meter.mark(t, logSince * spec.batch);
      p.etaSeconds =
          (last - step) * (double)spec.batch * meter.secondsPerImage();
      if (scaleT)
        p.lossScale = readScalar(ctx, *scaleT);
      std::printf("%s\n", progressLine(p).c_str());
      json.write(progressJson(p));
      logSince = 0;
    }
    if (isCkpt) {
      // The next step's batch has been produced from pipe->before[1-slot].
      LoaderState next = synthetic ? ls : pipe->before[1 - slot];
      if (piped)
        writePipelineCheckpoint(ctx, spec, o.checkpoint, step, next);
      else if (rank == 0)
        writeCheckpoint(ctx, o.checkpoint, step, next);
    }
    if (evaluator && plan.evalEvery > 0 && step % plan.evalEvery == 0 &&
        step != last)
      evaluate(step);
  }
  waitForStep("end of training");
  if (runSteps > 0 && std::isnan(lastLoss) && lossT)
    lastLoss = readScalar(ctx, *lossT);
  RunSummary summary;
  summary.steps = runSteps;
  summary.worldSize = world;
  summary.hasSteady = meter.hasSteady();
  summary.steadyImagesPerSecond = meter.steadyRate();
  summary.meanImagesPerSecond = meter.wholeRunRate();
  if (piped && gPipeline.replicas > 1) {
    // The replicas step together (their gradient all-reduce): each trains
    // on its shard at this rate.
    summary.steadyImagesPerSecond *= gPipeline.replicas;
    summary.meanImagesPerSecond *= gPipeline.replicas;
  }
  summary.startupSeconds = runSteps > 0 ? meter.startupSeconds()
                                        : std::max(now() - tProcess, 0.0);
  if (!o.checkpoint.empty() && runSteps > 0) {
    // The loader produced up to step `last`: its state is the next batch's.
    LoaderState next = synthetic ? ls : loader.state();
    if (piped)
      writePipelineCheckpoint(ctx, spec, o.checkpoint, last, next);
    else if (rank == 0)
      writeCheckpoint(ctx, o.checkpoint, last, next);
  }
  peak = std::max(peak, usedGPUMemory());
  if (evaluator)
    evaluate(std::max(last, startStep));

  if (world > 1 && !piped) {
    // Every rank's own figures (each in its slot, summed over the ranks),
    // then the totals the "done" line reports; start-up is the slowest
    // rank's (the others waited for it).
    std::vector<int64_t> figures(3 * world, 0);
    figures[rank] = std::llround(summary.steadyImagesPerSecond);
    figures[world + rank] = std::llround(summary.meanImagesPerSecond);
    figures[2 * world + rank] = std::llround(summary.startupSeconds * 1000);
    spec.dist->sumHost(ctx, figures.data(), 3 * world);
    summary.steadyImagesPerSecond = summary.meanImagesPerSecond = 0;
    summary.startupSeconds = 0;
    for (int r = 0; r < world; ++r) {
      if (summary.hasSteady)
        summary.steadyPerRank.push_back((double)figures[r]);
      summary.meanPerRank.push_back((double)figures[world + r]);
      summary.startupPerRank.push_back(figures[2 * world + r] / 1000.0);
      summary.steadyImagesPerSecond += figures[r];
      summary.meanImagesPerSecond += figures[world + r];
      summary.startupSeconds =
          std::max(summary.startupSeconds, summary.startupPerRank.back());
    }
    if (!summary.hasSteady)
      summary.steadyImagesPerSecond = summary.meanImagesPerSecond;
    std::printf("%s\n", dataParallelLine(summary).c_str());
  } else {
    if (summary.hasSteady)
      summary.steadyPerRank.push_back(summary.steadyImagesPerSecond);
    summary.meanPerRank.push_back(summary.meanImagesPerSecond);
    summary.startupPerRank.push_back(summary.startupSeconds);
  }
  const double steadyIps = summary.steadyImagesPerSecond;
  if (spec.dist && stallSamples > 0) {
    // CNNC_ALLREDUCE_TIMING=1: the compute stream's wait for the buckets,
    // per rank, averaged over the sampled (logged) steps, in microseconds.
    std::vector<int64_t> us(world, 0);
    us[rank] = static_cast<int64_t>(1000.0 * stallMsSum / stallSamples + 0.5);
    if (world > 1)
      spec.dist->sumHost(ctx, us.data(), world);
    // A pipeline's img/s is the pipeline's (times its replicas), its
    // spec's batch all M micro-batches.
    double stepMs = 1000.0 * spec.batch *
                    (piped ? gPipeline.replicas : world) /
                    std::max(steadyIps, 1e-9);
    // Per-rank milliseconds, ", "-separated.
    auto perRank = [&](auto msOf) {
      std::string out;
      for (int r = 0; r < world; ++r) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%s%.3f", r ? ", " : "", msOf(r));
        out += buf;
      }
      return out;
    };
    const std::string each = perRank([&](int r) { return us[r] / 1000.0; });
    if (piped)
      // The compute stream idle at its transferWaits (and, with replicas,
      // at its gradient buckets' joins): what is left of the step is the
      // stage's own work, the graph's launch gaps included.
      std::printf("pipeline: compute stream waiting for its neighbours "
                  "(transfers%s): ms/step per rank [%s] of a %.3f ms step; "
                  "busy (step - wait) [%s] ms; %d sampled steps\n",
                  gPipeline.replicas > 1 ? " and gradient buckets" : "",
                  each.c_str(), stepMs,
                  perRank([&](int r) { return stepMs - us[r] / 1000.0; })
                      .c_str(),
                  stallSamples);
    else
      std::printf("data parallel: all-reduce not hidden by the backward "
                  "pass: ms/step per rank [%s] (rank 0: %.1f%% of a %.3f ms "
                  "step; %d sampled steps)\n",
                  each.c_str(), 100.0 * us[0] / 1000.0 / stepMs, stepMs,
                  stallSamples);
  }
  summary.finalLoss = lastLoss;
  summary.miou = lastMIoU;
  summary.pixelAcc = lastPixelAcc;
  summary.peakGpuMiB =
      static_cast<int64_t>((ownMemory(peak) + (1 << 20) - 1) >> 20);
  std::printf("%s\n", doneLine(summary).c_str());
  json.write(doneJson(summary));
  return kExitOk;
}

} // namespace

int trainMain(int argc, char **argv, const ModelSpec &spec) {
  // The executable's boundary for the runtime's errors: the message the
  // library would have printed and its exit code (1, 2 out of GPU memory, 3
  // no GPU), after the stack's destructors have given back what they held.
  // A dead peer ends the process at once (dist's die), not through the
  // destructors, which would wait on the aborted collectives.
  setExitOnStuckDevice(true);
  try {
    return runTraining(argc, argv, spec);
  } catch (const Error &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", e.what());
    std::fflush(stderr);
    return e.exitCode();
  }
}

namespace {
/// `./train` of a pipelined step, started by hand: one process of this
/// executable per stage (CNNC_RANK = the stage, on GPU `stage`), the NCCL
/// id met in a fresh directory; a stage that fails stops the others
/// (runLocalRanks) and the run ends with one error and its code.
int launchStages(const Options &o, int numStages, int replicas, int argc,
                 char **argv) {
  const int ranks = numStages * replicas;
  if (o.gpus > 0 && o.gpus != ranks)
    usageError(
        "--gpus " + std::to_string(o.gpus) + ": this step has " +
        std::to_string(numStages) + " pipeline stages" +
        (replicas > 1 ? " x " + std::to_string(replicas) +
                            " data-parallel replicas = " +
                            std::to_string(ranks) + " GPUs"
                      : std::string(", one per GPU")) +
        " (compiled with cnnc --pipeline-stages " + std::to_string(numStages) +
        (replicas > 1 ? " --gpus " + std::to_string(replicas) : std::string()) +
        ")");
  if (o.nnodes > 1 || o.nodeRankGiven || !o.distInit.empty())
    usageError("--nnodes/--node-rank/--dist-init: pipeline stages run on "
               "the GPUs of one host");
  requireGPU();
  int devices = visibleGPUs();
  if (ranks > devices) {
    std::fprintf(stderr,
                 "cnnrt: error: %d pipeline stages x %d replica(s) need %d "
                 "GPUs: only %d GPU(s) are visible (CUDA_VISIBLE_DEVICES=%s)\n",
                 numStages, replicas, ranks, devices,
                 std::getenv("CUDA_VISIBLE_DEVICES")
                     ? std::getenv("CUDA_VISIBLE_DEVICES")
                     : "<unset>");
    return kExitError;
  }
  const char *t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t && *t ? t : "/tmp") + "/cnnc-stages-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back(0);
  if (!mkdtemp(buf.data())) {
    std::fprintf(stderr, "cnnrt: error: cannot create %s: %s\n", tmpl.c_str(),
                 std::strerror(errno));
    return kExitError;
  }
  const std::string tmpDir = buf.data(), idFile = tmpDir + "/nccl-id";
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    std::fprintf(stderr, "cnnrt: error: cannot find this executable "
                         "(/proc/self/exe) to start the stages\n");
    return kExitError;
  }
  self[n] = 0;
  std::vector<std::string> args = {self};
  for (int i = 1; i < argc; ++i)
    args.push_back(argv[i]);
  if (replicas > 1)
    std::printf("pipeline: starting %d processes, %d stages x %d replicas, "
                "one per GPU (rank = replica x %d + stage); rank %d reports\n",
                ranks, numStages, replicas, numStages, numStages - 1);
  else
    std::printf("pipeline: starting %d processes, one per stage and GPU "
                "(stages 0..%d); stage %d reports\n",
                numStages, numStages - 1, numStages - 1);
  std::fflush(stdout);
  std::string err;
  NodeLayout node{ranks, 1, 0};
  int rc = runLocalRanks(args, node, "file://" + idFile, 10.0, err);
  unlink(idFile.c_str());
  rmdir(tmpDir.c_str());
  if (rc == 0)
    return kExitOk;
  std::fprintf(stderr, "cnnrt: error: pipeline run failed: %s\n",
               err.c_str());
  return rc == kExitOutOfMemory || rc == kExitNoGPU ? rc : kExitError;
}
} // namespace

int trainPipelineMain(int argc, char **argv, const ModelSpec *const *stages,
                      int numStages) {
  return trainPipelineMain(argc, argv, stages, numStages, 1);
}

int trainPipelineMain(int argc, char **argv, const ModelSpec *const *stages,
                      int numStages, int replicas) {
  setExitOnStuckDevice(true);
  try {
    if (numStages < 2 || !stages)
      usageError("a pipelined step needs at least 2 stages");
    if (replicas < 1)
      usageError("a pipelined step needs at least 1 replica");
    const int ranks = numStages * replicas;
    LaunchInfo li;
    std::string err;
    if (!resolveLaunch([](const char *k) { return std::getenv(k); }, "", li,
                       err))
      usageError(err);
    if (!li.distributed()) {
      // The flags are checked (and --help answered) before any process
      // starts; every stage's spec takes the same ones.
      Options o = parseArgs(argc, argv, *stages[numStages - 1]);
      return launchStages(o, numStages, replicas, argc, argv);
    }
    if (li.worldSize != ranks || li.rank < 0 || li.rank >= ranks)
      usageError(li.describe() + ": this step has " +
                 std::to_string(numStages) + " pipeline stages" +
                 (replicas > 1 ? " x " + std::to_string(replicas) + " replicas"
                               : std::string()) +
                 ": start it as ./train (one process per stage and GPU) or "
                 "with a world size of " +
                 std::to_string(ranks));
    gPipeline.stage = li.rank % numStages;
    gPipeline.stages = numStages;
    gPipeline.replica = li.rank / numStages;
    gPipeline.replicas = replicas;
    // The NCCL layer splits the world into the stages of each replica and
    // the replicas of each stage (Nccl.h).
    setenv("CNNC_PIPELINE_STAGES", std::to_string(numStages).c_str(), 1);
    // A stage's link streams hold NCCL kernels that spin until the peer
    // arrives (an interleaved step posts its receives at the top). CUDA
    // maps streams onto CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 by
    // default) and serializes streams that share one: a waiting receive
    // then stalls the compute stream behind it, and a ring of stages
    // deadlocks. The most queues, before this process first touches CUDA,
    // unless the caller chose: a precaution (session 35 found the
    // interleaved hangs elsewhere: the first step's library set-up, then
    // the CUDA graph's replay; see runStageAlone, ModelSpec::uncapturedWhy).
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
    return runTraining(argc, argv, *stages[gPipeline.stage]);
  } catch (const Error &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", e.what());
    std::fflush(stderr);
    return e.exitCode();
  }
}

} // namespace cnnrt
