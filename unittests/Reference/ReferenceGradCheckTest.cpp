//===- ReferenceGradCheckTest.cpp - finite-difference gradient checks -----===//
//
// Each backward kernel is checked against central differences of a scalar
// loss L = sum(dy * forward(...)), evaluated in double from the f32 forward
// kernel's output.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include "gtest/gtest.h"

#include <cmath>
#include <functional>
#include <random>

using namespace cnnc::reference::kernels;

namespace {

std::vector<float> randomVector(int64_t n, unsigned seed, float lo = -1,
                                float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

double dot(const std::vector<float> &a, const std::vector<float> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += static_cast<double>(a[i]) * b[i];
  return s;
}

/// Compares `analytic` with central differences of `loss` around `x`.
/// Tolerance: |fd - analytic| <= tol * max(1, max|analytic|).
void checkGrad(const std::function<double(const std::vector<float> &)> &loss,
               std::vector<float> x, const std::vector<float> &analytic,
               float eps, double tol) {
  ASSERT_EQ(x.size(), analytic.size());
  double scale = 1;
  for (float g : analytic)
    scale = std::max(scale, static_cast<double>(std::fabs(g)));
  for (size_t i = 0; i < x.size(); ++i) {
    const float orig = x[i];
    x[i] = orig + eps;
    const double up = loss(x);
    x[i] = orig - eps;
    const double down = loss(x);
    x[i] = orig;
    const double fd = (up - down) / (2.0 * eps);
    EXPECT_NEAR(fd, analytic[i], tol * scale) << "at index " << i;
  }
}

ConvParams convCase(int variant) {
  ConvParams p;
  p.n = 2;
  p.c = 4;
  p.h = 7;
  p.w = 6;
  p.f = 6;
  p.kh = 3;
  p.kw = 3;
  switch (variant) {
  case 0: // padded 3x3
    p.padT = p.padL = p.padB = p.padR = 1;
    break;
  case 1: // strided, asymmetric padding, dilation, groups
    p.strideH = 2;
    p.strideW = 1;
    p.padT = 2;
    p.padL = 0;
    p.padB = 1;
    p.padR = 2;
    p.dilH = 1;
    p.dilW = 2;
    p.groups = 2;
    break;
  case 2: // 1x1 stride 2 (the ResNet downsample)
    p.kh = p.kw = 1;
    p.strideH = p.strideW = 2;
    break;
  case 3: // depthwise
    p.f = 4;
    p.groups = 4;
    p.padT = p.padL = p.padB = p.padR = 1;
    p.strideH = p.strideW = 2;
    break;
  }
  return p;
}

} // namespace

TEST(GradCheck, Conv2dBwdDataAndFilter) {
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    ConvParams p = convCase(variant);
    const int64_t ysize = p.n * p.f * p.outH() * p.outW();
    auto x = randomVector(p.n * p.c * p.h * p.w, 10 + variant);
    auto w = randomVector(p.f * (p.c / p.groups) * p.kh * p.kw, 20 + variant);
    auto dy = randomVector(ysize, 30 + variant);
    std::vector<float> dx(x.size()), dw(w.size()), y(ysize);
    conv2dBwdData(dy.data(), w.data(), dx.data(), p);
    conv2dBwdFilter(x.data(), dy.data(), dw.data(), p);
    // The loss is linear in x and in w: a large step has no truncation
    // error and keeps f32 rounding small.
    checkGrad(
        [&](const std::vector<float> &xx) {
          conv2d(xx.data(), w.data(), y.data(), p);
          return dot(y, dy);
        },
        x, dx, 0.5f, 1e-4);
    checkGrad(
        [&](const std::vector<float> &ww) {
          conv2d(x.data(), ww.data(), y.data(), p);
          return dot(y, dy);
        },
        w, dw, 0.5f, 1e-4);
  }
}

TEST(GradCheck, MaxPoolGrad) {
  PoolParams p;
  p.planes = 3;
  p.h = 5;
  p.w = 6;
  p.kh = p.kw = 3;
  p.strideH = p.strideW = 2;
  p.padT = p.padL = p.padB = p.padR = 1;
  p.ceilMode = true;
  // Distinct values at least 0.01 apart, so a 1e-3 step keeps each argmax.
  std::vector<float> x(p.planes * p.h * p.w);
  std::mt19937 gen(5);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.01f * static_cast<float>(i);
  std::shuffle(x.begin(), x.end(), gen);
  const int64_t ysize = p.planes * p.outH() * p.outW();
  auto dy = randomVector(ysize, 6);
  std::vector<float> dx(x.size()), y(ysize);
  maxPool2dGrad(dy.data(), x.data(), dx.data(), p);
  checkGrad(
      [&](const std::vector<float> &xx) {
        maxPool2d(xx.data(), y.data(), p);
        return dot(y, dy);
      },
      x, dx, 1e-3f, 1e-3);
}

TEST(GradCheck, AvgPoolGrad) {
  for (int mode = 0; mode < 4; ++mode) {
    PoolParams p;
    p.planes = 2;
    p.h = 7;
    p.w = 5;
    p.kh = 3;
    p.kw = 2;
    p.strideH = 2;
    p.strideW = 2;
    p.padT = p.padB = 1;
    p.padL = p.padR = 1;
    p.ceilMode = mode & 1;
    p.countIncludePad = mode & 2;
    SCOPED_TRACE("mode " + std::to_string(mode));
    auto x = randomVector(p.planes * p.h * p.w, 7);
    const int64_t ysize = p.planes * p.outH() * p.outW();
    auto dy = randomVector(ysize, 8);
    std::vector<float> dx(x.size()), y(ysize);
    avgPool2dGrad(dy.data(), dx.data(), p);
    checkGrad(
        [&](const std::vector<float> &xx) {
          avgPool2d(xx.data(), y.data(), p);
          return dot(y, dy);
        },
        x, dx, 0.5f, 1e-4);
  }
}

TEST(GradCheck, GlobalAvgPoolGrad) {
  auto x = randomVector(2 * 3 * 4 * 5, 9), dy = randomVector(6, 10);
  std::vector<float> dx(x.size()), y(6);
  globalAvgPoolGrad(dy.data(), dx.data(), 6, 20);
  checkGrad(
      [&](const std::vector<float> &xx) {
        globalAvgPool(xx.data(), y.data(), 6, 20);
        return dot(y, dy);
      },
      x, dx, 0.5f, 1e-4);
}

TEST(GradCheck, BatchNormGrad) {
  const int64_t n = 3, c = 2, inner = 5;
  auto x = randomVector(n * c * inner, 11, -2, 2);
  auto scale = randomVector(c, 12, 0.5f, 1.5f);
  auto bias = randomVector(c, 13);
  auto dy = randomVector(x.size(), 14);
  std::vector<float> rm(c, 0), rv(c, 1), y(x.size()), mean(c), invstd(c),
      nrm(c), nrv(c);
  auto forward = [&](const std::vector<float> &xx, const std::vector<float> &sc,
                     const std::vector<float> &bi) {
    batchNormTrain(xx.data(), sc.data(), bi.data(), rm.data(), rv.data(),
                   y.data(), mean.data(), invstd.data(), nrm.data(), nrv.data(),
                   n, c, inner, 1e-5f, 0.1f);
    return dot(y, dy);
  };
  forward(x, scale, bias);
  std::vector<float> dx(x.size()), dscale(c), dbias(c);
  batchNormGrad(dy.data(), x.data(), scale.data(), mean.data(), invstd.data(),
                dx.data(), dscale.data(), dbias.data(), n, c, inner);
  checkGrad(
      [&](const std::vector<float> &xx) { return forward(xx, scale, bias); }, x,
      dx, 1e-2f, 2e-3);
  checkGrad([&](const std::vector<float> &s) { return forward(x, s, bias); },
            scale, dscale, 1e-2f, 2e-3);
  checkGrad([&](const std::vector<float> &b) { return forward(x, scale, b); },
            bias, dbias, 1e-2f, 2e-3);
}

TEST(GradCheck, SoftmaxCrossEntropyGrad) {
  for (float smoothing : {0.0f, 0.2f}) {
    const int64_t n = 4, c = 5;
    auto logits = randomVector(n * c, 15, -3, 3);
    std::vector<float> labels = {0, 4, 2, 2}, g(n * c);
    const float gradLoss = 1.7f;
    softmaxCrossEntropyGrad(logits.data(), labels.data(), gradLoss, g.data(), n,
                            c, smoothing);
    checkGrad(
        [&](const std::vector<float> &l) {
          return gradLoss * static_cast<double>(softmaxCrossEntropy(
                                l.data(), labels.data(), n, c, smoothing));
        },
        logits, g, 1e-2f, 2e-3);
  }
}

TEST(GradCheck, MatmulTransposes) {
  // d/dA sum(dC * A B) = dC B^T; d/dB = A^T dC.
  const int64_t m = 3, k = 4, n = 5;
  auto a = randomVector(m * k, 16), b = randomVector(k * n, 17),
       dc = randomVector(m * n, 18);
  std::vector<float> c(m * n), da(m * k), db(k * n);
  gemm(m, k, n, dc.data(), false, b.data(), true, da.data());
  gemm(k, n, m, a.data(), true, dc.data(), false, db.data());
  checkGrad(
      [&](const std::vector<float> &aa) {
        gemm(m, n, k, aa.data(), false, b.data(), false, c.data());
        return dot(c, dc);
      },
      a, da, 0.5f, 1e-4);
  checkGrad(
      [&](const std::vector<float> &bb) {
        gemm(m, n, k, a.data(), false, bb.data(), false, c.data());
        return dot(c, dc);
      },
      b, db, 0.5f, 1e-4);
}
