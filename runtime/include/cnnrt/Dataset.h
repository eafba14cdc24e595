//===- Dataset.h - training data: readers, transforms, batching --*- C++
//-*-===//
//
// Pure C++17 (no CUDA). The GPU runtime and the compiler's CPU reference
// interpreter both feed their training steps through StreamLoader (over a
// SampleSource from openSource), so they see the same batches in the same
// order. Formats: CIFAR-10 binary, torchvision ImageFolder (JPEG/PNG), .npy
// arrays (memory-mapped), synthetic. See docs/runtime.md ("Data").
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_DATASET_H
#define CNNRT_DATASET_H

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cnnrt {

/// Images as bytes in NCHW (per image: CHW) order plus int32 labels.
struct ImageSet {
  int C = 0, H = 0, W = 0;
  int numClasses = 0;
  int64_t count = 0;
  std::vector<uint8_t> images;    ///< count * C * H * W
  std::vector<int32_t> labels;    ///< count
  std::vector<std::string> files; ///< where the records came from
  size_t imageBytes() const { return static_cast<size_t>(C) * H * W; }
};

/// Geometry of the binary record: 1 label byte + C*H*W image bytes (CHW).
struct CifarFormat {
  int C = 3, H = 32, W = 32;
  int numClasses = 10;
  size_t recordBytes() const { return 1 + static_cast<size_t>(C) * H * W; }
};

enum class Split { Train, Test };

/// The files of a split: for a directory, the sorted data_batch_*.bin (Train)
/// or test_batch.bin (Test); a regular file is used for both splits.
bool cifarFiles(const std::string &path, Split split,
                std::vector<std::string> &files, std::string &err);

/// Reads one CIFAR-format binary file, appending to `out` (whose C/H/W must be
/// unset or equal to fmt's). Errors:
///   "short/truncated file <path>: N bytes is not a multiple of record size R"
///   "bad label L in <path> record I (num_classes = K)"
bool readCifarFile(const std::string &path, const CifarFormat &fmt,
                   ImageSet &out, std::string &err);
/// Reads all files of a split (see cifarFiles).
bool loadCifar(const std::string &path, Split split, const CifarFormat &fmt,
               ImageSet &out, std::string &err);

/// Synthetic image `index`, deterministic, from a splitmix64 stream seeded
/// with (seed, index): label = next() % numClasses; pixel = (112 if in the
/// label's band of rows, else 32) + per-channel label level (0..72) +
/// (next() & 63). Learnable. `out` holds C*H*W bytes.
void synthesizeImage(uint64_t seed, int64_t index, int C, int H, int W,
                     int numClasses, uint8_t *out, int32_t &label);
/// Images 0..count-1 of synthesizeImage, materialized.
ImageSet makeSynthetic(int64_t count, int C, int H, int W, int numClasses,
                       uint64_t seed);

/// Adapts images to the model's input geometry: nearest-neighbour resize
/// (src = floor(dst * srcSize / dstSize)), then channels: 1 -> N replicates,
/// 3 -> 1 averages as (r + g + b + 1) / 3; other channel changes are errors.
bool adaptImages(const ImageSet &in, int C, int H, int W, ImageSet &out,
                 std::string &err);

/// Options of openDataset.
struct DatasetOptions {
  int C = 3, H = 32, W = 32; ///< model input geometry
  int numClasses = 10;
  CifarFormat file;           ///< geometry of the records on disk
  int64_t syntheticCount = 0; ///< images in the synthetic set (0: batch)
  int batch = 1;
  uint64_t seed = 0;
};

/// `spec` is a directory, a file, or "synthetic". Loads the split and adapts
/// it to opts.C/H/W. Synthetic: makeSynthetic(count, ..., seed) for Train and
/// seed ^ 0x7E57 for Test.
bool openDataset(const std::string &spec, Split split,
                 const DatasetOptions &opts, ImageSet &out, std::string &err);

/// Resumable position of a BatchLoader.
struct LoaderState {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t cursor = 0; ///< index into the epoch's permutation
};

/// Produces fixed-size batches from an ImageSet as one endless stream of
/// samples: epoch e visits every sample once in the order of its permutation;
/// a batch that crosses the end of an epoch continues with the next epoch.
/// With shuffle, the permutation of epoch e is a Fisher-Yates shuffle
/// (i = n-1 .. 1: j = rng() % (i + 1); swap(p[i], p[j])) driven by
/// std::mt19937_64(seed + 0x9E3779B97F4A7C15 * e); without shuffle it is the
/// identity. The state (seed, epoch, cursor) reproduces the stream exactly.
class BatchLoader {
public:
  BatchLoader(const ImageSet &set, int batch, uint64_t seed, bool shuffle);

  int batch() const { return batch_; }
  const ImageSet &set() const { return set_; }

  /// Next batch: images as bytes (batch * C*H*W, NCHW), labels as int32.
  void nextBatchU8(uint8_t *images, int32_t *labels);
  /// Next batch as float32 NCHW, x = byte / 255.0f (what the GPU computes).
  void nextBatchF32(float *images, int32_t *labels);
  /// Sample indices of the next batch without advancing.
  std::vector<int64_t> peekIndices() const;

  LoaderState state() const { return {seed_, epoch_, cursor_}; }
  void setState(const LoaderState &s);

private:
  void makePerm();
  const ImageSet &set_;
  int batch_;
  uint64_t seed_;
  bool shuffle_;
  int64_t epoch_ = 0, cursor_ = 0;
  std::vector<int64_t> perm_;
};

/// The one byte -> float scaling used on CPU and GPU: x = byte / 255.0f.
inline float byteToFloat(uint8_t b) { return static_cast<float>(b) / 255.0f; }

//===--- Sample sources -------------------------------------------------===//

/// How samples are stored before normalization: bytes (x = b / 255) or
/// float32 (x = v).
enum class SampleType { U8, F32 };

/// Per-channel normalization x' = (x - mean[c]) / std[c], applied after the
/// byte scaling, computed with a true division on CPU and GPU alike (so both
/// see the same bits). Empty vectors: identity.
struct Normalization {
  std::vector<float> mean, std;
  bool identity() const { return mean.empty(); }
  static Normalization imagenet() {
    return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  }
  float apply(float x, int c) const {
    return identity() ? x : (x - mean[c]) / std[c];
  }
};

/// A random-access set of labelled samples, each already in the model's
/// geometry (C x H x W, CHW order). get() is called concurrently from the
/// loader's worker threads.
class SampleSource {
public:
  virtual ~SampleSource() = default;
  virtual int64_t size() const = 0;
  virtual SampleType type() const { return SampleType::U8; }
  /// Number of classes found in the data (labels are < this).
  virtual int numClasses() const = 0;
  /// What the data is ("ImageFolder DIR: 1000 classes, 1281167 images").
  virtual std::string describe() const = 0;
  /// Writes sample `index` (C*H*W elements of type()) and its label.
  /// `augmentSeed` drives the random training transform (if any). A dense
  /// source (labelH > 0) has no single label: its get() is an error.
  virtual bool get(int64_t index, uint64_t augmentSeed, void *out,
                   int32_t &label, std::string &err) const = 0;
  /// Writes sample `index` and its labelsPerSample() labels (one per image,
  /// or a labelH x labelW mask, row-major, transformed as the image). The
  /// loaders read every source through this.
  virtual bool getSample(int64_t index, uint64_t augmentSeed, void *out,
                         int32_t *labels, std::string &err) const {
    return get(index, augmentSeed, out, labels[0], err);
  }
  /// The mean/std this format is normalized with unless flags say otherwise
  /// (ImageFolder: ImageNet's; the others: identity, as before).
  virtual Normalization defaultNormalization() const { return {}; }
  int C = 0, H = 0, W = 0;
  /// Per-pixel labels (dense prediction): labelH x labelW per sample, whose
  /// values are classes or the model's ignore_index. 0: one label per image.
  int labelH = 0, labelW = 0;
  size_t labelsPerSample() const {
    return labelH > 0 ? static_cast<size_t>(labelH) * labelW : 1;
  }
  size_t sampleBytes() const {
    return static_cast<size_t>(C) * H * W * (type() == SampleType::U8 ? 1 : 4);
  }
};

/// Options of openSource.
struct SourceOptions {
  int C = 3, H = 32, W = 32; ///< model input geometry
  int numClasses = 10;       ///< the model's classes (labels must be below)
  int64_t syntheticCount = 0;
  int batch = 1;
  uint64_t seed = 0;
  std::string labels;     ///< labels .npy for an images .npy in `spec`
  bool augment = true;    ///< ImageFolder train split: RandomResizedCrop+flip
  double cropPct = 0.875; ///< eval: Resize(int(size / cropPct)) + CenterCrop
  /// The step's label tensor is N x labelH x labelW (dense prediction):
  /// .npy labels must be N x H x W and a directory may hold images/ and
  /// masks/ (see openSource). 0: one label per image.
  int labelH = 0, labelW = 0;
  /// Dense labels: a value that is not a class must be this.
  int64_t ignoreIndex = -100;
};

/// What `spec` is, recognized from the path:
///   "synthetic"; FILE.npy (images, with SourceOptions::labels);
///   DIR with train_x.npy/train_y.npy (val_x.npy/val_y.npy for Test);
///   DIR with data_batch_*.bin/test_batch.bin, or any other FILE: CIFAR-10;
///   DIR with train/ (and val/) class folders, or DIR of class folders:
///   ImageFolder;
///   DIR with images/ and masks/ (or train/images, train/masks and
///   val/images, val/masks): SegFolder, an image and its PNG mask of the
///   same stem (dense prediction).
enum class DataFormat {
  Synthetic,
  Cifar,
  Npy,
  ImageFolder,
  SegFolder,
  Unknown
};
DataFormat detectFormat(const std::string &spec);
const char *formatName(DataFormat f);

/// Whether `spec` has a Test (validation) split: CIFAR test_batch.bin,
/// ImageFolder DIR/val, npy DIR/val_x.npy. Synthetic: no.
bool hasTestSplit(const std::string &spec);

/// Opens the split of `spec` as a SampleSource in the model's geometry.
/// Errors name the offending file (corrupt image files are only found when
/// they are decoded: StreamLoader::next reports them).
bool openSource(const std::string &spec, Split split, const SourceOptions &o,
                std::unique_ptr<SampleSource> &out, std::string &err);

/// Wraps an in-memory ImageSet (already in the model's geometry).
std::unique_ptr<SampleSource> makeImageSetSource(ImageSet set);
/// Samples shard, shard + shards, shard + 2*shards, ... of `base` (which
/// must outlive it): the ranks' disjoint parts of a validation split, which
/// together cover it once.
std::unique_ptr<SampleSource> makeStridedSource(const SampleSource &base,
                                                int shard, int shards);

/// ImageFolder: the sorted class folder names of DIR (torchvision's
/// find_classes) and the samples (path, class index) in torchvision's order.
bool scanImageFolder(const std::string &dir, std::vector<std::string> &classes,
                     std::vector<std::pair<std::string, int32_t>> &samples,
                     std::string &err);

//===--- Streaming batches ----------------------------------------------===//

struct LoaderOptions {
  int batch = 1;
  uint64_t seed = 0;
  bool shuffle = true;
  /// Decoding threads; 0 decodes on the calling thread.
  int workers = 0;
  /// Batches decoded ahead of the consumer (bounded memory:
  /// prefetch * batch * sampleBytes).
  int prefetch = 3;
  /// Data parallelism: the stream is that of a global batch of
  /// batch * shards (one shuffle per epoch, the same on every rank) and this
  /// loader returns rows [shard * batch, (shard + 1) * batch) of each one:
  /// disjoint shards, exactly the samples of a 1-rank run with the global
  /// batch. The state (epoch, cursor) is the global stream's, the same on
  /// every rank, so a checkpoint resumes on any number of ranks.
  int shard = 0, shards = 1;
};

/// The seed of the random transform of `sample` in `epoch`: independent of
/// the number of workers and of the batch size.
uint64_t augmentSeed(uint64_t seed, int64_t epoch, int64_t sample);

/// Batches from a SampleSource as one endless stream with the same order as
/// BatchLoader (epoch permutations, batches crossing epochs), decoded by a
/// pool of workers into a bounded queue of `prefetch` batches.
class StreamLoader {
public:
  StreamLoader(const SampleSource &src, const LoaderOptions &o);
  ~StreamLoader();
  StreamLoader(const StreamLoader &) = delete;
  StreamLoader &operator=(const StreamLoader &) = delete;

  const SampleSource &source() const { return src_; }
  int batch() const { return opt_.batch; }
  size_t batchBytes() const { return opt_.batch * src_.sampleBytes(); }
  /// int32 labels per batch: batch * source().labelsPerSample().
  size_t batchLabels() const { return opt_.batch * src_.labelsPerSample(); }
  /// Next batch as stored (batch * C*H*W of source().type()) + labels
  /// (batchLabels() of them).
  /// False (with err naming the file) when a sample cannot be read.
  bool next(void *images, int32_t *labels, std::string &err);
  /// Next batch as normalized float32 (what the GPU's input conversion
  /// computes).
  bool nextF32(float *images, int32_t *labels, const Normalization &norm,
               std::string &err);
  /// The position of the batch the next call returns.
  LoaderState state() const;
  /// Restarts the stream at `s` (drops the batches decoded ahead).
  void setState(const LoaderState &s);
  /// Fractional epochs consumed so far.
  double epochsDone() const;

private:
  struct Slot {
    std::vector<uint8_t> images;
    std::vector<int32_t> labels;
    std::vector<int64_t> samples; ///< sample index of each row
    std::vector<int64_t> epochs;  ///< epoch of each row
    LoaderState before;
    int pending = 0, next = 0; ///< rows not done / first row not taken
    bool failed = false;
    std::string err;
    uint64_t generation = 0;
  };
  void plan(Slot &s);
  void fill(Slot &s, int row);
  void work();
  void stopWorkers();
  void startWorkers();
  void makePerm();

  const SampleSource &src_;
  LoaderOptions opt_;
  int64_t epoch_ = 0, cursor_ = 0; ///< planning position
  std::vector<int64_t> perm_;
  std::vector<Slot> slots_;
  size_t head_ = 0; ///< slot the next batch comes from
  uint64_t generation_ = 0;
  std::mutex mu_;
  std::condition_variable workReady_, rowDone_;
  std::deque<std::pair<size_t, int>> queue_; ///< (slot, row)
  std::vector<std::thread> threads_;
  bool stop_ = false;
  int64_t consumed_ = 0; ///< samples returned
};

/// The CPU side of the normalization: byte or float -> normalized float.
void normalizeBatch(const void *in, SampleType type, size_t count, int C,
                    size_t plane, const Normalization &norm, float *out);

} // namespace cnnrt

#endif // CNNRT_DATASET_H
