// Per-image CPU cost of the training transform (JPEG decode, then
// RandomResizedCrop + bilinear resample to 224x224), one thread: what one
// --workers thread of the ImageFolder pipeline can deliver.
//   python3 (PIL) makes img/0000.jpg..0099.jpg (~450x365, quality 90, as
//   bench/data_pipeline.sh), then:
//   g++ -O2 -std=c++17 -Iruntime/include bench/micro/image_pipeline.cpp \
//       build/lib/libcnnrt_host.a -lturbojpeg -lpng -o image_pipeline
#include "cnnrt/Image.h"
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>
#include <string>
int main() {
  std::vector<std::vector<uint8_t>> files;
  for (int i = 0; i < 100; ++i) {
    char p[64]; std::snprintf(p, sizeof p, "img/%04d.jpg", i);
    std::ifstream f(p, std::ios::binary);
    files.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  std::vector<uint8_t> out(3 * 224 * 224);
  double tdec = 0, trs = 0;
  std::mt19937_64 rng(1);
  for (int rep = 0; rep < 5; ++rep)
    for (auto &b : files) {
      cnnrt::Image img; std::string err;
      auto t0 = std::chrono::steady_clock::now();
      if (!cnnrt::decodeImage(b.data(), b.size(), "x", img, err)) { std::puts(err.c_str()); return 1; }
      auto t1 = std::chrono::steady_clock::now();
      cnnrt::CropBox box = cnnrt::randomResizedCrop(img.W, img.H, rng);
      cnnrt::resampleToCHW(img, box, true, 224, 224, false, 3, out.data());
      auto t2 = std::chrono::steady_clock::now();
      tdec += std::chrono::duration<double>(t1 - t0).count();
      trs += std::chrono::duration<double>(t2 - t1).count();
    }
  std::printf("per image: decode %.3f ms, crop+resample %.3f ms -> %.0f img/s per thread\n",
              tdec / 500 * 1e3, trs / 500 * 1e3, 500 / (tdec + trs));
}
