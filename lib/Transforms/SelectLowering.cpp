//===- SelectLowering.cpp - cnn-select-lowering: how each op runs ---------===//
//
// The CUDA target's choices of how an op runs, made here in IR (so that lit
// tests see them and the emitter only prints what they say):
//
//   cnn.lowering = "gemm"            conv2d, conv2d_bwd_data and
//                                    conv2d_bwd_filter that are NHWC 1x1,
//                                    stride 1, no padding, one group: a
//                                    cuBLASLt matrix product over the N*H*W
//                                    pixels (ResNet-50's bottleneck 1x1
//                                    layers took up to 0.6 ms each as cuDNN
//                                    legacy convolutions)
//   cnn.lowering = "vec8"            NHWC max pooling (forward and gradient),
//                                    the per-channel sums of BatchNorm
//                                    (statistics, gradients) and bias_grad,
//                                    and fused_dual_batch_norm_grad, with
//                                    C % 8 == 0: eight channels per thread,
//                                    16-byte accesses (the dual BN gradient
//                                    otherwise runs as two batch_norm_grad);
//                                    upsample + concat's fused_resize_concat
//                                    and channel-range resize_grad when the
//                                    offset is too
//   cnn.lowering = "cudnn_bias_act"  fused_conv2d whose epilogue is exactly
//                                    cudnnConvolutionBiasActivationForward's
//                                    (a bias of the data type, relu or none):
//                                    the runtime times the two forms
//   cnn.lowering = "channel_sum"     reduce_sum / reduce_mean over every
//                                    dimension but the innermost (NHWC
//                                    per-channel sums): the two-pass,
//                                    coalesced kernels of bias_grad; the
//                                    generic reduction read one channel per
//                                    block at a stride of C (--sync-bn's
//                                    ResNet-50 step: 8x slower);
//                                    "channel_sum_vec8" with C % 8 == 0:
//                                    their eight-channel form
//   cnn.lowering = "spatial_sum"     other reduce_sum / reduce_mean over
//                                    one run of consecutive dimensions
//                                    (spatialSumShape: an NHWC tensor's
//                                    pixels, squeeze-excitation's gradient;
//                                    a 5-D split attention's H x W):
//                                    global_avg_pool's blocks per (outer,
//                                    inner chunk, split of the run); a
//                                    thread per result left 8,192 threads
//                                    adding 3,136 values each (resnest14d:
//                                    0.43 ms for 100 MB on the H100)
//   cnn.lowering = "tiled"           cnn.transpose keeping leading
//                                    dimensions and swapping the next two
//                                    groups (tiledTransposeShape: NCHW <->
//                                    NHWC, GroupNorm's channel views), only
//                                    with tiled-transpose (on by default:
//                                    2.3-3.7x the gather on an H100, the
//                                    same bits): batchedTranspose2D's
//                                    32 x 32 shared-memory tiles; the
//                                    generic gather reads at a stride of C
//                                    or H x W (resnetv2_50x1_bit: 0.18 ms
//                                    for 51 MB each way, ~570 GB/s on an
//                                    H200)
//   cnn.update_group = k             optimizer updates of one algorithm,
//                                    hyper-parameters, element types and
//                                    scalar operands whose results go
//                                    straight to the return: one multi-tensor
//                                    kernel per group, at its last member
//   cnn.cast_group = k               a contiguous run of one-input
//                                    fused_elementwise ops of one body and
//                                    types on parameters (the f16 copies of
//                                    the weights each step starts with): one
//                                    multi-tensor kernel per run, at its last
//                                    member (SimpleCNN: 8 launches of 60)
//   cnn.lowering = "vec8"            on every member of such a group, and on
//                                    all_finite, when each tensor's element
//                                    count is a multiple of 8: the
//                                    multi-tensor kernel moves eight
//                                    elements per thread (16/32-byte
//                                    accesses; one four-byte load in flight
//                                    per thread held ResNet-50's casts,
//                                    finiteness check and SGD at 0.45-1 TB/s)
//
// Every function gets `cnn.lowering_selected`; the CUDA emitter refuses a
// function without it.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/LoweringLimits.h"
#include "cnnc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>

namespace cnnc {
#define GEN_PASS_DEF_CNNSELECTLOWERING
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

/// An NHWC 1x1 convolution with stride 1, no padding and one group, of one
/// element type: `x` the activation, `w` the filter, `y` the output.
bool pointwiseGemm(Operation *op, RankedTensorType x, RankedTensorType w,
                   RankedTensorType y, ArrayRef<int64_t> strides,
                   ArrayRef<int64_t> padding, int64_t groups) {
  return isNHWC(op) && w.getRank() == 4 && w.getDimSize(1) == 1 &&
         w.getDimSize(2) == 1 &&
         llvm::all_of(strides, [](int64_t s) { return s == 1; }) &&
         llvm::all_of(padding, [](int64_t p) { return p == 0; }) &&
         groups == 1 && x.getElementType() == w.getElementType() &&
         x.getElementType() == y.getElementType();
}

bool vec8Pool(Operation *op, RankedTensorType y) {
  return isNHWC(op) && y.getRank() == 4 && y.getDimSize(3) % 8 == 0;
}

/// A sum or mean over every dimension but the innermost, contiguous one (the
/// per-channel statistics of an NHWC tensor: --sync-bn, a LayerNorm's
/// weight gradient): rows of C channels, read coalesced across channels.
bool channelSum(Operation *op) {
  auto in = cast<RankedTensorType>(op->getOperand(0).getType());
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
  if (in.getRank() < 2 || (int64_t)axes.size() != in.getRank() - 1)
    return false;
  for (int64_t d = 0; d + 1 < in.getRank(); ++d)
    if (!llvm::is_contained(axes, d))
      return false;
  return in.getDimSize(in.getRank() - 1) <= kNhwcScratchDoubles;
}

/// A tensor whose element count is a multiple of 8 (a multi-tensor kernel's
/// eight-element form: the arena aligns every buffer to 256 bytes).
bool eightElements(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements() % 8 == 0;
}

/// The lowering of `op`, or "" for the default one. `tiledTranspose`: the
/// pass option of that name.
StringRef loweringOf(Operation *op, bool tiledTranspose) {
  return llvm::TypeSwitch<Operation *, StringRef>(op)
      .Case([](Conv2DOp c) {
        return pointwiseGemm(c, c.getInput().getType(), c.getFilter().getType(),
                             c.getType(), c.getStrides(), c.getPadding(),
                             c.getGroups())
                   ? "gemm"
                   : "";
      })
      .Case([](FusedConv2DStatsOp c) {
        // The convolution of the split form (see the runtime's
        // registerConvStats).
        return pointwiseGemm(c, c.getInput().getType(), c.getFilter().getType(),
                             c.getResult().getType(), c.getStrides(),
                             c.getPadding(), c.getGroups())
                   ? "gemm"
                   : "";
      })
      .Case([](Conv2DBwdDataOp c) {
        return pointwiseGemm(c, c.getType(), c.getFilter().getType(),
                             c.getGradOutput().getType(), c.getStrides(),
                             c.getPadding(), c.getGroups())
                   ? "gemm"
                   : "";
      })
      .Case([](FusedConv2DBwdDataOp c) {
        // The convolution of the split form (see the runtime's
        // registerConvBwdDataAddRelu).
        return pointwiseGemm(c, c.getType(), c.getFilter().getType(),
                             c.getGradOutput().getType(), c.getStrides(),
                             c.getPadding(), c.getGroups())
                   ? "gemm"
                   : "";
      })
      .Case([](FusedConv2DBwdFilterOp c) {
        // The convolution of the split form (see the runtime's
        // registerConvBwdFilterPrologue).
        return pointwiseGemm(c, c.getInput().getType(), c.getType(),
                             c.getGradOutput().getType(), c.getStrides(),
                             c.getPadding(), c.getGroups())
                   ? "gemm"
                   : "";
      })
      .Case([](Conv2DBwdFilterOp c) {
        return pointwiseGemm(c, c.getInput().getType(), c.getType(),
                             c.getGradOutput().getType(), c.getStrides(),
                             c.getPadding(), c.getGroups())
                   ? "gemm"
                   : "";
      })
      .Case(
          [](MaxPool2DOp p) { return vec8Pool(p, p.getType()) ? "vec8" : ""; })
      .Case([](FusedMaxPool2DOp p) {
        return vec8Pool(p, p.getResult().getType()) ? "vec8" : "";
      })
      .Case([](MaxPool2DIndexGradOp p) {
        return vec8Pool(p, p.getType()) ? "vec8" : "";
      })
      .Case([](FusedMaxPool2DBatchNormReluGradOp p) {
        return vec8Pool(p, p.getGradInput().getType()) ? "vec8" : "";
      })
      .Case([](FusedDualBatchNormGradOp p) {
        return vec8Pool(p, p.getGradOutput().getType()) ? "vec8" : "";
      })
      // Upsample + concat's fused forms (cnn-fuse): eight channels a thread
      // where the resized channels, the others and their offset are
      // multiples of 8 (what FusedResizeConcatOp / ResizeGradOp verify).
      .Case([](FusedResizeConcatOp r) {
        return vec8Pool(r, r.getInput().getType()) &&
                       vec8Pool(r, r.getType())
                   ? "vec8"
                   : "";
      })
      .Case([](ResizeGradOp r) {
        return r.getChannelOffset() && *r.getChannelOffset() % 8 == 0 &&
                       vec8Pool(r, r.getType()) &&
                       vec8Pool(r, r.getGradOutput().getType())
                   ? "vec8"
                   : "";
      })
      // Their per-channel sums (nhwcPartial8 against nhwcPartial): operand
      // 0 is the tensor summed (x, or dy of the gradients).
      .Case<BiasGradOp, BatchNormTrainOp, BatchNormStatsOp, BatchNormGradOp,
            FusedBatchNormReluGradOp, FusedBatchNormAffineReluGradOp,
            BatchNormSumsOp, BatchNormGradSumsOp,
            FusedBatchNormAffineReluGradSumsOp>(
          [](Operation *o) {
            // Any rank: the sums run over rows of the innermost dimension.
            auto t = cast<RankedTensorType>(o->getOperand(0).getType());
            return isNHWC(o) && t.getRank() >= 1 &&
                           t.getDimSize(t.getRank() - 1) % 8 == 0
                       ? "vec8"
                       : "";
          })
      .Case([](FusedConv2DOp c) {
        Type et = c.getType().getElementType();
        StringRef act = c.getActivation();
        return c.getBias() && (act == "relu" || act == "none") &&
                       c.getBias().getType().getElementType() == et &&
                       c.getInput().getType().getElementType() == et
                   ? "cudnn_bias_act"
                   : "";
      })
      .Case<ReduceSumOp, ReduceMeanOp>([](Operation *o) -> StringRef {
        if (!channelSum(o))
          return spatialSumShape(o) ? "spatial_sum" : "";
        auto t = cast<RankedTensorType>(o->getOperand(0).getType());
        return t.getDimSize(t.getRank() - 1) % 8 == 0 ? "channel_sum_vec8"
                                                      : "channel_sum";
      })
      .Case([&](TransposeOp t) {
        return tiledTranspose && tiledTransposeShape(t) ? "tiled" : "";
      })
      .Case([](AllFiniteOp a) {
        return a.getInputs().size() > 1 &&
                       llvm::all_of(a.getInputs(), eightElements)
                   ? "vec8"
                   : "";
      })
      .Default([](Operation *) { return ""; });
}

struct SelectLoweringPass
    : public cnnc::impl::CNNSelectLoweringBase<SelectLoweringPass> {
  using CNNSelectLoweringBase::CNNSelectLoweringBase;
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    getOperation().walk([&](func::FuncOp f) {
      if (f.isExternal())
        return;
      for (Operation &op : f.getBody().front()) {
        StringRef l = loweringOf(&op, tiledTranspose);
        if (l.empty()) {
          op.removeAttr("cnn.lowering");
          continue;
        }
        op.setAttr("cnn.lowering", StringAttr::get(ctx, l));
        ++(l == "gemm"                    ? numGemm
           : l == "vec8"                  ? numVec8
           : l.starts_with("channel_sum") ? numChannelSum
           : l == "spatial_sum"           ? numSpatialSum
           : l == "tiled"                 ? numTiledTranspose
                                          : numCudnnFused);
      }
      groupUpdates(f);
      groupParameterCasts(f);
      f->setAttr("cnn.lowering_selected", UnitAttr::get(ctx));
    });
  }

  /// Contiguous runs of one-input fused_elementwise ops on parameters with
  /// equal bodies and types share one multi-tensor kernel. Contiguity makes
  /// running the whole run at its last member safe: the inputs are function
  /// arguments, and every output is live from its member to a use after the
  /// run, so the memory plan gave them disjoint buffers.
  void groupParameterCasts(func::FuncOp f) {
    MLIRContext *ctx = &getContext();
    int64_t next = 0;
    SmallVector<FusedElementwiseOp> run;
    auto flush = [&]() {
      if (run.size() > 1) {
        bool vec8 = llvm::all_of(run, [](FusedElementwiseOp m) {
          return eightElements(m.getResult(0));
        });
        for (FusedElementwiseOp m : run) {
          m->setAttr("cnn.cast_group",
                     IntegerAttr::get(IntegerType::get(ctx, 64), next));
          if (vec8) {
            m->setAttr("cnn.lowering", StringAttr::get(ctx, "vec8"));
            ++numVec8;
          }
        }
        ++next;
        numCastGrouped += run.size();
      }
      run.clear();
    };
    auto isParamCast = [&](Operation &op) -> FusedElementwiseOp {
      auto fe = dyn_cast<FusedElementwiseOp>(op);
      if (!fe || fe.getInputs().size() != 1 || fe->getNumResults() != 1 ||
          fe.getBroadcast()[0] != 0 || fe->hasAttr("cnn.in_place"))
        return {};
      auto arg = dyn_cast<BlockArgument>(fe.getInputs()[0]);
      if (!arg || arg.getOwner() != &f.getBody().front() ||
          !f.getArgAttr(arg.getArgNumber(), "cnn.param"))
        return {};
      return fe;
    };
    auto sameKernel = [](FusedElementwiseOp a, FusedElementwiseOp b) {
      auto et = [](Value v) {
        return cast<RankedTensorType>(v.getType()).getElementType();
      };
      return et(a.getInputs()[0]) == et(b.getInputs()[0]) &&
             et(a.getResult(0)) == et(b.getResult(0)) &&
             OperationEquivalence::isRegionEquivalentTo(
                 &a.getBody(), &b.getBody(),
                 OperationEquivalence::IgnoreLocations);
    };
    for (Operation &op : f.getBody().front()) {
      op.removeAttr("cnn.cast_group");
      FusedElementwiseOp fe = isParamCast(op);
      if (!fe || (!run.empty() && !sameKernel(run.front(), fe)))
        flush();
      if (fe)
        run.push_back(fe);
    }
    flush();
  }

  /// Optimizer updates that can share one multi-tensor kernel: same op and
  /// inherent attributes, same parameter element type, the
  /// same scalar operands (lr, step, grad scale, finite flag), and results
  /// read only by the return (so the kernel can run at the group's last
  /// member).
  void groupUpdates(func::FuncOp f) {
    MLIRContext *ctx = &getContext();
    DenseMap<Value, unsigned> scalarIds;
    llvm::StringMap<int64_t> groups;
    std::map<int64_t, SmallVector<Operation *>> members;
    for (Operation &op : f.getBody().front()) {
      op.removeAttr("cnn.update_group");
      if (!isa<SGDUpdateOp, AdamUpdateOp>(op))
        continue;
      if (!llvm::all_of(op.getUsers(),
                        [](Operation *u) { return isa<func::ReturnOp>(u); }))
        continue;
      std::string key = op.getName().getStringRef().str();
      llvm::raw_string_ostream os(key);
      op.getPropertiesAsAttribute().print(os);
      auto type = [](Value v) { return cast<RankedTensorType>(v.getType()); };
      // The gradients' element types may differ within a group (f16 from
      // convolutions and matmuls, f32 from BatchNorm): the kernel loads each
      // tensor by its own type.
      os << type(op.getOperand(0)).getElementType();
      for (Value v : op.getOperands())
        if (type(v).getRank() == 0)
          os << " s"
             << scalarIds.try_emplace(v, scalarIds.size()).first->second;
      os.flush();
      auto [it, fresh] = groups.try_emplace(key, groups.size());
      (void)fresh;
      op.setAttr("cnn.update_group",
                 IntegerAttr::get(IntegerType::get(ctx, 64), it->second));
      members[it->second].push_back(&op);
      ++numGrouped;
    }
    // The eight-element form when every full-size operand of every member
    // qualifies (their shapes are the parameter's).
    for (auto &[id, group] : members) {
      (void)id;
      if (group.size() < 2 || !llvm::all_of(group, [](Operation *op) {
            return llvm::all_of(op->getOperands(), [](Value v) {
              return cast<RankedTensorType>(v.getType()).getRank() == 0 ||
                     eightElements(v);
            });
          }))
        continue;
      for (Operation *op : group) {
        op->setAttr("cnn.lowering", StringAttr::get(ctx, "vec8"));
        ++numVec8;
      }
    }
  }
};

} // namespace
