//===- TrainLoop.cpp - schedules, progress lines, JSON log, flags ---------===//

#include "cnnrt/TrainLoop.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <unistd.h>

namespace cnnrt {

//===--- schedules ------------------------------------------------------===//

double LRSchedule::at(int64_t step) const {
  int64_t i = std::max<int64_t>(step - 1, 0);
  if (i < warmup)
    return base * static_cast<double>(i + 1) / static_cast<double>(warmup);
  int64_t j = i - warmup;
  if (kind == "step")
    return base * std::pow(gamma, static_cast<double>(
                                      j / std::max<int64_t>(stepSize, 1)));
  if (kind == "cosine") {
    int64_t T = std::max<int64_t>(total - warmup, 1);
    return minLR + (base - minLR) *
                       (1 + std::cos(M_PI * static_cast<double>(j) / T)) / 2;
  }
  return base;
}

std::string LRSchedule::describe() const {
  char buf[256];
  if (kind == "step")
    std::snprintf(buf, sizeof(buf), "step (lr %g, x%g every %lld steps)", base,
                  gamma, static_cast<long long>(stepSize));
  else if (kind == "cosine")
    std::snprintf(buf, sizeof(buf), "cosine (lr %g -> %g over %lld steps)",
                  base, minLR, static_cast<long long>(total - warmup));
  else
    std::snprintf(buf, sizeof(buf), "constant (lr %g)", base);
  std::string s = buf;
  if (warmup > 0)
    s += ", linear warmup " + std::to_string(warmup) + " steps";
  return s;
}

//===--- flags ----------------------------------------------------------===//

namespace {
std::string jsonNumberShort(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

const char *const kFlags[] = {"--epochs",       "--lr-schedule",
                              "--warmup-steps", "--warmup-epochs",
                              "--lr-step",      "--lr-step-epochs",
                              "--lr-gamma",     "--lr-min",
                              "--eval-every",   "--eval-every-epochs",
                              "--log-every",    "--log-json",
                              "--workers",      "--mean",
                              "--std",          "--labels"};

bool parseI(const std::string &v, int64_t min, int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno || x < min)
    return false;
  out = x;
  return true;
}
bool parseF(const std::string &v, double min, double &out) {
  char *end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !(x >= min) || !std::isfinite(x))
    return false;
  out = x;
  return true;
}
bool parseList(const std::string &v, std::vector<float> &out, bool positive) {
  out.clear();
  size_t i = 0;
  while (i <= v.size()) {
    size_t j = v.find(',', i);
    if (j == std::string::npos)
      j = v.size();
    double x;
    if (!parseF(v.substr(i, j - i), positive ? 1e-30 : -1e30, x))
      return false;
    out.push_back(static_cast<float>(x));
    i = j + 1;
  }
  return !out.empty();
}
} // namespace

bool TrainFlags::isFlag(const std::string &flag) {
  for (const char *f : kFlags)
    if (flag == f)
      return true;
  return false;
}

int TrainFlags::parse(const std::string &a, const std::string &v,
                      std::string &err) {
  if (!isFlag(a))
    return 0;
  auto bad = [&](const char *what) {
    err = "invalid value '" + v + "' for " + a + " (expected " + what + ")";
    return -1;
  };
  int64_t i = 0;
  double d = 0;
  if (a == "--epochs") {
    if (!parseF(v, 1e-9, epochs))
      return bad("a positive number");
  } else if (a == "--lr-schedule") {
    if (v != "constant" && v != "step" && v != "cosine")
      return bad("constant, step or cosine");
    schedule = v;
  } else if (a == "--warmup-steps") {
    if (!parseI(v, 0, warmupSteps))
      return bad("an integer >= 0");
  } else if (a == "--warmup-epochs") {
    if (!parseF(v, 0, warmupEpochs))
      return bad("a number >= 0");
  } else if (a == "--lr-step") {
    if (!parseI(v, 1, lrStep))
      return bad("an integer >= 1");
  } else if (a == "--lr-step-epochs") {
    if (!parseF(v, 1e-9, lrStepEpochs))
      return bad("a positive number");
  } else if (a == "--lr-gamma") {
    if (!parseF(v, 0, lrGamma))
      return bad("a number >= 0");
  } else if (a == "--lr-min") {
    if (!parseF(v, 0, lrMin))
      return bad("a number >= 0");
  } else if (a == "--eval-every") {
    if (!parseI(v, 1, evalEvery))
      return bad("an integer >= 1");
  } else if (a == "--eval-every-epochs") {
    if (!parseF(v, 1e-9, evalEveryEpochs))
      return bad("a positive number");
  } else if (a == "--log-every") {
    if (!parseI(v, 1, logEvery))
      return bad("an integer >= 1");
  } else if (a == "--log-json") {
    if (v.empty())
      return bad("a file name");
    logJson = v;
  } else if (a == "--workers") {
    if (!parseI(v, 0, i) || i > 1024)
      return bad("an integer in [0, 1024]");
    workers = static_cast<int>(i);
  } else if (a == "--mean") {
    if (!parseList(v, mean, false))
      return bad("comma-separated numbers, one per channel");
  } else if (a == "--std") {
    if (!parseList(v, std, true))
      return bad("comma-separated positive numbers, one per channel");
  } else if (a == "--labels") {
    if (v.empty())
      return bad("a file name");
    labels = v;
  }
  (void)d;
  given.emplace_back(a, v);
  return 1;
}

std::vector<std::string> TrainFlags::toArgs() const {
  std::vector<std::string> out;
  for (const auto &[f, v] : given) {
    out.push_back(f);
    out.push_back(v);
  }
  return out;
}

const char *TrainFlags::help() {
  return "  --epochs E            train for E epochs (instead of --steps)\n"
         "  --lr-schedule S       constant | step | cosine (default "
         "constant)\n"
         "  --warmup-steps N / --warmup-epochs E\n"
         "                        linear warmup from lr/N to lr (default 0)\n"
         "  --lr-step N / --lr-step-epochs E\n"
         "                        step schedule: multiply by --lr-gamma every "
         "N steps\n"
         "  --lr-gamma G          step schedule factor (default 0.1)\n"
         "  --lr-min X            cosine schedule's final lr (default 0)\n"
         "  --eval-every N / --eval-every-epochs E\n"
         "                        validate (top-1/top-5) every N steps / E "
         "epochs\n"
         "  --log-every K         print progress every K steps\n"
         "  --log-json FILE       also write each log line as a JSON object\n"
         "  --workers N           image decoding threads (default: min(cores, "
         "16))\n"
         "  --mean a,b,c --std a,b,c\n"
         "                        normalization (default: ImageNet's for image "
         "folders,\n"
         "                        none (x = byte / 255) otherwise)\n"
         "  --labels FILE.npy     labels of --data images.npy: N, or N x H x "
         "W for a\n"
         "                        dense model (int64, int32 or uint8)\n";
}

bool planRun(const TrainFlags &f, int64_t samples, int batch,
             int64_t defaultSteps, double defaultLR, int64_t defaultLogEvery,
             RunPlan &p, std::string &err) {
  p = RunPlan();
  p.stepsPerEpoch = static_cast<double>(samples) / std::max(batch, 1);
  // A step count past 2^53 is not a run anyone can finish, and converting a
  // double beyond int64's range is undefined (--epochs 1e300 ran one step):
  // such an epoch count is an error naming its flag.
  const double maxSteps = 9007199254740992.0; // 2^53
  std::string tooMany;
  auto epochsToSteps = [&](double e, const char *flag) -> int64_t {
    double s = std::ceil(e * p.stepsPerEpoch - 1e-9);
    if (!(s <= maxSteps)) {
      if (tooMany.empty()) {
        std::ostringstream os;
        os << flag << " " << e << " is more than 2^53 steps of "
           << p.stepsPerEpoch << " per epoch";
        tooMany = os.str();
      }
      return 1;
    }
    return std::max<int64_t>(1, static_cast<int64_t>(s));
  };
  if (f.steps >= 0 && f.epochs >= 0) {
    err = "give --steps or --epochs, not both";
    return false;
  }
  p.totalSteps = f.epochs >= 0  ? epochsToSteps(f.epochs, "--epochs")
                 : f.steps >= 0 ? f.steps
                                : defaultSteps;
  if (f.warmupSteps >= 0 && f.warmupEpochs >= 0) {
    err = "give --warmup-steps or --warmup-epochs, not both";
    return false;
  }
  if (f.lrStep >= 0 && f.lrStepEpochs >= 0) {
    err = "give --lr-step or --lr-step-epochs, not both";
    return false;
  }
  if (f.evalEvery > 0 && f.evalEveryEpochs > 0) {
    err = "give --eval-every or --eval-every-epochs, not both";
    return false;
  }
  p.lr.kind = f.schedule;
  p.lr.base = f.lr >= 0 ? f.lr : defaultLR;
  p.lr.gamma = f.lrGamma;
  p.lr.minLR = f.lrMin;
  p.lr.total = p.totalSteps;
  p.lr.warmup = f.warmupSteps >= 0 ? f.warmupSteps
                : f.warmupEpochs > 0
                    ? epochsToSteps(f.warmupEpochs, "--warmup-epochs")
                    : 0;
  p.lr.stepSize = f.lrStep >= 0 ? f.lrStep
                  : f.lrStepEpochs > 0
                      ? epochsToSteps(f.lrStepEpochs, "--lr-step-epochs")
                      : 0;
  if (p.lr.kind == "step" && p.lr.stepSize <= 0) {
    err = "--lr-schedule step needs --lr-step N or --lr-step-epochs E";
    return false;
  }
  if (p.lr.kind != "step" && (f.lrStep >= 0 || f.lrStepEpochs >= 0)) {
    err = "--lr-step/--lr-step-epochs need --lr-schedule step";
    return false;
  }
  p.evalEvery = f.evalEvery > 0 ? f.evalEvery
                : f.evalEveryEpochs > 0
                    ? epochsToSteps(f.evalEveryEpochs, "--eval-every-epochs")
                    : 0;
  p.logEvery = f.logEvery > 0 ? f.logEvery : defaultLogEvery;
  if (!tooMany.empty()) {
    err = tooMany;
    return false;
  }
  return true;
}

bool resolveNormalization(const TrainFlags &f, const SampleSource &src,
                          Normalization &out, std::string &err) {
  if (f.mean.empty() != f.std.empty()) {
    err = "--mean and --std go together";
    return false;
  }
  if (f.mean.empty()) {
    out = src.defaultNormalization();
    return true;
  }
  if (static_cast<int>(f.mean.size()) != src.C ||
      static_cast<int>(f.std.size()) != src.C) {
    err = "--mean/--std need " + std::to_string(src.C) +
          " values (one per input channel)";
    return false;
  }
  out.mean = f.mean;
  out.std = f.std;
  return true;
}

int defaultWorkers(DataFormat f) {
  if (f != DataFormat::ImageFolder && f != DataFormat::Npy &&
      f != DataFormat::SegFolder)
    return 0;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return static_cast<int>(std::max(1L, std::min(n, 16L)));
}

std::string runHeader(const SampleSource &train, const SampleSource *test,
                      int workers, const Normalization &norm,
                      const RunPlan &plan, int batch) {
  std::string s = "data: " + train.describe() + "; " + std::to_string(workers) +
                  " workers; normalization ";
  if (norm.identity()) {
    s += train.type() == SampleType::U8 ? "none (x = byte / 255)" : "none";
  } else {
    s += "mean";
    for (size_t c = 0; c < norm.mean.size(); ++c)
      s += (c ? "," : " ") + jsonNumberShort(norm.mean[c]);
    s += " std";
    for (size_t c = 0; c < norm.std.size(); ++c)
      s += (c ? "," : " ") + jsonNumberShort(norm.std[c]);
  }
  s += "\n";
  if (test)
    s += "validation: " + test->describe() + "\n";
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "; %lld steps (%.2f epochs of %lld images, "
                "batch %d)\n",
                static_cast<long long>(plan.totalSteps),
                plan.totalSteps / std::max(plan.stepsPerEpoch, 1e-9),
                static_cast<long long>(train.size()), batch);
  s += "schedule: " + plan.lr.describe() + buf;
  return s;
}

//===--- lines ----------------------------------------------------------===//

std::string formatDuration(double s) {
  if (!(s >= 0) || !std::isfinite(s))
    s = 0;
  long long t = static_cast<long long>(s + 0.5);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", t / 3600, (t / 60) % 60,
                t % 60);
  return buf;
}

namespace {
std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}
} // namespace

std::string progressLine(const Progress &p) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "step %lld loss %.7g epoch %.2f lr %.6g img/s %lld eta %s",
                static_cast<long long>(p.step), p.loss, p.epoch, p.lr,
                static_cast<long long>(p.imagesPerSecond + 0.5),
                formatDuration(p.etaSeconds).c_str());
  std::string s = buf;
  if (p.lossScale >= 0) {
    std::snprintf(buf, sizeof(buf), " scale %g", p.lossScale);
    s += buf;
  }
  return s;
}

std::string progressJson(const Progress &p) {
  std::string s = "{\"type\": \"train\", \"step\": " + std::to_string(p.step) +
                  ", \"total_steps\": " + std::to_string(p.totalSteps) +
                  ", \"epoch\": " + jsonNumber(p.epoch) +
                  ", \"loss\": " + jsonNumber(p.loss) +
                  ", \"lr\": " + jsonNumber(p.lr) +
                  ", \"img_per_s\": " + jsonNumber(p.imagesPerSecond) +
                  ", \"eta_s\": " + jsonNumber(p.etaSeconds);
  if (p.lossScale >= 0)
    s += ", \"loss_scale\": " + jsonNumber(p.lossScale);
  return s + "}";
}

void beginDenseEval(int numClasses, EvalResult &e) {
  e.numClasses = numClasses;
  e.confusion.assign(static_cast<size_t>(numClasses) * numClasses, 0);
}

void accumulateConfusion(const float *logits, bool channelsLast, int H, int W,
                         const int32_t *labels, int64_t ignoreIndex,
                         EvalResult &e) {
  const int C = e.numClasses;
  const size_t plane = static_cast<size_t>(H) * W;
  for (size_t p = 0; p < plane; ++p) {
    int32_t t = labels[p];
    if (t == ignoreIndex || t < 0 || t >= C)
      continue;
    // The first maximum, as torch.argmax; a NaN wins (torch.argmax
    // treats NaN as the maximum).
    int best = 0;
    float bv = channelsLast ? logits[p * C] : logits[p];
    for (int c = 1; c < C && !std::isnan(bv); ++c) {
      float v = channelsLast ? logits[p * C + c] : logits[c * plane + p];
      if (v > bv || std::isnan(v)) {
        bv = v;
        best = c;
      }
    }
    ++e.confusion[static_cast<size_t>(t) * C + best];
  }
  ++e.total;
}

void accumulateConfusionBatch(const float *logits, int64_t images,
                              bool channelsLast, int H, int W,
                              const int32_t *labels, int64_t ignoreIndex,
                              EvalResult &e) {
  const size_t plane = static_cast<size_t>(H) * W;
  const size_t perImage = plane * e.numClasses;
  for (int64_t b = 0; b < images; ++b)
    accumulateConfusion(logits + b * perImage, channelsLast, H, W,
                        labels + b * plane, ignoreIndex, e);
}

double meanIoU(const EvalResult &e, std::vector<double> *perClass) {
  const int C = e.numClasses;
  double sum = 0;
  int valid = 0;
  if (perClass)
    perClass->assign(C, std::nan(""));
  for (int c = 0; c < C; ++c) {
    int64_t tp = e.confusion[static_cast<size_t>(c) * C + c], row = 0, col = 0;
    for (int k = 0; k < C; ++k) {
      row += e.confusion[static_cast<size_t>(c) * C + k];
      col += e.confusion[static_cast<size_t>(k) * C + c];
    }
    int64_t uni = row + col - tp;
    if (uni <= 0)
      continue;
    double iou = static_cast<double>(tp) / static_cast<double>(uni);
    if (perClass)
      (*perClass)[c] = iou;
    sum += iou;
    ++valid;
  }
  return valid ? sum / valid : std::nan("");
}

double pixelAccuracy(const EvalResult &e) {
  int64_t all = 0, diag = 0;
  for (int c = 0; c < e.numClasses; ++c)
    diag += e.confusion[static_cast<size_t>(c) * e.numClasses + c];
  for (int64_t v : e.confusion)
    all += v;
  return all ? static_cast<double>(diag) / static_cast<double>(all)
             : std::nan("");
}

namespace {
int64_t pixelsOf(const EvalResult &e) {
  int64_t all = 0;
  for (int64_t v : e.confusion)
    all += v;
  return all;
}
} // namespace

std::string evalLine(const EvalResult &e) {
  char buf[512];
  if (e.dense()) {
    std::snprintf(buf, sizeof(buf),
                  "eval step %lld epoch %.2f: mIoU %.2f%% pixel acc %.2f%% "
                  "(%lld pixels, %lld images)",
                  static_cast<long long>(e.step), e.epoch, 100.0 * meanIoU(e),
                  100.0 * pixelAccuracy(e), static_cast<long long>(pixelsOf(e)),
                  static_cast<long long>(e.total));
    return buf;
  }
  double n = std::max<int64_t>(e.total, 1);
  std::snprintf(buf, sizeof(buf),
                "eval step %lld epoch %.2f: top-1 %.2f%% (%lld/%lld) top-5 "
                "%.2f%% (%lld/%lld)",
                static_cast<long long>(e.step), e.epoch, 100.0 * e.top1 / n,
                static_cast<long long>(e.top1), static_cast<long long>(e.total),
                100.0 * e.top5 / n, static_cast<long long>(e.top5),
                static_cast<long long>(e.total));
  return buf;
}

std::string evalJson(const EvalResult &e) {
  if (e.dense()) {
    std::vector<double> iou;
    double m = meanIoU(e, &iou);
    std::string per = "[";
    for (size_t c = 0; c < iou.size(); ++c)
      per += (c ? ", " : "") + jsonNumber(iou[c]);
    return "{\"type\": \"eval\", \"step\": " + std::to_string(e.step) +
           ", \"epoch\": " + jsonNumber(e.epoch) +
           ", \"images\": " + std::to_string(e.total) +
           ", \"pixels\": " + std::to_string(pixelsOf(e)) +
           ", \"miou\": " + jsonNumber(m) +
           ", \"pixel_acc\": " + jsonNumber(pixelAccuracy(e)) +
           ", \"iou\": " + per + "]}";
  }
  double n = std::max<int64_t>(e.total, 1);
  return "{\"type\": \"eval\", \"step\": " + std::to_string(e.step) +
         ", \"epoch\": " + jsonNumber(e.epoch) +
         ", \"images\": " + std::to_string(e.total) +
         ", \"top1\": " + jsonNumber(e.top1 / n) +
         ", \"top5\": " + jsonNumber(e.top5 / n) +
         ", \"top1_correct\": " + std::to_string(e.top1) +
         ", \"top5_correct\": " + std::to_string(e.top5) + "}";
}

//===--- throughput -----------------------------------------------------===//

void ThroughputMeter::start(double processStart, double trainStart) {
  *this = ThroughputMeter();
  processStart_ = processStart;
  trainStart_ = trainStart;
}

double ThroughputMeter::mark(double t, int64_t images) {
  double at = t - paused_;
  double since = intervals_ == 0 ? trainStart_ : lastMark_;
  double rate = images / std::max(at - since, 1e-9);
  if (intervals_ == 0) {
    firstMark_ = at;
    firstImages_ = images;
  } else {
    laterImages_ += images;
  }
  lastMark_ = at;
  ++intervals_;
  return rate;
}

double ThroughputMeter::wholeRunRate() const {
  if (intervals_ == 0)
    return 0;
  return images() / std::max(lastMark_ - trainStart_, 1e-9);
}

double ThroughputMeter::steadyRate() const {
  if (!hasSteady())
    return wholeRunRate();
  return laterImages_ / laterSeconds();
}

double ThroughputMeter::startupSeconds() const {
  if (!hasSteady())
    return std::max(trainStart_ - processStart_, 0.0);
  // The first interval at the steady rate would have taken
  // firstImages_ / steadyRate(); the rest of the time until its end went
  // to start-up.
  double lost = firstMark_ - processStart_ - firstImages_ / steadyRate();
  return std::max(lost, 0.0);
}

double ThroughputMeter::secondsPerImage() const {
  double r = steadyRate();
  return r > 0 ? 1 / r : 0;
}

namespace {
std::string rateList(const std::vector<double> &rates, int64_t &total) {
  std::string s = "[";
  total = 0;
  for (size_t r = 0; r < rates.size(); ++r) {
    long long v = std::llround(rates[r]);
    s += (r ? ", " : "") + std::to_string(v);
    total += v;
  }
  return s + "]";
}
} // namespace

std::string doneLine(const RunSummary &s) {
  char buf[512];
  std::string steady =
      s.hasSteady ? std::to_string(std::llround(s.steadyImagesPerSecond))
                  : std::string("n/a");
  std::snprintf(buf, sizeof(buf),
                "done: %lld steps, final loss %.6g, steady img/s %s, start-up "
                "%.1f s, mean img/s %lld (whole run), peak GPU memory %lld MiB",
                static_cast<long long>(s.steps), s.finalLoss, steady.c_str(),
                s.startupSeconds,
                static_cast<long long>(std::llround(s.meanImagesPerSecond)),
                static_cast<long long>(s.peakGpuMiB));
  std::string line = buf;
  if (!std::isnan(s.miou) || !std::isnan(s.pixelAcc)) {
    std::snprintf(buf, sizeof(buf), ", mIoU %.2f%% pixel acc %.2f%%",
                  100.0 * s.miou, 100.0 * s.pixelAcc);
    line += buf;
  }
  return line;
}

std::string dataParallelLine(const RunSummary &s) {
  int64_t steadyTotal = 0, meanTotal = 0;
  // rateList() sets the total: it runs before the total is printed (one
  // statement each; an operand's order of evaluation is unspecified).
  std::string line = "data parallel: steady img/s per rank ";
  if (s.hasSteady) {
    line += rateList(s.steadyPerRank, steadyTotal);
    line += ", total " + std::to_string(steadyTotal);
  } else {
    line += "n/a";
  }
  line += "; whole run per rank ";
  line += rateList(s.meanPerRank, meanTotal);
  line += ", total " + std::to_string(meanTotal);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "; start-up %.1f s (slowest rank)",
                s.startupSeconds);
  return line + buf;
}

std::string doneJson(const RunSummary &s) {
  std::string perRank = "null";
  if (s.hasSteady) {
    perRank = "[";
    for (size_t r = 0; r < s.steadyPerRank.size(); ++r)
      perRank += (r ? ", " : "") + jsonNumber(s.steadyPerRank[r]);
    perRank += "]";
  }
  return "{\"type\": \"done\", \"steps\": " + std::to_string(s.steps) +
         ", \"final_loss\": " + jsonNumber(s.finalLoss) +
         ", \"steady_img_per_s\": " +
         (s.hasSteady ? jsonNumber(s.steadyImagesPerSecond) : "null") +
         ", \"startup_s\": " + jsonNumber(s.startupSeconds) +
         ", \"mean_img_per_s\": " + jsonNumber(s.meanImagesPerSecond) +
         ", \"peak_gpu_mib\": " + std::to_string(s.peakGpuMiB) +
         ", \"world_size\": " + std::to_string(s.worldSize) +
         ", \"steady_img_per_s_per_rank\": " + perRank +
         (std::isnan(s.miou) && std::isnan(s.pixelAcc)
              ? std::string()
              : ", \"miou\": " + jsonNumber(s.miou) +
                    ", \"pixel_acc\": " + jsonNumber(s.pixelAcc)) +
         "}";
}

void accumulateTopK(const float *logits, int numClasses, int label,
                    EvalResult &e) {
  // Rank of the label: logits strictly greater, plus equal ones earlier
  // (torch.argmax picks the first maximum).
  float v = logits[label];
  int rank = 0;
  for (int c = 0; c < numClasses; ++c)
    if (logits[c] > v || (logits[c] == v && c < label) || std::isnan(logits[c]))
      ++rank;
  ++e.total;
  e.top1 += rank < 1;
  e.top5 += rank < 5;
}

JsonLog::~JsonLog() {
  if (f_)
    std::fclose(f_);
}

bool JsonLog::open(const std::string &path, std::string &err) {
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) {
    err = "cannot write --log-json " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

void JsonLog::write(const std::string &json) {
  if (!f_)
    return;
  std::fputs(json.c_str(), f_);
  std::fputc('\n', f_);
  std::fflush(f_);
}

} // namespace cnnrt
