//===- Loader.cpp - StreamLoader: worker threads and a prefetch queue -----===//
//
// The consumer plans batches (which samples, from the epoch permutations) on
// its own thread; workers only decode rows of planned batches. A batch is
// therefore the same whatever the number of workers, and the augmentation of
// a row depends only on (seed, epoch, sample).
//
//===----------------------------------------------------------------------===//

#include "cnnrt/Dataset.h"

#include <algorithm>
#include <cstring>
#include <random>

namespace cnnrt {

uint64_t augmentSeed(uint64_t seed, int64_t epoch, int64_t sample) {
  uint64_t z =
      seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(epoch + 1));
  z ^= 0xD1B54A32D192ED03ull * static_cast<uint64_t>(sample + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void normalizeBatch(const void *in, SampleType type, size_t count, int C,
                    size_t plane, const Normalization &norm, float *out) {
  for (size_t i = 0; i < count; ++i) {
    int c = static_cast<int>((i / plane) % C);
    float x = type == SampleType::U8
                  ? byteToFloat(static_cast<const uint8_t *>(in)[i])
                  : static_cast<const float *>(in)[i];
    out[i] = norm.apply(x, c);
  }
}

StreamLoader::StreamLoader(const SampleSource &src, const LoaderOptions &o)
    : src_(src), opt_(o) {
  opt_.prefetch = std::max(1, opt_.prefetch);
  opt_.shards = std::max(1, opt_.shards);
  opt_.shard = std::min(std::max(0, opt_.shard), opt_.shards - 1);
  opt_.workers = std::max(0, opt_.workers);
  epoch_ = 0;
  cursor_ = 0;
  makePerm();
  slots_.resize(opt_.prefetch);
  for (Slot &s : slots_) {
    s.images.resize(batchBytes());
    s.labels.resize(batchLabels());
    s.samples.resize(opt_.batch);
    s.epochs.resize(opt_.batch);
  }
  startWorkers();
  std::lock_guard<std::mutex> lock(mu_);
  for (Slot &s : slots_)
    plan(s);
}

StreamLoader::~StreamLoader() { stopWorkers(); }

void StreamLoader::startWorkers() {
  stop_ = false;
  for (int i = 0; i < opt_.workers; ++i)
    threads_.emplace_back([this] { work(); });
}

void StreamLoader::stopWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  workReady_.notify_all();
  for (std::thread &t : threads_)
    t.join();
  threads_.clear();
}

void StreamLoader::makePerm() {
  // Exactly BatchLoader's permutation (see Dataset.h).
  int64_t n = src_.size();
  perm_.resize(n);
  for (int64_t i = 0; i < n; ++i)
    perm_[i] = i;
  if (!opt_.shuffle || n < 2)
    return;
  std::mt19937_64 rng(opt_.seed +
                      0x9E3779B97F4A7C15ull * static_cast<uint64_t>(epoch_));
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(perm_[i], perm_[j]);
  }
}

// Called with mu_ held.
void StreamLoader::plan(Slot &s) {
  s.before = {opt_.seed, epoch_, cursor_};
  // The global batch's rows; this shard keeps its contiguous slice.
  const int64_t first = static_cast<int64_t>(opt_.shard) * opt_.batch;
  const int64_t global = static_cast<int64_t>(opt_.shards) * opt_.batch;
  for (int64_t g = 0; g < global; ++g) {
    if (cursor_ >= src_.size()) {
      ++epoch_;
      cursor_ = 0;
      makePerm();
    }
    int64_t sample = perm_[cursor_++];
    if (g < first || g >= first + opt_.batch)
      continue;
    s.samples[g - first] = sample;
    s.epochs[g - first] = epoch_;
  }
  s.pending = opt_.batch;
  s.failed = false;
  s.err.clear();
  s.generation = ++generation_;
  if (opt_.workers > 0) {
    size_t k = &s - slots_.data();
    for (int r = 0; r < opt_.batch; ++r)
      queue_.emplace_back(k, r);
    workReady_.notify_all();
  }
}

void StreamLoader::fill(Slot &s, int row) {
  std::string err;
  size_t bytes = src_.sampleBytes();
  // Each row owns its slice of the labels: no lock needed to write it.
  const size_t lps = src_.labelsPerSample();
  bool ok = src_.getSample(
      s.samples[row], augmentSeed(opt_.seed, s.epochs[row], s.samples[row]),
      s.images.data() + row * bytes, s.labels.data() + row * lps, err);
  std::lock_guard<std::mutex> lock(mu_);
  if (!ok && !s.failed) {
    s.failed = true;
    s.err = err;
  }
  --s.pending;
}

void StreamLoader::work() {
  for (;;) {
    std::pair<size_t, int> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      workReady_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_)
        return;
      job = queue_.front();
      queue_.pop_front();
    }
    fill(slots_[job.first], job.second);
    rowDone_.notify_all();
  }
}

bool StreamLoader::next(void *images, int32_t *labels, std::string &err) {
  Slot &s = slots_[head_];
  if (opt_.workers == 0) {
    for (int r = 0; r < opt_.batch; ++r)
      fill(s, r);
  } else {
    std::unique_lock<std::mutex> lock(mu_);
    rowDone_.wait(lock, [&] { return s.pending == 0; });
  }
  if (s.failed) {
    err = s.err;
    return false;
  }
  std::memcpy(images, s.images.data(), batchBytes());
  std::memcpy(labels, s.labels.data(), batchLabels() * sizeof(int32_t));
  consumed_ += opt_.batch;
  std::lock_guard<std::mutex> lock(mu_);
  plan(s);
  head_ = (head_ + 1) % slots_.size();
  return true;
}

bool StreamLoader::nextF32(float *images, int32_t *labels,
                           const Normalization &norm, std::string &err) {
  std::vector<uint8_t> raw(batchBytes());
  if (!next(raw.data(), labels, err))
    return false;
  normalizeBatch(raw.data(), src_.type(),
                 static_cast<size_t>(opt_.batch) * src_.C * src_.H * src_.W,
                 src_.C, static_cast<size_t>(src_.H) * src_.W, norm, images);
  return true;
}

LoaderState StreamLoader::state() const { return slots_[head_].before; }

double StreamLoader::epochsDone() const {
  const LoaderState s = state();
  return s.epoch +
         static_cast<double>(s.cursor) / std::max<int64_t>(1, src_.size());
}

void StreamLoader::setState(const LoaderState &st) {
  // Stop decoding ahead: wait for the rows in flight, drop the queued ones.
  stopWorkers();
  std::lock_guard<std::mutex> lock(mu_);
  queue_.clear();
  opt_.seed = st.seed;
  epoch_ = st.epoch;
  cursor_ = st.cursor;
  makePerm();
  head_ = 0;
  stop_ = false;
  for (Slot &s : slots_)
    plan(s);
  // plan() queued the rows; the workers start on them once we unlock.
  for (int i = 0; i < opt_.workers; ++i)
    threads_.emplace_back([this] { work(); });
}

} // namespace cnnrt
