//===- Sources.cpp - ImageFolder, memory-mapped .npy, in-memory sets ------===//

#include "cnnrt/Dataset.h"
#include "cnnrt/Image.h"
#include "cnnrt/TensorFile.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <random>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cnnrt {

namespace {

bool isDir(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool isFile(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}
std::string lower(std::string s) {
  for (char &c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Sorted entry names of a directory (without "." and "..").
bool listDir(const std::string &dir, std::vector<std::string> &names,
             std::string &err) {
  names.clear();
  DIR *d = opendir(dir.c_str());
  if (!d) {
    err = "cannot open directory " + dir + ": " + std::strerror(errno);
    return false;
  }
  while (dirent *e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..")
      names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return true;
}

//===--- in-memory sets (CIFAR, synthetic) -------------------------------===//

class ImageSetSource final : public SampleSource {
public:
  explicit ImageSetSource(ImageSet s) : set_(std::move(s)) {
    C = set_.C;
    H = set_.H;
    W = set_.W;
  }
  int64_t size() const override { return set_.count; }
  int numClasses() const override { return set_.numClasses; }
  std::string describe() const override {
    std::string f = set_.files.empty() ? "" : set_.files.front();
    return (f == "synthetic"
                ? "synthetic"
                : "CIFAR-10 binary " + f +
                      (set_.files.size() > 1
                           ? " (+" + std::to_string(set_.files.size() - 1) +
                                 " files)"
                           : "")) +
           ": " + std::to_string(set_.count) + " images";
  }
  bool get(int64_t i, uint64_t, void *out, int32_t &label,
           std::string &) const override {
    std::memcpy(out, set_.images.data() + i * set_.imageBytes(),
                set_.imageBytes());
    label = set_.labels[i];
    return true;
  }

private:
  ImageSet set_;
};

/// Synthetic data made on demand (synthesizeImage): opening a set of any
/// size is free, so a run whose plan cannot fit the GPU reaches that
/// diagnostic at once instead of after materializing batch-many images.
class SyntheticSource final : public SampleSource {
public:
  /// labelH > 0: a dense model's per-pixel labels (labelH x labelW), a
  /// 4 x 4 grid of classes starting at the image's label, so that a
  /// segmentation net's step reads a label for every pixel it predicts.
  SyntheticSource(int64_t count, int c, int h, int w, int numClasses,
                  uint64_t seed, int labelRows = 0, int labelCols = 0)
      : count_(count), numClasses_(numClasses), seed_(seed) {
    C = c;
    H = h;
    W = w;
    labelH = labelRows;
    labelW = labelCols;
  }
  int64_t size() const override { return count_; }
  int numClasses() const override { return numClasses_; }
  std::string describe() const override {
    return "synthetic: " + std::to_string(count_) + " images";
  }
  bool get(int64_t i, uint64_t, void *out, int32_t &label,
           std::string &err) const override {
    if (labelH > 0) {
      err = "synthetic data for a dense model has per-pixel labels only";
      return false;
    }
    synthesizeImage(seed_, i, C, H, W, numClasses_, static_cast<uint8_t *>(out),
                    label);
    return true;
  }
  bool getSample(int64_t i, uint64_t, void *out, int32_t *labels,
                 std::string &) const override {
    int32_t label = 0;
    synthesizeImage(seed_, i, C, H, W, numClasses_, static_cast<uint8_t *>(out),
                    label);
    if (labelH <= 0) {
      labels[0] = label;
      return true;
    }
    for (int y = 0; y < labelH; ++y)
      for (int x = 0; x < labelW; ++x)
        labels[static_cast<size_t>(y) * labelW + x] =
            (label + (4 * y / labelH) * 4 + 4 * x / labelW) % numClasses_;
    return true;
  }

private:
  int64_t count_;
  int numClasses_;
  uint64_t seed_;
};

//===--- ImageFolder ------------------------------------------------------===//

bool isImageName(const std::string &n) {
  std::string l = lower(n);
  return endsWith(l, ".jpg") || endsWith(l, ".jpeg") || endsWith(l, ".png");
}

/// torchvision's make_dataset walks each class folder with os.walk(
/// followlinks=True) and sorted names: files of a folder, then its
/// subfolders in order (each sorted).
bool walkImages(const std::string &dir, int32_t label,
                std::vector<std::pair<std::string, int32_t>> &out,
                int64_t &ignored, int depth, std::string &err) {
  if (depth > 32) {
    err = "directory nesting too deep (a symlink loop?) at " + dir;
    return false;
  }
  std::vector<std::string> names, subdirs;
  if (!listDir(dir, names, err))
    return false;
  for (const std::string &n : names) {
    std::string p = dir + "/" + n;
    if (isDir(p))
      subdirs.push_back(p);
    else if (isImageName(n))
      out.emplace_back(p, label);
    else
      ++ignored;
  }
  for (const std::string &s : subdirs)
    if (!walkImages(s, label, out, ignored, depth + 1, err))
      return false;
  return true;
}

class ImageFolderSource final : public SampleSource {
public:
  ImageFolderSource(std::string dir, std::vector<std::string> classes,
                    std::vector<std::pair<std::string, int32_t>> samples,
                    const SourceOptions &o, bool train)
      : dir_(std::move(dir)), classes_(std::move(classes)),
        samples_(std::move(samples)), train_(train && o.augment),
        resizeShorter_(static_cast<int>(std::min(o.H, o.W) / o.cropPct)) {
    C = o.C;
    H = o.H;
    W = o.W;
  }
  int64_t size() const override {
    return static_cast<int64_t>(samples_.size());
  }
  int numClasses() const override { return static_cast<int>(classes_.size()); }
  Normalization defaultNormalization() const override {
    return C == 3 ? Normalization::imagenet() : Normalization{};
  }
  std::string describe() const override {
    return "ImageFolder " + dir_ + ": " + std::to_string(classes_.size()) +
           " classes, " + std::to_string(samples_.size()) + " images, " +
           (train_ ? "RandomResizedCrop+flip" : "resize+center crop");
  }
  bool get(int64_t i, uint64_t seed, void *out, int32_t &label,
           std::string &err) const override {
    const auto &[path, cls] = samples_[i];
    label = cls;
    std::vector<uint8_t> bytes;
    Image img;
    if (!readFileBytes(path, bytes, err) ||
        !decodeImage(bytes.data(), bytes.size(), path, img, err))
      return false;
    uint8_t *dst = static_cast<uint8_t *>(out);
    if (train_) {
      std::mt19937_64 rng(seed);
      CropBox box = randomResizedCrop(img.W, img.H, rng);
      bool flip = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
      resampleToCHW(img, box, /*clipToBox=*/true, W, H, flip, C, dst);
    } else {
      CropBox box = centerCropBox(img.W, img.H, W, H, resizeShorter_);
      resampleToCHW(img, box, /*clipToBox=*/false, W, H, false, C, dst);
    }
    return true;
  }

private:
  std::string dir_;
  std::vector<std::string> classes_;
  std::vector<std::pair<std::string, int32_t>> samples_;
  bool train_;
  int resizeShorter_;
};

//===--- SegFolder: images/ and masks/ side by side -----------------------===//

/// The stem of a file name: the name without its last extension.
std::string stemOf(const std::string &name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

/// Dense prediction from DIR/images/<stem>.jpg|png and DIR/masks/<stem>.png.
/// Training: one crop box and flip drawn per sample (RandomResizedCrop with
/// scale (0.25, 1)), applied to the image (antialiased bilinear, as
/// ImageFolder) and to the mask (nearest: a class index is not averaged).
/// Evaluation: the whole image resized to the model's size, the mask by
/// nearest neighbour to the label tensor's.
class SegFolderSource final : public SampleSource {
public:
  SegFolderSource(std::string dir,
                  std::vector<std::pair<std::string, std::string>> samples,
                  const SourceOptions &o, bool train)
      : dir_(std::move(dir)), samples_(std::move(samples)),
        train_(train && o.augment), classes_(o.numClasses),
        ignoreIndex_(o.ignoreIndex) {
    C = o.C;
    H = o.H;
    W = o.W;
    labelH = o.labelH;
    labelW = o.labelW;
  }
  int64_t size() const override {
    return static_cast<int64_t>(samples_.size());
  }
  int numClasses() const override { return classes_; }
  Normalization defaultNormalization() const override {
    return C == 3 ? Normalization::imagenet() : Normalization{};
  }
  std::string describe() const override {
    return "SegFolder " + dir_ + ": " + std::to_string(samples_.size()) +
           " images with masks, " +
           (train_
                ? "RandomResizedCrop(scale 0.25-1)+flip"
                : "resize to " + std::to_string(H) + "x" + std::to_string(W)) +
           " (masks: nearest)";
  }
  bool get(int64_t, uint64_t, void *, int32_t &,
           std::string &err) const override {
    err = "SegFolder " + dir_ +
          " has per-pixel labels (masks), not one "
          "label per image";
    return false;
  }
  bool getSample(int64_t i, uint64_t seed, void *out, int32_t *labels,
                 std::string &err) const override {
    const auto &[imagePath, maskPath] = samples_[i];
    std::vector<uint8_t> bytes;
    Image img, mask;
    if (!readFileBytes(imagePath, bytes, err) ||
        !decodeImage(bytes.data(), bytes.size(), imagePath, img, err) ||
        !readFileBytes(maskPath, bytes, err) ||
        !decodeMask(bytes.data(), bytes.size(), maskPath, mask, err))
      return false;
    if (mask.W != img.W || mask.H != img.H) {
      err = "mask " + maskPath + " is " + std::to_string(mask.W) + "x" +
            std::to_string(mask.H) + " but its image " + imagePath + " is " +
            std::to_string(img.W) + "x" + std::to_string(img.H) +
            " (width x height)";
      return false;
    }
    for (size_t k = 0; k < mask.pixels.size(); ++k) {
      int v = mask.pixels[k];
      if (v >= classes_ && v != ignoreIndex_) {
        err = "mask " + maskPath + ": label " + std::to_string(v) + " at (y " +
              std::to_string(k / mask.W) + ", x " + std::to_string(k % mask.W) +
              ") is not a class in [0, " + std::to_string(classes_) +
              ") nor the ignore_index " + std::to_string(ignoreIndex_);
        return false;
      }
    }
    CropBox box{0, 0, static_cast<double>(img.W), static_cast<double>(img.H)};
    bool flip = false;
    if (train_) {
      std::mt19937_64 rng(seed);
      box = randomResizedCrop(img.W, img.H, rng, 0.25, 1.0);
      flip = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
    }
    resampleToCHW(img, box, /*clipToBox=*/true, W, H, flip, C,
                  static_cast<uint8_t *>(out));
    nearestMask(mask, box, flip, labelW, labelH, labels);
    return true;
  }

  /// The mask pixel under each output pixel's centre (x mirrored by flip).
  static void nearestMask(const Image &mask, const CropBox &box, bool flip,
                          int outW, int outH, int32_t *labels) {
    for (int y = 0; y < outH; ++y) {
      int sy = static_cast<int>(std::floor(box.y + (y + 0.5) * box.h / outH));
      sy = std::min(std::max(sy, 0), mask.H - 1);
      for (int x = 0; x < outW; ++x) {
        int ox = flip ? outW - 1 - x : x;
        int sx =
            static_cast<int>(std::floor(box.x + (ox + 0.5) * box.w / outW));
        sx = std::min(std::max(sx, 0), mask.W - 1);
        labels[static_cast<size_t>(y) * outW + x] = mask.at(sy, sx, 0);
      }
    }
  }

private:
  std::string dir_;
  std::vector<std::pair<std::string, std::string>> samples_;
  bool train_;
  int classes_;
  int64_t ignoreIndex_;
};

/// DIR/images/* (sorted) paired with DIR/masks/<stem>.png.
bool scanSegFolder(const std::string &dir,
                   std::vector<std::pair<std::string, std::string>> &samples,
                   std::string &err) {
  std::vector<std::string> names;
  if (!listDir(dir + "/images", names, err))
    return false;
  for (const std::string &n : names) {
    if (!isImageName(n) || !isFile(dir + "/images/" + n))
      continue;
    std::string mask = dir + "/masks/" + stemOf(n) + ".png";
    if (!isFile(mask)) {
      err = "image " + dir + "/images/" + n + " has no mask " + mask;
      return false;
    }
    samples.emplace_back(dir + "/images/" + n, mask);
  }
  if (samples.empty()) {
    err = "no .jpg/.jpeg/.png images in " + dir + "/images";
    return false;
  }
  return true;
}

//===--- .npy (memory-mapped) ---------------------------------------------===//

struct MappedNpy {
  std::string path;
  std::string descr;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr; ///< first element
  void *map = nullptr;
  size_t mapSize = 0;
  ~MappedNpy() {
    if (map)
      munmap(map, mapSize);
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

/// Value text of `key` in the header dict ("'descr': '<f4', ...").
bool npyField(const std::string &h, const std::string &key, std::string &v) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos)
    return false;
  size_t c = h.find(':', k);
  if (c == std::string::npos)
    return false;
  size_t b = h.find_first_not_of(' ', c + 1);
  if (b == std::string::npos)
    return false;
  size_t e;
  if (h[b] == '(') {
    e = h.find(')', b);
    if (e == std::string::npos)
      return false;
    ++e;
  } else if (h[b] == '\'') {
    e = h.find('\'', b + 1);
    if (e == std::string::npos)
      return false;
    ++e;
  } else {
    e = h.find_first_of(",}", b);
  }
  v = h.substr(b, e - b);
  return true;
}

bool mapNpy(const std::string &path, MappedNpy &m, std::string &err) {
  m.path = path;
  // openRegularFile: a FIFO must not block the open.
  int fd = openRegularFile(path, err);
  if (fd < 0)
    return false;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    err = "cannot stat " + path + ": " + std::strerror(errno);
    return false;
  }
  m.mapSize = static_cast<size_t>(st.st_size);
  if (m.mapSize < 12) {
    close(fd);
    err = "not a .npy file (too short): " + path;
    return false;
  }
  m.map = mmap(nullptr, m.mapSize, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (m.map == MAP_FAILED) {
    m.map = nullptr;
    err = "cannot map " + path + ": " + std::strerror(errno);
    return false;
  }
  const uint8_t *b = static_cast<const uint8_t *>(m.map);
  if (std::memcmp(b, "\x93NUMPY", 6) != 0) {
    err = "not a .npy file (bad magic): " + path;
    return false;
  }
  size_t hlen, off;
  if (b[6] == 1) {
    hlen = b[8] | (b[9] << 8);
    off = 10;
  } else if (b[6] == 2 || b[6] == 3) {
    hlen = b[8] | (b[9] << 8) | (size_t(b[10]) << 16) | (size_t(b[11]) << 24);
    off = 12;
  } else {
    err = "unsupported .npy version " + std::to_string(b[6]) + " in " + path;
    return false;
  }
  if (off + hlen > m.mapSize) {
    err = "truncated .npy header in " + path;
    return false;
  }
  std::string h(reinterpret_cast<const char *>(b + off), hlen);
  std::string fortran, shape;
  if (!npyField(h, "descr", m.descr) || !npyField(h, "shape", shape) ||
      !npyField(h, "fortran_order", fortran) || m.descr.size() < 2) {
    err = "malformed .npy header in " + path;
    return false;
  }
  m.descr = m.descr.substr(1, m.descr.size() - 2);
  if (fortran.find("True") != std::string::npos) {
    err = "Fortran-order .npy arrays are not supported: " + path;
    return false;
  }
  m.shape.clear();
  for (size_t i = 1; i + 1 < shape.size();) {
    size_t j = shape.find_first_of(",)", i);
    std::string t = shape.substr(i, j - i);
    t.erase(0, t.find_first_not_of(' '));
    if (!t.empty()) {
      char *end = nullptr;
      long long v = std::strtoll(t.c_str(), &end, 10);
      if (*end || v < 0) {
        err = "malformed .npy shape " + shape + " in " + path;
        return false;
      }
      m.shape.push_back(v);
    }
    i = j + 1;
  }
  m.data = b + off + hlen;
  size_t item = (m.descr == "|u1" || m.descr == "u1" || m.descr == "<u1") ? 1
                : (m.descr == "<f4" || m.descr == "<i4")                  ? 4
                : m.descr == "<i8"                                        ? 8
                                                                          : 0;
  if (item == 0) {
    err = "unsupported .npy dtype '" + m.descr + "' in " + path +
          " (images: uint8 or float32; labels: int64, int32 or uint8)";
    return false;
  }
  if (off + hlen + static_cast<size_t>(m.numel()) * item > m.mapSize) {
    err = "truncated .npy file " + path + ": the shape needs " +
          std::to_string(m.numel() * item) + " data bytes, the file has " +
          std::to_string(m.mapSize - off - hlen);
    return false;
  }
  return true;
}

class NpySource final : public SampleSource {
public:
  std::unique_ptr<MappedNpy> images, labelFile;
  std::vector<int32_t> labels;
  int srcC = 0, srcH = 0, srcW = 0;
  bool nhwc = false, f32 = false;
  int classes = 0;

  /// Per-pixel labels (labelH > 0): the N x srcH x srcW array, resized to
  /// labelH x labelW by the images' nearest-neighbour rule.
  bool dense = false;

  int64_t size() const override { return images->shape[0]; }
  SampleType type() const override {
    return f32 ? SampleType::F32 : SampleType::U8;
  }
  int numClasses() const override { return classes; }
  int64_t labelAt(size_t k) const {
    const std::string &t = labelFile->descr;
    if (t == "<i8") {
      int64_t v;
      std::memcpy(&v, labelFile->data + 8 * k, 8);
      return v;
    }
    if (t == "<i4") {
      int32_t v;
      std::memcpy(&v, labelFile->data + 4 * k, 4);
      return v;
    }
    return labelFile->data[k];
  }
  bool getSample(int64_t i, uint64_t seed, void *out, int32_t *labels,
                 std::string &err) const override {
    if (!dense)
      return get(i, seed, out, labels[0], err);
    int32_t unused;
    get(i, seed, out, unused, err);
    size_t base = static_cast<size_t>(i) * srcH * srcW;
    for (int y = 0; y < labelH; ++y) {
      size_t sy = static_cast<size_t>(static_cast<int64_t>(y) * srcH / labelH);
      for (int x = 0; x < labelW; ++x) {
        size_t sx =
            static_cast<size_t>(static_cast<int64_t>(x) * srcW / labelW);
        // Checked when the file was opened: a class or the ignore_index
        // (which fits an int32: SourceOptions' check).
        labels[static_cast<size_t>(y) * labelW + x] =
            static_cast<int32_t>(labelAt(base + sy * srcW + sx));
      }
    }
    return true;
  }
  std::string describe() const override {
    return "npy " + images->path + " (" + (nhwc ? "NHWC" : "NCHW") + " " +
           (f32 ? "float32" : "uint8") + ", " + std::to_string(size()) +
           " images) + " + labelFile->path;
  }
  bool get(int64_t i, uint64_t, void *out, int32_t &label,
           std::string &) const override {
    label = dense ? 0 : labels[i];
    size_t item = f32 ? 4 : 1;
    const uint8_t *img =
        images->data + static_cast<size_t>(i) * srcC * srcH * srcW * item;
    auto at = [&](int c, int y, int x) -> float {
      size_t k = nhwc ? (static_cast<size_t>(y) * srcW + x) * srcC + c
                      : (static_cast<size_t>(c) * srcH + y) * srcW + x;
      if (f32) {
        float v;
        std::memcpy(&v, img + 4 * k, 4);
        return v;
      }
      return img[k];
    };
    // Nearest-neighbour resize and channel adaptation as adaptImages.
    for (int c = 0; c < C; ++c)
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
          int sy = static_cast<int>(static_cast<int64_t>(y) * srcH / H);
          int sx = static_cast<int>(static_cast<int64_t>(x) * srcW / W);
          size_t d = (static_cast<size_t>(c) * H + y) * W + x;
          if (f32) {
            float v =
                srcC == C ? at(c, sy, sx)
                : srcC == 1
                    ? at(0, sy, sx)
                    : (at(0, sy, sx) + at(1, sy, sx) + at(2, sy, sx)) / 3.0f;
            static_cast<float *>(out)[d] = v;
          } else {
            int v = srcC == C   ? static_cast<int>(at(c, sy, sx))
                    : srcC == 1 ? static_cast<int>(at(0, sy, sx))
                                : (static_cast<int>(at(0, sy, sx)) +
                                   static_cast<int>(at(1, sy, sx)) +
                                   static_cast<int>(at(2, sy, sx)) + 1) /
                                      3;
            static_cast<uint8_t *>(out)[d] = static_cast<uint8_t>(v);
          }
        }
    return true;
  }
};

std::string shapeText(const std::vector<int64_t> &d) {
  std::string sh;
  for (int64_t v : d)
    sh += (sh.empty() ? "" : ", ") + std::to_string(v);
  return "(" + sh + (d.size() == 1 ? ",)" : ")");
}

/// Per-pixel labels: N x H x W, the images' N, H and W (they are resized
/// together), every value a class or the ignore_index.
bool finishDenseNpy(std::unique_ptr<NpySource> s, const std::string &imagesPath,
                    const std::string &labelsPath, const SourceOptions &o,
                    std::unique_ptr<SampleSource> &out, std::string &err) {
  const MappedNpy &lb = *s->labelFile;
  const int64_t n = s->images->shape[0];
  if (lb.shape.size() != 3 || lb.shape[0] != n || lb.shape[1] != s->srcH ||
      lb.shape[2] != s->srcW) {
    err = "labels " + labelsPath + " have shape " + shapeText(lb.shape) +
          " but the step expects per-pixel labels (" + std::to_string(n) +
          ", " + std::to_string(s->srcH) + ", " + std::to_string(s->srcW) +
          ") for the images " + imagesPath +
          " (N x H x W, one class per pixel: the model's output is N x C x "
          "H x W)";
    return false;
  }
  s->dense = true;
  const size_t total = static_cast<size_t>(n) * s->srcH * s->srcW;
  for (size_t k = 0; k < total; ++k) {
    int64_t v = s->labelAt(k);
    if (v == o.ignoreIndex)
      continue;
    if (v < 0 || v >= o.numClasses) {
      size_t plane = static_cast<size_t>(s->srcH) * s->srcW;
      err = "label " + std::to_string(v) + " is not a class in [0, " +
            std::to_string(o.numClasses) + ") nor the ignore_index " +
            std::to_string(o.ignoreIndex) + ": " + labelsPath + " at (" +
            std::to_string(k / plane) + ", " +
            std::to_string(k % plane / s->srcW) + ", " +
            std::to_string(k % s->srcW) + ")";
      return false;
    }
    s->classes = std::max(s->classes, static_cast<int>(v) + 1);
  }
  s->C = o.C;
  s->H = o.H;
  s->W = o.W;
  s->labelH = o.labelH;
  s->labelW = o.labelW;
  out = std::move(s);
  return true;
}

bool openNpy(const std::string &imagesPath, const std::string &labelsPath,
             const SourceOptions &o, std::unique_ptr<SampleSource> &out,
             std::string &err) {
  auto s = std::make_unique<NpySource>();
  s->images = std::make_unique<MappedNpy>();
  s->labelFile = std::make_unique<MappedNpy>();
  if (labelsPath.empty()) {
    err = "the images " + imagesPath +
          " need their labels: pass --labels labels.npy";
    return false;
  }
  if (!mapNpy(imagesPath, *s->images, err) ||
      !mapNpy(labelsPath, *s->labelFile, err))
    return false;
  const MappedNpy &im = *s->images, &lb = *s->labelFile;
  if (im.descr != "<f4" && im.descr != "|u1" && im.descr != "u1" &&
      im.descr != "<u1") {
    err = "images " + imagesPath + " have dtype '" + im.descr +
          "' (expected uint8 or float32)";
    return false;
  }
  s->f32 = im.descr == "<f4";
  const std::vector<int64_t> &d = im.shape;
  auto isCh = [&](int64_t v) { return v == 1 || v == 3 || v == o.C; };
  if (d.size() == 3) {
    s->srcC = 1;
    s->srcH = static_cast<int>(d[1]);
    s->srcW = static_cast<int>(d[2]);
  } else if (d.size() == 4 && isCh(d[1])) {
    s->srcC = static_cast<int>(d[1]);
    s->srcH = static_cast<int>(d[2]);
    s->srcW = static_cast<int>(d[3]);
  } else if (d.size() == 4 && isCh(d[3])) {
    s->nhwc = true;
    s->srcH = static_cast<int>(d[1]);
    s->srcW = static_cast<int>(d[2]);
    s->srcC = static_cast<int>(d[3]);
  } else {
    std::string sh;
    for (int64_t v : d)
      sh += (sh.empty() ? "" : ",") + std::to_string(v);
    err = "images " + imagesPath + " have shape (" + sh +
          "); expected N x C x H x W, N x H x W x C (C = 1, 3 or " +
          std::to_string(o.C) + ") or N x H x W";
    return false;
  }
  if (d[0] == 0 || s->srcH == 0 || s->srcW == 0) {
    err = "images " + imagesPath + " are empty";
    return false;
  }
  if (!(s->srcC == o.C || s->srcC == 1 || (s->srcC == 3 && o.C == 1))) {
    err = "cannot adapt the " + std::to_string(s->srcC) + "-channel images " +
          imagesPath + " to " + std::to_string(o.C) + " channels";
    return false;
  }
  if (lb.descr != "<i8" && lb.descr != "<i4" && lb.descr != "|u1" &&
      lb.descr != "u1" && lb.descr != "<u1") {
    err = "labels " + labelsPath + " have dtype '" + lb.descr +
          "' (expected int64, int32 or uint8)";
    return false;
  }
  if (o.labelH > 0)
    return finishDenseNpy(std::move(s), imagesPath, labelsPath, o, out, err);
  if (lb.shape.size() != 1 || lb.shape[0] != d[0]) {
    err = "labels " + labelsPath + " have " +
          (lb.shape.size() == 1 ? std::to_string(lb.shape[0]) + " entries"
                                : std::to_string(lb.shape.size()) + " dims") +
          " but " + imagesPath + " has " + std::to_string(d[0]) +
          " images (expected a 1-D array of one label per image)";
    return false;
  }
  s->labels.resize(d[0]);
  for (int64_t i = 0; i < d[0]; ++i) {
    int64_t v;
    if (lb.descr == "<i8") {
      std::memcpy(&v, lb.data + 8 * i, 8);
    } else if (lb.descr == "<i4") {
      int32_t t;
      std::memcpy(&t, lb.data + 4 * i, 4);
      v = t;
    } else {
      v = lb.data[i];
    }
    if (v < 0 || v >= o.numClasses) {
      err = "bad label " + std::to_string(v) + " in " + labelsPath + " index " +
            std::to_string(i) +
            " (num_classes = " + std::to_string(o.numClasses) + ")";
      return false;
    }
    s->labels[i] = static_cast<int32_t>(v);
    s->classes = std::max(s->classes, static_cast<int>(v) + 1);
  }
  s->C = o.C;
  s->H = o.H;
  s->W = o.W;
  out = std::move(s);
  return true;
}

bool hasCifarFiles(const std::string &dir) {
  std::vector<std::string> names;
  std::string err;
  if (!listDir(dir, names, err))
    return false;
  for (const std::string &n : names)
    if (n == "test_batch.bin" ||
        (n.rfind("data_batch_", 0) == 0 && endsWith(n, ".bin")))
      return true;
  return false;
}

bool hasSubdir(const std::string &dir) {
  std::vector<std::string> names;
  std::string err;
  if (!listDir(dir, names, err))
    return false;
  for (const std::string &n : names)
    if (isDir(dir + "/" + n))
      return true;
  return false;
}

} // namespace

std::unique_ptr<SampleSource> makeImageSetSource(ImageSet set) {
  return std::make_unique<ImageSetSource>(std::move(set));
}

namespace {
class StridedSource final : public SampleSource {
public:
  StridedSource(const SampleSource &base, int shard, int shards)
      : base_(base), shard_(shard), shards_(shards) {
    C = base.C;
    H = base.H;
    W = base.W;
    labelH = base.labelH;
    labelW = base.labelW;
  }
  int64_t size() const override {
    int64_t n = base_.size();
    return n > shard_ ? (n - shard_ + shards_ - 1) / shards_ : 0;
  }
  SampleType type() const override { return base_.type(); }
  int numClasses() const override { return base_.numClasses(); }
  std::string describe() const override {
    return base_.describe() + " (shard " + std::to_string(shard_) + " of " +
           std::to_string(shards_) + ")";
  }
  bool get(int64_t i, uint64_t seed, void *out, int32_t &label,
           std::string &err) const override {
    return base_.get(i * shards_ + shard_, seed, out, label, err);
  }
  bool getSample(int64_t i, uint64_t seed, void *out, int32_t *labels,
                 std::string &err) const override {
    return base_.getSample(i * shards_ + shard_, seed, out, labels, err);
  }
  Normalization defaultNormalization() const override {
    return base_.defaultNormalization();
  }

private:
  const SampleSource &base_;
  int shard_, shards_;
};
} // namespace

std::unique_ptr<SampleSource> makeStridedSource(const SampleSource &base,
                                                int shard, int shards) {
  return std::make_unique<StridedSource>(base, shard, std::max(shards, 1));
}

bool scanImageFolder(const std::string &dir, std::vector<std::string> &classes,
                     std::vector<std::pair<std::string, int32_t>> &samples,
                     std::string &err) {
  classes.clear();
  samples.clear();
  std::vector<std::string> names;
  if (!listDir(dir, names, err))
    return false;
  for (const std::string &n : names)
    if (isDir(dir + "/" + n))
      classes.push_back(n);
  if (classes.empty()) {
    err = "no class folders in " + dir +
          " (an ImageFolder is DIR/<class>/<image>.jpg|.png)";
    return false;
  }
  int64_t ignored = 0;
  for (size_t k = 0; k < classes.size(); ++k) {
    size_t before = samples.size();
    if (!walkImages(dir + "/" + classes[k], static_cast<int32_t>(k), samples,
                    ignored, 0, err))
      return false;
    if (samples.size() == before) {
      err =
          "no .jpg/.jpeg/.png images in class folder " + dir + "/" + classes[k];
      return false;
    }
  }
  return true;
}

DataFormat detectFormat(const std::string &spec) {
  if (spec == "synthetic")
    return DataFormat::Synthetic;
  if (isFile(spec))
    return endsWith(lower(spec), ".npy") ? DataFormat::Npy : DataFormat::Cifar;
  if (!isDir(spec))
    return DataFormat::Unknown;
  if (isFile(spec + "/train_x.npy"))
    return DataFormat::Npy;
  if ((isDir(spec + "/images") && isDir(spec + "/masks")) ||
      (isDir(spec + "/train/images") && isDir(spec + "/train/masks")))
    return DataFormat::SegFolder;
  if (hasCifarFiles(spec))
    return DataFormat::Cifar;
  if (hasSubdir(spec))
    return DataFormat::ImageFolder;
  return DataFormat::Unknown;
}

const char *formatName(DataFormat f) {
  switch (f) {
  case DataFormat::Synthetic:
    return "synthetic";
  case DataFormat::Cifar:
    return "CIFAR-10 binary";
  case DataFormat::Npy:
    return "npy";
  case DataFormat::ImageFolder:
    return "ImageFolder";
  case DataFormat::SegFolder:
    return "SegFolder";
  case DataFormat::Unknown:
    break;
  }
  return "unknown";
}

bool hasTestSplit(const std::string &spec) {
  switch (detectFormat(spec)) {
  case DataFormat::Cifar: {
    std::vector<std::string> files;
    std::string err;
    return isDir(spec) && cifarFiles(spec, Split::Test, files, err);
  }
  case DataFormat::Npy:
    return isDir(spec) && isFile(spec + "/val_x.npy");
  case DataFormat::ImageFolder:
    return isDir(spec + "/train") && isDir(spec + "/val");
  case DataFormat::SegFolder:
    return isDir(spec + "/val/images");
  default:
    return false;
  }
}

bool openSource(const std::string &spec, Split split, const SourceOptions &o,
                std::unique_ptr<SampleSource> &out, std::string &err) {
  DataFormat f = detectFormat(spec);
  switch (f) {
  case DataFormat::Synthetic: {
    int64_t n = o.syntheticCount > 0 ? o.syntheticCount : o.batch;
    uint64_t seed = split == Split::Train ? o.seed : (o.seed ^ 0x7E57);
    out = std::make_unique<SyntheticSource>(n, o.C, o.H, o.W, o.numClasses,
                                            seed, o.labelH, o.labelW);
    return true;
  }
  case DataFormat::Cifar: {
    DatasetOptions d;
    d.C = o.C;
    d.H = o.H;
    d.W = o.W;
    d.numClasses = o.numClasses;
    ImageSet set;
    if (!openDataset(spec, split, d, set, err))
      return false;
    out = makeImageSetSource(std::move(set));
    return true;
  }
  case DataFormat::Npy: {
    if (isDir(spec)) {
      std::string p = spec + (split == Split::Train ? "/train" : "/val");
      if (split == Split::Test && !isFile(p + "_x.npy")) {
        err = "no validation split in " + spec + " (val_x.npy/val_y.npy)";
        return false;
      }
      return openNpy(p + "_x.npy", p + "_y.npy", o, out, err);
    }
    if (split == Split::Test) {
      err = "no validation split for the single array " + spec +
            " (use a directory with train_x.npy, train_y.npy, val_x.npy, "
            "val_y.npy)";
      return false;
    }
    return openNpy(spec, o.labels, o, out, err);
  }
  case DataFormat::ImageFolder: {
    bool splitDirs = isDir(spec + "/train");
    std::string dir = spec;
    if (splitDirs)
      dir = spec + (split == Split::Train ? "/train" : "/val");
    if (split == Split::Test && !(splitDirs && isDir(dir))) {
      err = "no validation split in " + spec + " (expected " + spec +
            "/train and " + spec + "/val)";
      return false;
    }
    if (o.C != 1 && o.C != 3) {
      err = "ImageFolder data gives RGB (or gray) images but the model takes " +
            std::to_string(o.C) + " channels";
      return false;
    }
    std::vector<std::string> classes;
    std::vector<std::pair<std::string, int32_t>> samples;
    if (!scanImageFolder(dir, classes, samples, err))
      return false;
    if (static_cast<int>(classes.size()) > o.numClasses) {
      err = "ImageFolder " + dir + " has " + std::to_string(classes.size()) +
            " classes but the model has " + std::to_string(o.numClasses) +
            " outputs (class folder '" + classes[o.numClasses] +
            "' would get the out-of-range label " +
            std::to_string(o.numClasses) + ")";
      return false;
    }
    if (split == Split::Test) {
      // Validation labels must mean what the training labels mean.
      std::vector<std::string> names, trainClasses;
      if (!listDir(spec + "/train", names, err))
        return false;
      for (const std::string &n : names)
        if (isDir(spec + "/train/" + n))
          trainClasses.push_back(n);
      if (trainClasses != classes) {
        err = "the class folders of " + dir + " differ from those of " + spec +
              "/train (the labels would not match)";
        return false;
      }
    }
    if (!haveImageDecoders()) {
      err = "ImageFolder " + dir +
            ": this runtime was built without libjpeg-turbo/libpng";
      return false;
    }
    out = std::make_unique<ImageFolderSource>(
        dir, std::move(classes), std::move(samples), o, split == Split::Train);
    return true;
  }
  case DataFormat::SegFolder: {
    bool splitDirs = isDir(spec + "/train/images");
    std::string dir = spec;
    if (splitDirs)
      dir = spec + (split == Split::Train ? "/train" : "/val");
    if (split == Split::Test && !(splitDirs && isDir(dir + "/images"))) {
      err = "no validation split in " + spec + " (expected " + spec +
            "/train/{images,masks} and " + spec + "/val/{images,masks})";
      return false;
    }
    if (o.labelH <= 0) {
      err = "SegFolder " + spec +
            " holds masks (per-pixel labels) but the model takes one label "
            "per image";
      return false;
    }
    if (o.C != 1 && o.C != 3) {
      err = "SegFolder images are RGB (or gray) but the model takes " +
            std::to_string(o.C) + " channels";
      return false;
    }
    if (!haveImageDecoders()) {
      err = "SegFolder " + dir +
            ": this runtime was built without libjpeg-turbo/libpng";
      return false;
    }
    std::vector<std::pair<std::string, std::string>> samples;
    if (!scanSegFolder(dir, samples, err))
      return false;
    out = std::make_unique<SegFolderSource>(dir, std::move(samples), o,
                                            split == Split::Train);
    return true;
  }
  case DataFormat::Unknown:
    break;
  }
  if (!isDir(spec) && !isFile(spec)) {
    // Name the real reason: a FIFO or a device exists but is no dataset.
    struct stat st;
    if (stat(spec.c_str(), &st) != 0)
      err = "cannot open dataset " + spec + ": " + std::strerror(errno);
    else
      err = "dataset " + spec + " is not a regular file or a directory";
    return false;
  }
  err = "cannot tell the format of dataset directory " + spec +
        ": expected data_batch_*.bin/test_batch.bin (CIFAR-10), "
        "train_x.npy/train_y.npy (npy), class folders (ImageFolder), or "
        "images/ and masks/ (SegFolder)";
  return false;
}

} // namespace cnnrt
