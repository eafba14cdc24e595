//===- Precision.cpp - cnn-precision: f16 compute, dynamic loss scaling ---===//
//
// Mixed precision as torch.autocast + torch.amp.GradScaler do it, inside the
// train step:
//  - the image input is cast to f16 right after the argument; every
//    activation and activation gradient is f16 (conv/matmul run on Tensor
//    Cores with f32 accumulation in the CUDA runtime);
//  - parameters stay f32 arguments (master weights); each use that needs an
//    f16 operand (conv filter, matmul weight, bias) reads one f16 copy
//    (cnn.cast, shared by the forward and backward uses); BN keeps f32
//    scale/bias/statistics, the loss is f32;
//  - the loss gradient seed (the constant 1.0 of softmax_cross_entropy_grad)
//    becomes the loss scale S, a persistent state argument; parameter
//    gradients are checked with cnn.all_finite, cast back to f32 and divided
//    by S inside the optimizer update, which is skipped when any gradient is
//    not finite; cnn.loss_scale_update computes the next S and growth
//    tracker (both returned as state). With optimizer none the returned
//    gradients are unscaled (cnn.unscale, f32).
//  - normalization statistics stay f32 (torch.autocast runs group_norm,
//    layer_norm and norm in f32): reductions return f32; elementwise ops on
//    those statistics (and constants) stay f32; an elementwise op whose
//    every user is a reduction (the square of x - mean) computes and stores
//    f32. Only the big normalized output goes back to f16.
//  - parameter arithmetic stays f32 (parameterArithmetic): autocast casts
//    to f16 only at its f16 ops' inputs, so what a model computes from its
//    f32 parameters (weight standardization, gain * w) and its gradient run
//    in f32; bias_grad of an affine shift that is no conv/matmul bias
//    returns f32 like the reductions (reducesToF32).
//  - convolutions whose input channel count is not a multiple of 8 get their
//    input and filter zero-padded along C to the next multiple of 8 (4 for
//    an RGB 7x7 stride-2 stem); the filter gradient is sliced back.
// @forward (evaluation) runs in f16 the same way and casts the logits back.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/SetVector.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNPRECISION
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

constexpr const char *kLossScaleName = "loss_scale";
constexpr const char *kTrackerName = "loss_scale.growth_tracker";
/// How many optimizer steps were applied (not skipped for inf/NaN): the step
/// number of torch.optim's update, which GradScaler.step() does not call on
/// a skipped step (Adam's bias correction, SGD's first momentum step).
constexpr const char *kAppliedStepsName = "optimizer.applied_steps";

bool isFloatTensor(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt && isa<FloatType>(rt.getElementType());
}
bool isF32Tensor(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt && rt.getElementType().isF32();
}
RankedTensorType withElement(Type t, Type elem) {
  return cast<RankedTensorType>(t).clone(elem);
}

struct PrecisionPass : public cnnc::impl::CNNPrecisionBase<PrecisionPass> {
  using CNNPrecisionBase::CNNPrecisionBase;
  void runOnOperation() override;

  LogicalResult convert(func::FuncOp f);
  LogicalResult addLossScaling(func::FuncOp f);
  LogicalResult padChannels(func::FuncOp f);

  /// The f16 version of `v`: itself if already f16, else one cnn.cast placed
  /// right after its definition (shared by all users).
  Value toF16(OpBuilder &b, Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getElementType().isF16())
      return v;
    auto it = f16Of.find(v);
    if (it != f16Of.end())
      return it->second;
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointAfterValue(v);
    Value c = CastOp::create(b, v.getLoc(), withElement(t, b.getF16Type()), v);
    created.insert(c.getDefiningOp());
    f16Of[v] = c;
    return c;
  }
  /// The f32 version of `v` (f16 or f32), as toF16.
  Value toF32(OpBuilder &b, Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getElementType().isF32())
      return v;
    auto it = f32Of.find(v);
    if (it != f32Of.end())
      return it->second;
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointAfterValue(v);
    Value c = CastOp::create(b, v.getLoc(), withElement(t, b.getF32Type()), v);
    created.insert(c.getDefiningOp());
    f32Of[v] = c;
    return c;
  }
  DenseMap<Value, Value> f16Of, f32Of;
  DenseSet<Operation *> created;
};

/// Operand positions that carry activations (must become f16); the other
/// float operands (BN scale/bias/statistics, scalars) keep their type.
SmallVector<unsigned> activationOperands(Operation *op) {
  if (isa<BatchNormOp, BatchNormTrainOp, SoftmaxCrossEntropyGradOp,
          SoftmaxCrossEntropyOp>(op))
    return {0};
  if (isa<BatchNormGradOp>(op))
    return {0, 1};
  if (isa<DropoutMaskOp>(op))
    return {};
  SmallVector<unsigned> all;
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (isFloatTensor(v.getType()) &&
        cast<RankedTensorType>(v.getType()).getRank() > 0)
      all.push_back(i);
  return all;
}

/// The ops torch.autocast runs in f16 (conv, linear/matmul and their
/// backward passes, Tensor Cores with f32 accumulation): they cast their
/// operands to f16 whatever computed them.
bool isF16ListOp(Operation *op) {
  return isa<Conv2DOp, Conv2DBwdDataOp, Conv2DBwdFilterOp, MatmulOp,
             FusedConv2DOp, FusedConv2DStatsOp, FusedConv2DBwdDataOp,
             FusedConv2DBwdFilterOp>(op);
}
bool isReduction(Operation *op) {
  return isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, BiasGradOp>(op);
}
/// Whether a reduction returns f32. bias_grad is the bias gradient of a
/// conv or matmul when that op's backward reads the same gradient: autocast
/// computes it in f16 with the op, and so does this pass. Any other
/// bias_grad sums the gradient of an op autocast runs in f32 (the affine
/// shift of GroupNorm / InstanceNorm / LayerNorm: bias_add of a normalized
/// value), whose f16 sum over the batch overflows at the loss scale.
bool reducesToF32(Operation *op) {
  if (auto bg = dyn_cast<BiasGradOp>(op))
    return llvm::none_of(bg.getGradOutput().getUsers(), isF16ListOp);
  return isReduction(op);
}
bool isElementwise(Operation *op) {
  return (isa<ElementwiseOpInterface>(op) && !isa<CastOp>(op)) ||
         isa<FusedElementwiseOp>(op);
}

/// The ops that keep f32 results (normalization statistics, as autocast
/// computes group_norm / layer_norm / norm in f32), decided on the f32 IR:
///  - reductions (reduce_sum / reduce_mean / reduce_max): their results are
///    per-group / per-channel statistics (reduced dims of size 1), whatever
///    the input's type;
///  - elementwise ops whose float operands are all such statistics or
///    constants (at least one statistic) and whose results are no larger
///    than those statistics: mean, var + eps, sqrt, 1 / std,
///    GRN's gx / mean(gx) and their gradients;
///  - elementwise ops all of whose users are reductions or such ops (the
///    square (x - mean)^2, x * x of ReduceL2, dy * y of a gradient sum):
///    computed and stored in f32, where f16 loses digits and overflows for
///    |x| > 256. cnn-fuse merges the widening cast into them, so this costs
///    no kernel (only the wider intermediate).
/// The big elementwise ops that consume statistics (x - mean, d / std)
/// produce f16 as before.
DenseSet<Operation *> keepF32Ops(Block &entry) {
  DenseSet<Operation *> keep;
  auto isConstant = [](Value v) {
    return v.getDefiningOp<ConstantOp>() ||
           cast<RankedTensorType>(v.getType()).getRank() == 0;
  };
  for (Operation &op : entry) {
    if (isReduction(&op)) {
      if (reducesToF32(&op))
        keep.insert(&op);
      continue;
    }
    if (!isElementwise(&op) || op.getNumResults() == 0)
      continue;
    bool anyStat = false, all = true;
    int64_t statSize = 0;
    for (Value v : op.getOperands()) {
      if (!isFloatTensor(v.getType()))
        continue;
      Operation *d = v.getDefiningOp();
      if (d && keep.contains(d)) {
        anyStat = true;
        statSize = std::max(
            statSize, cast<RankedTensorType>(v.getType()).getNumElements());
      } else if (!isConstant(v)) {
        all = false;
      }
    }
    // (Not a statistic broadcast back to the activation's shape.)
    if (anyStat && all &&
        llvm::all_of(op.getResultTypes(), [&](Type t) {
          return cast<RankedTensorType>(t).getNumElements() <= statSize;
        }))
      keep.insert(&op);
  }
  for (Operation &op : llvm::reverse(entry)) {
    if (!isElementwise(&op) || keep.contains(&op) || op.use_empty())
      continue;
    if (llvm::all_of(op.getUsers(),
                     [&](Operation *u) {
                       return reducesToF32(u) ||
                              (isElementwise(u) && keep.contains(u) &&
                               !isReduction(u));
                     }) &&
        llvm::all_of(op.getResultTypes(), isF32Tensor))
      keep.insert(&op);
  }
  return keep;
}

/// Ops that only move or reinterpret elements: their precision follows
/// what their operand is and what their users need.
bool isDataMovement(Operation *op) {
  return isa<ReshapeOp, FlattenOp, TransposeOp, SliceOp, PadOp, ConcatOp>(op);
}
/// Users that consume a parameter gradient: the optimizer updates, gradient
/// clipping's divisor, gradient accumulation, and cnn.grad results.
bool isGradientSink(OpOperand &use, func::FuncOp f) {
  Operation *u = use.getOwner();
  if (isa<func::ReturnOp>(u))
    return static_cast<bool>(
        f.getResultAttr(use.getOperandNumber(), kGradAttr));
  if (isa<SGDUpdateOp, AdamUpdateOp>(u))
    return use.getOperandNumber() == 1;
  return isa<ClipDivisorOp, AccumulateGradOp, AllFiniteOp, UnscaleOp>(u);
}

/// Parameter arithmetic: the ops that compute on parameters alone, and
/// their gradients, which keep f32 operands and results. torch.autocast
/// casts to f16 only at the inputs of its f16 ops (conv, matmul); whatever
/// a model computes from its f32 parameters before that cast (weight
/// standardization: NF-Nets' ScaledStdConv2d and BiT's StdConv2d
/// batch-normalize the weight; gain * w; w / ||w||) runs in f32, and so
/// does its backward, which reads the f16 weight gradient of the conv
/// through the cast's f32 backward. In f16 that arithmetic overflows at the
/// loss scale: the gradient of a standardized weight's gain sums
/// dW * w_hat over the whole filter, 4.7 * 65536 in BiT's stem, beyond
/// f16's 65504, and every step skips. Decided on the f32 IR:
///  - parameter values P: the cnn.param arguments, constants, and the
///    results of ops whose float operands are all in P;
///  - forward: an op whose results are in P computes in f32, except the f16
///    ops above; data movement (reshape, transpose, ...) only where its
///    result feeds such an f32 op (a filter's layout transpose and channel
///    pad stay on the f16 copy that cnn-param-format folds);
///  - backward: an op whose results flow only into parameter gradients
///    (optimizer updates, clipping, accumulation, cnn.grad results) and
///    that reads a value of P or of another f32 backward op (BN's gradient
///    over the weight reads the weight and the saved statistics) computes
///    in f32, its f16 gradient operand widened; data movement of such a
///    result too.
/// The gradient that leaves the f16 op (conv2d_bwd_filter's dW) is f16 as
/// in autocast; the weight that enters it is cast to f16 once.
DenseSet<Operation *> parameterArithmetic(func::FuncOp f,
                                          const DenseSet<Operation *> &stats) {
  Block &entry = f.getBody().front();
  DenseSet<Value> params;
  for (BlockArgument a : entry.getArguments())
    if (f.getArgAttr(a.getArgNumber(), kParamAttr))
      params.insert(a);
  auto floatOperands = [](Operation *op) {
    SmallVector<Value> vs;
    for (Value v : op->getOperands())
      if (isFloatTensor(v.getType()))
        vs.push_back(v);
    return vs;
  };
  DenseSet<Operation *> keep;
  // Forward: P, then its compute ops; data movement that feeds them, in
  // reverse order (a chain reshape -> transpose -> batch_norm_train).
  for (Operation &op : entry) {
    if (isa<func::ReturnOp>(op) || op.getNumResults() == 0)
      continue;
    SmallVector<Value> in = floatOperands(&op);
    bool fromParams =
        isa<ConstantOp>(op) ||
        (!in.empty() && op.getNumOperands() == in.size() &&
         llvm::all_of(in, [&](Value v) { return params.contains(v); }));
    if (!fromParams)
      continue;
    for (Value r : op.getResults())
      params.insert(r);
    if (!isa<ConstantOp, CastOp>(op) && !isDataMovement(&op) &&
        !isF16ListOp(&op) && llvm::all_of(op.getResultTypes(), isF32Tensor))
      keep.insert(&op);
  }
  for (Operation &op : llvm::reverse(entry))
    if (isDataMovement(&op) && params.contains(op.getResult(0)) &&
        llvm::any_of(op.getUsers(),
                     [&](Operation *u) { return keep.contains(u); }))
      keep.insert(&op);
  // Backward: values that flow only into parameter gradients, not through
  // an f16 op (reverse; every gradient ends in a parameter's, the
  // activation gradients through convolutions and matmuls).
  DenseSet<Value> gradOnly;
  for (Operation &op : llvm::reverse(entry))
    for (Value r : op.getResults())
      if (!r.use_empty() && llvm::all_of(r.getUses(), [&](OpOperand &use) {
            if (isGradientSink(use, f))
              return true;
            Operation *u = use.getOwner();
            return !isF16ListOp(u) && !u->use_empty() &&
                   llvm::all_of(u->getResults(), [&](Value ur) {
                     return ur.use_empty() || gradOnly.contains(ur);
                   });
          }))
        gradOnly.insert(r);
  // (An unused result, BN's gradient of a constant bias, flows nowhere.)
  for (Operation &op : entry) {
    if (keep.contains(&op) || stats.contains(&op) || op.use_empty() ||
        isa<ConstantOp, CastOp>(op) || isF16ListOp(&op) ||
        !llvm::all_of(
            op.getResults(),
            [&](Value r) { return r.use_empty() || gradOnly.contains(r); }) ||
        !llvm::all_of(op.getResultTypes(), isF32Tensor))
      continue;
    // (A constant, the loss seed or an epsilon, is no parameter value.)
    auto onPath = [&](Value v) {
      Operation *d = v.getDefiningOp();
      if (d && isa<ConstantOp>(d))
        return false;
      return params.contains(v) ||
             (d && (keep.contains(d) || stats.contains(d)));
    };
    SmallVector<Value> in = floatOperands(&op);
    bool reads = isDataMovement(&op) ? llvm::all_of(in, onPath)
                                     : llvm::any_of(in, onPath);
    if (!in.empty() && reads)
      keep.insert(&op);
  }
  return keep;
}

LogicalResult PrecisionPass::convert(func::FuncOp f) {
  OpBuilder b(f.getContext());
  Block &entry = f.getBody().front();
  f16Of.clear();
  f32Of.clear();
  SmallVector<Operation *> ops;
  for (Operation &op : entry)
    ops.push_back(&op);
  DenseSet<Operation *> keep;
  if (f32Statistics)
    keep = keepF32Ops(entry);
  DenseSet<Operation *> paramMath = parameterArithmetic(f, keep);
  auto isStat = [&](Value v) {
    Operation *d = v.getDefiningOp();
    return d && (keep.contains(d) || paramMath.contains(d));
  };
  for (Operation *op : ops) {
    if (created.contains(op))
      continue;
    // (The accumulation of gradients keeps its f32 sums and reads the f16
    // gradient as it is, as the updates do.)
    if (isa<func::ReturnOp, ConstantOp, CastOp, SGDUpdateOp, AdamUpdateOp,
            AllFiniteOp, LossScaleUpdateOp, UnscaleOp, ClipDivisorOp,
            AccumulateGradOp, AccumulationStepOp>(op))
      continue;
    if (op->getDialect() != f->getContext()->getLoadedDialect<CNNDialect>())
      return op->emitError("cnn-precision: unsupported op '")
             << op->getName() << "' in @" << f.getName();
    // A reshape from or to a 0-d tensor (a learned scalar such as NFNet's
    // skipinit gain, broadcast by a reshape, and its gradient reshaped
    // back) keeps its operand's element type: 0-d values stay f32 in this
    // pass, and the reshaped value's users cast it as they cast any other
    // operand.
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      auto in = cast<RankedTensorType>(reshape->getOperand(0).getType());
      auto out = cast<RankedTensorType>(reshape->getResult(0).getType());
      if (in.getRank() == 0 || out.getRank() == 0) {
        reshape->getResult(0).setType(out.clone(in.getElementType()));
        continue;
      }
    }
    if (paramMath.contains(op)) {
      // Parameter arithmetic: f32 operands (an f16 gradient widened), f32
      // results as in the f32 IR.
      for (auto [i, v] : llvm::enumerate(op->getOperands()))
        if (isFloatTensor(v.getType()))
          op->setOperand(i, toF32(b, v));
      continue;
    }
    if (keep.contains(op)) {
      // f32 statistics: the results keep their f32 types. A reduction reads
      // its input as it is (f16 or f32), fused_elementwise mixed inputs;
      // the other elementwise ops read f32 operands.
      if (isReduction(op) || isa<FusedElementwiseOp>(op)) {
        // (An f32 activation that is no statistic, the image argument, is
        // read in f16 as by every other op.)
        for (unsigned i : activationOperands(op)) {
          Value v = op->getOperand(i);
          if (isF32Tensor(v.getType()) && !isStat(v) &&
              !v.getDefiningOp<ConstantOp>())
            op->setOperand(i, toF16(b, v));
        }
        continue;
      }
      for (auto [i, v] : llvm::enumerate(op->getOperands()))
        if (isFloatTensor(v.getType()))
          op->setOperand(i, toF32(b, v));
      continue;
    }
    for (unsigned i : activationOperands(op)) {
      Value v = op->getOperand(i);
      // A fused_elementwise reads f32 statistics as they are.
      if (isa<FusedElementwiseOp>(op) && isStat(v))
        continue;
      if (isF32Tensor(v.getType()))
        op->setOperand(i, toF16(b, v));
    }
    // BatchNorm's per-channel operands (scale, bias, running or saved
    // statistics) are f32: its kernels take one type for all of them, and
    // the statistics it writes are f32. Computed ones arrive here in f16
    // (timm's ScaledStdConv2d: the scale gain * gamma / sqrt(fan_in) and the
    // running statistics torch exports for the BatchNormalization that
    // standardizes its weight): read them through a cast.
    if (isa<BatchNormOp, BatchNormTrainOp, BatchNormGradOp>(op)) {
      SmallVector<unsigned> act = activationOperands(op);
      for (auto [i, v] : llvm::enumerate(op->getOperands())) {
        if (llvm::is_contained(act, i) || !isFloatTensor(v.getType()) ||
            isF32Tensor(v.getType()))
          continue;
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPoint(op);
        op->setOperand(i, CastOp::create(b, v.getLoc(),
                                         withElement(v.getType(),
                                                     b.getF32Type()),
                                         v));
      }
    }
    // New result types: inferred where the op infers them (BN statistics
    // and the loss stay f32), else f16 for every f32 result except scalars
    // (the sum of several losses stays f32).
    SmallVector<Type> types;
    if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
      if (failed(infer.inferReturnTypes(
              op->getContext(), op->getLoc(), op->getOperands(),
              op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
              op->getRegions(), types)))
        return failure();
    } else {
      for (Type t : op->getResultTypes())
        types.push_back(isF32Tensor(t) && cast<RankedTensorType>(t).getRank()
                            ? withElement(t, b.getF16Type())
                            : t);
    }
    for (auto [r, t] : llvm::zip(op->getResults(), types))
      r.setType(t);
  }
  return success();
}

/// The channel count a convolution's f16 input is padded to: cuDNN's
/// Tensor Core kernels want C % 8 == 0. A large strided stem (7x7 stride 2
/// on RGB) reads 4 instead: on the H100 at batch 128 its forward takes
/// 0.24 ms at C = 4 against 0.65 ms at C = 8 (bench/micro/stem_conv.py;
/// ResNet-50's step 0.5 ms faster, its f16 curve checked against PyTorch).
/// Small kernels keep 8: SimpleCNN's 3x3 first convolution at C = 4 failed
/// the Python entry's f16 training check in 3 of 4 runs on the H100 with
/// some cuDNN graph plans (not understood; docs/benchmarks.md, session 14).
static int64_t paddedChannels(int64_t c, int64_t kernelArea, int64_t stride) {
  if (c <= 4 && kernelArea >= 25 && stride >= 2)
    return 4;
  return (c + 7) / 8 * 8;
}

/// Zero-pads the input channels of convolutions to paddedChannels (groups 1).
LogicalResult PrecisionPass::padChannels(func::FuncOp f) {
  OpBuilder b(f.getContext());
  SmallVector<Conv2DOp> convs;
  f.walk([&](Conv2DOp c) { convs.push_back(c); });
  for (Conv2DOp conv : convs) {
    int64_t axis = conv.isNHWC() ? 3 : 1;
    Value x = conv.getInput(), w = conv.getFilter();
    auto xt = cast<RankedTensorType>(x.getType());
    auto wt = cast<RankedTensorType>(w.getType());
    int64_t c = xt.getDimSize(axis);
    // The filter's spatial dims: K x R x S x C (NHWC) or K x C x R x S.
    int64_t kernelArea = conv.isNHWC() ? wt.getDimSize(1) * wt.getDimSize(2)
                                       : wt.getDimSize(2) * wt.getDimSize(3);
    ArrayRef<int64_t> strides = conv.getStrides();
    int64_t cp = paddedChannels(c, kernelArea,
                                std::min(strides[0], strides[1]));
    if (conv.getGroups() != 1 || cp == c || !xt.getElementType().isF16())
      continue;
    // One cnn.pad (zeros at the end of the channel dimension): a single
    // kernel, where a zero constant + concat took three launches per step.
    auto pad = [&](Value v) -> Value {
      auto t = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> pads(2 * t.getRank(), 0);
      pads[t.getRank() + axis] = cp - c;
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointAfterValue(v);
      return PadOp::create(
          b, v.getLoc(), ValueRange{v},
          {b.getNamedAttr("pads", b.getDenseI64ArrayAttr(pads)),
           b.getNamedAttr("mode", b.getStringAttr("constant")),
           b.getNamedAttr("value", b.getF32FloatAttr(0.0f))});
    };
    auto sameAttrs = [&](Operation *o) {
      for (StringRef n :
           {"strides", "padding", "dilations", "groups", "layout"})
        if (o->getAttr(n) != conv->getAttr(n))
          return false;
      return true;
    };
    auto sliceBack = [&](Operation *o, RankedTensorType orig) {
      b.setInsertionPointAfter(o);
      SmallVector<int64_t> offs(orig.getRank(), 0);
      auto s = SliceOp::create(
          b, o->getLoc(), ValueRange{o->getResult(0)},
          {b.getNamedAttr("offsets", b.getDenseI64ArrayAttr(offs)),
           b.getNamedAttr("sizes", b.getDenseI64ArrayAttr(orig.getShape()))});
      o->getResult(0).replaceAllUsesExcept(s, s);
    };
    Value xp = pad(x), wp = pad(w);
    // Gradients of this convolution: bwd_filter(x, dy) and bwd_data(dy, w).
    SmallVector<Operation *> users(x.getUsers().begin(), x.getUsers().end());
    for (Operation *u : users)
      if (auto bf = dyn_cast<Conv2DBwdFilterOp>(u))
        if (bf.getInput() == x && bf.getType() == wt && sameAttrs(u)) {
          bf.getInputMutable().assign(xp);
          bf.getResult().setType(cast<RankedTensorType>(wp.getType()));
          sliceBack(u, wt);
        }
    users.assign(w.getUsers().begin(), w.getUsers().end());
    for (Operation *u : users)
      if (auto bd = dyn_cast<Conv2DBwdDataOp>(u))
        if (bd.getFilter() == w && bd.getType() == xt && sameAttrs(u)) {
          bd.getFilterMutable().assign(wp);
          bd.getResult().setType(cast<RankedTensorType>(xp.getType()));
          sliceBack(u, xt);
        }
    conv.getInputMutable().assign(xp);
    conv.getFilterMutable().assign(wp);
  }
  return success();
}

/// Whether `c` is the scalar constant 1 (cnn-autodiff's placeholder divisor
/// and flag).
static bool isScalarOne(ConstantOp c) {
  auto v = dyn_cast<DenseElementsAttr>(c.getValue());
  return v && v.isSplat() && v.getNumElements() == 1 &&
         v.getSplatValue<APFloat>().convertToDouble() == 1.0;
}

LogicalResult PrecisionPass::addLossScaling(func::FuncOp f) {
  MLIRContext *ctx = f.getContext();
  OpBuilder b(ctx);
  Block &entry = f.getBody().front();
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    if (auto s = f.getArgAttrOfType<StringAttr>(i, kStateAttr))
      if (s.getValue() == kLossScaleName)
        return f.emitError("cnn-precision: @")
               << f.getName()
               << " already has a loss scale (the pass ran twice?)";

  // The seeds of the backward pass (one per logits tensor: auxiliary
  // classifiers have their own).
  SmallVector<SoftmaxCrossEntropyGradOp> seedOps;
  f.walk([&](SoftmaxCrossEntropyGradOp o) { seedOps.push_back(o); });
  // A pipeline stage before the last (cnn-pipeline-stage) has no loss: the
  // gradients it receives were seeded with the last stage's scale, which
  // equals its own (every stage starts from init-scale and updates with the
  // same flag, combined across the stages below).
  const bool pipelineStage = f->hasAttr("cnn.pipeline_stages");
  if (seedOps.empty() && !pipelineStage)
    return f.emitError("cnn-precision: @")
           << f.getName()
           << " has no softmax_cross_entropy_grad to seed with the loss scale";
  llvm::SmallSetVector<Operation *, 2> ones; // seeds may share the constant
  for (SoftmaxCrossEntropyGradOp seedOp : seedOps) {
    auto one = seedOp.getGradLoss().getDefiningOp<ConstantOp>();
    if (!one || !isScalarOne(one))
      return seedOp.emitError("cnn-precision: the loss gradient seed must be "
                              "the constant 1.0 made by cnn-autodiff");
    ones.insert(one);
  }

  SmallVector<Operation *> updates;
  // Gradient accumulation (cnn-autodiff's accumulate): the micro-steps of
  // one optimizer step share the loss scale, the accumulated sums hold the
  // scaled gradients, and the skip decision, the applied-step count and the
  // scale's update happen on the micro-step that applies the update, as
  // with GradScaler in torch's loop (scaler.step/update once per k
  // backward passes).
  AccumulationStepOp accumulation;
  for (Operation &op : entry) {
    if (isa<SGDUpdateOp, AdamUpdateOp>(op))
      updates.push_back(&op);
    if (auto a = dyn_cast<AccumulationStepOp>(op))
      accumulation = a;
  }

  // New state arguments: S (initial value init-scale), the growth tracker
  // and, with optimizer updates, the count of applied steps (initially 0).
  unsigned sIdx = f.getNumArguments();
  auto initAttr = b.getF32FloatAttr(initScale);
  entry.addArgument(scalar, f.getLoc());
  entry.addArgument(scalar, f.getLoc());
  if (!updates.empty())
    entry.addArgument(scalar, f.getLoc());
  f.setFunctionType(
      b.getFunctionType(entry.getArgumentTypes(), f.getResultTypes()));
  // (set all at once: the attribute arrays are not resized by
  // setFunctionType)
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i < sIdx; ++i)
    argAttrs.push_back(f.getArgAttrDict(i));
  argAttrs.push_back(b.getDictionaryAttr(
      {b.getNamedAttr(kStateAttr, b.getStringAttr(kLossScaleName)),
       b.getNamedAttr("cnn.loss_scale", b.getUnitAttr()),
       b.getNamedAttr("cnn.init", initAttr)}));
  argAttrs.push_back(b.getDictionaryAttr(
      b.getNamedAttr(kStateAttr, b.getStringAttr(kTrackerName))));
  if (!updates.empty())
    argAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kStateAttr, b.getStringAttr(kAppliedStepsName))));
  for (DictionaryAttr &d : argAttrs)
    if (!d)
      d = b.getDictionaryAttr({});
  f.setAllArgAttrs(argAttrs);
  Value S = f.getArgument(sIdx), tracker = f.getArgument(sIdx + 1);
  for (SoftmaxCrossEntropyGradOp seedOp : seedOps)
    seedOp.getGradLossMutable().assign(S);
  for (Operation *one : ones)
    if (one->use_empty())
      one->erase();

  // Gradients: operands of the optimizer updates, or cnn.grad results.
  SmallVector<unsigned> gradResults;
  for (unsigned r = 0; r < f.getNumResults(); ++r)
    if (f.getResultAttr(r, kGradAttr))
      gradResults.push_back(r);
  SmallVector<Value> grads;
  for (Operation *u : updates)
    grads.push_back(u->getOperand(1));
  for (unsigned r : gradResults)
    grads.push_back(ret.getOperand(r));
  if (grads.empty())
    return f.emitError("cnn-precision: @")
           << f.getName()
           << " has neither optimizer updates nor gradient results";
  Operation *at = updates.empty() ? ret.getOperation() : updates.front();
  for (Value g : grads)
    if (Operation *d = g.getDefiningOp())
      if (!d->isBeforeInBlock(at))
        return d->emitError("cnn-precision: a gradient is computed after the "
                            "first optimizer update");
  // Constant gradients (zeros of unused parameters) need no check.
  SmallVector<Value> checked;
  for (Value g : grads)
    if (!g.getDefiningOp<ConstantOp>() && !llvm::is_contained(checked, g))
      checked.push_back(g);
  if (checked.empty())
    checked.push_back(grads.front());
  b.setInsertionPoint(at);
  Location loc = NameLoc::get(b.getStringAttr("loss_scale"), f.getLoc());
  Value finite = AllFiniteOp::create(b, loc, scalar, checked);
  // Pipeline stages: each checks only its own gradients; the minimum of
  // the flags over the stages (the stages' communicator) makes a step
  // skipped on one stage skipped on all, and their scales stay equal.
  if (pipelineStage)
    finite = AllReduceOp::create(
                 b, loc, TypeRange{scalar}, ValueRange{finite},
                 {b.getNamedAttr("reduction", b.getStringAttr("min")),
                  b.getNamedAttr("bucket", b.getI64IntegerAttr(0)),
                  b.getNamedAttr("bytes", b.getI64IntegerAttr(4)),
                  // Over the stages (of one data-parallel replica), not
                  // over the replicas a gradient all-reduce spans.
                  b.getNamedAttr("cnn.across_stages", b.getUnitAttr())})
                 .getResult(0);
  Value apply = accumulation ? accumulation.getApply() : Value();
  // With accumulation an update applies when its micro-step is the last of
  // the optimizer step and the accumulated sums are finite.
  Value applies =
      apply ? MulOp::create(b, loc, scalar, ValueRange{apply, finite})
                  .getResult()
            : finite;
  auto upd = LossScaleUpdateOp::create(
      b, loc, TypeRange{scalar, scalar}, ValueRange{S, tracker, finite},
      {b.getNamedAttr("growth_interval", b.getI64IntegerAttr(growthInterval)),
       b.getNamedAttr("growth_factor", b.getF32FloatAttr(growthFactor)),
       b.getNamedAttr("backoff_factor", b.getF32FloatAttr(backoffFactor))});
  Value newScale = upd.getNewScale(), newTracker = upd.getNewGrowthTracker();
  if (apply) {
    // The scale and its growth tracker change on the applying micro-step
    // only; the others keep them.
    auto keep = makeFusedElementwise(
        b, loc, TypeRange{scalar, scalar},
        ValueRange{apply, newScale, S, newTracker, tracker}, {0, 0, 0, 0, 0},
        Layout::NCHW, [](ScalarBuilder &sb, ValueRange a) {
          Value last = sb.gt(a[0], sb.c(0.5));
          return SmallVector<Value>{sb.select(last, a[1], a[2]),
                                    sb.select(last, a[3], a[4])};
        });
    newScale = keep.getResult(0);
    newTracker = keep.getResult(1);
  }

  // Optimizer updates: the f16 gradients as they are (the update widens them
  // on load, exactly as a cast would, and a cast kernel per parameter and
  // step is saved), divided by S, skipped unless finite, numbered by the
  // applied steps (count + finite) instead of the global step, as
  // torch.optim numbers them under GradScaler.
  Value applied;
  if (!updates.empty()) {
    Value count = f.getArgument(sIdx + 2);
    applied = AddOp::create(b, loc, scalar, ValueRange{count, applies});
  }
  for (Operation *u : updates) {
    // Operand 4 (SGD) / 5 (Adam) is the step number.
    u->setOperand(isa<AdamUpdateOp>(u) ? 5 : 4, applied);
    Value clip = isa<SGDUpdateOp>(u) ? cast<SGDUpdateOp>(u).getGradScale()
                                     : cast<AdamUpdateOp>(u).getGradScale();
    if (!clip) {
      u->insertOperands(u->getNumOperands(), ValueRange{S, finite});
      continue;
    }
    // Gradient clipping or accumulation (cnn-autodiff): the clip divisor
    // measures the gradients scaled by S (without clipping the divisor is
    // the constant 1, which S replaces), and the update is skipped unless
    // it applies: its flag (the constant 1, or accumulation's apply) is
    // replaced.
    unsigned divisorIdx = u->getNumOperands() - 2;
    if (auto divisor = clip.getDefiningOp<ClipDivisorOp>()) {
      divisor.getScaleMutable().assign(S);
    } else if (auto one = clip.getDefiningOp<ConstantOp>();
               one && isScalarOne(one)) {
      u->setOperand(divisorIdx, S);
    } else {
      return u->emitError("cnn-precision: an optimizer update that already "
                          "divides its gradient by something other than "
                          "cnn.clip_divisor or 1");
    }
    u->setOperand(u->getNumOperands() - 1, applies);
  }
  // Returned gradients: unscaled to f32.
  b.setInsertionPoint(ret);
  for (unsigned r : gradResults) {
    Value g = ret.getOperand(r);
    auto t = withElement(g.getType(), b.getF32Type());
    ret.setOperand(r, UnscaleOp::create(b, g.getLoc(), t, ValueRange{g, S}));
  }
  // Return the new scale and tracker.
  SmallVector<Value> results(ret.getOperands());
  results.append({newScale, newTracker});
  if (applied)
    results.push_back(applied);
  SmallVector<DictionaryAttr> resAttrs;
  for (unsigned r = 0; r < f.getNumResults(); ++r)
    resAttrs.push_back(f.getResultAttrDict(r));
  resAttrs.push_back(b.getDictionaryAttr(
      b.getNamedAttr(kStateAttr, b.getStringAttr(kLossScaleName))));
  resAttrs.push_back(b.getDictionaryAttr(
      b.getNamedAttr(kStateAttr, b.getStringAttr(kTrackerName))));
  if (applied)
    resAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kStateAttr, b.getStringAttr(kAppliedStepsName))));
  ret->setOperands(results);
  f.setFunctionType(b.getFunctionType(entry.getArgumentTypes(),
                                      ValueRange(results).getTypes()));
  for (DictionaryAttr &d : resAttrs)
    if (!d)
      d = b.getDictionaryAttr({});
  f.setAllResultAttrs(resAttrs);
  return success();
}

/// Results must keep their f32 types (logits, new params, statistics):
/// cast back what became f16.
void castResults(func::FuncOp f, DenseSet<Operation *> &created) {
  auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
  OpBuilder b(ret);
  for (auto [r, t] : llvm::enumerate(f.getResultTypes()))
    if (ret.getOperand(r).getType() != t) {
      auto c = CastOp::create(b, ret.getLoc(), t, ret.getOperand(r));
      created.insert(c);
      ret.setOperand(r, c);
    }
}

void PrecisionPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (initScale <= 0 || growthInterval < 1 || growthFactor <= 1 ||
      backoffFactor <= 0 || backoffFactor >= 1) {
    module.emitError(
        "cnn-precision: need init-scale > 0, growth-interval >= 1, "
        "growth-factor > 1 and 0 < backoff-factor < 1");
    return signalPassFailure();
  }
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  if (!forward && !step)
    return; // nothing to do
  for (func::FuncOp f : {forward, step}) {
    if (!f || f.isExternal())
      continue;
    if (f.getBlocks().size() != 1) {
      f.emitError("cnn-precision: functions must have one block");
      return signalPassFailure();
    }
    if (failed(convert(f)))
      return signalPassFailure();
    // After conversion: the seed constant (still f32) becomes S, gradients
    // (now f16) are checked, cast to f32 and unscaled in the updates.
    if (f == step && failed(addLossScaling(f)))
      return signalPassFailure();
    if (padChannelsOpt && failed(padChannels(f)))
      return signalPassFailure();
    castResults(f, created);
  }
}

} // namespace
