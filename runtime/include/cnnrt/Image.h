//===- Image.h - JPEG/PNG decoding and the torchvision transforms -*- C++
//-*-===//
//
// Pure C++17 (no CUDA), part of cnnrt_host. Decoding uses libjpeg-turbo's
// TurboJPEG API and libpng's simplified API. The transforms follow
// torchvision's ImageNet recipes:
//   train: RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3)) +
//          RandomHorizontalFlip(0.5)
//   eval:  Resize(int(size / 0.875)) + CenterCrop(size)
// with PIL's antialiased bilinear ("triangle") resampling. The random numbers
// come from a std::mt19937_64 per sample (see randomResizedCrop), so the
// crops are deterministic but are not the ones torch's generator would pick.
// See docs/runtime.md ("Data").
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_IMAGE_H
#define CNNRT_IMAGE_H

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace cnnrt {

/// An 8-bit image in HWC order (C = 3: RGB).
struct Image {
  int W = 0, H = 0, C = 0;
  std::vector<uint8_t> pixels;
  uint8_t at(int y, int x, int c) const {
    return pixels[(static_cast<size_t>(y) * W + x) * C + c];
  }
};

/// Whether this runtime was built with libjpeg-turbo and libpng.
bool haveImageDecoders();

/// Reads a whole file. Error: "cannot read <path>: <reason>".
bool readFileBytes(const std::string &path, std::vector<uint8_t> &out,
                   std::string &err);

/// Decodes a JPEG or PNG (recognized by its signature, not its name) to RGB.
/// Grayscale and palette images are expanded, alpha is dropped, 16-bit
/// samples become 8-bit. Corrupt or truncated data (also what libjpeg only
/// reports as a warning) is an error: "corrupt JPEG <path>: <reason>".
bool decodeImage(const uint8_t *data, size_t size, const std::string &path,
                 Image &out, std::string &err);

/// Decodes a segmentation mask: a PNG whose 8-bit values are class indices,
/// grayscale (the values) or palette (the indices, not the colours: VOC's
/// masks). Out: C = 1. Other PNGs (RGB, 16-bit) and JPEGs (lossy: their
/// values are not indices) are errors naming the file.
bool decodeMask(const uint8_t *data, size_t size, const std::string &path,
                Image &out, std::string &err);

/// A rectangle in source pixel coordinates (may be fractional).
struct CropBox {
  double x = 0, y = 0, w = 0, h = 0;
};

/// torchvision.transforms.RandomResizedCrop.get_params for a W x H image:
/// up to 10 tries of area = W*H*U(scaleMin, scaleMax), aspect =
/// exp(U(log ratioMin, log ratioMax)), w = round(sqrt(area*aspect)),
/// h = round(sqrt(area/aspect)); accepted when 0 < w <= W and 0 < h <= H, at
/// x = U{0..W-w}, y = U{0..H-h}. Otherwise the central crop with the aspect
/// ratio clamped to [ratioMin, ratioMax]. U(a,b) is
/// std::uniform_real_distribution<double>, U{..} uniform_int_distribution.
CropBox randomResizedCrop(int W, int H, std::mt19937_64 &rng,
                          double scaleMin = 0.08, double scaleMax = 1.0,
                          double ratioMin = 3.0 / 4.0,
                          double ratioMax = 4.0 / 3.0);

/// The source region that Resize(resizeShorter) + CenterCrop(outH, outW)
/// keeps: the image is scaled so that its shorter side is resizeShorter (the
/// longer side int(resizeShorter * long / short), as torchvision), and the
/// crop starts at int(round((resized - out) / 2)).
CropBox centerCropBox(int W, int H, int outW, int outH, int resizeShorter);

/// Resamples `box` of `src` to outW x outH with PIL's antialiased bilinear
/// filter (support scaled by the downscaling factor), optionally mirrored
/// left-right, and writes outC planes (CHW, rounded and clamped to 0..255).
/// Pixels outside the box contribute only when !clipToBox (Resize of the
/// whole image then crop); with clipToBox the box is first cut out (crop then
/// resize). outC: 3 (RGB) or 1 ((r + g + b) / 3).
void resampleToCHW(const Image &src, const CropBox &box, bool clipToBox,
                   int outW, int outH, bool flip, int outC, uint8_t *dst);

/// Writes test images (used by the tests and tools): RGB HWC pixels.
bool encodeJPEG(const Image &img, int quality, std::vector<uint8_t> &out,
                std::string &err);
bool encodePNG(const Image &img, std::vector<uint8_t> &out, std::string &err);
/// A mask (C = 1, class indices) as a palette PNG (an arbitrary colour per
/// index, as VOC's) or, with !palette, an 8-bit grayscale PNG.
bool encodeMaskPNG(const Image &mask, bool palette, std::vector<uint8_t> &out,
                   std::string &err);

} // namespace cnnrt

#endif // CNNRT_IMAGE_H
