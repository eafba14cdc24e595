//===- TrainLoop.h - what the GPU and CPU training loops share ---*- C++
//-*-===//
//
// Pure C++17 (no CUDA), part of cnnrt_host: the training flags (parsed the
// same way by generated executables and by `cnnc`), learning-rate schedules,
// the progress/eval lines, the --log-json records and top-k accuracy. The GPU
// driver (TrainMain.cu) and the reference interpreter's loop (cnnc's
// lib/Driver/Train.cpp) print through these functions, so their output is the same.
// See docs/runtime.md ("Training loop").
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_TRAINLOOP_H
#define CNNRT_TRAINLOOP_H

#include "cnnrt/Dataset.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace cnnrt {

/// Learning rate of each (1-based) step. Step k is computed like the lr
/// torch.optim.lr_scheduler gives to the k-th optimizer.step() when
/// scheduler.step() is called after every step (i = k - 1 previous steps):
///   warmup (i < W):  base * (i + 1) / W   (LinearLR(start_factor=1/W,
///                                            total_iters=W-1))
///   then, with j = i - W (SequentialLR(..., milestones=[W])):
///   constant:        base
///   step:            base * gamma^floor(j / stepSize)         (StepLR)
///   cosine:          minLR + (base - minLR) * (1 + cos(pi * j / T)) / 2,
///                    T = total - W                  (CosineAnnealingLR)
struct LRSchedule {
  std::string kind = "constant"; ///< constant | step | cosine
  double base = 0.01;
  int64_t warmup = 0;   ///< steps
  int64_t stepSize = 0; ///< steps (step schedule)
  double gamma = 0.1;
  double minLR = 0;
  int64_t total = 1; ///< steps of the whole run
  double at(int64_t step) const;
  std::string describe() const;
};

/// The flags of a training run, shared by `./train` and `cnnc train`.
struct TrainFlags {
  int64_t steps = -1; ///< < 0: not given
  double epochs = -1; ///< < 0: not given
  double lr = -1;     ///< < 0: the model's default
  std::string schedule = "constant";
  int64_t warmupSteps = -1;
  double warmupEpochs = -1;
  int64_t lrStep = -1;
  double lrStepEpochs = -1;
  double lrGamma = 0.1;
  double lrMin = 0;
  int64_t evalEvery = 0; ///< steps; 0: only at the end (if --eval)
  double evalEveryEpochs = 0;
  int64_t logEvery = -1; ///< < 0: the caller's default
  std::string logJson;
  int workers = -1; ///< < 0: automatic
  std::vector<float> mean, std;
  std::string labels; ///< labels .npy for --data images.npy
  /// The (flag, value) pairs parse() accepted, in order (for forwarding).
  std::vector<std::pair<std::string, std::string>> given;

  /// Handles `flag` (with its value) if it is one of the flags above;
  /// returns 1 if handled, 0 if not a training flag, -1 on a bad value (err).
  int parse(const std::string &flag, const std::string &value,
            std::string &err);
  /// The flags that parse() knows (one per line), for --help texts.
  static const char *help();
  /// The given flags as command-line arguments (to forward to ./train).
  std::vector<std::string> toArgs() const;
  /// Whether parse() handles `flag` (every one of them takes a value).
  static bool isFlag(const std::string &flag);
};

/// Resolved run length and schedule for a data set of `samples` images and
/// a batch of `batch`: steps from --steps or ceil(--epochs * samples /
/// batch); epochs-based flags turned into steps. Errors on --steps together
/// with --epochs, and on a schedule that needs what is missing.
struct RunPlan {
  int64_t totalSteps = 0;
  double stepsPerEpoch = 0;
  LRSchedule lr;
  int64_t evalEvery = 0; ///< steps, 0: never during training
  int64_t logEvery = 10;
};
bool planRun(const TrainFlags &f, int64_t samples, int batch,
             int64_t defaultSteps, double defaultLR, int64_t defaultLogEvery,
             RunPlan &plan, std::string &err);

/// The normalization in effect: --mean/--std if given, else the source's
/// default. Error when the counts do not match the channels.
bool resolveNormalization(const TrainFlags &f, const SampleSource &src,
                          Normalization &out, std::string &err);

/// Decoding threads when --workers is not given: min(cores, 16) for the
/// formats that decode or resample per sample (ImageFolder, npy), else 0.
int defaultWorkers(DataFormat f);

/// The lines printed before training (same on GPU and CPU):
///   data: <describe>; N workers; normalization ...
///   validation: <describe>                       (with a Test split)
///   schedule: <lr schedule>; S steps (E epochs of N images, batch B)
std::string runHeader(const SampleSource &train, const SampleSource *test,
                      int workers, const Normalization &norm,
                      const RunPlan &plan, int batch);

/// One progress report.
struct Progress {
  int64_t step = 0, totalSteps = 0;
  double epoch = 0; ///< fractional epochs done
  double loss = 0, lr = 0;
  double imagesPerSecond = 0;
  double etaSeconds = 0;
  double lossScale = -1; ///< < 0: none
};
/// "step 20 loss 0.512345 epoch 1.25 lr 0.001 img/s 123 eta 0:00:05"
/// (+ " scale 65536" with a loss scale). The first four fields are the old
/// "step N loss X" line.
std::string progressLine(const Progress &p);
std::string progressJson(const Progress &p);

/// The throughput accounting of a run (docs/runtime.md, "Summary"): fed
/// with the time and the images trained (all ranks, or one rank's own) at
/// each logged step, it separates the start-up (data, weights, NCCL
/// connection, cuDNN autotuning, graph capture: all in the first logged
/// interval) from the steady state that follows.
///   steady rate = images after the end of the first logged interval /
///                 the time since then (needs a second logged interval);
///   start-up    = time from process start to the end of the first logged
///                 interval, minus that interval's images at the steady
///                 rate: the time start-up cost. Without a second interval
///                 there is no steady rate: start-up is then the time from
///                 process start to the first step, the rate the whole
///                 run's mean, and hasSteady() false;
///   whole run   = all images / the time from the first step to the last
///                 mark.
/// Times in seconds on any one clock; pause() takes time out (validation).
class ThroughputMeter {
public:
  /// `processStart`: when the process began; `trainStart`: when the first
  /// step was issued.
  void start(double processStart, double trainStart);
  /// `seconds` of the run that are not training (validation): later marks
  /// are shifted back by them.
  void pause(double seconds) { paused_ += seconds; }
  /// A logged step at time `t`: `images` trained since the previous mark
  /// (or the start). Returns the interval's img/s.
  double mark(double t, int64_t images);

  int64_t intervals() const { return intervals_; }
  int64_t images() const { return firstImages_ + laterImages_; }
  bool hasSteady() const { return intervals_ >= 2 && laterSeconds() > 0; }
  /// The steady rate; the whole run's when !hasSteady().
  double steadyRate() const;
  double wholeRunRate() const;
  double startupSeconds() const;
  /// Seconds per image for an ETA: the steady rate's when known, else the
  /// whole run's so far (0 before the first mark).
  double secondsPerImage() const;

private:
  double laterSeconds() const { return lastMark_ - firstMark_; }
  double processStart_ = 0, trainStart_ = 0, paused_ = 0;
  double firstMark_ = 0, lastMark_ = 0; ///< pause-adjusted
  int64_t intervals_ = 0, firstImages_ = 0, laterImages_ = 0;
};

/// What the end of a run reports.
struct RunSummary {
  int64_t steps = 0;
  double finalLoss = 0;
  bool hasSteady = false;
  double steadyImagesPerSecond = 0; ///< all ranks
  double startupSeconds = 0;        ///< the slowest rank's
  double meanImagesPerSecond = 0;   ///< whole run, all ranks
  int64_t peakGpuMiB = 0;
  int worldSize = 1;
  /// The last validation of a dense model (NaN: none): the done line ends
  /// with ", mIoU X% pixel acc Y%" and the JSON has "miou", "pixel_acc".
  double miou = std::nan(""), pixelAcc = std::nan("");
  /// Per rank (world size > 1): steady (empty when !hasSteady) and whole-run
  /// img/s, start-up seconds.
  std::vector<double> steadyPerRank, meanPerRank, startupPerRank;
};
/// "done: N steps, final loss X, steady img/s S, start-up T s, mean img/s M
/// (whole run), peak GPU memory P MiB" ("steady img/s n/a" without a steady
/// rate).
std::string doneLine(const RunSummary &s);
/// "data parallel: steady img/s per rank [a, b], total S; whole run per
/// rank [c, d], total W; start-up T s (slowest rank)" ("steady img/s per
/// rank n/a; ..." without a steady rate).
std::string dataParallelLine(const RunSummary &s);
/// {"type": "done", "steps", "final_loss", "steady_img_per_s" (null
/// without a steady rate), "startup_s", "mean_img_per_s", "peak_gpu_mib",
/// "world_size", "steady_img_per_s_per_rank" (null without)}.
std::string doneJson(const RunSummary &s);

/// One validation result. A dense-prediction model (per-pixel labels)
/// fills `confusion` instead of top1/top5.
struct EvalResult {
  int64_t step = 0;
  double epoch = 0;
  int64_t total = 0, top1 = 0, top5 = 0;
  /// Dense prediction: numClasses x numClasses counts [target][prediction]
  /// over the pixels whose target is a class (cnnc.confusion_matrix); empty
  /// for a classifier.
  int numClasses = 0;
  std::vector<int64_t> confusion;
  bool dense() const { return numClasses > 0; }
};
/// "eval step 20 epoch 1.25: top-1 93.27% (277/297) top-5 99.66% (296/297)";
/// dense: "eval step 20 epoch 1.25: mIoU 41.52% pixel acc 87.10%
/// (24576 pixels, 6 images)".
std::string evalLine(const EvalResult &e);
/// {"type": "eval", "step", "epoch", "images", "top1", "top5", ...}; dense:
/// {"type": "eval", "step", "epoch", "images", "pixels", "miou",
/// "pixel_acc", "iou": [per class, null where absent]}.
std::string evalJson(const EvalResult &e);

/// Starts a dense evaluation of `numClasses` classes (zeroed confusion).
void beginDenseEval(int numClasses, EvalResult &e);
/// Adds one image's pixels to e.confusion: `logits` C x H x W (or H x W x C
/// when `channelsLast`), the prediction the first arg-max over C (as
/// torch.argmax); `labels` H x W. Pixels labelled ignoreIndex are left
/// out; every other label is a class (the loaders check). Counts the image.
void accumulateConfusion(const float *logits, bool channelsLast, int H, int W,
                         const int32_t *labels, int64_t ignoreIndex,
                         EvalResult &e);
/// The validation batch's step: accumulateConfusion over its first `images`
/// images (a padded last batch has fewer real ones than the step's N), each
/// C x H x W logits (H x W x C when `channelsLast`) and H x W labels on from
/// the previous image's.
void accumulateConfusionBatch(const float *logits, int64_t images,
                              bool channelsLast, int H, int W,
                              const int32_t *labels, int64_t ignoreIndex,
                              EvalResult &e);
/// As cnnc.miou: IoU_c = TP / (TP + FP + FN) from the confusion matrix;
/// classes absent from target and prediction are NaN and out of the mean
/// (NaN when all are). Pixel accuracy: the diagonal over all counted
/// pixels (NaN without any).
double meanIoU(const EvalResult &e, std::vector<double> *perClass = nullptr);
double pixelAccuracy(const EvalResult &e);

/// Adds one row of logits to `e` (top-5 when there are >= 5 classes, else
/// top-numClasses). Ties count against the label (a label is in the top k
/// when fewer than k logits are strictly greater ... or equal and earlier).
void accumulateTopK(const float *logits, int numClasses, int label,
                    EvalResult &e);

/// "H:MM:SS".
std::string formatDuration(double seconds);

/// --log-json FILE: one JSON object per line, flushed per line.
class JsonLog {
public:
  ~JsonLog();
  bool open(const std::string &path, std::string &err);
  void write(const std::string &json);
  bool enabled() const { return f_ != nullptr; }

private:
  FILE *f_ = nullptr;
};

} // namespace cnnrt

#endif // CNNRT_TRAINLOOP_H
