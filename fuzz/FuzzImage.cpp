//===- FuzzImage.cpp - the JPEG/PNG decoders and the image transforms -----===//
//
// Input: one byte selecting the transform, then the image file's bytes.
// Goes through the public API of runtime/include/cnnrt/Image.h as an
// ImageFolder source does: decodeImage (libjpeg-turbo / libpng, recognized
// by signature), then the training crop (randomResizedCrop, seeded from the
// selector) or the evaluation crop (centerCropBox), resampled to a small
// CHW output, mirrored or not, RGB or gray. A decoder must either fail with
// a message or return an image whose pixel buffer matches its geometry.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

#include "cnnrt/Image.h"

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace cnnrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const uint8_t sel = data[0];
  Image img;
  std::string err;
  if (!decodeImage(data + 1, size - 1, "fuzz.img", img, err)) {
    if (err.empty())
      std::abort(); // a failure must say why
    return 0;
  }
  if (img.W <= 0 || img.H <= 0 || img.C != 3 ||
      img.pixels.size() != static_cast<size_t>(img.W) * img.H * img.C)
    std::abort();
  const int outW = 1 + sel % 9, outH = 1 + (sel >> 4) % 7;
  const int outC = (sel & 0x40) ? 1 : 3;
  const bool flip = sel & 0x80;
  CropBox box;
  bool clip;
  if (sel & 0x20) {
    std::mt19937_64 rng(sel);
    box = randomResizedCrop(img.W, img.H, rng);
    clip = true;
  } else {
    box = centerCropBox(img.W, img.H, outW, outH, outW + sel % 5);
    clip = false;
  }
  std::vector<uint8_t> out(static_cast<size_t>(outC) * outW * outH);
  resampleToCHW(img, box, clip, outW, outH, flip, outC, out.data());
  return 0;
}
