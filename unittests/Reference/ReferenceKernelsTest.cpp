//===- ReferenceKernelsTest.cpp - hand-computed cases for the kernels -----===//
#include "Kernels.h"
#include "cnnc/Reference/Interpreter.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>

using namespace cnnc::reference;
using namespace cnnc::reference::kernels;

namespace {

std::vector<float> iota(int64_t n, float start = 0.0f) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = start + static_cast<float>(i);
  return v;
}

std::vector<float> randomVector(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i])))
        << "at index " << i;
}

/// Direct 7-loop convolution in double: the oracle for the im2col kernels.
std::vector<float> naiveConv(const std::vector<float> &x,
                             const std::vector<float> &w, const ConvParams &p) {
  const int64_t oh = p.outH(), ow = p.outW(), cg = p.c / p.groups,
                fg = p.f / p.groups;
  std::vector<float> y(p.n * p.f * oh * ow);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t f = 0; f < p.f; ++f)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = 0;
          const int64_t g = f / fg;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < p.kh; ++i)
              for (int64_t j = 0; j < p.kw; ++j) {
                int64_t ih = oy * p.strideH - p.padT + i * p.dilH;
                int64_t iw = ox * p.strideW - p.padL + j * p.dilW;
                if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w)
                  continue;
                acc += static_cast<double>(
                           x[((n * p.c + g * cg + c) * p.h + ih) * p.w + iw]) *
                       w[((f * cg + c) * p.kh + i) * p.kw + j];
              }
          y[((n * p.f + f) * oh + oy) * ow + ox] = static_cast<float>(acc);
        }
  return y;
}

ConvParams conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t f,
                int64_t kh, int64_t kw) {
  ConvParams p;
  p.n = n;
  p.c = c;
  p.h = h;
  p.w = w;
  p.f = f;
  p.kh = kh;
  p.kw = kw;
  return p;
}

PoolParams pool(int64_t h, int64_t w, int64_t k, int64_t s, int64_t pad,
                bool ceil, bool includePad = true) {
  PoolParams p;
  p.h = h;
  p.w = w;
  p.kh = p.kw = k;
  p.strideH = p.strideW = s;
  p.padT = p.padL = p.padB = p.padR = pad;
  p.ceilMode = ceil;
  p.countIncludePad = includePad;
  return p;
}

} // namespace

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

TEST(ConvKernel, OneChannel3x3) {
  ConvParams p = conv(1, 1, 3, 3, 1, 2, 2);
  std::vector<float> x = iota(9, 1), w(4, 1.0f), y(4);
  conv2d(x.data(), w.data(), y.data(), p);
  expectNear(y, {12, 16, 24, 28});
}

TEST(ConvKernel, AsymmetricPadding) {
  ConvParams p = conv(1, 1, 2, 2, 1, 1, 1);
  p.padT = 1;
  p.padR = 2;
  ASSERT_EQ(p.outH(), 3);
  ASSERT_EQ(p.outW(), 4);
  std::vector<float> x = {1, 2, 3, 4}, w = {2}, y(12);
  conv2d(x.data(), w.data(), y.data(), p);
  expectNear(y, {0, 0, 0, 0, 2, 4, 0, 0, 6, 8, 0, 0});
}

TEST(ConvKernel, StrideAndDilation) {
  ConvParams p = conv(1, 1, 5, 5, 1, 2, 2);
  p.strideH = p.strideW = 2;
  p.dilH = p.dilW = 2;
  std::vector<float> x = iota(25), w(4, 1.0f), y(4);
  conv2d(x.data(), w.data(), y.data(), p);
  expectNear(y, {24, 32, 64, 72});
}

TEST(ConvKernel, Groups) {
  ConvParams p = conv(1, 2, 1, 1, 2, 1, 1);
  p.groups = 2;
  std::vector<float> x = {2, 3}, w = {10, 100}, y(2);
  conv2d(x.data(), w.data(), y.data(), p);
  expectNear(y, {20, 300});
}

TEST(ConvKernel, MatchesNaiveOnRandomConfigs) {
  struct Case {
    int64_t n, c, h, w, f, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, g;
  } cases[] = {
      {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 4, 9, 9, 6, 3, 2, 2, 1, 0, 1, 2, 0, 1, 2, 2},
      {2, 6, 8, 8, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 6},  // depthwise
      {1, 8, 5, 5, 16, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1}, // direct 1x1
      {1, 3, 11, 13, 5, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1},
      {3, 4, 6, 7, 8, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 2},
  };
  unsigned seed = 1;
  for (const Case &k : cases) {
    ConvParams p = conv(k.n, k.c, k.h, k.w, k.f, k.kh, k.kw);
    p.strideH = k.sh;
    p.strideW = k.sw;
    p.padT = k.pt;
    p.padL = k.pl;
    p.padB = k.pb;
    p.padR = k.pr;
    p.dilH = k.dh;
    p.dilW = k.dw;
    p.groups = k.g;
    auto x = randomVector(p.n * p.c * p.h * p.w, seed++);
    auto w = randomVector(p.f * (p.c / p.groups) * p.kh * p.kw, seed++);
    std::vector<float> y(p.n * p.f * p.outH() * p.outW());
    conv2d(x.data(), w.data(), y.data(), p);
    expectNear(y, naiveConv(x, w, p), 1e-5);
  }
}

TEST(GemmKernel, TransposeFlags) {
  const int64_t m = 5, n = 7, k = 9;
  auto a = randomVector(m * k, 11), b = randomVector(k * n, 12);
  std::vector<float> want(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t l = 0; l < k; ++l)
        acc += static_cast<double>(a[i * k + l]) * b[l * n + j];
      want[i * n + j] = static_cast<float>(acc);
    }
  std::vector<float> at(k * m), bt(n * k);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t l = 0; l < k; ++l)
      at[l * m + i] = a[i * k + l];
  for (int64_t l = 0; l < k; ++l)
    for (int64_t j = 0; j < n; ++j)
      bt[j * k + l] = b[l * n + j];
  for (int mask = 0; mask < 4; ++mask) {
    bool ta = mask & 1, tb = mask & 2;
    std::vector<float> c(m * n);
    gemm(m, n, k, ta ? at.data() : a.data(), ta, tb ? bt.data() : b.data(), tb,
         c.data());
    expectNear(c, want);
  }
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST(ElementwiseKernels, ReluClipBias) {
  std::vector<float> x = {-2, -0.5f, 0, 0.5f, 7}, y(5), dx(5);
  std::vector<float> dy = {1, 2, 3, 4, 5};
  relu(x.data(), y.data(), 5);
  expectNear(y, {0, 0, 0, 0.5f, 7});
  reluGrad(dy.data(), y.data(), dx.data(), 5);
  expectNear(dx, {0, 0, 0, 4, 5});
  clip(x.data(), y.data(), 5, 0, 6);
  expectNear(y, {0, 0, 0, 0.5f, 6});
  clipGrad(dy.data(), x.data(), dx.data(), 5, 0, 6);
  expectNear(dx, {0, 0, 0, 4, 0});

  std::vector<float> img = iota(12), b = {100, 200, 300}, out(12), db(3);
  biasAdd(img.data(), b.data(), out.data(), 2, 3, 2); // 2 x 3 x 2
  expectNear(out, {100, 101, 202, 203, 304, 305, 106, 107, 208, 209, 310, 311});
  biasGrad(img.data(), db.data(), 2, 3, 2);
  expectNear(db, {0 + 1 + 6 + 7, 2 + 3 + 8 + 9, 4 + 5 + 10 + 11});
}

//===----------------------------------------------------------------------===//
// Batch normalization
//===----------------------------------------------------------------------===//

TEST(BatchNormKernel, TrainRunningStatsUseUnbiasedVariance) {
  // N=2, C=1, H=1, W=2: values 1..4, mean 2.5, biased var 1.25, unbiased 5/3.
  std::vector<float> x = {1, 2, 3, 4}, scale = {2}, bias = {0.5f};
  std::vector<float> rm = {0}, rv = {1}, y(4), mean(1), invstd(1), nrm(1),
                     nrv(1);
  batchNormTrain(x.data(), scale.data(), bias.data(), rm.data(), rv.data(),
                 y.data(), mean.data(), invstd.data(), nrm.data(), nrv.data(),
                 2, 1, 2, 0.0f, 0.1f);
  const float is = 1.0f / std::sqrt(1.25f);
  expectNear(mean, {2.5f});
  expectNear(invstd, {is});
  expectNear(nrm, {0.25f});
  expectNear(nrv, {0.9f + 0.1f * 5.0f / 3.0f});
  expectNear(y, {-1.5f * is * 2 + 0.5f, -0.5f * is * 2 + 0.5f,
                 0.5f * is * 2 + 0.5f, 1.5f * is * 2 + 0.5f});
}

TEST(BatchNormKernel, Inference) {
  std::vector<float> x = {1, 2, 3, 4}, scale = {2, 3}, bias = {1, -1},
                     mean = {1, 2}, var = {4, 9}, y(4);
  // 2-D input N=2, C=2.
  batchNormInference(x.data(), scale.data(), bias.data(), mean.data(),
                     var.data(), y.data(), 2, 2, 1, 0.0f);
  expectNear(y, {1, -1, 3, 1});
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

TEST(PoolKernel, MaxCeilMode) {
  PoolParams p = pool(4, 4, 3, 2, 0, true);
  ASSERT_EQ(p.outH(), 2);
  std::vector<float> x = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  x[5] = 20; // window (0,0) max
  std::vector<float> y(4);
  maxPool2d(x.data(), y.data(), p);
  expectNear(y, {20, 11, 14, 15});
}

TEST(PoolKernel, MaxPaddingNeverWinsAndFirstMaxWins) {
  // All values negative: zero padding must not win.
  PoolParams p = pool(2, 2, 2, 1, 1, false);
  std::vector<float> x = {-4, -3, -2, -1}, y(9);
  maxPool2d(x.data(), y.data(), p);
  expectNear(y, {-4, -3, -3, -2, -1, -1, -2, -1, -1});
  // Ties: the gradient goes to the first maximum in window order.
  PoolParams q = pool(2, 2, 2, 2, 0, false);
  std::vector<float> same = {5, 5, 5, 5}, dy = {1}, dx(4);
  maxPool2dGrad(dy.data(), same.data(), dx.data(), q);
  expectNear(dx, {1, 0, 0, 0});
}

TEST(PoolKernel, AvgCeilModeBorder) {
  // torch: avg_pool2d(arange(1,10).view(1,1,3,3), 2, 2, ceil_mode=True)
  PoolParams p = pool(3, 3, 2, 2, 0, true);
  std::vector<float> x = iota(9, 1), y(4);
  avgPool2d(x.data(), y.data(), p);
  expectNear(y, {3, 4.5f, 7.5f, 9});
}

TEST(PoolKernel, AvgCountIncludePad) {
  std::vector<float> x = iota(9, 1), y(4);
  PoolParams inc = pool(3, 3, 3, 2, 1, false, true);
  avgPool2d(x.data(), y.data(), inc);
  expectNear(y, {12.0f / 9, 16.0f / 9, 24.0f / 9, 28.0f / 9});
  PoolParams exc = pool(3, 3, 3, 2, 1, false, false);
  avgPool2d(x.data(), y.data(), exc);
  expectNear(y, {3, 4, 6, 7});
  // ceil_mode + padding: the last window is clipped at the padded border.
  PoolParams cp = pool(4, 4, 3, 2, 1, true, true);
  ASSERT_EQ(cp.outH(), 3);
  std::vector<float> x4 = iota(16, 1), y9(9);
  avgPool2d(x4.data(), y9.data(), cp);
  EXPECT_NEAR(y9[8], 16.0f / 4, 1e-6);
  EXPECT_NEAR(y9[0], (1 + 2 + 5 + 6) / 9.0f, 1e-6);
}

TEST(PoolKernel, GlobalAvg) {
  std::vector<float> x = iota(8), y(2), dx(8), dy = {4, 8};
  globalAvgPool(x.data(), y.data(), 2, 4);
  expectNear(y, {1.5f, 5.5f});
  globalAvgPoolGrad(dy.data(), dx.data(), 2, 4);
  expectNear(dx, {1, 1, 1, 1, 2, 2, 2, 2});
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST(DataKernels, ConcatSliceTranspose) {
  std::vector<float> a = iota(4), b = iota(2, 10), y(6);
  concat({a.data(), b.data()}, {{2, 2}, {2, 1}}, 1, y.data());
  expectNear(y, {0, 1, 10, 2, 3, 11});
  std::vector<float> s(2);
  slice(y.data(), {2, 3}, {0, 2}, {2, 1}, s.data());
  expectNear(s, {10, 11});
  std::vector<float> x = iota(24), t(24);
  transpose(x.data(), {2, 3, 4}, {2, 0, 1}, t.data()); // -> 4 x 2 x 3
  EXPECT_EQ(t[0], 0);
  EXPECT_EQ(t[1], 4);  // (0,0,1) <- x(0,1,0)
  EXPECT_EQ(t[3], 12); // (0,1,0) <- x(1,0,0)
  EXPECT_EQ(t[6], 1);  // (1,0,0) <- x(0,0,1)
  EXPECT_EQ(t[23], 23);
}

//===----------------------------------------------------------------------===//
// Softmax, loss
//===----------------------------------------------------------------------===//

TEST(LossKernels, SoftmaxAndCrossEntropyWithSmoothing) {
  std::vector<float> logits = {1, 2, 3}, labels = {2}, p(3);
  softmax(logits.data(), p.data(), 1, 3, 1);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  expectNear(p, {float(std::exp(1.0) / z), float(std::exp(2.0) / z),
                 float(std::exp(3.0) / z)});
  float plain = softmaxCrossEntropy(logits.data(), labels.data(), 1, 3, 0);
  EXPECT_NEAR(plain, 0.40760596, 1e-6);
  float smooth = softmaxCrossEntropy(logits.data(), labels.data(), 1, 3, 0.1f);
  EXPECT_NEAR(smooth, 0.9 * 0.40760596 + 0.1 * 1.40760596, 1e-6);
  // Large logits stay finite (log-sum-exp).
  std::vector<float> big = {1000, 0}, l0 = {0};
  EXPECT_NEAR(softmaxCrossEntropy(big.data(), l0.data(), 1, 2, 0), 0, 1e-6);
  std::vector<float> g(3);
  softmaxCrossEntropyGrad(logits.data(), labels.data(), 2.0f, g.data(), 1, 3,
                          0.1f);
  expectNear(g, {2 * (p[0] - 0.1f / 3), 2 * (p[1] - 0.1f / 3),
                 2 * (p[2] - 0.9f - 0.1f / 3)});
}

// ignore_index: ignored rows contribute nothing and are not counted (the
// smoothing term too, as torch 1.13's F.cross_entropy); every row ignored
// gives NaN and a zero gradient, as PyTorch's mean reduction.
TEST(LossKernels, CrossEntropyIgnoreIndex) {
  std::vector<float> logits = {1, 2, 3, 5, -1, 0, 1, 2, 3},
                     labels = {2, 255, 2}, g(9), p(3);
  softmax(logits.data(), p.data(), 1, 3, 1);
  float smooth =
      softmaxCrossEntropy(logits.data(), labels.data(), 3, 3, 0.1f, 255);
  EXPECT_NEAR(smooth, 0.9 * 0.40760596 + 0.1 * 1.40760596, 1e-6);
  softmaxCrossEntropyGrad(logits.data(), labels.data(), 2.0f, g.data(), 3, 3,
                          0.1f, 255);
  // Two rows count: each non-ignored row's gradient is halved.
  expectNear(g, {p[0] - 0.1f / 3, p[1] - 0.1f / 3, p[2] - 0.9f - 0.1f / 3, 0, 0,
                 0, p[0] - 0.1f / 3, p[1] - 0.1f / 3, p[2] - 0.9f - 0.1f / 3});
  std::vector<float> none = {-100, -100};
  EXPECT_TRUE(
      std::isnan(softmaxCrossEntropy(logits.data(), none.data(), 2, 3, 0.0f)));
  softmaxCrossEntropyGrad(logits.data(), none.data(), 1.0f, g.data(), 2, 3,
                          0.0f);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(g[i], 0.0f);
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

TEST(OptimizerKernels, SgdMomentumNesterov) {
  std::vector<float> p = {1}, g = {0.5f}, buf = {0}, np(1), nb(1);
  // Step 1: buf = g + wd p = 0.5 + 0.1 = 0.6; nesterov g' = 0.6 + 0.9 * 0.6.
  sgdUpdate(p.data(), g.data(), buf.data(), np.data(), nb.data(), 1, 0.1f, 1.0f,
            0.9f, 0.0f, 0.1f, true);
  expectNear(nb, {0.6f});
  expectNear(np, {1 - 0.1f * (0.6f + 0.9f * 0.6f)});
  // Step 2 with dampening 0.5: buf = 0.9 * 0.6 + 0.5 * g.
  std::vector<float> np2(1), nb2(1);
  sgdUpdate(np.data(), g.data(), nb.data(), np2.data(), nb2.data(), 1, 0.1f,
            2.0f, 0.9f, 0.5f, 0.0f, false);
  expectNear(nb2, {0.9f * 0.6f + 0.5f * 0.5f});
  expectNear(np2, {np[0] - 0.1f * nb2[0]});
}

TEST(OptimizerKernels, AdamAndAdamW) {
  std::vector<float> p = {1}, g = {0.5f}, m = {0}, v = {0}, np(1), nm(1), nv(1);
  adamUpdate(p.data(), g.data(), m.data(), v.data(), np.data(), nm.data(),
             nv.data(), 1, 0.01f, 1.0f, 0.9f, 0.999f, 1e-8f, 0.0f, false);
  // First step: m_hat = g, v_hat = g^2: param -= lr * g / (|g| + eps).
  expectNear(nm, {0.05f});
  expectNear(nv, {0.001f * 0.25f});
  EXPECT_NEAR(np[0], 1 - 0.01, 1e-6);
  // AdamW: decay first, gradient untouched.
  adamUpdate(p.data(), g.data(), m.data(), v.data(), np.data(), nm.data(),
             nv.data(), 1, 0.01f, 1.0f, 0.9f, 0.999f, 1e-8f, 0.5f, true);
  EXPECT_NEAR(np[0], 1 * (1 - 0.005) - 0.01, 1e-6);
  // Adam with L2: g' = g + wd * p = 1.0, still a unit step.
  adamUpdate(p.data(), g.data(), m.data(), v.data(), np.data(), nm.data(),
             nv.data(), 1, 0.01f, 1.0f, 0.9f, 0.999f, 1e-8f, 0.5f, false);
  expectNear(nm, {0.1f});
  EXPECT_NEAR(np[0], 1 - 0.01, 1e-6);
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

TEST(DropoutKernel, HashIsSplitmix64) {
  // Known answers of the reference splitmix64 generator (state 0, 1 step).
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFull);
  float u = dropoutUniform(7, 3, 11);
  EXPECT_GE(u, 0.0f);
  EXPECT_LT(u, 1.0f);
  EXPECT_EQ(u, dropoutUniform(7, 3, 11));
  EXPECT_NE(u, dropoutUniform(7, 4, 11));
}

TEST(DropoutKernel, MaskStatistics) {
  const int64_t n = 100000;
  std::vector<float> mask(n);
  dropoutMask(mask.data(), n, 0.25f, 42, 1);
  int64_t zeros = 0;
  for (float m : mask) {
    EXPECT_TRUE(m == 0.0f || m == 1.0f / 0.75f);
    zeros += m == 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(zeros) / n, 0.25, 0.01);
}

//===----------------------------------------------------------------------===//
// roundToHalf
//===----------------------------------------------------------------------===//

TEST(RoundToHalf, EdgeCases) {
  EXPECT_EQ(roundToHalf(1.0f), 1.0f);
  EXPECT_EQ(roundToHalf(65504.0f), 65504.0f);
  EXPECT_EQ(roundToHalf(65519.0f), 65504.0f);
  EXPECT_TRUE(std::isinf(roundToHalf(65520.0f)));
  EXPECT_EQ(roundToHalf(-1e6f), -INFINITY);
  EXPECT_EQ(roundToHalf(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(roundToHalf(NAN)));
  EXPECT_TRUE(std::signbit(roundToHalf(-0.0f)));
  // Ties to even among normals: 1 + 2^-11 lies between 1 and 1 + 2^-10.
  EXPECT_EQ(roundToHalf(1.0f + std::ldexp(1.0f, -11)), 1.0f);
  EXPECT_EQ(roundToHalf(1.0f + 3 * std::ldexp(1.0f, -11)),
            1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(roundToHalf(0.1f), 0.0999755859375f);
  // Subnormals: spacing 2^-24; 2^-25 ties to 0, 3 * 2^-25 ties to 2^-23.
  EXPECT_EQ(roundToHalf(std::ldexp(1.0f, -24)), std::ldexp(1.0f, -24));
  EXPECT_EQ(roundToHalf(std::ldexp(1.0f, -25)), 0.0f);
  EXPECT_EQ(roundToHalf(std::ldexp(1.0f, -25) * 1.01f), std::ldexp(1.0f, -24));
  EXPECT_EQ(roundToHalf(3 * std::ldexp(1.0f, -25)), std::ldexp(1.0f, -23));
  EXPECT_EQ(roundToHalf(-std::ldexp(1.0f, -26)), -0.0f);
  // Just below the smallest normal rounds up to it.
  EXPECT_EQ(roundToHalf(std::nextafter(std::ldexp(1.0f, -14), 0.0f)),
            std::ldexp(1.0f, -14));
}

#ifdef __FLT16_MAX__
TEST(RoundToHalf, MatchesCompilerFloat16) {
  std::mt19937 gen(3);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = gen();
    if (i & 1) // concentrate on the range of halves
      bits = (bits & 0x807FFFFFu) | ((100u + gen() % 46u) << 23);
    float x;
    std::memcpy(&x, &bits, sizeof x);
    if (std::isnan(x))
      continue;
    float want = static_cast<float>(static_cast<_Float16>(x));
    float got = roundToHalf(x);
    ASSERT_EQ(std::memcmp(&want, &got, sizeof x), 0)
        << "x = " << x << " want " << want << " got " << got;
  }
}
#endif
