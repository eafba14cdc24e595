//===- Kernels.h - CPU reference kernels for the cnn ops --------*- C++ -*-===//
//
// Plain C++ on raw float pointers and shapes, no MLIR. One function per cnn
// op. All tensors are dense row-major (NCHW for images, FCHW for filters).
// Every kernel matches PyTorch (CPU, f32) semantics; reductions whose order
// is cheap to control are accumulated in double.
//
// Outputs are written, never accumulated into, unless a comment says so.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_LIB_REFERENCE_KERNELS_H
#define CNNC_LIB_REFERENCE_KERNELS_H

#include "cnnc/Support/Resize.h"
#include "cnnc/Support/WindowSize.h"
#include <cstdint>
#include <optional>

#include <vector>

namespace cnnc::reference::kernels {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape &shape);

/// Output size of a convolution / pooling window along one dimension.
using cnnc::windowOutputSize;

//===----------------------------------------------------------------------===//
// Matrix product
//===----------------------------------------------------------------------===//

/// C[M x N] = op(A) * op(B) (+ C when `accumulate`), row-major, where op(A)
/// is M x K (A is K x M when transA) and op(B) is K x N (N x K when transB).
void gemm(int64_t m, int64_t n, int64_t k, const float *a, bool transA,
          const float *b, bool transB, float *c, bool accumulate = false);

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

struct ConvParams {
  int64_t n = 1, c = 1, h = 1, w = 1; // input
  int64_t f = 1, kh = 1, kw = 1;      // filter F x (C/groups) x KH x KW
  int64_t strideH = 1, strideW = 1;
  int64_t padT = 0, padL = 0, padB = 0, padR = 0;
  int64_t dilH = 1, dilW = 1;
  int64_t groups = 1;
  int64_t outH() const;
  int64_t outW() const;
};

/// y[N, F, OH, OW] = conv2d(x[N, C, H, W], w[F, C/groups, KH, KW]).
void conv2d(const float *x, const float *w, float *y, const ConvParams &p);
/// dx[N, C, H, W] from dy[N, F, OH, OW] and w.
void conv2dBwdData(const float *dy, const float *w, float *dx,
                   const ConvParams &p);
/// dw[F, C/groups, KH, KW] from x and dy.
void conv2dBwdFilter(const float *x, const float *dy, float *dw,
                     const ConvParams &p);
/// The most floats conv2d, conv2dBwdData or conv2dBwdFilter allocate besides
/// their operands (the im2col buffers of one chunk of images, the transposed
/// filter), for `n` images, `f` filters in `groups` groups, `k` = C/groups x
/// KH x KW and `p` = OH x OW output positions; nullopt if it overflows. The
/// interpreter counts it against its memory limit before a convolution runs:
/// with a large kernel the buffers can be far larger than the result.
std::optional<int64_t> convScratchFloats(int64_t n, int64_t f, int64_t groups,
                                         int64_t k, int64_t p);

//===----------------------------------------------------------------------===//
// Elementwise and per-channel ops
//===----------------------------------------------------------------------===//

/// y = x + bias[channel]; x has shape [d0, C, rest...] with `inner` =
/// prod(rest).
void biasAdd(const float *x, const float *bias, float *y, int64_t outer,
             int64_t channels, int64_t inner);
/// db[c] = sum of dy over every dimension but 1 (double accumulation).
void biasGrad(const float *dy, float *db, int64_t outer, int64_t channels,
              int64_t inner);
void relu(const float *x, float *y, int64_t n);
/// dx = dy where out > 0 else 0.
void reluGrad(const float *dy, const float *out, float *dx, int64_t n);
/// torch.clamp(x, lo, hi) (NaN propagates).
void clip(const float *x, float *y, int64_t n, float lo, float hi);
/// dx = dy where lo < x < hi else 0 (torch hardtanh_backward).
void clipGrad(const float *dy, const float *x, float *dx, int64_t n, float lo,
              float hi);
void add(const float *a, const float *b, float *y, int64_t n);
void mul(const float *a, const float *b, float *y, int64_t n);
void scale(const float *x, float *y, int64_t n, float factor);

//===----------------------------------------------------------------------===//
// Batch normalization; x is [N, C, inner] (inner = H*W, or 1 for 2-D input)
//===----------------------------------------------------------------------===//

void batchNormInference(const float *x, const float *scale, const float *bias,
                        const float *mean, const float *var, float *y,
                        int64_t n, int64_t c, int64_t inner, float eps);

/// Training form. saved_invstd = 1/sqrt(biased_var + eps); new running
/// statistics (1-m)*running + m*stat, with the unbiased variance n/(n-1).
void batchNormTrain(const float *x, const float *scale, const float *bias,
                    const float *runningMean, const float *runningVar, float *y,
                    float *savedMean, float *savedInvstd, float *newRunningMean,
                    float *newRunningVar, int64_t n, int64_t c, int64_t inner,
                    float eps, float momentum);

/// PyTorch's batch_norm_backward (training): with M = n*inner,
///   dbias = sum dy, dscale = sum (x-mean) dy * invstd,
///   dx = (dy - dbias/M - (x-mean) invstd^2 sum((x-mean) dy)/M) invstd scale.
void batchNormGrad(const float *dy, const float *x, const float *scale,
                   const float *savedMean, const float *savedInvstd, float *dx,
                   float *dscale, float *dbias, int64_t n, int64_t c,
                   int64_t inner);

//===----------------------------------------------------------------------===//
// Pooling; x is [N*C planes of H x W]
//===----------------------------------------------------------------------===//

struct PoolParams {
  int64_t planes = 1, h = 1, w = 1; // planes = N * C
  int64_t kh = 1, kw = 1, strideH = 1, strideW = 1;
  int64_t padT = 0, padL = 0, padB = 0, padR = 0;
  bool ceilMode = false;
  bool countIncludePad = true; // avg pooling only
  int64_t outH() const;
  int64_t outW() const;
};

/// Padding never wins; the first maximum in window (row-major) order wins;
/// NaN wins as in PyTorch.
void maxPool2d(const float *x, float *y, const PoolParams &p);
/// Routes each dy to the first maximum of its window (accumulating).
void maxPool2dGrad(const float *dy, const float *x, float *dx,
                   const PoolParams &p);
/// maxPool2d, and in `index` each window's first maximum as its position
/// kh * kw_size + kw inside the window (fused_max_pool2d's window_index).
void maxPool2dIndex(const float *x, float *y, float *index,
                    const PoolParams &p);
/// maxPool2dGrad routed by `index` (as maxPool2dIndex writes it): the same
/// sums in the same order, without the pooled input.
void maxPool2dIndexGrad(const float *dy, const float *index, float *dx,
                        const PoolParams &p);
/// PyTorch's divisor: with count_include_pad, the window clipped to the
/// padded input [-padT, H+padB) x [-padL, W+padR); otherwise the number of
/// real elements. A window without real elements gives 0.
void avgPool2d(const float *x, float *y, const PoolParams &p);
void avgPool2dGrad(const float *dy, float *dx, const PoolParams &p);
void globalAvgPool(const float *x, float *y, int64_t planes, int64_t hw);
void globalAvgPoolGrad(const float *dy, float *dx, int64_t planes, int64_t hw);

//===----------------------------------------------------------------------===//
// Resampling (cnn.resize); x is [planes of H x W], y [planes of OH x OW]
//===----------------------------------------------------------------------===//

/// y[oh, ow] reads x through the taps of H (`th`, OH of them) and W (`tw`),
/// from resizeTaps (cnnc/Support/Resize.h). Nearest copies x[lo_h, lo_w];
/// linear is PyTorch's bilinear in f32: ((x[lo_h, lo_w] (1 - l_w) +
/// x[lo_h, hi_w] l_w) (1 - l_h) + (x[hi_h, lo_w] (1 - l_w) + x[hi_h, hi_w]
/// l_w) l_h.
void resize(const float *x, float *y, int64_t planes, int64_t h, int64_t w,
            const std::vector<ResizeTap> &th, const std::vector<ResizeTap> &tw,
            bool linear);
/// The adjoint (cnn.resize_grad): dx (planes x H x W) = 0, then every
/// dy[oh, ow] added into the elements output (oh, ow) read, times their
/// weight (l_h' l_w') dy, in output order, as PyTorch's CPU backward.
void resizeGrad(const float *dy, float *dx, int64_t planes, int64_t h,
                int64_t w, const std::vector<ResizeTap> &th,
                const std::vector<ResizeTap> &tw, bool linear);

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

void copy(const float *x, float *y, int64_t n);
/// Concatenation along `axis` of inputs sharing every other dimension.
void concat(const std::vector<const float *> &inputs,
            const std::vector<Shape> &shapes, int64_t axis, float *y);
/// y = x[offsets : offsets + sizes].
void slice(const float *x, const Shape &shape, const Shape &offsets,
           const Shape &sizes, float *y);
/// y.dim(i) = x.dim(perm[i]).
void transpose(const float *x, const Shape &shape, const Shape &perm, float *y);
/// Padding modes of pad/padGrad (cnn.pad's "constant", "reflect", "edge").
enum class PadMode { Constant, Reflect, Edge };
/// The input index that padded index `j` (in [0, n + begin + end)) copies
/// along one dimension of size `n` with `begin` leading pads, or -1 for a
/// constant fill.
int64_t padSource(int64_t j, int64_t n, int64_t begin, PadMode mode);
/// y = pad(x): pads = [begin_0..begin_{r-1}, end_0..end_{r-1}] (cnn.pad).
void pad(const float *x, const Shape &shape, const Shape &pads, PadMode mode,
         float value, float *y);
/// dx (of `shape`) = sum of dy over the padded elements that copy each x
/// element (cnn.pad_grad); dy has the padded shape.
void padGrad(const float *dy, const Shape &shape, const Shape &pads,
             PadMode mode, float *dx);

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// splitmix64 finalizer (Steele, Lea, Flood 2014):
///   z = x + 0x9E3779B97F4A7C15
///   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
///   z = (z ^ (z >> 27)) * 0x94D049BB133111EB
///   return z ^ (z >> 31)              (all arithmetic mod 2^64)
uint64_t splitmix64(uint64_t x);
/// The counter-based dropout generator shared with the CUDA backend:
///   h = splitmix64(splitmix64(splitmix64(seed) + step) + index)
///   u = (h >> 40) * 2^-24              (24 random bits, exact in f32, [0,1))
/// `step` is the 1-based training step (the op's `step` operand, truncated to
/// an integer), `index` the row-major element index.
float dropoutUniform(uint64_t seed, uint64_t step, uint64_t index);
/// mask[i] = dropoutUniform(seed, step, i) < ratio ? 0 : keep, where
/// keep = (float)(1.0 / (1.0 - (double)ratio)).
void dropoutMask(float *mask, int64_t n, float ratio, uint64_t seed,
                 uint64_t step);

//===----------------------------------------------------------------------===//
// Softmax and loss
//===----------------------------------------------------------------------===//

/// Softmax along the middle dimension of [outer, axisSize, inner].
void softmax(const float *x, float *y, int64_t outer, int64_t axisSize,
             int64_t inner);
/// torch.nn.CrossEntropyLoss(label_smoothing=s, ignore_index=ii), mean over
/// the rows whose label is not `ignoreIndex` (NaN when there are none);
/// logits [n, c], labels held as floats, each other label in [0, c).
/// Returns the loss (double accumulation, log-sum-exp with the row maximum
/// subtracted).
float softmaxCrossEntropy(const float *logits, const float *labels, int64_t n,
                          int64_t c, float smoothing,
                          int64_t ignoreIndex = -100);
/// dlogits = (softmax(logits) - ((1-s) onehot + s/c)) * gradLoss / v for the
/// v rows whose label is not `ignoreIndex`, 0 for the others.
void softmaxCrossEntropyGrad(const float *logits, const float *labels,
                             float gradLoss, float *dlogits, int64_t n,
                             int64_t c, float smoothing,
                             int64_t ignoreIndex = -100);

//===----------------------------------------------------------------------===//
// Optimizers (torch.optim formulas, elementwise over n values)
//===----------------------------------------------------------------------===//

/// The shortest decimal that rounds to `f`, as a double: the value the user
/// most likely wrote (0.999f -> 0.999). Hyper-parameters are f32 attributes
/// but torch.optim computes with Python doubles; 1 - beta2 from 0.999f would
/// be off by 5e-5 relative, so 1 - beta, 1 - dampening and beta^step are
/// computed from this value (backends should do the same on the host).
double decimalValue(float f);

/// torch.optim.SGD; `step` is the 1-based step count (the buffer is
/// initialised to g on step 1). With momentum 0 the buffer is passed through.
void sgdUpdate(const float *param, const float *grad, const float *buf,
               float *newParam, float *newBuf, int64_t n, float lr, float step,
               float momentum, float dampening, float weightDecay,
               bool nesterov);
/// torch.optim.Adam (decoupled = false) or AdamW (decoupled = true).
void adamUpdate(const float *param, const float *grad, const float *expAvg,
                const float *expAvgSq, float *newParam, float *newExpAvg,
                float *newExpAvgSq, int64_t n, float lr, float step,
                float beta1, float beta2, float eps, float weightDecay,
                bool decoupled);

} // namespace cnnc::reference::kernels

#endif
