//===- FuzzCifar.cpp - the CIFAR-10 binary reader and the batch pipeline --===//
//
// Input: 5 header bytes (record C, H, W, number of classes, model geometry
// selector) then the file. Goes through the public API of
// runtime/include/cnnrt/Dataset.h as the runtime does: readCifarFile, then
// adaptImages to a model geometry, then one batch from BatchLoader.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

#include "cnnrt/Dataset.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

using namespace cnnrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 5)
    return 0;
  CifarFormat fmt;
  fmt.C = 1 + data[0] % 4;
  fmt.H = 1 + data[1] % 16;
  fmt.W = 1 + data[2] % 16;
  fmt.numClasses = 1 + data[3] % 16;
  uint8_t sel = data[4];
  static const std::string path =
      "/tmp/cnnc-fuzz-cifar-" + std::to_string(getpid()) + ".bin";
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return 0;
  if (size > 5)
    std::fwrite(data + 5, 1, size - 5, f);
  std::fclose(f);
  ImageSet set;
  std::string err;
  bool ok = readCifarFile(path, fmt, set, err);
  std::remove(path.c_str());
  if (!ok) {
    if (err.empty())
      std::abort();
    return 0;
  }
  if (set.count <= 0 || set.labels.size() != size_t(set.count) ||
      set.images.size() != size_t(set.count) * set.imageBytes())
    std::abort();
  int C = (sel & 1) ? 3 : fmt.C, H = 1 + (sel >> 1) % 8, W = 1 + (sel >> 4);
  ImageSet adapted;
  if (!adaptImages(set, C, H, W, adapted, err))
    return 0;
  int batch = 1 + sel % 7;
  BatchLoader loader(adapted, batch, /*seed=*/sel, /*shuffle=*/sel & 2);
  std::vector<float> images(size_t(batch) * adapted.imageBytes());
  std::vector<int32_t> labels(batch);
  loader.nextBatchF32(images.data(), labels.data());
  for (int32_t l : labels)
    if (l < 0 || l >= fmt.numClasses)
      std::abort();
  return 0;
}
