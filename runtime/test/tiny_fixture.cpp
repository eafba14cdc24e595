// Test fixture for the tiny model (pure C++, runs without a GPU):
//   tiny_fixture weights OUT.cnnw          initial parameters (no OptState)
//   tiny_fixture cifar DIR N               CIFAR-format train/test files
//   tiny_fixture ref WEIGHTS STEPS LR SEED CPU reference losses on synthetic
//                                          data ("step i loss x" lines)
#include "cnnrt/Dataset.h"
#include "cnnrt/TensorFile.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace cnnrt;

namespace {
constexpr int B = 32, C = 3, H = 32, W = 32, K = 8, J = 10;

uint64_t mix(uint64_t &s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
float uniform(uint64_t &s, float a) {
  return (static_cast<float>(mix(s) >> 40) / 16777216.0f * 2.f - 1.f) * a;
}

std::vector<TensorEntry> makeWeights() {
  uint64_t s = 1234;
  std::vector<TensorEntry> e;
  e.push_back(TensorEntry::zeros("conv1.weight", DType::F32, {K, C, 3, 3}));
  e.push_back(TensorEntry::zeros("conv1.bias", DType::F32, {K}));
  e.push_back(TensorEntry::zeros("fc.weight", DType::F32, {J, K}));
  e.push_back(TensorEntry::zeros("fc.bias", DType::F32, {J}));
  for (auto &t : e)
    for (int64_t i = 0; i < t.numel(); ++i)
      t.as<float>()[i] = uniform(s, t.name == "fc.weight" ? 0.35f : 0.19f);
  return e;
}

int writeCifar(const std::string &dir, int n) {
  std::string err;
  const char *names[3] = {"data_batch_1.bin", "data_batch_2.bin",
                          "test_batch.bin"};
  for (int f = 0; f < 3; ++f) {
    ImageSet s = makeSynthetic(n, C, H, W, J, 100 + f);
    std::string bytes;
    for (int i = 0; i < n; ++i) {
      bytes += static_cast<char>(s.labels[i]);
      bytes.append(reinterpret_cast<const char *>(s.images.data()) +
                       i * s.imageBytes(),
                   s.imageBytes());
    }
    if (!writeFileAtomic(dir + "/" + names[f], bytes, err)) {
      std::fprintf(stderr, "%s\n", err.c_str());
      return 1;
    }
  }
  return 0;
}

int reference(const std::string &wpath, int steps, float lr, uint64_t seed) {
  std::vector<TensorEntry> e;
  std::string err;
  if (!readTensorFile(wpath, e, err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  std::vector<float> w1(e[0].as<float>(), e[0].as<float>() + K * C * 9),
      b1(e[1].as<float>(), e[1].as<float>() + K),
      w2(e[2].as<float>(), e[2].as<float>() + J * K),
      b2(e[3].as<float>(), e[3].as<float>() + J);
  std::vector<float> m1(w1.size()), mb1(K), m2(w2.size()), mb2(J);
  DatasetOptions o;
  o.batch = B;
  o.seed = seed;
  ImageSet set;
  openDataset("synthetic", Split::Train, o, set, err);
  BatchLoader loader(set, B, seed, false);
  std::vector<float> x(B * C * H * W);
  std::vector<int32_t> y(B);
  loader.nextBatchF32(x.data(), y.data());
  std::vector<float> a(B * K * H * W);
  for (int step = 1; step <= steps; ++step) {
    // forward
    for (int n = 0; n < B; ++n)
      for (int k = 0; k < K; ++k)
        for (int i = 0; i < H; ++i)
          for (int j = 0; j < W; ++j) {
            double s = 0;
            for (int c = 0; c < C; ++c)
              for (int r = 0; r < 3; ++r)
                for (int q = 0; q < 3; ++q) {
                  int ii = i + r - 1, jj = j + q - 1;
                  if (ii >= 0 && ii < H && jj >= 0 && jj < W)
                    s += x[((n * C + c) * H + ii) * W + jj] *
                         w1[((k * C + c) * 3 + r) * 3 + q];
                }
            float v = static_cast<float>(s) + b1[k];
            a[((n * K + k) * H + i) * W + j] = v > 0 ? v : 0;
          }
    std::vector<double> pool(B * K), dl(B * J);
    double loss = 0;
    for (int n = 0; n < B; ++n)
      for (int k = 0; k < K; ++k) {
        double s = 0;
        for (int p = 0; p < H * W; ++p)
          s += a[(n * K + k) * H * W + p];
        pool[n * K + k] = s / (H * W);
      }
    for (int n = 0; n < B; ++n) {
      double z[J], m = -1e30, se = 0;
      for (int j = 0; j < J; ++j) {
        z[j] = b2[j];
        for (int k = 0; k < K; ++k)
          z[j] += pool[n * K + k] * w2[j * K + k];
        m = std::max(m, z[j]);
      }
      for (int j = 0; j < J; ++j)
        se += std::exp(z[j] - m);
      double lse = m + std::log(se);
      loss += lse - z[y[n]];
      for (int j = 0; j < J; ++j)
        dl[n * J + j] = (std::exp(z[j] - lse) - (j == y[n])) / B;
    }
    std::printf("step %d loss %.6g\n", step, loss / B);
    // backward
    std::vector<double> gw2(J * K, 0), gb2(J, 0), dp(B * K, 0),
        gw1(w1.size(), 0), gb1(K, 0);
    for (int n = 0; n < B; ++n)
      for (int j = 0; j < J; ++j) {
        gb2[j] += dl[n * J + j];
        for (int k = 0; k < K; ++k) {
          gw2[j * K + k] += dl[n * J + j] * pool[n * K + k];
          dp[n * K + k] += dl[n * J + j] * w2[j * K + k];
        }
      }
    for (int n = 0; n < B; ++n)
      for (int k = 0; k < K; ++k)
        for (int i = 0; i < H; ++i)
          for (int j = 0; j < W; ++j) {
            if (a[((n * K + k) * H + i) * W + j] <= 0)
              continue;
            double g = dp[n * K + k] / (H * W);
            gb1[k] += g;
            for (int c = 0; c < C; ++c)
              for (int r = 0; r < 3; ++r)
                for (int q = 0; q < 3; ++q) {
                  int ii = i + r - 1, jj = j + q - 1;
                  if (ii >= 0 && ii < H && jj >= 0 && jj < W)
                    gw1[((k * C + c) * 3 + r) * 3 + q] +=
                        g * x[((n * C + c) * H + ii) * W + jj];
                }
          }
    auto sgd = [&](std::vector<float> &p, std::vector<float> &m,
                   const std::vector<double> &g) {
      for (size_t i = 0; i < p.size(); ++i) {
        m[i] = step == 1 ? static_cast<float>(g[i])
                         : 0.9f * m[i] + static_cast<float>(g[i]);
        p[i] -= lr * m[i];
      }
    };
    sgd(w1, m1, gw1);
    sgd(b1, mb1, gb1);
    sgd(w2, m2, gw2);
    sgd(b2, mb2, gb2);
  }
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  std::string err;
  if (cmd == "weights" && argc == 3) {
    if (!writeTensorFileAtomic(argv[2], makeWeights(), err)) {
      std::fprintf(stderr, "%s\n", err.c_str());
      return 1;
    }
    return 0;
  }
  if (cmd == "cifar" && argc == 4)
    return writeCifar(argv[2], std::atoi(argv[3]));
  if (cmd == "ref" && argc == 6)
    return reference(argv[2], std::atoi(argv[3]),
                     static_cast<float>(std::atof(argv[4])),
                     std::strtoull(argv[5], nullptr, 10));
  std::fprintf(stderr, "usage: tiny_fixture weights OUT | cifar DIR N | ref "
                       "WEIGHTS STEPS LR SEED\n");
  return 1;
}
