//===- FusedOps.cpp - reference execution of cnn-fuse's ops ---------------===//
//
// Each fused op computes exactly what the op sequence it replaced computes
// (same f32/double accumulation as Kernels.cpp), in NCHW or NHWC.
//
//===----------------------------------------------------------------------===//
#include "FusedOps.h"

#include "Kernels.h"
#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::reference;
namespace kn = cnnc::reference::kernels;

namespace {
/// Maps a flat element index to its channel for a shape and layout.
struct ChannelOf {
  int64_t channels = 1, inner = 1;
  bool nhwc = false;
  ChannelOf(ArrayRef<int64_t> s, cnn::Layout layout) {
    nhwc = layout == cnn::Layout::NHWC && s.size() == 4;
    if (s.size() < 2)
      return;
    channels = nhwc ? s[3] : s[1];
    for (size_t d = 2; d < s.size(); ++d)
      inner *= s[d];
  }
  int64_t operator()(int64_t i) const {
    return nhwc ? i % channels : (i / inner) % channels;
  }
};

/// The prologue of the fused convolutions and pooling, in place:
/// relu(x * scale + shift) per channel of `layout`, rounded to x's type as
/// the unfused normalization (a fused_elementwise: f32 mul, add, maximumf,
/// which propagates NaN) stored it.
void applyScaleShiftRelu(Tensor &x, const Tensor &scale, const Tensor &shift,
                         cnn::Layout layout) {
  ChannelOf ich(x.shape, layout);
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = x.data[i] * scale.data[ich(i)] + shift.data[ich(i)];
    v = std::isnan(v) || v > 0 ? v : 0;
    x.data[i] = x.kind == ElemKind::F16 ? roundToHalf(v) : v;
  }
}

/// NHWC <-> NCHW copies (4-D).
std::vector<float> nhwcToNchw(const Tensor &t) {
  auto s = t.shape;
  int64_t n = s[0], h = s[1], w = s[2], c = s[3];
  std::vector<float> o(t.data.size());
  for (int64_t a = 0; a < n; ++a)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t k = 0; k < c; ++k)
          o[((a * c + k) * h + y) * w + x] =
              t.data[((a * h + y) * w + x) * c + k];
  return o;
}
void nchwToNhwc(const std::vector<float> &in, ArrayRef<int64_t> nhwc,
                float *o) {
  int64_t n = nhwc[0], h = nhwc[1], w = nhwc[2], c = nhwc[3];
  for (int64_t a = 0; a < n; ++a)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t k = 0; k < c; ++k)
          o[((a * h + y) * w + x) * c + k] = in[((a * c + k) * h + y) * w + x];
}

/// A windowed op's strides and (top, left, bottom, right) padding into the
/// kernels' convolution or pooling parameters (the same field names).
template <typename Params, typename WindowOp>
void setStridesAndPadding(Params &p, WindowOp op) {
  p.strideH = op.getStrides()[0];
  p.strideW = op.getStrides()[1];
  p.padT = op.getPadding()[0];
  p.padL = op.getPadding()[1];
  p.padB = op.getPadding()[2];
  p.padR = op.getPadding()[3];
}

/// The kernels' parameters of a convolution op whose input (x) has shape
/// `xs` and filter `fs`, in its layout.
template <typename ConvOp>
kn::ConvParams convParamsOf(ConvOp op, ArrayRef<int64_t> xs,
                            ArrayRef<int64_t> fs) {
  bool nhwc = op.isNHWC();
  kn::ConvParams p;
  p.n = xs[0];
  p.c = nhwc ? xs[3] : xs[1];
  p.h = nhwc ? xs[1] : xs[2];
  p.w = nhwc ? xs[2] : xs[3];
  p.f = fs[0];
  p.kh = nhwc ? fs[1] : fs[2];
  p.kw = nhwc ? fs[2] : fs[3];
  setStridesAndPadding(p, op);
  p.dilH = op.getDilations()[0];
  p.dilW = op.getDilations()[1];
  p.groups = op.getGroups();
  return p;
}

/// r = conv2d(x, w) of a convolution op (fused_conv2d, fused_conv2d_stats),
/// unrounded.
template <typename ConvOp>
void convInto(ConvOp op, const Tensor &x, const Tensor &w, Tensor &r) {
  bool nhwc = op.isNHWC();
  std::vector<float> xs = nhwc ? nhwcToNchw(x) : x.data;
  std::vector<float> ws = nhwc ? nhwcToNchw(w) : w.data;
  kn::ConvParams p = convParamsOf(op, x.shape, w.shape);
  std::vector<float> y(p.n * p.f * p.outH() * p.outW());
  kn::conv2d(xs.data(), ws.data(), y.data(), p);
  if (nhwc)
    nchwToNhwc(y, r.shape, r.data.data());
  else
    r.data = y;
}

LogicalResult execConv(cnn::FusedConv2DOp op,
                       function_ref<const Tensor &(Value)> get,
                       function_ref<Tensor &(Value)> def) {
  Tensor &r = def(op.getResult());
  convInto(op, get(op.getInput()), get(op.getFilter()), r);
  ChannelOf ch(r.shape, op.getLayout());
  const Tensor *bias = op.getBias() ? &get(op.getBias()) : nullptr;
  const Tensor *res = op.getResidual() ? &get(op.getResidual()) : nullptr;
  float lo = op.getClipMin().convertToFloat(),
        hi = op.getClipMax().convertToFloat();
  StringRef act = op.getActivation();
  bool half = r.kind == ElemKind::F16;
  for (int64_t i = 0; i < (int64_t)r.data.size(); ++i) {
    // Each step rounds as the unfused ops stored their f16 results.
    float v = r.data[i];
    if (half)
      v = roundToHalf(v);
    if (bias) {
      v += bias->data[ch(i)];
      if (half)
        v = roundToHalf(v);
    }
    if (res) {
      v += res->data[i];
      if (half)
        v = roundToHalf(v);
    }
    if (act == "relu")
      v = v > 0 ? v : 0;
    else if (act == "clip")
      v = std::min(std::max(v, lo), hi);
    r.data[i] = v;
  }
  return success();
}

LogicalResult execStats(cnn::BatchNormStatsOp op,
                        function_ref<const Tensor &(Value)> get,
                        function_ref<Tensor &(Value)> def) {
  float *m = def(op.getSavedMean()).data.data(),
        *is = def(op.getSavedInvstd()).data.data(),
        *nm = def(op.getNewRunningMean()).data.data(),
        *nv = def(op.getNewRunningVar()).data.data(),
        *al = def(op.getAlpha()).data.data(),
        *be = def(op.getBeta()).data.data();
  const Tensor &x = get(op.getInput());
  ChannelOf ch(x.shape, op.getLayout());
  int64_t c = ch.channels, count = x.numel() / c;
  std::vector<double> sum(c, 0), ss(c, 0);
  for (int64_t i = 0; i < x.numel(); ++i)
    sum[ch(i)] += x.data[i];
  std::vector<double> mean(c);
  for (int64_t k = 0; k < c; ++k)
    mean[k] = sum[k] / count;
  for (int64_t i = 0; i < x.numel(); ++i) {
    double d = x.data[i] - mean[ch(i)];
    ss[ch(i)] += d * d;
  }
  const Tensor &rm = get(op.getRunningMean()), &rv = get(op.getRunningVar()),
               &scale = get(op.getScale()), &bias = get(op.getBias());
  double mom = kn::decimalValue(op.getMomentum().convertToFloat());
  float eps = op.getEpsilon().convertToFloat();
  for (int64_t k = 0; k < c; ++k) {
    double var = ss[k] / count;
    double unbiased = count > 1 ? ss[k] / (count - 1) : var;
    m[k] = (float)mean[k];
    double invstd = 1.0 / std::sqrt(var + eps);
    is[k] = (float)invstd;
    // As batch_norm_train's kernel (kernels::batchNormTrain).
    double a = invstd * scale.data[k];
    al[k] = (float)a;
    be[k] = (float)(bias.data[k] - mean[k] * a);
    nm[k] = (float)(mom * mean[k] + (1.0 - mom) * rm.data[k]);
    nv[k] = (float)(mom * unbiased + (1.0 - mom) * rv.data[k]);
  }
  return success();
}

/// fused_conv2d_stats: the convolution, rounded to the result's type as
/// conv2d stores it, and the per-channel sums of the stored values (f64).
/// Per channel of `x` (per `layout`): sum and sum of squares of the stored
/// values, in f64, rounded once (fused_conv2d_stats' and batch_norm_sums').
void storeChannelSums(const Tensor &x, cnn::Layout layout, float *sum,
                      float *sumSq) {
  ChannelOf ch(x.shape, layout);
  std::vector<double> s(ch.channels, 0), ss(ch.channels, 0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.data[i];
    s[ch(i)] += v;
    ss[ch(i)] += v * v;
  }
  for (int64_t k = 0; k < ch.channels; ++k) {
    sum[k] = (float)s[k];
    sumSq[k] = (float)ss[k];
  }
}

LogicalResult execConvStats(cnn::FusedConv2DStatsOp op,
                            function_ref<const Tensor &(Value)> get,
                            function_ref<Tensor &(Value)> def) {
  Tensor &r = def(op.getResult());
  const Tensor &in = get(op.getInput());
  if (!op.getScale()) {
    convInto(op, in, get(op.getFilter()), r);
  } else {
    Tensor x = in;
    applyScaleShiftRelu(x, get(op.getScale()), get(op.getShift()),
                        op.getLayout());
    convInto(op, x, get(op.getFilter()), r);
  }
  if (r.kind == ElemKind::F16)
    for (float &v : r.data)
      v = roundToHalf(v);
  storeChannelSums(r, op.getLayout(), def(op.getSum()).data.data(),
                   def(op.getSumSq()).data.data());
  return success();
}

/// fused_conv2d_bwd_data: the unfused conv2d_bwd_data, add and relu_grad,
/// each rounded to the result's type as those ops store it (bit-identical
/// to them).
LogicalResult execDgradAddRelu(cnn::FusedConv2DBwdDataOp op,
                               function_ref<const Tensor &(Value)> get,
                               function_ref<Tensor &(Value)> def) {
  Tensor &r = def(op.getResult());
  const Tensor &dy = get(op.getGradOutput()), &w = get(op.getFilter());
  bool nhwc = op.isNHWC();
  std::vector<float> dys = nhwc ? nhwcToNchw(dy) : dy.data;
  std::vector<float> ws = nhwc ? nhwcToNchw(w) : w.data;
  kn::ConvParams p = convParamsOf(op, r.shape, w.shape);
  std::vector<float> dx(r.data.size());
  kn::conv2dBwdData(dys.data(), ws.data(), dx.data(), p);
  if (nhwc)
    nchwToNhwc(dx, r.shape, r.data.data());
  else
    r.data = std::move(dx);
  bool half = r.kind == ElemKind::F16;
  auto round = [&](float v) { return half ? roundToHalf(v) : v; };
  const Tensor &addend = get(op.getAddend()), &y = get(op.getReluOutput());
  for (int64_t i = 0; i < r.numel(); ++i) {
    float sum = round(round(r.data[i]) + addend.data[i]);
    r.data[i] = y.data[i] > 0 ? sum : 0.f;
  }
  return success();
}

/// fused_conv2d_bwd_filter: the normalization relu(x * scale + shift),
/// rounded to x's type as the unfused kernel stores it, then the unfused
/// conv2d_bwd_filter (f32 scale and shift: bit-identical to the unfused
/// step).
LogicalResult execWgradPrologue(cnn::FusedConv2DBwdFilterOp op,
                                function_ref<const Tensor &(Value)> get,
                                function_ref<Tensor &(Value)> def) {
  Tensor x = get(op.getInput());
  applyScaleShiftRelu(x, get(op.getScale()), get(op.getShift()),
                      op.getLayout());
  Tensor &r = def(op.getResult());
  const Tensor &dy = get(op.getGradOutput());
  bool nhwc = op.isNHWC();
  std::vector<float> xs = nhwc ? nhwcToNchw(x) : x.data;
  std::vector<float> dys = nhwc ? nhwcToNchw(dy) : dy.data;
  kn::ConvParams p = convParamsOf(op, x.shape, r.shape);
  std::vector<float> dw(r.data.size());
  kn::conv2dBwdFilter(xs.data(), dys.data(), dw.data(), p);
  if (nhwc)
    nchwToNhwc(dw, r.shape, r.data.data());
  else
    r.data = std::move(dw);
  if (r.kind == ElemKind::F16)
    for (float &v : r.data)
      v = roundToHalf(v);
  return success();
}

/// The kernels' pooling parameters for an NCHW input of shape `in`.
template <typename PoolOp>
kn::PoolParams poolParamsOf(PoolOp op, ArrayRef<int64_t> in) {
  kn::PoolParams p;
  p.planes = in[0] * in[1];
  p.h = in[2];
  p.w = in[3];
  p.kh = op.getKernel()[0];
  p.kw = op.getKernel()[1];
  setStridesAndPadding(p, op);
  p.ceilMode = op.getCeilMode();
  return p;
}

/// A 4-D tensor's values and shape in NCHW order.
std::vector<float> asNCHW(const Tensor &t, bool nhwc,
                          SmallVectorImpl<int64_t> &shape) {
  shape.assign(t.shape.begin(), t.shape.end());
  if (!nhwc)
    return t.data;
  shape.assign({t.shape[0], t.shape[3], t.shape[1], t.shape[2]});
  return nhwcToNchw(t);
}
void storeFromNCHW(std::vector<float> &&v, bool nhwc, Tensor &r) {
  if (nhwc)
    nchwToNhwc(v, r.shape, r.data.data());
  else
    r.data = std::move(v);
}

/// fused_max_pool2d: the prologue as the unfused normalization stores it
/// (relu(x * scale + shift) rounded to x's type), then max_pool2d and the
/// window index of each maximum.
LogicalResult execMaxPoolIndex(cnn::FusedMaxPool2DOp op,
                               function_ref<const Tensor &(Value)> get,
                               function_ref<Tensor &(Value)> def) {
  Tensor x = get(op.getInput());
  if (op.getScale())
    applyScaleShiftRelu(x, get(op.getScale()), get(op.getShift()),
                        op.getLayout());
  bool nhwc = op.isNHWC();
  SmallVector<int64_t> shape;
  std::vector<float> xs = asNCHW(x, nhwc, shape);
  kn::PoolParams p = poolParamsOf(op, shape);
  Tensor &r = def(op.getResult()), &index = def(op.getWindowIndex());
  std::vector<float> y(r.data.size()), idx(index.data.size());
  kn::maxPool2dIndex(xs.data(), y.data(), idx.data(), p);
  storeFromNCHW(std::move(y), nhwc, r);
  storeFromNCHW(std::move(idx), nhwc, index);
  return success();
}

/// max_pool2d_grad's sums routed by the index (max_pool2d_index_grad and the
/// gradient fused_max_pool2d_batch_norm_relu_grad reads) into `r`, whose
/// shape and kind are the pooled input's.
template <typename PoolOp>
void poolIndexGrad(PoolOp op, const Tensor &dyT, const Tensor &idxT,
                   Tensor &r) {
  bool nhwc = op.isNHWC();
  SmallVector<int64_t> dyShape, idxShape;
  std::vector<float> dy = asNCHW(dyT, nhwc, dyShape);
  std::vector<float> idx = asNCHW(idxT, nhwc, idxShape);
  auto s = r.shape;
  SmallVector<int64_t> in = nhwc ? SmallVector<int64_t>{s[0], s[3], s[1], s[2]}
                                 : SmallVector<int64_t>(s.begin(), s.end());
  std::vector<float> dx(r.data.size());
  kn::maxPool2dIndexGrad(dy.data(), idx.data(), dx.data(),
                         poolParamsOf(op, in));
  storeFromNCHW(std::move(dx), nhwc, r);
}

/// max_pool2d_index_grad: max_pool2d_grad's sums, routed by the index.
LogicalResult execMaxPoolIndexGrad(cnn::MaxPool2DIndexGradOp op,
                                   function_ref<const Tensor &(Value)> get,
                                   function_ref<Tensor &(Value)> def) {
  // Rounded to f16 as stored by the interpreter.
  poolIndexGrad(op, get(op.getGradOutput()), get(op.getWindowIndex()),
                def(op.getResult()));
  return success();
}

/// batch_norm_finalize: batch_norm_stats' results from the sums.
LogicalResult execFinalize(cnn::BatchNormFinalizeOp op,
                           function_ref<const Tensor &(Value)> get,
                           function_ref<Tensor &(Value)> def) {
  float *m = def(op.getSavedMean()).data.data(),
        *is = def(op.getSavedInvstd()).data.data(),
        *nm = def(op.getNewRunningMean()).data.data(),
        *nv = def(op.getNewRunningVar()).data.data(),
        *al = def(op.getAlpha()).data.data(),
        *be = def(op.getBeta()).data.data();
  const Tensor &sum = get(op.getSum()), &sq = get(op.getSumSq()),
               &rm = get(op.getRunningMean()), &rv = get(op.getRunningVar()),
               &scale = get(op.getScale()), &bias = get(op.getBias());
  int64_t count = op.getCount();
  double mom = kn::decimalValue(op.getMomentum().convertToFloat());
  float eps = op.getEpsilon().convertToFloat();
  for (int64_t k = 0; k < sum.numel(); ++k) {
    double mean = (double)sum.data[k] / count;
    double var = std::max((double)sq.data[k] / count - mean * mean, 0.0);
    double unbiased = count > 1 ? var * count / (count - 1) : var;
    double invstd = 1.0 / std::sqrt(var + eps);
    m[k] = (float)mean;
    is[k] = (float)invstd;
    double a = invstd * scale.data[k];
    al[k] = (float)a;
    be[k] = (float)(bias.data[k] - mean * a);
    nm[k] = (float)(mom * mean + (1.0 - mom) * rm.data[k]);
    nv[k] = (float)(mom * unbiased + (1.0 - mom) * rv.data[k]);
  }
  return success();
}

/// batch_norm_sums: per-channel sum and sum of squares, f64, rounded once.
LogicalResult execSums(cnn::BatchNormSumsOp op,
                       function_ref<const Tensor &(Value)> get,
                       function_ref<Tensor &(Value)> def) {
  storeChannelSums(get(op.getInput()), op.getLayout(),
                   def(op.getSum()).data.data(),
                   def(op.getSumSq()).data.data());
  return success();
}

/// The recomputed ReLU mask of the fused BN gradients: whether the
/// forward's relu(x * alpha + beta) was positive, its normalization as the
/// fused_elementwise computes it (a rounded f32 product, then the sum),
/// rounded to the stored type (`half`: f16) as y was.
bool affineReluPositive(float x, float alpha, float beta, bool half) {
  volatile float p = x * alpha;
  float v = p + beta;
  return (half ? roundToHalf(v) : v) > 0;
}

/// batch_norm_grad_sums: batch_norm_grad's grad_bias and grad_scale sums;
/// fused_batch_norm_affine_relu_grad_sums (`alphaV`, `betaV` given): of dy
/// masked by the ReLU of the forward's x * alpha + beta, recomputed as
/// execBnReluGrad does.
LogicalResult execGradSums(Value dyV, Value xV, Value meanV, Value invstdV,
                           Value alphaV, Value betaV, cnn::Layout layout,
                           Value sumDyV, Value sumDyXhatV,
                           function_ref<const Tensor &(Value)> get,
                           function_ref<Tensor &(Value)> def) {
  const Tensor &dy = get(dyV), &x = get(xV), &mean = get(meanV),
               &invstd = get(invstdV);
  const float *alpha = alphaV ? get(alphaV).data.data() : nullptr,
              *beta = betaV ? get(betaV).data.data() : nullptr;
  bool half = x.kind == ElemKind::F16;
  ChannelOf ch(x.shape, layout);
  std::vector<double> sdy(ch.channels, 0), sdx(ch.channels, 0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t k = ch(i);
    if (alpha && !affineReluPositive(x.data[i], alpha[k], beta[k], half))
      continue;
    double g = dy.data[i];
    sdy[k] += g;
    sdx[k] += g * ((double)x.data[i] - mean.data[k]) * invstd.data[k];
  }
  float *a = def(sumDyV).data.data(), *b = def(sumDyXhatV).data.data();
  for (int64_t k = 0; k < ch.channels; ++k) {
    a[k] = (float)sdy[k];
    b[k] = (float)sdx[k];
  }
  return success();
}

/// fused_batch_norm_relu_grad (the mask read from the stored ReLU output
/// `y`), fused_batch_norm_affine_relu_grad (`y` null: the mask
/// recomputed from x with the normalization's alpha, beta) and, with
/// neither, batch_norm_grad (each half of fused_dual_batch_norm_grad).
LogicalResult execBnReluGrad(Operation *op, const Tensor &dy, Value yV,
                             Value xV, Value scaleV, Value meanV, Value invstdV,
                             Value alphaV, Value betaV, cnn::Layout layout,
                             Value dxV, Value dsV, Value dbV,
                             function_ref<const Tensor &(Value)> get,
                             function_ref<Tensor &(Value)> def) {
  float *dx = def(dxV).data.data();
  float *ds = def(dsV).data.data(), *db = def(dbV).data.data();
  const Tensor &x = get(xV), &scale = get(scaleV), &mean = get(meanV),
               &invstd = get(invstdV);
  const Tensor *y = yV ? &get(yV) : nullptr;
  const float *alpha = alphaV ? get(alphaV).data.data() : nullptr,
              *beta = betaV ? get(betaV).data.data() : nullptr;
  ChannelOf ch(x.shape, layout);
  int64_t c = ch.channels, n = x.numel();
  double count = (double)(n / c);
  bool half = x.kind == ElemKind::F16;
  auto positive = [&](int64_t i) {
    if (y)
      return y->data[i] > 0;
    if (!alpha)
      return true;
    int64_t k = ch(i);
    return affineReluPositive(x.data[i], alpha[k], beta[k], half);
  };
  auto g = [&](int64_t i) {
    float v = positive(i) ? dy.data[i] : 0.0f;
    return half ? roundToHalf(v) : v;
  };
  std::vector<double> sumDy(c, 0), dot(c, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = ch(i);
    double gi = g(i);
    sumDy[k] += gi;
    dot[k] += (x.data[i] - (double)mean.data[k]) * gi;
  }
  for (int64_t k = 0; k < c; ++k) {
    db[k] = (float)sumDy[k];
    ds[k] = (float)(dot[k] * invstd.data[k]);
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = ch(i);
    double is = invstd.data[k], m = mean.data[k];
    // The same operations, in the same order, as batch_norm_grad's kernel.
    double kk = dot[k] * is * is / count, w = is * scale.data[k];
    dx[i] = (float)((g(i) - sumDy[k] / count - (x.data[i] - m) * kk) * w);
  }
  return success();
}

/// A fused_elementwise body compiled to a straight-line program.
struct Program {
  enum Kind {
    Const,
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Cmp,
    Select,
    And,
    Or,
    Neg,
    Trunc,
    Copy,
    Exp,
    Expm1,
    Log,
    Log1p,
    Tanh,
    Erf,
    Sqrt,
    Pow
  };
  struct Inst {
    Kind kind;
    int a = 0, b = 0, c = 0, out = 0;
    float value = 0;
    arith::CmpFPredicate pred = arith::CmpFPredicate::OEQ;
  };
  std::vector<Inst> insts;
  std::vector<int> yields;
  int slots = 0;
};

FailureOr<Program> compile(cnn::FusedElementwiseOp op) {
  Program p;
  DenseMap<Value, int> slot;
  Block &body = op.getBody().front();
  for (BlockArgument a : body.getArguments())
    slot[a] = p.slots++;
  for (Operation &o : body.without_terminator()) {
    Program::Inst in;
    in.out = p.slots++;
    auto arg = [&](unsigned k) { return slot.lookup(o.getOperand(k)); };
    bool ok = true;
    TypeSwitch<Operation *>(&o)
        .Case([&](arith::ConstantOp c) {
          in.kind = Program::Const;
          if (auto f = dyn_cast<FloatAttr>(c.getValue()))
            in.value = f.getValueAsDouble();
          else if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
            in.value = i.getValue().getZExtValue();
          else
            ok = false;
        })
        .Case<arith::AddFOp>([&](auto) { in.kind = Program::Add; })
        .Case<arith::SubFOp>([&](auto) { in.kind = Program::Sub; })
        .Case<arith::MulFOp>([&](auto) { in.kind = Program::Mul; })
        .Case<arith::DivFOp>([&](auto) { in.kind = Program::Div; })
        .Case<arith::MaximumFOp, arith::MaxNumFOp>(
            [&](auto) { in.kind = Program::Max; })
        .Case<arith::MinimumFOp, arith::MinNumFOp>(
            [&](auto) { in.kind = Program::Min; })
        .Case([&](arith::CmpFOp c) {
          in.kind = Program::Cmp;
          in.pred = c.getPredicate();
        })
        .Case<arith::SelectOp>([&](auto) { in.kind = Program::Select; })
        .Case<arith::AndIOp>([&](auto) { in.kind = Program::And; })
        .Case<arith::OrIOp>([&](auto) { in.kind = Program::Or; })
        .Case<arith::NegFOp>([&](auto) { in.kind = Program::Neg; })
        .Case<arith::TruncFOp>([&](auto) { in.kind = Program::Trunc; })
        .Case<arith::ExtFOp>([&](auto) { in.kind = Program::Copy; })
        .Case<math::ExpOp>([&](auto) { in.kind = Program::Exp; })
        .Case<math::ExpM1Op>([&](auto) { in.kind = Program::Expm1; })
        .Case<math::LogOp>([&](auto) { in.kind = Program::Log; })
        .Case<math::Log1pOp>([&](auto) { in.kind = Program::Log1p; })
        .Case<math::TanhOp>([&](auto) { in.kind = Program::Tanh; })
        .Case<math::ErfOp>([&](auto) { in.kind = Program::Erf; })
        .Case<math::SqrtOp>([&](auto) { in.kind = Program::Sqrt; })
        .Case<math::PowFOp>([&](auto) { in.kind = Program::Pow; })
        .Default([&](Operation *) { ok = false; });
    if (!ok)
      return o.emitError(
                 "reference interpreter: unsupported op in a fused body: '")
             << o.getName() << "'";
    if (o.getNumOperands() > 0)
      in.a = arg(0);
    if (o.getNumOperands() > 1)
      in.b = arg(1);
    if (o.getNumOperands() > 2)
      in.c = arg(2);
    slot[o.getResult(0)] = in.out;
    p.insts.push_back(in);
  }
  for (Value v : cast<cnn::YieldOp>(body.getTerminator()).getValues())
    p.yields.push_back(slot.lookup(v));
  return p;
}

bool compare(arith::CmpFPredicate p, float x, float y) {
  using P = arith::CmpFPredicate;
  switch (p) {
  case P::OGT:
    return x > y;
  case P::OGE:
    return x >= y;
  case P::OLT:
    return x < y;
  case P::OLE:
    return x <= y;
  case P::OEQ:
    return x == y;
  case P::ONE:
    return x != y && !std::isnan(x) && !std::isnan(y);
  case P::UNE:
    return x != y;
  case P::UGT:
    return !(x <= y);
  case P::ULT:
    return !(x >= y);
  default:
    return false;
  }
}

LogicalResult execElementwise(cnn::FusedElementwiseOp op,
                              function_ref<const Tensor &(Value)> get,
                              function_ref<Tensor &(Value)> def) {
  auto prog = compile(op);
  if (failed(prog))
    return failure();
  auto shape = cast<RankedTensorType>(op.getResult(0).getType()).getShape();
  ChannelOf ch(shape, op.getLayout());
  std::vector<float *> outs;
  std::vector<bool> half;
  for (Value r : op.getResults()) {
    Tensor &t = def(r);
    outs.push_back(t.data.data());
    half.push_back(t.kind == ElemKind::F16);
  }
  std::vector<const float *> ins;
  for (Value v : op.getInputs())
    ins.push_back(get(v).data.data());
  auto bc = op.getBroadcast();
  int64_t n =
      cast<RankedTensorType>(op.getResult(0).getType()).getNumElements();
  // Numpy-broadcast inputs (kind 3): the element strides of each input in
  // the results' index space, 0 along its size-1 dimensions.
  std::vector<std::vector<int64_t>> bstride(ins.size());
  for (size_t k = 0; k < ins.size(); ++k) {
    if (bc[k] != 3)
      continue;
    auto in = cast<RankedTensorType>(op.getInputs()[k].getType()).getShape();
    bstride[k].assign(shape.size(), 0);
    int64_t st = 1;
    for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
      bstride[k][d] = in[d] == 1 ? 0 : st;
      st *= in[d];
    }
  }
  auto broadcastIndex = [&](size_t k, int64_t i) {
    int64_t idx = 0;
    for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
      idx += (i % shape[d]) * bstride[k][d];
      i /= shape[d];
    }
    return idx;
  };
  std::vector<float> s(prog->slots);
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < ins.size(); ++k)
      s[k] = ins[k][bc[k] == 0   ? i
                    : bc[k] == 1 ? ch(i)
                    : bc[k] == 3 ? broadcastIndex(k, i)
                                 : 0];
    for (const Program::Inst &in : prog->insts) {
      float a = s[in.a], b = s[in.b];
      float &o = s[in.out];
      switch (in.kind) {
      case Program::Const:
        o = in.value;
        break;
      case Program::Add:
        o = a + b;
        break;
      case Program::Sub:
        o = a - b;
        break;
      case Program::Mul:
        o = a * b;
        break;
      case Program::Div:
        o = a / b;
        break;
      case Program::Max:
        o = std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
        break;
      case Program::Min:
        o = std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
        break;
      case Program::Cmp:
        o = compare(in.pred, a, b) ? 1.0f : 0.0f;
        break;
      case Program::Select:
        o = a != 0 ? b : s[in.c];
        break;
      case Program::And:
        o = (a != 0 && b != 0) ? 1.0f : 0.0f;
        break;
      case Program::Or:
        o = (a != 0 || b != 0) ? 1.0f : 0.0f;
        break;
      case Program::Neg:
        o = -a;
        break;
      case Program::Trunc:
        o = roundToHalf(a);
        break;
      case Program::Copy:
        o = a;
        break;
      case Program::Exp:
        o = std::exp(a);
        break;
      case Program::Expm1:
        o = std::expm1(a);
        break;
      case Program::Log:
        o = std::log(a);
        break;
      case Program::Log1p:
        o = std::log1p(a);
        break;
      case Program::Tanh:
        o = std::tanh(a);
        break;
      case Program::Erf:
        o = std::erf(a);
        break;
      case Program::Sqrt:
        o = std::sqrt(a);
        break;
      case Program::Pow:
        o = std::pow(a, b);
        break;
      }
    }
    for (size_t r = 0; r < outs.size(); ++r) {
      float v = s[prog->yields[r]];
      outs[r][i] = half[r] ? roundToHalf(v) : v;
    }
  }
  return success();
}
} // namespace

bool cnnc::reference::isFusedOp(Operation *op) {
  return isa<cnn::FusedConv2DOp, cnn::FusedElementwiseOp, cnn::BatchNormStatsOp,
             cnn::FusedConv2DStatsOp, cnn::BatchNormFinalizeOp,
             cnn::BatchNormSumsOp, cnn::BatchNormGradSumsOp,
             cnn::FusedBatchNormAffineReluGradSumsOp,
             cnn::FusedConv2DBwdDataOp, cnn::FusedConv2DBwdFilterOp,
             cnn::FusedBatchNormReluGradOp, cnn::FusedBatchNormAffineReluGradOp,
             cnn::FusedMaxPool2DOp, cnn::MaxPool2DIndexGradOp,
             cnn::FusedMaxPool2DBatchNormReluGradOp,
             cnn::FusedDualBatchNormGradOp>(op);
}

LogicalResult
cnnc::reference::executeFused(Operation *op,
                              function_ref<const Tensor &(Value)> get,
                              function_ref<Tensor &(Value)> def) {
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](cnn::FusedConv2DOp o) { return execConv(o, get, def); })
      .Case([&](cnn::BatchNormStatsOp o) { return execStats(o, get, def); })
      .Case(
          [&](cnn::FusedConv2DStatsOp o) { return execConvStats(o, get, def); })
      .Case(
          [&](cnn::BatchNormFinalizeOp o) { return execFinalize(o, get, def); })
      .Case([&](cnn::BatchNormSumsOp o) { return execSums(o, get, def); })
      .Case([&](cnn::BatchNormGradSumsOp o) {
        return execGradSums(o.getGradOutput(), o.getInput(), o.getSavedMean(),
                            o.getSavedInvstd(), {}, {}, o.getLayout(),
                            o.getSumDy(), o.getSumDyXhat(), get, def);
      })
      .Case([&](cnn::FusedBatchNormAffineReluGradSumsOp o) {
        return execGradSums(o.getGradOutput(), o.getInput(), o.getSavedMean(),
                            o.getSavedInvstd(), o.getAlpha(), o.getBeta(),
                            o.getLayout(), o.getSumDy(), o.getSumDyXhat(), get,
                            def);
      })
      .Case([&](cnn::FusedConv2DBwdDataOp o) {
        return execDgradAddRelu(o, get, def);
      })
      .Case([&](cnn::FusedConv2DBwdFilterOp o) {
        return execWgradPrologue(o, get, def);
      })
      .Case([&](cnn::FusedBatchNormReluGradOp o) {
        return execBnReluGrad(o, get(o.getGradOutput()), o.getReluOutput(),
                              o.getInput(), o.getScale(), o.getSavedMean(),
                              o.getSavedInvstd(), {}, {}, o.getLayout(),
                              o.getGradInput(), o.getGradScale(),
                              o.getGradBias(), get, def);
      })
      .Case([&](cnn::FusedBatchNormAffineReluGradOp o) {
        return execBnReluGrad(o, get(o.getGradOutput()), {}, o.getInput(),
                              o.getScale(), o.getSavedMean(),
                              o.getSavedInvstd(), o.getAlpha(), o.getBeta(),
                              o.getLayout(), o.getGradInput(), o.getGradScale(),
                              o.getGradBias(), get, def);
      })
      .Case([&](cnn::FusedMaxPool2DBatchNormReluGradOp o) {
        // The two ops' evals in sequence, the pooling gradient rounded to
        // the stored type as the unfused op's result was.
        const Tensor &x = get(o.getInput());
        Tensor g(x.kind, x.shape);
        poolIndexGrad(o, get(o.getGradOutput()), get(o.getWindowIndex()), g);
        if (g.kind == ElemKind::F16)
          for (float &v : g.data)
            v = roundToHalf(v);
        return execBnReluGrad(
            o, g, {}, o.getInput(), o.getScale(), o.getSavedMean(),
            o.getSavedInvstd(), o.getAlpha(), o.getBeta(), o.getLayout(),
            o.getGradInput(), o.getGradScale(), o.getGradBias(), get, def);
      })
      .Case([&](cnn::FusedDualBatchNormGradOp o) {
        // The two batch_norm_grad evals (same sums in the same order).
        const Tensor &dy = get(o.getGradOutput());
        if (failed(execBnReluGrad(
                o, dy, {}, o.getInputA(), o.getScaleA(), o.getSavedMeanA(),
                o.getSavedInvstdA(), {}, {}, o.getLayout(), o.getGradInputA(),
                o.getGradScaleA(), o.getGradBiasA(), get, def)))
          return failure();
        return execBnReluGrad(o, dy, {}, o.getInputB(), o.getScaleB(),
                              o.getSavedMeanB(), o.getSavedInvstdB(), {}, {},
                              o.getLayout(), o.getGradInputB(),
                              o.getGradScaleB(), o.getGradBiasB(), get, def);
      })
      .Case([&](cnn::FusedMaxPool2DOp o) {
        return execMaxPoolIndex(o, get, def);
      })
      .Case([&](cnn::MaxPool2DIndexGradOp o) {
        return execMaxPoolIndexGrad(o, get, def);
      })
      .Case([&](cnn::FusedElementwiseOp o) {
        return execElementwise(o, get, def);
      })
      .Default([](Operation *o) {
        return o->emitError("reference interpreter: '")
               << o->getName() << "' is not a fused op";
      });
}
