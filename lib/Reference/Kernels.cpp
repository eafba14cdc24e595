//===- Kernels.cpp - CPU reference kernels for the cnn ops ----------------===//
//
// Convolutions are im2col + a blocked GEMM whose inner loop runs over
// contiguous memory, so they vectorize at -O2 (this file is always built
// with at least -O2, see CMakeLists.txt).
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace cnnc::reference::kernels {

int64_t numel(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

namespace {

/// rows x cols (row-major) -> cols x rows.
void transpose2d(const float *src, int64_t rows, int64_t cols, float *dst) {
  constexpr int64_t B = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += B)
    for (int64_t j0 = 0; j0 < cols; j0 += B) {
      int64_t i1 = std::min(rows, i0 + B), j1 = std::min(cols, j0 + B);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j)
          dst[j * rows + i] = src[i * cols + j];
    }
}

/// C[m x n] (+)= A[m x k] * B[k x n], row-major with leading dimensions
/// lda, ldb, ldc. Blocked over n and k so a k-panel of B stays in cache; four
/// rows of C are updated per pass over a row of B. The innermost loop is
/// contiguous in B and C.
void gemmNN(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
            const float *b, int64_t ldb, float *c, int64_t ldc,
            bool accumulate) {
  if (!accumulate)
    for (int64_t i = 0; i < m; ++i)
      std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
  constexpr int64_t NB = 512, KB = 128;
  for (int64_t j0 = 0; j0 < n; j0 += NB) {
    const int64_t nb = std::min(NB, n - j0);
    for (int64_t k0 = 0; k0 < k; k0 += KB) {
      const int64_t kb = std::min(KB, k - k0);
      int64_t i = 0;
      for (; i + 4 <= m; i += 4) {
        float *__restrict c0 = c + i * ldc + j0;
        float *__restrict c1 = c0 + ldc;
        float *__restrict c2 = c1 + ldc;
        float *__restrict c3 = c2 + ldc;
        const float *a0 = a + i * lda + k0;
        for (int64_t kk = 0; kk < kb; ++kk) {
          const float v0 = a0[kk], v1 = a0[lda + kk], v2 = a0[2 * lda + kk],
                      v3 = a0[3 * lda + kk];
          const float *__restrict bp = b + (k0 + kk) * ldb + j0;
          for (int64_t j = 0; j < nb; ++j) {
            const float bv = bp[j];
            c0[j] += v0 * bv;
            c1[j] += v1 * bv;
            c2[j] += v2 * bv;
            c3[j] += v3 * bv;
          }
        }
      }
      for (; i < m; ++i) {
        float *__restrict c0 = c + i * ldc + j0;
        const float *a0 = a + i * lda + k0;
        for (int64_t kk = 0; kk < kb; ++kk) {
          const float v0 = a0[kk];
          const float *__restrict bp = b + (k0 + kk) * ldb + j0;
          for (int64_t j = 0; j < nb; ++j)
            c0[j] += v0 * bp[j];
        }
      }
    }
  }
}

} // namespace

void gemm(int64_t m, int64_t n, int64_t k, const float *a, bool transA,
          const float *b, bool transB, float *c, bool accumulate) {
  std::vector<float> at, bt;
  if (transA) {
    at.resize(m * k);
    transpose2d(a, k, m, at.data());
    a = at.data();
  }
  if (transB) {
    bt.resize(k * n);
    transpose2d(b, n, k, bt.data());
    b = bt.data();
  }
  gemmNN(m, n, k, a, k, b, n, c, n, accumulate);
}

//===----------------------------------------------------------------------===//
// Convolution
//
// Per group, the images of a chunk are laid side by side: col is
// K x (nb * P) with K = C/groups * KH * KW and P = OH * OW, so late layers
// with few output pixels still get long contiguous GEMM rows.
//===----------------------------------------------------------------------===//

int64_t ConvParams::outH() const {
  return windowOutputSize(h, padT, padB, kh, strideH, dilH, false);
}
int64_t ConvParams::outW() const {
  return windowOutputSize(w, padL, padR, kw, strideW, dilW, false);
}

namespace {

bool isDirect(const ConvParams &p) {
  return p.kh == 1 && p.kw == 1 && p.strideH == 1 && p.strideW == 1 &&
         p.padT == 0 && p.padL == 0 && p.padB == 0 && p.padR == 0;
}

/// Images per chunk: enough for rows of >= 512 columns, with col at most
/// 8M floats.
int64_t imagesPerChunk(const ConvParams &p, int64_t K, int64_t P) {
  int64_t chunk = std::min<int64_t>(p.n, std::max<int64_t>(1, 512 / P));
  const int64_t cap = std::max<int64_t>(1, (int64_t(8) << 20) / (K * P));
  return std::max<int64_t>(1, std::min(chunk, cap));
}

/// col[(c*KH + i)*KW + j][oh*OW + ow] = x[c][oh*sh - pt + i*dh][ow*sw - pl +
/// j*dw], 0 in the padding; rows of col are `ld` apart. `x` points at the
/// group's first channel of one image.
void im2col(const float *x, int64_t channels, const ConvParams &p, float *col,
            int64_t ld) {
  const int64_t oh = p.outH(), ow = p.outW();
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t i = 0; i < p.kh; ++i)
      for (int64_t j = 0; j < p.kw; ++j) {
        float *dst = col + ((ch * p.kh + i) * p.kw + j) * ld;
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t ih = y * p.strideH - p.padT + i * p.dilH;
          float *d = dst + y * ow;
          if (ih < 0 || ih >= p.h) {
            std::fill(d, d + ow, 0.0f);
            continue;
          }
          const float *src = x + (ch * p.h + ih) * p.w;
          const int64_t off = j * p.dilW - p.padL;
          if (p.strideW == 1 && off >= 0 && off + ow <= p.w) {
            std::memcpy(d, src + off, ow * sizeof(float));
            continue;
          }
          for (int64_t xo = 0; xo < ow; ++xo) {
            const int64_t iw = xo * p.strideW + off;
            d[xo] = (iw >= 0 && iw < p.w) ? src[iw] : 0.0f;
          }
        }
      }
}

/// The adjoint of im2col: accumulates col (rows `ld` apart) into dx.
void col2im(const float *col, int64_t ld, int64_t channels, const ConvParams &p,
            float *dx) {
  const int64_t oh = p.outH(), ow = p.outW();
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t i = 0; i < p.kh; ++i)
      for (int64_t j = 0; j < p.kw; ++j) {
        const float *src = col + ((ch * p.kh + i) * p.kw + j) * ld;
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t ih = y * p.strideH - p.padT + i * p.dilH;
          if (ih < 0 || ih >= p.h)
            continue;
          float *d = dx + (ch * p.h + ih) * p.w;
          const float *s = src + y * ow;
          const int64_t off = j * p.dilW - p.padL;
          for (int64_t xo = 0; xo < ow; ++xo) {
            const int64_t iw = xo * p.strideW + off;
            if (iw >= 0 && iw < p.w)
              d[iw] += s[xo];
          }
        }
      }
}

/// Lays the group-g inputs of images [n0, n0 + nb) side by side in col
/// (K x nb*P).
void buildCol(const float *x, const ConvParams &p, int64_t n0, int64_t nb,
              int64_t g, float *col) {
  const int64_t cg = p.c / p.groups, P = p.outH() * p.outW(), ld = nb * P;
  for (int64_t i = 0; i < nb; ++i) {
    const float *xg = x + ((n0 + i) * p.c + g * cg) * p.h * p.w;
    if (isDirect(p)) {
      for (int64_t ch = 0; ch < cg; ++ch)
        std::memcpy(col + ch * ld + i * P, xg + ch * P, P * sizeof(float));
    } else {
      im2col(xg, cg, p, col + i * P, ld);
    }
  }
}

/// The group-g channels of images [n0, n0 + nb) of an [N, F, P] tensor,
/// as an Fg x nb*P matrix (the layout of the GEMM result).
void gatherOutputs(const float *images, float *packed, const ConvParams &p,
                   int64_t n0, int64_t nb, int64_t g) {
  const int64_t fg = p.f / p.groups, P = p.outH() * p.outW(), ld = nb * P;
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t f = 0; f < fg; ++f)
      std::memcpy(packed + f * ld + i * P,
                  images + ((n0 + i) * p.f + g * fg + f) * P,
                  P * sizeof(float));
}

/// The inverse of gatherOutputs.
void scatterOutputs(const float *packed, float *images, const ConvParams &p,
                    int64_t n0, int64_t nb, int64_t g) {
  const int64_t fg = p.f / p.groups, P = p.outH() * p.outW(), ld = nb * P;
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t f = 0; f < fg; ++f)
      std::memcpy(images + ((n0 + i) * p.f + g * fg + f) * P,
                  packed + f * ld + i * P, P * sizeof(float));
}

} // namespace

std::optional<int64_t> convScratchFloats(int64_t n, int64_t f, int64_t groups,
                                         int64_t k, int64_t p) {
  if (n <= 0 || f <= 0 || groups <= 0 || k <= 0 || p <= 0)
    return 0;
  int64_t kp, chunkKP, fgChunkP, fk, total;
  if (llvm::MulOverflow(k, p, kp))
    return std::nullopt;
  // As the kernels choose their chunk (imagesPerChunk; a chunk of one image
  // when one image's buffer exceeds the cap).
  const int64_t chunk = std::max<int64_t>(
      1, std::min(std::min<int64_t>(n, std::max<int64_t>(1, 512 / p)),
                  std::max<int64_t>(1, (int64_t(8) << 20) / kp)));
  // conv2dBwdFilter: col and colT (K x chunk*P each) and dyc (F/g x
  // chunk*P); conv2dBwdData also the transposed filter (F x K).
  if (llvm::MulOverflow(kp, chunk, chunkKP) ||
      llvm::MulOverflow(f / groups, chunk * p, fgChunkP) ||
      llvm::MulOverflow(f, k, fk) ||
      llvm::AddOverflow(chunkKP, chunkKP, total) ||
      llvm::AddOverflow(total, fgChunkP, total) ||
      llvm::AddOverflow(total, fk, total))
    return std::nullopt;
  return total;
}

void conv2d(const float *x, const float *w, float *y, const ConvParams &p) {
  const int64_t cg = p.c / p.groups, fg = p.f / p.groups;
  const int64_t K = cg * p.kh * p.kw, P = p.outH() * p.outW();
  const int64_t chunk = imagesPerChunk(p, K, P);
  std::vector<float> col(K * chunk * P), out(fg * chunk * P);
  for (int64_t n0 = 0; n0 < p.n; n0 += chunk) {
    const int64_t nb = std::min(chunk, p.n - n0), ld = nb * P;
    for (int64_t g = 0; g < p.groups; ++g) {
      buildCol(x, p, n0, nb, g, col.data());
      gemmNN(fg, ld, K, w + g * fg * K, K, col.data(), ld, out.data(), ld,
             false);
      scatterOutputs(out.data(), y, p, n0, nb, g);
    }
  }
}

void conv2dBwdData(const float *dy, const float *w, float *dx,
                   const ConvParams &p) {
  const int64_t cg = p.c / p.groups, fg = p.f / p.groups;
  const int64_t K = cg * p.kh * p.kw, P = p.outH() * p.outW();
  const int64_t chunk = imagesPerChunk(p, K, P);
  // wt[g] = w[g]^T : K x Fg.
  std::vector<float> wt(p.f * K);
  for (int64_t g = 0; g < p.groups; ++g)
    transpose2d(w + g * fg * K, fg, K, wt.data() + g * fg * K);
  std::vector<float> col(K * chunk * P), dyc(fg * chunk * P);
  std::fill(dx, dx + p.n * p.c * p.h * p.w, 0.0f);
  for (int64_t n0 = 0; n0 < p.n; n0 += chunk) {
    const int64_t nb = std::min(chunk, p.n - n0), ld = nb * P;
    for (int64_t g = 0; g < p.groups; ++g) {
      gatherOutputs(dy, dyc.data(), p, n0, nb, g);
      gemmNN(K, ld, fg, wt.data() + g * fg * K, fg, dyc.data(), ld, col.data(),
             ld, false);
      for (int64_t i = 0; i < nb; ++i) {
        float *dxg = dx + ((n0 + i) * p.c + g * cg) * p.h * p.w;
        if (isDirect(p)) {
          for (int64_t ch = 0; ch < cg; ++ch)
            std::memcpy(dxg + ch * P, col.data() + ch * ld + i * P,
                        P * sizeof(float));
        } else {
          col2im(col.data() + i * P, ld, cg, p, dxg);
        }
      }
    }
  }
}

void conv2dBwdFilter(const float *x, const float *dy, float *dw,
                     const ConvParams &p) {
  const int64_t cg = p.c / p.groups, fg = p.f / p.groups;
  const int64_t K = cg * p.kh * p.kw, P = p.outH() * p.outW();
  const int64_t chunk = imagesPerChunk(p, K, P);
  std::vector<float> col(K * chunk * P), colT(K * chunk * P),
      dyc(fg * chunk * P);
  std::fill(dw, dw + p.f * K, 0.0f);
  for (int64_t n0 = 0; n0 < p.n; n0 += chunk) {
    const int64_t nb = std::min(chunk, p.n - n0), ld = nb * P;
    for (int64_t g = 0; g < p.groups; ++g) {
      buildCol(x, p, n0, nb, g, col.data());
      transpose2d(col.data(), K, ld, colT.data());
      gatherOutputs(dy, dyc.data(), p, n0, nb, g);
      // dw[g] (Fg x K) += dy (Fg x nb*P) * col^T (nb*P x K).
      gemmNN(fg, K, ld, dyc.data(), ld, colT.data(), K, dw + g * fg * K, K,
             true);
    }
  }
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

void biasAdd(const float *x, const float *bias, float *y, int64_t outer,
             int64_t channels, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const float b = bias[c];
      const float *xs = x + (o * channels + c) * inner;
      float *ys = y + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i)
        ys[i] = xs[i] + b;
    }
}

void biasGrad(const float *dy, float *db, int64_t outer, int64_t channels,
              int64_t inner) {
  std::vector<double> acc(channels, 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const float *s = dy + (o * channels + c) * inner;
      double sum = 0;
      for (int64_t i = 0; i < inner; ++i)
        sum += s[i];
      acc[c] += sum;
    }
  for (int64_t c = 0; c < channels; ++c)
    db[c] = static_cast<float>(acc[c]);
}

void relu(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] < 0.0f ? 0.0f : x[i]; // NaN propagates, like torch.relu
}

void reluGrad(const float *dy, const float *out, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] = out[i] > 0.0f ? dy[i] : 0.0f;
}

void clip(const float *x, float *y, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    y[i] = v < lo ? lo : (v > hi ? hi : v);
  }
}

void clipGrad(const float *dy, const float *x, float *dx, int64_t n, float lo,
              float hi) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] = (x[i] > lo && x[i] < hi) ? dy[i] : 0.0f;
}

void add(const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] + b[i];
}

void mul(const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] * b[i];
}

void scale(const float *x, float *y, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * factor;
}

//===----------------------------------------------------------------------===//
// Batch normalization
//===----------------------------------------------------------------------===//

namespace {
/// y = x * alpha + beta per channel, in f32 (as PyTorch's CPU kernel).
void affinePerChannel(const float *x, float *y, const std::vector<float> &alpha,
                      const std::vector<float> &beta, int64_t n, int64_t c,
                      int64_t inner) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float al = alpha[ch], be = beta[ch];
      const float *xs = x + (b * c + ch) * inner;
      float *ys = y + (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i)
        ys[i] = xs[i] * al + be;
    }
}
} // namespace

void batchNormInference(const float *x, const float *scale, const float *bias,
                        const float *mean, const float *var, float *y,
                        int64_t n, int64_t c, int64_t inner, float eps) {
  std::vector<float> alpha(c), beta(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    double invstd = 1.0 / std::sqrt(static_cast<double>(var[ch]) + eps);
    double a = invstd * scale[ch];
    alpha[ch] = static_cast<float>(a);
    beta[ch] = static_cast<float>(bias[ch] - mean[ch] * a);
  }
  affinePerChannel(x, y, alpha, beta, n, c, inner);
}

void batchNormTrain(const float *x, const float *scale, const float *bias,
                    const float *runningMean, const float *runningVar, float *y,
                    float *savedMean, float *savedInvstd, float *newRunningMean,
                    float *newRunningVar, int64_t n, int64_t c, int64_t inner,
                    float eps, float momentum) {
  const int64_t count = n * inner;
  std::vector<float> alpha(c), beta(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0;
    for (int64_t b = 0; b < n; ++b) {
      const float *xs = x + (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i)
        sum += xs[i];
    }
    const double mean = sum / count;
    double ss = 0;
    for (int64_t b = 0; b < n; ++b) {
      const float *xs = x + (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        double d = xs[i] - mean;
        ss += d * d;
      }
    }
    const double var = ss / count;
    const double invstd = 1.0 / std::sqrt(var + eps);
    const double unbiased = count > 1 ? ss / (count - 1) : var;
    const double m = decimalValue(momentum);
    savedMean[ch] = static_cast<float>(mean);
    savedInvstd[ch] = static_cast<float>(invstd);
    newRunningMean[ch] =
        static_cast<float>(m * mean + (1.0 - m) * runningMean[ch]);
    newRunningVar[ch] =
        static_cast<float>(m * unbiased + (1.0 - m) * runningVar[ch]);
    const double a = invstd * scale[ch];
    alpha[ch] = static_cast<float>(a);
    beta[ch] = static_cast<float>(bias[ch] - mean * a);
  }
  affinePerChannel(x, y, alpha, beta, n, c, inner);
}

void batchNormGrad(const float *dy, const float *x, const float *scale,
                   const float *savedMean, const float *savedInvstd, float *dx,
                   float *dscale, float *dbias, int64_t n, int64_t c,
                   int64_t inner) {
  const double count = static_cast<double>(n * inner);
  for (int64_t ch = 0; ch < c; ++ch) {
    const double mean = savedMean[ch], invstd = savedInvstd[ch];
    double sumDy = 0, dot = 0;
    for (int64_t b = 0; b < n; ++b) {
      const float *xs = x + (b * c + ch) * inner;
      const float *gs = dy + (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        sumDy += gs[i];
        dot += (xs[i] - mean) * gs[i];
      }
    }
    dbias[ch] = static_cast<float>(sumDy);
    dscale[ch] = static_cast<float>(dot * invstd);
    const double k = dot * invstd * invstd / count;
    const double gradMean = sumDy / count;
    const double w = invstd * scale[ch];
    for (int64_t b = 0; b < n; ++b) {
      const float *xs = x + (b * c + ch) * inner;
      const float *gs = dy + (b * c + ch) * inner;
      float *ds = dx + (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i)
        ds[i] = static_cast<float>((gs[i] - gradMean - (xs[i] - mean) * k) * w);
    }
  }
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

int64_t PoolParams::outH() const {
  return windowOutputSize(h, padT, padB, kh, strideH, 1, ceilMode);
}
int64_t PoolParams::outW() const {
  return windowOutputSize(w, padL, padR, kw, strideW, 1, ceilMode);
}

namespace {
/// Index of the window's maximum in the plane (PyTorch's rule).
int64_t argmaxWindow(const float *plane, const PoolParams &p, int64_t oy,
                     int64_t ox, float &maxval) {
  int64_t h0 = oy * p.strideH - p.padT, w0 = ox * p.strideW - p.padL;
  int64_t h1 = std::min(h0 + p.kh, p.h), w1 = std::min(w0 + p.kw, p.w);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  int64_t best = h0 * p.w + w0;
  maxval = -std::numeric_limits<float>::infinity();
  for (int64_t ih = h0; ih < h1; ++ih)
    for (int64_t iw = w0; iw < w1; ++iw) {
      const float v = plane[ih * p.w + iw];
      if (v > maxval || std::isnan(v)) {
        maxval = v;
        best = ih * p.w + iw;
      }
    }
  return best;
}

struct AvgWindow {
  int64_t h0, h1, w0, w1; // real elements [h0, h1) x [w0, w1)
  int64_t divisor;        // 0: empty window
};

AvgWindow avgWindow(const PoolParams &p, int64_t oy, int64_t ox) {
  int64_t h0 = oy * p.strideH - p.padT, w0 = ox * p.strideW - p.padL;
  int64_t h1 = std::min(h0 + p.kh, p.h + p.padB);
  int64_t w1 = std::min(w0 + p.kw, p.w + p.padR);
  const int64_t poolSize = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, p.h);
  w1 = std::min(w1, p.w);
  if (h0 >= h1 || w0 >= w1)
    return {h0, h1, w0, w1, 0};
  return {h0, h1, w0, w1, p.countIncludePad ? poolSize : (h1 - h0) * (w1 - w0)};
}

/// fn(pl, o, oy, ox) for every output position (oy, ox) of every plane pl,
/// o the flat output index, in plane, row, column order.
template <typename F> void forEachWindow(const PoolParams &p, F fn) {
  const int64_t oh = p.outH(), ow = p.outW();
  for (int64_t pl = 0; pl < p.planes; ++pl)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox)
        fn(pl, (pl * oh + oy) * ow + ox, oy, ox);
}
} // namespace

void maxPool2d(const float *x, float *y, const PoolParams &p) {
  forEachWindow(p, [&](int64_t pl, int64_t o, int64_t oy, int64_t ox) {
    float m;
    argmaxWindow(x + pl * p.h * p.w, p, oy, ox, m);
    y[o] = m;
  });
}

void maxPool2dGrad(const float *dy, const float *x, float *dx,
                   const PoolParams &p) {
  std::fill(dx, dx + p.planes * p.h * p.w, 0.0f);
  forEachWindow(p, [&](int64_t pl, int64_t o, int64_t oy, int64_t ox) {
    float m;
    int64_t best = argmaxWindow(x + pl * p.h * p.w, p, oy, ox, m);
    dx[pl * p.h * p.w + best] += dy[o];
  });
}

void maxPool2dIndex(const float *x, float *y, float *index,
                    const PoolParams &p) {
  forEachWindow(p, [&](int64_t pl, int64_t o, int64_t oy, int64_t ox) {
    float m;
    int64_t best = argmaxWindow(x + pl * p.h * p.w, p, oy, ox, m);
    int64_t kh = best / p.w - (oy * p.strideH - p.padT),
            kw = best % p.w - (ox * p.strideW - p.padL);
    y[o] = m;
    index[o] = (float)(kh * p.kw + kw);
  });
}

void maxPool2dIndexGrad(const float *dy, const float *index, float *dx,
                        const PoolParams &p) {
  std::fill(dx, dx + p.planes * p.h * p.w, 0.0f);
  forEachWindow(p, [&](int64_t pl, int64_t o, int64_t oy, int64_t ox) {
    int64_t k = (int64_t)index[o];
    int64_t ih = oy * p.strideH - p.padT + k / p.kw,
            iw = ox * p.strideW - p.padL + k % p.kw;
    if (k < 0 || k >= p.kh * p.kw || ih < 0 || ih >= p.h || iw < 0 || iw >= p.w)
      return; // not a position of this window: no element receives it
    dx[(pl * p.h + ih) * p.w + iw] += dy[o];
  });
}

void avgPool2d(const float *x, float *y, const PoolParams &p) {
  const int64_t oh = p.outH(), ow = p.outW();
  for (int64_t pl = 0; pl < p.planes; ++pl) {
    const float *plane = x + pl * p.h * p.w;
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        AvgWindow win = avgWindow(p, oy, ox);
        float &out = y[(pl * oh + oy) * ow + ox];
        if (!win.divisor) {
          out = 0.0f;
          continue;
        }
        double sum = 0;
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw)
            sum += plane[ih * p.w + iw];
        out = static_cast<float>(sum / win.divisor);
      }
  }
}

void avgPool2dGrad(const float *dy, float *dx, const PoolParams &p) {
  const int64_t oh = p.outH(), ow = p.outW();
  std::fill(dx, dx + p.planes * p.h * p.w, 0.0f);
  for (int64_t pl = 0; pl < p.planes; ++pl) {
    float *dplane = dx + pl * p.h * p.w;
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        AvgWindow win = avgWindow(p, oy, ox);
        if (!win.divisor)
          continue;
        const float g =
            dy[(pl * oh + oy) * ow + ox] / static_cast<float>(win.divisor);
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw)
            dplane[ih * p.w + iw] += g;
      }
  }
}

void globalAvgPool(const float *x, float *y, int64_t planes, int64_t hw) {
  for (int64_t pl = 0; pl < planes; ++pl) {
    double sum = 0;
    for (int64_t i = 0; i < hw; ++i)
      sum += x[pl * hw + i];
    y[pl] = static_cast<float>(sum / hw);
  }
}

void globalAvgPoolGrad(const float *dy, float *dx, int64_t planes, int64_t hw) {
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float g = dy[pl] / static_cast<float>(hw);
    std::fill(dx + pl * hw, dx + (pl + 1) * hw, g);
  }
}

//===----------------------------------------------------------------------===//
// Resampling
//===----------------------------------------------------------------------===//

void resize(const float *x, float *y, int64_t planes, int64_t h, int64_t w,
            const std::vector<ResizeTap> &th, const std::vector<ResizeTap> &tw,
            bool linear) {
  const int64_t oh = th.size(), ow = tw.size();
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float *xp = x + pl * h * w;
    float *yp = y + pl * oh * ow;
    for (int64_t i = 0; i < oh; ++i) {
      const ResizeTap &a = th[i];
      for (int64_t j = 0; j < ow; ++j) {
        const ResizeTap &b = tw[j];
        if (!linear) {
          yp[i * ow + j] = xp[a.lo * w + b.lo];
          continue;
        }
        const float h1 = a.l1, h0 = 1.0f - h1, w1 = b.l1, w0 = 1.0f - w1;
        const float top = xp[a.lo * w + b.lo] * w0 + xp[a.lo * w + b.hi] * w1;
        const float bottom =
            xp[a.hi * w + b.lo] * w0 + xp[a.hi * w + b.hi] * w1;
        yp[i * ow + j] = top * h0 + bottom * h1;
      }
    }
  }
}

void resizeGrad(const float *dy, float *dx, int64_t planes, int64_t h,
                int64_t w, const std::vector<ResizeTap> &th,
                const std::vector<ResizeTap> &tw, bool linear) {
  const int64_t oh = th.size(), ow = tw.size();
  std::fill(dx, dx + planes * h * w, 0.0f);
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float *dyp = dy + pl * oh * ow;
    float *dxp = dx + pl * h * w;
    for (int64_t i = 0; i < oh; ++i) {
      const ResizeTap &a = th[i];
      for (int64_t j = 0; j < ow; ++j) {
        const ResizeTap &b = tw[j];
        const float g = dyp[i * ow + j];
        if (!linear) {
          dxp[a.lo * w + b.lo] += g;
          continue;
        }
        const float h1 = a.l1, h0 = 1.0f - h1, w1 = b.l1, w0 = 1.0f - w1;
        dxp[a.lo * w + b.lo] += h0 * w0 * g;
        dxp[a.lo * w + b.hi] += h0 * w1 * g;
        dxp[a.hi * w + b.lo] += h1 * w0 * g;
        dxp[a.hi * w + b.hi] += h1 * w1 * g;
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

void copy(const float *x, float *y, int64_t n) {
  if (n)
    std::memcpy(y, x, n * sizeof(float));
}

void concat(const std::vector<const float *> &inputs,
            const std::vector<Shape> &shapes, int64_t axis, float *y) {
  assert(!inputs.empty() && inputs.size() == shapes.size());
  const Shape &s0 = shapes[0];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= s0[d];
  for (size_t d = axis + 1; d < s0.size(); ++d)
    inner *= s0[d];
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int64_t chunk = shapes[i][axis] * inner;
      copy(inputs[i] + o * chunk, y, chunk);
      y += chunk;
    }
}

namespace {
std::vector<int64_t> stridesOf(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}
} // namespace

void slice(const float *x, const Shape &shape, const Shape &offsets,
           const Shape &sizes, float *y) {
  const int64_t rank = shape.size();
  if (rank == 0) {
    y[0] = x[0];
    return;
  }
  std::vector<int64_t> strides = stridesOf(shape);
  const int64_t rows = numel(sizes) / sizes[rank - 1];
  std::vector<int64_t> idx(rank, 0); // index over sizes[0 .. rank-2]
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = offsets[rank - 1];
    for (int64_t d = 0; d + 1 < rank; ++d)
      off += (offsets[d] + idx[d]) * strides[d];
    copy(x + off, y + r * sizes[rank - 1], sizes[rank - 1]);
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++idx[d] < sizes[d])
        break;
      idx[d] = 0;
    }
  }
}

int64_t padSource(int64_t j, int64_t n, int64_t begin, PadMode mode) {
  int64_t k = j - begin;
  if (k >= 0 && k < n)
    return k;
  switch (mode) {
  case PadMode::Constant:
    return -1;
  case PadMode::Edge:
    return k < 0 ? 0 : n - 1;
  case PadMode::Reflect:
    // Pads are smaller than n (the verifier), so one reflection suffices.
    return k < 0 ? -k : 2 * (n - 1) - k;
  }
  return -1;
}

namespace {
/// Calls f(outIndex, inIndex or -1) for every element of the padded shape.
template <typename F>
void forEachPadded(const Shape &shape, const Shape &pads, PadMode mode, F f) {
  const int64_t rank = shape.size();
  Shape outShape(rank);
  for (int64_t d = 0; d < rank; ++d)
    outShape[d] = shape[d] + pads[d] + pads[rank + d];
  std::vector<int64_t> inStrides = stridesOf(shape);
  const int64_t total = numel(outShape);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < total; ++i) {
    int64_t src = 0;
    for (int64_t d = 0; d < rank && src >= 0; ++d) {
      int64_t k = padSource(idx[d], shape[d], pads[d], mode);
      src = k < 0 ? -1 : src + k * inStrides[d];
    }
    f(i, src);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < outShape[d])
        break;
      idx[d] = 0;
    }
  }
}
} // namespace

void pad(const float *x, const Shape &shape, const Shape &pads, PadMode mode,
         float value, float *y) {
  forEachPadded(shape, pads, mode, [&](int64_t i, int64_t src) {
    y[i] = src < 0 ? value : x[src];
  });
}

void padGrad(const float *dy, const Shape &shape, const Shape &pads,
             PadMode mode, float *dx) {
  std::fill(dx, dx + numel(shape), 0.0f);
  forEachPadded(shape, pads, mode, [&](int64_t i, int64_t src) {
    if (src >= 0)
      dx[src] += dy[i];
  });
}

void transpose(const float *x, const Shape &shape, const Shape &perm,
               float *y) {
  const int64_t rank = shape.size();
  if (rank == 0) {
    y[0] = x[0];
    return;
  }
  std::vector<int64_t> inStrides = stridesOf(shape);
  Shape outShape(rank);
  std::vector<int64_t> srcStride(rank); // input stride of each output dim
  for (int64_t d = 0; d < rank; ++d) {
    outShape[d] = shape[perm[d]];
    srcStride[d] = inStrides[perm[d]];
  }
  const int64_t total = numel(outShape);
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < total; ++i) {
    y[i] = x[off];
    for (int64_t d = rank - 1; d >= 0; --d) {
      off += srcStride[d];
      if (++idx[d] < outShape[d])
        break;
      off -= srcStride[d] * outShape[d];
      idx[d] = 0;
    }
  }
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float dropoutUniform(uint64_t seed, uint64_t step, uint64_t index) {
  uint64_t h = splitmix64(splitmix64(splitmix64(seed) + step) + index);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

void dropoutMask(float *mask, int64_t n, float ratio, uint64_t seed,
                 uint64_t step) {
  const float keep =
      static_cast<float>(1.0 / (1.0 - static_cast<double>(ratio)));
  for (int64_t i = 0; i < n; ++i)
    mask[i] = dropoutUniform(seed, step, i) < ratio ? 0.0f : keep;
}

//===----------------------------------------------------------------------===//
// Softmax and loss
//===----------------------------------------------------------------------===//

void softmax(const float *x, float *y, int64_t outer, int64_t axisSize,
             int64_t inner) {
  std::vector<double> e(axisSize);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      const float *xs = x + o * axisSize * inner + in;
      float *ys = y + o * axisSize * inner + in;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t a = 0; a < axisSize; ++a)
        mx = std::max(mx, xs[a * inner]);
      double sum = 0;
      for (int64_t a = 0; a < axisSize; ++a)
        sum += e[a] = std::exp(static_cast<double>(xs[a * inner]) - mx);
      for (int64_t a = 0; a < axisSize; ++a)
        ys[a * inner] = static_cast<float>(e[a] / sum);
    }
}

namespace {
/// log(sum(exp(row))) with the maximum subtracted, in double.
double logSumExp(const float *row, int64_t c) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < c; ++j)
    mx = std::max(mx, static_cast<double>(row[j]));
  double sum = 0;
  for (int64_t j = 0; j < c; ++j)
    sum += std::exp(row[j] - mx);
  return mx + std::log(sum);
}
} // namespace

namespace {
/// The rows that count: those whose label is not `ignoreIndex`.
int64_t countValid(const float *labels, int64_t n, int64_t ignoreIndex) {
  int64_t valid = 0;
  for (int64_t i = 0; i < n; ++i)
    valid += static_cast<int64_t>(labels[i]) != ignoreIndex;
  return valid;
}
} // namespace

float softmaxCrossEntropy(const float *logits, const float *labels, int64_t n,
                          int64_t c, float smoothing, int64_t ignoreIndex) {
  const double s = smoothing;
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float *row = logits + i * c;
    const int64_t y = static_cast<int64_t>(labels[i]);
    if (y == ignoreIndex)
      continue;
    const double lse = logSumExp(row, c);
    double nll = lse - row[y];
    double smooth = 0;
    if (s != 0) {
      for (int64_t j = 0; j < c; ++j)
        smooth += lse - row[j];
      smooth /= c;
    }
    total += (1.0 - s) * nll + s * smooth;
  }
  // 0 / 0 = NaN when every row is ignored, as PyTorch's mean reduction.
  return static_cast<float>(
      total / static_cast<double>(countValid(labels, n, ignoreIndex)));
}

void softmaxCrossEntropyGrad(const float *logits, const float *labels,
                             float gradLoss, float *dlogits, int64_t n,
                             int64_t c, float smoothing, int64_t ignoreIndex) {
  const double s = smoothing,
               factor = static_cast<double>(gradLoss) /
                        static_cast<double>(countValid(labels, n, ignoreIndex));
  for (int64_t i = 0; i < n; ++i) {
    const float *row = logits + i * c;
    const int64_t y = static_cast<int64_t>(labels[i]);
    if (y == ignoreIndex) {
      std::fill(dlogits + i * c, dlogits + (i + 1) * c, 0.0f);
      continue;
    }
    const double lse = logSumExp(row, c);
    for (int64_t j = 0; j < c; ++j) {
      double target = s / c + (j == y ? 1.0 - s : 0.0);
      dlogits[i * c + j] =
          static_cast<float>((std::exp(row[j] - lse) - target) * factor);
    }
  }
}

//===----------------------------------------------------------------------===//
// Optimizers: f32 arithmetic in the order of torch.optim's single-tensor code
//===----------------------------------------------------------------------===//

double decimalValue(float f) {
  if (!std::isfinite(f))
    return f;
  char buf[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(f));
    double d = std::strtod(buf, nullptr);
    if (static_cast<float>(d) == f)
      return d;
  }
  return f;
}

void sgdUpdate(const float *param, const float *grad, const float *buf,
               float *newParam, float *newBuf, int64_t n, float lr, float step,
               float momentum, float dampening, float weightDecay,
               bool nesterov) {
  const bool first = step < 1.5f;
  const float damp = static_cast<float>(1.0 - decimalValue(dampening));
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i];
    if (weightDecay != 0.0f)
      g = g + weightDecay * param[i];
    if (momentum != 0.0f) {
      float b = first ? g : buf[i] * momentum + damp * g;
      newBuf[i] = b;
      g = nesterov ? g + momentum * b : b;
    } else {
      newBuf[i] = buf[i];
    }
    newParam[i] = param[i] + (-lr) * g;
  }
}

void adamUpdate(const float *param, const float *grad, const float *expAvg,
                const float *expAvgSq, float *newParam, float *newExpAvg,
                float *newExpAvgSq, int64_t n, float lr, float step,
                float beta1, float beta2, float eps, float weightDecay,
                bool decoupled) {
  const double b1 = decimalValue(beta1), b2 = decimalValue(beta2), t = step;
  const float oneMinusB1 = static_cast<float>(1.0 - b1);
  const float oneMinusB2 = static_cast<float>(1.0 - b2);
  const double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
  const float stepSize = static_cast<float>(decimalValue(lr) / bc1);
  const float bc2Sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay =
      static_cast<float>(1.0 - decimalValue(lr) * decimalValue(weightDecay));
  for (int64_t i = 0; i < n; ++i) {
    float p = param[i], g = grad[i];
    if (decoupled)
      p = p * decay;
    else if (weightDecay != 0.0f)
      g = g + weightDecay * p;
    const float m = expAvg[i] * beta1 + oneMinusB1 * g;
    const float v = expAvgSq[i] * beta2 + oneMinusB2 * g * g;
    const float denom = std::sqrt(v) / bc2Sqrt + eps;
    newExpAvg[i] = m;
    newExpAvgSq[i] = v;
    newParam[i] = p + (-stepSize) * (m / denom);
  }
}

} // namespace cnnc::reference::kernels
