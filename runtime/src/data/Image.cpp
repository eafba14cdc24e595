//===- Image.cpp - JPEG/PNG decoding and the torchvision transforms -------===//

#include "cnnrt/Image.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#if CNNRT_HAVE_IMAGE_DECODERS
#include <png.h>
#include <turbojpeg.h>
#endif

namespace cnnrt {

bool haveImageDecoders() { return CNNRT_HAVE_IMAGE_DECODERS != 0; }

bool readFileBytes(const std::string &path, std::vector<uint8_t> &out,
                   std::string &err) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    err = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  out.clear();
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    out.insert(out.end(), buf, buf + n);
  bool bad = std::ferror(f);
  std::fclose(f);
  if (bad) {
    err = "cannot read " + path + ": read error";
    return false;
  }
  return true;
}

namespace {
// Images larger than this (pixels) are rejected before allocating: a corrupt
// header must not make us allocate gigabytes.
constexpr int64_t kMaxPixels = int64_t(1) << 28;

bool isPNG(const uint8_t *data, size_t size) {
  static const uint8_t kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return size >= 8 && std::memcmp(data, kPng, 8) == 0;
}

#if CNNRT_HAVE_IMAGE_DECODERS
struct TjHandle {
  tjhandle h = tjInitDecompress();
  ~TjHandle() {
    if (h)
      tjDestroy(h);
  }
};

bool decodeJPEG(const uint8_t *data, size_t size, const std::string &path,
                Image &out, std::string &err) {
  // One decompressor per thread (workers decode concurrently).
  thread_local TjHandle tj;
  if (!tj.h) {
    err = "cannot create a JPEG decompressor for " + path;
    return false;
  }
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.h, data, static_cast<unsigned long>(size), &w, &h,
                          &subsamp, &colorspace) != 0) {
    err = "corrupt JPEG " + path + ": " + tjGetErrorStr2(tj.h);
    return false;
  }
  if (w <= 0 || h <= 0 || int64_t(w) * h > kMaxPixels) {
    err = "corrupt JPEG " + path + ": implausible size " + std::to_string(w) +
          "x" + std::to_string(h);
    return false;
  }
  out.W = w;
  out.H = h;
  out.C = 3;
  out.pixels.resize(static_cast<size_t>(w) * h * 3);
  // Warnings (e.g. "premature end of data") are errors too: the image would
  // be partly gray.
  if (tjDecompress2(tj.h, data, static_cast<unsigned long>(size),
                    out.pixels.data(), w, 0, h, TJPF_RGB,
                    TJFLAG_STOPONWARNING) != 0) {
    err = "corrupt JPEG " + path + ": " + tjGetErrorStr2(tj.h);
    return false;
  }
  return true;
}

/// libpng's simplified reader with the checks the image and the mask
/// decoders share: the header read (a corrupt file and an implausible size
/// are errors naming it) and the pixels read; freed on every path.
struct PngReader {
  png_image img;
  const std::string &path;
  explicit PngReader(const std::string &p) : path(p) {
    std::memset(&img, 0, sizeof(img));
    img.version = PNG_IMAGE_VERSION;
  }
  ~PngReader() { png_image_free(&img); }
  bool begin(const uint8_t *data, size_t size, std::string &err) {
    if (!png_image_begin_read_from_memory(&img, data, size)) {
      err = "corrupt PNG " + path + ": " + img.message;
      return false;
    }
    if (img.width == 0 || img.height == 0 ||
        int64_t(img.width) * img.height > kMaxPixels) {
      err = "corrupt PNG " + path + ": implausible size";
      return false;
    }
    return true;
  }
  /// Reads the pixels in `format` (img.format) into `out`.
  bool finish(uint32_t format, Image &out, int channels, std::string &err,
              void *colourMap = nullptr) {
    img.format = format;
    out.W = static_cast<int>(img.width);
    out.H = static_cast<int>(img.height);
    out.C = channels;
    out.pixels.resize(PNG_IMAGE_SIZE(img));
    if (!png_image_finish_read(&img, nullptr, out.pixels.data(), 0,
                               colourMap)) {
      err = "corrupt PNG " + path + ": " + img.message;
      return false;
    }
    return true;
  }
};

bool decodePNG(const uint8_t *data, size_t size, const std::string &path,
               Image &out, std::string &err) {
  PngReader png(path);
  return png.begin(data, size, err) && png.finish(PNG_FORMAT_RGB, out, 3, err);
}

/// Encodes `pixels` as `p` describes (size, format) into `out`: libpng's
/// two calls, the size and then the bytes.
bool writePNG(png_image &p, const uint8_t *pixels, const void *colourMap,
              std::vector<uint8_t> &out, std::string &err) {
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&p, nullptr, &size, 0, pixels, 0, colourMap)) {
    err = std::string("PNG encoding failed: ") + p.message;
    return false;
  }
  out.resize(size);
  if (!png_image_write_to_memory(&p, out.data(), &size, 0, pixels, 0,
                                 colourMap)) {
    err = std::string("PNG encoding failed: ") + p.message;
    return false;
  }
  out.resize(size);
  return true;
}
#endif
} // namespace

bool decodeImage(const uint8_t *data, size_t size, const std::string &path,
                 Image &out, std::string &err) {
  static const uint8_t kJpeg[] = {0xFF, 0xD8, 0xFF};
  bool jpeg = size >= 3 && std::memcmp(data, kJpeg, 3) == 0;
  bool png = isPNG(data, size);
  if (!jpeg && !png) {
    err = "not a JPEG or PNG file (bad signature): " + path;
    return false;
  }
#if CNNRT_HAVE_IMAGE_DECODERS
  return jpeg ? decodeJPEG(data, size, path, out, err)
              : decodePNG(data, size, path, out, err);
#else
  err = "cannot decode " + path +
        ": this runtime was built without libjpeg-turbo/libpng "
        "(apt install libturbojpeg0-dev libpng-dev and rebuild)";
  return false;
#endif
}

bool decodeMask(const uint8_t *data, size_t size, const std::string &path,
                Image &out, std::string &err) {
  if (!isPNG(data, size)) {
    err = "mask " + path +
          " is not a PNG file (masks are 8-bit grayscale or palette PNGs "
          "of class indices)";
    return false;
  }
#if CNNRT_HAVE_IMAGE_DECODERS
  PngReader png(path);
  if (!png.begin(data, size, err))
    return false;
  const uint32_t format = png.img.format;
  const bool colormap = format & PNG_FORMAT_FLAG_COLORMAP;
  if (!colormap &&
      (format & (PNG_FORMAT_FLAG_COLOR | PNG_FORMAT_FLAG_LINEAR))) {
    err = "mask " + path + " is " +
          ((format & PNG_FORMAT_FLAG_LINEAR) ? "a 16-bit" : "an RGB") +
          " PNG; masks are 8-bit grayscale or palette PNGs whose values are "
          "class indices";
    return false;
  }
  if (!colormap)
    return png.finish(PNG_FORMAT_GRAY, out, 1, err);
  // A palette PNG read into a colour-mapped format keeps its indices
  // (libpng's PNG_CMAP_NONE); only the colours could be converted.
  png.img.format = PNG_FORMAT_RGBA_COLORMAP;
  std::vector<uint8_t> colours(PNG_IMAGE_COLORMAP_SIZE(png.img));
  return png.finish(PNG_FORMAT_RGBA_COLORMAP, out, 1, err, colours.data());
#else
  err = "cannot decode " + path +
        ": this runtime was built without libpng "
        "(apt install libpng-dev and rebuild)";
  return false;
#endif
}

CropBox randomResizedCrop(int W, int H, std::mt19937_64 &rng, double scaleMin,
                          double scaleMax, double ratioMin, double ratioMax) {
  double area = static_cast<double>(W) * H;
  std::uniform_real_distribution<double> scaleDist(scaleMin, scaleMax);
  std::uniform_real_distribution<double> logRatio(std::log(ratioMin),
                                                  std::log(ratioMax));
  for (int attempt = 0; attempt < 10; ++attempt) {
    double target = area * scaleDist(rng);
    double aspect = std::exp(logRatio(rng));
    int w = static_cast<int>(std::lround(std::sqrt(target * aspect)));
    int h = static_cast<int>(std::lround(std::sqrt(target / aspect)));
    if (0 < w && w <= W && 0 < h && h <= H) {
      int y = std::uniform_int_distribution<int>(0, H - h)(rng);
      int x = std::uniform_int_distribution<int>(0, W - w)(rng);
      return {double(x), double(y), double(w), double(h)};
    }
  }
  // Fallback to a central crop.
  double inRatio = static_cast<double>(W) / H;
  int w = W, h = H;
  if (inRatio < ratioMin) {
    h = static_cast<int>(std::lround(w / ratioMin));
  } else if (inRatio > ratioMax) {
    w = static_cast<int>(std::lround(h * ratioMax));
  }
  return {double((W - w) / 2), double((H - h) / 2), double(w), double(h)};
}

CropBox centerCropBox(int W, int H, int outW, int outH, int resizeShorter) {
  // torchvision Resize(int): the shorter side becomes resizeShorter, the
  // longer one int(resizeShorter * long / short).
  int rw, rh;
  if (W <= H) {
    rw = resizeShorter;
    rh = static_cast<int>(static_cast<int64_t>(resizeShorter) * H / W);
  } else {
    rh = resizeShorter;
    rw = static_cast<int>(static_cast<int64_t>(resizeShorter) * W / H);
  }
  // CenterCrop: top = int(round((rh - outH) / 2.0)) (Python rounds half to
  // even; the argument is a multiple of 0.5).
  auto start = [](int resized, int out) {
    return static_cast<int>(std::nearbyint((resized - out) / 2.0));
  };
  double sx = static_cast<double>(W) / rw, sy = static_cast<double>(H) / rh;
  return {start(rw, outW) * sx, start(rh, outH) * sy, outW * sx, outH * sy};
}

namespace {
/// PIL's precompute_coeffs for the bilinear filter: for each output index,
/// the first source index and the normalized weights.
struct Coeffs {
  std::vector<int> first, count;
  std::vector<float> weights; ///< out * ksize
  int ksize = 0;
};

Coeffs coefficients(double boxStart, double boxSize, int lo, int hi,
                    int outSize) {
  Coeffs c;
  double scale = boxSize / outSize;
  double filterScale = std::max(scale, 1.0);
  double support = 1.0 * filterScale;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(outSize);
  c.count.resize(outSize);
  c.weights.assign(static_cast<size_t>(outSize) * c.ksize, 0.0f);
  for (int o = 0; o < outSize; ++o) {
    double center = boxStart + (o + 0.5) * scale;
    int xmin =
        std::max(static_cast<int>(std::floor(center - support + 0.5)), lo);
    int xmax =
        std::min(static_cast<int>(std::floor(center + support + 0.5)), hi);
    if (xmax <= xmin) { // a box at the very edge: take the nearest pixel
      xmin = std::min(std::max(static_cast<int>(center), lo), hi - 1);
      xmax = xmin + 1;
    }
    int n = std::min(xmax - xmin, c.ksize);
    double total = 0;
    float *w = &c.weights[static_cast<size_t>(o) * c.ksize];
    for (int k = 0; k < n; ++k) {
      double t = std::fabs((k + xmin - center + 0.5) / filterScale);
      w[k] = static_cast<float>(t < 1.0 ? 1.0 - t : 0.0);
      total += w[k];
    }
    if (total <= 0) { // cannot happen for a non-empty window; be safe
      w[0] = 1;
      total = 1;
      n = std::max(n, 1);
    }
    for (int k = 0; k < n; ++k)
      w[k] = static_cast<float>(w[k] / total);
    c.first[o] = xmin;
    c.count[o] = n;
  }
  return c;
}
} // namespace

namespace {
/// The two passes of resampleToCHW for `C` channels known at compile time
/// (the inner loops unroll and vectorize: 3-channel images took 1.2 ms per
/// 224x224 crop with C a run-time value, more than their JPEG decode). The
/// arithmetic is the same, in the same order, for every C.
template <int C>
void resamplePasses(const Image &src, const Coeffs &cx, const Coeffs &cy,
                    int outW, int outH, bool flip, int outC, uint8_t *dst) {
  int rowLo = cy.first[0], rowHi = 0;
  for (int o = 0; o < outH; ++o) {
    rowLo = std::min(rowLo, cy.first[o]);
    rowHi = std::max(rowHi, cy.first[o] + cy.count[o]);
  }
  // Horizontal pass over the rows the vertical pass needs, into a buffer
  // each worker thread keeps: a fresh ~1 MB vector per image was mapped and
  // page-faulted in every time.
  thread_local std::vector<float> tmp;
  tmp.resize(static_cast<size_t>(rowHi - rowLo) * outW * C);
  for (int y = rowLo; y < rowHi; ++y) {
    const uint8_t *row = src.pixels.data() + static_cast<size_t>(y) * src.W * C;
    float *t = tmp.data() + static_cast<size_t>(y - rowLo) * outW * C;
    for (int o = 0; o < outW; ++o) {
      const float *w = &cx.weights[static_cast<size_t>(o) * cx.ksize];
      const uint8_t *p0 = row + static_cast<size_t>(cx.first[o]) * C;
      float acc[C] = {};
      for (int k = 0, n = cx.count[o]; k < n; ++k)
        for (int c = 0; c < C; ++c)
          acc[c] += w[k] * p0[k * C + c];
      for (int c = 0; c < C; ++c)
        t[static_cast<size_t>(o) * C + c] = acc[c];
    }
  }
  auto toByte = [](float v) {
    v = std::floor(v + 0.5f);
    return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
  };
  size_t plane = static_cast<size_t>(outH) * outW;
  const size_t rowStride = static_cast<size_t>(outW) * C;
  for (int oy = 0; oy < outH; ++oy) {
    const float *w = &cy.weights[static_cast<size_t>(oy) * cy.ksize];
    const float *t0 =
        tmp.data() + static_cast<size_t>(cy.first[oy] - rowLo) * rowStride;
    const int n = cy.count[oy];
    for (int ox = 0; ox < outW; ++ox) {
      float acc[C] = {};
      for (int k = 0; k < n; ++k)
        for (int c = 0; c < C; ++c)
          acc[c] += w[k] * t0[k * rowStride + static_cast<size_t>(ox) * C + c];
      int dx = flip ? outW - 1 - ox : ox;
      size_t at = static_cast<size_t>(oy) * outW + dx;
      if (outC == C) {
        for (int c = 0; c < C; ++c)
          dst[c * plane + at] = toByte(acc[c]);
      } else { // 3 -> 1
        dst[at] = toByte((acc[0] + acc[1 % C] + acc[2 % C]) / 3.0f);
      }
    }
  }
}
} // namespace

void resampleToCHW(const Image &src, const CropBox &box, bool clipToBox,
                   int outW, int outH, bool flip, int outC, uint8_t *dst) {
  int xlo = 0, xhi = src.W, ylo = 0, yhi = src.H;
  if (clipToBox) {
    xlo = std::max(0, static_cast<int>(std::floor(box.x)));
    ylo = std::max(0, static_cast<int>(std::floor(box.y)));
    xhi = std::min(src.W, static_cast<int>(std::ceil(box.x + box.w)));
    yhi = std::min(src.H, static_cast<int>(std::ceil(box.y + box.h)));
  }
  Coeffs cx = coefficients(box.x, box.w, xlo, xhi, outW);
  Coeffs cy = coefficients(box.y, box.h, ylo, yhi, outH);
  switch (src.C) {
  case 1:
    return resamplePasses<1>(src, cx, cy, outW, outH, flip, outC, dst);
  case 2:
    return resamplePasses<2>(src, cx, cy, outW, outH, flip, outC, dst);
  case 3:
    return resamplePasses<3>(src, cx, cy, outW, outH, flip, outC, dst);
  default:
    return resamplePasses<4>(src, cx, cy, outW, outH, flip, outC, dst);
  }
}

bool encodeJPEG(const Image &img, int quality, std::vector<uint8_t> &out,
                std::string &err) {
#if CNNRT_HAVE_IMAGE_DECODERS
  tjhandle h = tjInitCompress();
  unsigned char *buf = nullptr;
  unsigned long size = 0;
  int rc = tjCompress2(h, img.pixels.data(), img.W, 0, img.H,
                       img.C == 1 ? TJPF_GRAY : TJPF_RGB, &buf, &size,
                       img.C == 1 ? TJSAMP_GRAY : TJSAMP_444, quality, 0);
  if (rc != 0)
    err = std::string("JPEG encoding failed: ") + tjGetErrorStr2(h);
  else
    out.assign(buf, buf + size);
  tjFree(buf);
  tjDestroy(h);
  return rc == 0;
#else
  (void)img, (void)quality, (void)out;
  err = "built without libjpeg-turbo";
  return false;
#endif
}

bool encodePNG(const Image &img, std::vector<uint8_t> &out, std::string &err) {
#if CNNRT_HAVE_IMAGE_DECODERS
  png_image p;
  std::memset(&p, 0, sizeof(p));
  p.version = PNG_IMAGE_VERSION;
  p.width = img.W;
  p.height = img.H;
  p.format = img.C == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  return writePNG(p, img.pixels.data(), nullptr, out, err);
#else
  (void)img, (void)out;
  err = "built without libpng";
  return false;
#endif
}

bool encodeMaskPNG(const Image &mask, bool palette, std::vector<uint8_t> &out,
                   std::string &err) {
#if CNNRT_HAVE_IMAGE_DECODERS
  png_image p;
  std::memset(&p, 0, sizeof(p));
  p.version = PNG_IMAGE_VERSION;
  p.width = mask.W;
  p.height = mask.H;
  std::vector<uint8_t> colours;
  if (palette) {
    // Colours unrelated to the indices: a reader must not use them.
    p.format = PNG_FORMAT_RGB_COLORMAP;
    p.colormap_entries = 256;
    colours.resize(3 * 256);
    for (int i = 0; i < 256; ++i) {
      colours[3 * i] = static_cast<uint8_t>(i * 37 + 11);
      colours[3 * i + 1] = static_cast<uint8_t>(255 - i);
      colours[3 * i + 2] = static_cast<uint8_t>(i * 91);
    }
  } else {
    p.format = PNG_FORMAT_GRAY;
  }
  return writePNG(p, mask.pixels.data(), palette ? colours.data() : nullptr,
                  out, err);
#else
  (void)mask, (void)palette, (void)out;
  err = "built without libpng";
  return false;
#endif
}

} // namespace cnnrt
