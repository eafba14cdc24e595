//===- Dataset.cpp - CIFAR-10 binary reader, synthetic data, batching -----===//

#include "cnnrt/Dataset.h"
#include "cnnrt/TensorFile.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

namespace cnnrt {

namespace {
bool isDir(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

uint64_t splitmix64(uint64_t &s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
} // namespace

bool cifarFiles(const std::string &path, Split split,
                std::vector<std::string> &files, std::string &err) {
  files.clear();
  if (!isDir(path)) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      err = "cannot open dataset " + path + ": " + std::strerror(errno);
      return false;
    }
    if (!S_ISREG(st.st_mode)) {
      err = "dataset " + path + " is not a regular file or a directory";
      return false;
    }
    files.push_back(path);
    return true;
  }
  DIR *d = opendir(path.c_str());
  if (!d) {
    err = "cannot open directory " + path + ": " + std::strerror(errno);
    return false;
  }
  while (dirent *e = readdir(d)) {
    std::string n = e->d_name;
    bool want = split == Split::Test
                    ? n == "test_batch.bin"
                    : (n.rfind("data_batch_", 0) == 0 && n.size() > 4 &&
                       n.compare(n.size() - 4, 4, ".bin") == 0);
    if (want)
      files.push_back(path + "/" + n);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    err = std::string("no ") +
          (split == Split::Test ? "test_batch.bin" : "data_batch_*.bin") +
          " in directory " + path;
    return false;
  }
  return true;
}

bool readCifarFile(const std::string &path, const CifarFormat &fmt,
                   ImageSet &out, std::string &err) {
  if (out.count == 0 && out.C == 0) {
    out.C = fmt.C;
    out.H = fmt.H;
    out.W = fmt.W;
    out.numClasses = fmt.numClasses;
  } else if (out.C != fmt.C || out.H != fmt.H || out.W != fmt.W) {
    err = "image geometry mismatch while reading " + path;
    return false;
  }
  // readFileBytes opens with openRegularFile: a FIFO or device given as
  // --data must not block.
  std::vector<char> buf;
  if (!readFileBytes(path, buf, err))
    return false;
  size_t size = buf.size();
  size_t rec = fmt.recordBytes();
  if (size % rec != 0 || size == 0) {
    err = "short/truncated file " + path + ": " + std::to_string(size) +
          " bytes is not a multiple of record size " + std::to_string(rec);
    return false;
  }
  int64_t n = static_cast<int64_t>(size / rec);
  size_t img = rec - 1;
  out.images.reserve(out.images.size() + n * img);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t *r = reinterpret_cast<const uint8_t *>(buf.data()) + i * rec;
    if (r[0] >= fmt.numClasses) {
      err = "bad label " + std::to_string(r[0]) + " in " + path + " record " +
            std::to_string(i) +
            " (num_classes = " + std::to_string(fmt.numClasses) + ")";
      return false;
    }
    out.labels.push_back(r[0]);
    out.images.insert(out.images.end(), r + 1, r + rec);
  }
  out.count += n;
  out.files.push_back(path);
  return true;
}

bool loadCifar(const std::string &path, Split split, const CifarFormat &fmt,
               ImageSet &out, std::string &err) {
  out = ImageSet();
  std::vector<std::string> files;
  if (!cifarFiles(path, split, files, err))
    return false;
  for (const std::string &f : files)
    if (!readCifarFile(f, fmt, out, err))
      return false;
  return true;
}

void synthesizeImage(uint64_t seed, int64_t index, int C, int H, int W,
                     int numClasses, uint8_t *out, int32_t &label) {
  // One stream per image (seeded from seed and index) so that any image can
  // be made on its own: a synthetic set of any size costs nothing to open.
  uint64_t st = seed + static_cast<uint64_t>(index) * 0xD1B54A32D192ED03ull;
  splitmix64(st);
  label = static_cast<int32_t>(splitmix64(st) % numClasses);
  for (int c = 0; c < C; ++c) {
    // Channel brightness that depends on the label (learnable even after
    // global average pooling).
    // In int64: label * 7 overflowed an int for a class count near 2^31.
    int level = static_cast<int>((int64_t(label) * 7 + int64_t(c) * 3) %
                                 numClasses * 72 /
                                 std::max(numClasses - 1, 1));
    for (int y = 0; y < H; ++y) {
      // Class pattern: a bright band whose position depends on the label.
      bool band = ((static_cast<int64_t>(y) * numClasses) / H + c) % numClasses ==
                  label;
      int base = (band ? 112 : 32) + level;
      uint8_t *row = out + (static_cast<size_t>(c) * H + y) * W;
      for (int x = 0; x < W; ++x)
        row[x] = static_cast<uint8_t>(base + (splitmix64(st) & 63));
    }
  }
}

ImageSet makeSynthetic(int64_t count, int C, int H, int W, int numClasses,
                       uint64_t seed) {
  ImageSet s;
  s.C = C;
  s.H = H;
  s.W = W;
  s.numClasses = numClasses;
  s.count = count;
  s.files.push_back("synthetic");
  size_t img = s.imageBytes();
  s.images.resize(count * img);
  s.labels.resize(count);
  for (int64_t i = 0; i < count; ++i)
    synthesizeImage(seed, i, C, H, W, numClasses, s.images.data() + i * img,
                    s.labels[i]);
  return s;
}

bool adaptImages(const ImageSet &in, int C, int H, int W, ImageSet &out,
                 std::string &err) {
  if (in.C == C && in.H == H && in.W == W) {
    out = in;
    return true;
  }
  if (!(in.C == C || in.C == 1 || (in.C == 3 && C == 1))) {
    err = "cannot adapt " + std::to_string(in.C) + "-channel images to " +
          std::to_string(C) + " channels (supported: equal, 1 -> N, 3 -> 1)";
    return false;
  }
  ImageSet o;
  o.C = C;
  o.H = H;
  o.W = W;
  o.numClasses = in.numClasses;
  o.count = in.count;
  o.labels = in.labels;
  o.files = in.files;
  o.images.resize(in.count * o.imageBytes());
  std::vector<int> sy(H), sx(W);
  for (int y = 0; y < H; ++y)
    sy[y] = static_cast<int>(static_cast<int64_t>(y) * in.H / H);
  for (int x = 0; x < W; ++x)
    sx[x] = static_cast<int>(static_cast<int64_t>(x) * in.W / W);
  size_t inPlane = static_cast<size_t>(in.H) * in.W;
  for (int64_t i = 0; i < in.count; ++i) {
    const uint8_t *src = in.images.data() + i * in.imageBytes();
    uint8_t *dst = o.images.data() + i * o.imageBytes();
    for (int c = 0; c < C; ++c)
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
          size_t off = static_cast<size_t>(sy[y]) * in.W + sx[x];
          uint8_t v;
          if (in.C == C)
            v = src[c * inPlane + off];
          else if (in.C == 1)
            v = src[off];
          else
            v = static_cast<uint8_t>(
                (src[off] + src[inPlane + off] + src[2 * inPlane + off] + 1) /
                3);
          dst[(static_cast<size_t>(c) * H + y) * W + x] = v;
        }
  }
  out = std::move(o);
  return true;
}

bool openDataset(const std::string &spec, Split split,
                 const DatasetOptions &opts, ImageSet &out, std::string &err) {
  if (spec == "synthetic") {
    int64_t n = opts.syntheticCount > 0 ? opts.syntheticCount : opts.batch;
    uint64_t seed = split == Split::Train ? opts.seed : (opts.seed ^ 0x7E57);
    out = makeSynthetic(n, opts.C, opts.H, opts.W, opts.numClasses, seed);
    return true;
  }
  CifarFormat fmt = opts.file;
  fmt.numClasses = opts.numClasses;
  ImageSet raw;
  if (!loadCifar(spec, split, fmt, raw, err))
    return false;
  return adaptImages(raw, opts.C, opts.H, opts.W, out, err);
}

BatchLoader::BatchLoader(const ImageSet &set, int batch, uint64_t seed,
                         bool shuffle)
    : set_(set), batch_(batch), seed_(seed), shuffle_(shuffle) {
  makePerm();
}

void BatchLoader::makePerm() {
  int64_t n = set_.count;
  perm_.resize(n);
  for (int64_t i = 0; i < n; ++i)
    perm_[i] = i;
  if (!shuffle_ || n < 2)
    return;
  std::mt19937_64 rng(seed_ +
                      0x9E3779B97F4A7C15ull * static_cast<uint64_t>(epoch_));
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(perm_[i], perm_[j]);
  }
}

void BatchLoader::setState(const LoaderState &s) {
  seed_ = s.seed;
  epoch_ = s.epoch;
  cursor_ = s.cursor;
  makePerm();
}

std::vector<int64_t> BatchLoader::peekIndices() const {
  std::vector<int64_t> idx;
  BatchLoader copy(set_, batch_, seed_, shuffle_);
  copy.epoch_ = epoch_;
  copy.cursor_ = cursor_;
  copy.perm_ = perm_;
  for (int b = 0; b < batch_; ++b) {
    if (copy.cursor_ >= set_.count) {
      ++copy.epoch_;
      copy.cursor_ = 0;
      copy.makePerm();
    }
    idx.push_back(copy.perm_[copy.cursor_++]);
  }
  return idx;
}

void BatchLoader::nextBatchU8(uint8_t *images, int32_t *labels) {
  size_t img = set_.imageBytes();
  for (int b = 0; b < batch_; ++b) {
    if (cursor_ >= set_.count) {
      ++epoch_;
      cursor_ = 0;
      makePerm();
    }
    int64_t s = perm_[cursor_++];
    std::memcpy(images + b * img, set_.images.data() + s * img, img);
    labels[b] = set_.labels[s];
  }
}

void BatchLoader::nextBatchF32(float *images, int32_t *labels) {
  size_t n = static_cast<size_t>(batch_) * set_.imageBytes();
  std::vector<uint8_t> tmp(n);
  nextBatchU8(tmp.data(), labels);
  for (size_t i = 0; i < n; ++i)
    images[i] = byteToFloat(tmp[i]);
}

} // namespace cnnrt
