//===- Dataset.h - CIFAR-10 binary reader, synthetic data, batching -*- C++
//-*-===//
//
// Pure C++17 (no CUDA). The GPU runtime and the compiler's CPU reference
// interpreter both feed their training steps through BatchLoader, so they see
// the same batches in the same order. See docs/runtime.md ("Data").
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_DATASET_H
#define CNNRT_DATASET_H

#include <cstdint>
#include <string>
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

/// Deterministic synthetic data from a splitmix64 stream seeded with `seed`:
/// label = next() % numClasses; pixel = (112 if in the label's band of rows,
/// else 32) + per-channel label level (0..72) + (next() & 63). Learnable.
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

} // namespace cnnrt

#endif // CNNRT_DATASET_H
