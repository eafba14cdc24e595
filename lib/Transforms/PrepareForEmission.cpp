//===- PrepareForEmission.cpp - cnn-prepare-for-emission ------------------===//
//
// The CUDA target's launch decisions, made in IR as CIRCT's
// PrepareForEmission makes ExportVerilog's: the GPU the step is printed for
// (#cnn.target on the module, from one table of architectures) and, on every
// op whose lowering launches a generated kernel, how it launches
// (#cnn.launch: the grid's ceiling from the target's SM count, the block
// sizes, the elementwise kernels' vector width, the reduction strategy, the
// partial-sum block budgets, the multi-tensor kernels' chunks). The printer
// reads them and decides nothing; the dialect verifies them. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <limits>
#include <map>

namespace cnnc {
#define GEN_PASS_DEF_CNNPREPAREFOREMISSION
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {

/// One architecture cnnc targets: a representative GPU's SM count and the
/// CUDA limits of the compute capability (threads and opt-in shared memory
/// per block). With `--arch native` the driver picks the architecture of
/// the machine's GPU, whose SM count may differ from the table's.
struct KnownTarget {
  const char *arch;
  int64_t sms, maxThreads, smemPerBlock;
};
constexpr KnownTarget kKnownTargets[] = {
    {"sm_80", 108, 1024, 166912},  // A100
    {"sm_86", 84, 1024, 101376},   // A40
    {"sm_89", 142, 1024, 101376},  // L40S
    {"sm_90", 132, 1024, 232448},  // H100 SXM
    {"sm_90a", 132, 1024, 232448}, // H100 SXM, arch-specific features
};

/// Blocks of a grid-stride kernel per SM: 32 x 256 threads, enough resident
/// work to hide latency without one block per element.
constexpr int64_t kBlocksPerSM = 32;
/// A multi-tensor group's chunks are made small enough that about this many
/// blocks per SM get one.
constexpr int64_t kChunkBlocksPerSM = 8;
/// The NHWC partial-sum kernels' block budget as measured on the H100 (2048
/// blocks for its 132 SMs), in proportion to the target's SMs.
constexpr int64_t kPartialBlocksH100 = 2048, kSMsH100 = 132;
/// The threads of a block per channel of the NCHW per-channel sums: 512, to
/// keep enough loads in flight over N x H x W elements with one block per
/// channel (at most the target's threads per block).
constexpr int64_t kChannelBlock = 512;
/// Elementwise kernels move eight elements a thread through 16-byte
/// accesses where their operands allow it: f16 activations would otherwise
/// move 2 bytes a load in these memory-bound kernels.
constexpr int64_t kVectorWidth = 8;

int64_t numElements(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

bool isVec8(Operation *op) {
  auto l = op->getAttrOfType<StringAttr>("cnn.lowering");
  return l && l.getValue() == "vec8";
}

/// A reduction's strategy: a block per result when each result reduces at
/// least 32 times as many elements as there are results (a LayerNorm's or
/// a layer scale's weight gradient, [N,H,W,C] -> [C]) and the results fit
/// gridDim.x; otherwise a thread per result (squeeze-excitation gradients,
/// per-row sums). One thread per result left 96 threads summing 200K values
/// each (ConvNeXt-Tiny: 10 ms per reduction on an H100).
StringRef reductionStrategy(Operation *op) {
  if (auto s = dyn_cast<SoftmaxOp>(op)) {
    // A contiguous axis (only 1s after it) is a row per block; any other a
    // thread per (outer, inner) pair.
    auto t = s.getType();
    int64_t inner = 1;
    for (int64_t d = s.getAxis() + 1; d < t.getRank(); ++d)
      inner *= t.getDimSize(d);
    return inner == 1 ? "block_per_result" : "thread_per_result";
  }
  auto in = cast<RankedTensorType>(op->getOperand(0).getType());
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
  int64_t count = 1;
  for (int64_t d : axes)
    count *= in.getDimSize(d);
  int64_t n = numElements(op->getResult(0));
  return count >= 32 * n && n <= std::numeric_limits<int32_t>::max()
             ? "block_per_result"
             : "thread_per_result";
}

struct PrepareForEmission
    : public cnnc::impl::CNNPrepareForEmissionBase<PrepareForEmission> {
  using CNNPrepareForEmissionBase::CNNPrepareForEmissionBase;

  /// The chunk of a multi-tensor kernel over tensors of `units` units in
  /// all, at most `maxChunk`: smaller for a small group so that about
  /// kChunkBlocksPerSM blocks per SM still get one, a multiple of 256.
  int64_t chunkUnits(int64_t units, int64_t maxChunk) const {
    return std::clamp<int64_t>(units / (sms * kChunkBlocksPerSM) / 256 * 256,
                               256, std::max<int64_t>(maxChunk, 256));
  }

  /// The target of the `arch` option, the module's, or sm_90's.
  FailureOr<TargetAttr> chooseTarget(ModuleOp module) {
    StringRef name = arch;
    if (name.empty()) {
      if (auto t = module->getAttrOfType<TargetAttr>(kTargetAttr))
        return t;
      name = "sm_90";
    }
    for (const KnownTarget &k : kKnownTargets)
      if (name == k.arch)
        return TargetAttr::get(module.getContext(), k.arch, k.sms, k.maxThreads,
                               k.smemPerBlock);
    std::vector<std::string> known;
    for (const KnownTarget &k : kKnownTargets)
      known.push_back(k.arch);
    return module.emitError("cnn-prepare-for-emission: unknown GPU "
                            "architecture '")
           << name << "' (known: " << llvm::join(known, ", ") << ")";
  }

  /// The chunks of the multi-tensor kernels `op` launches, or none.
  SmallVector<int64_t>
  multiTensorChunks(Operation *op,
                    const DenseMap<Operation *, int64_t> &groupUnits) const {
    SmallVector<int64_t> chunks;
    if (auto a = dyn_cast<AllFiniteOp>(op)) {
      // One kernel per element type of two or more inputs, in the
      // printer's order (f16 before f32).
      std::map<int, std::pair<int64_t, int64_t>> byType; // count, units
      int64_t vec = isVec8(op) ? 8 : 1;
      for (Value v : a.getInputs()) {
        Type e = cast<RankedTensorType>(v.getType()).getElementType();
        auto &[count, units] = byType[e.isF16() ? 0 : e.isF32() ? 1 : 2];
        ++count;
        units += numElements(v) / vec;
      }
      for (auto &[key, cu] : byType)
        if (cu.first > 1)
          chunks.push_back(chunkUnits(cu.second, vec == 8 ? 1024 : 8192));
    } else if (auto c = dyn_cast<ClipDivisorOp>(op)) {
      int64_t units = 0;
      for (Value g : c.getGrads())
        units += numElements(g);
      chunks.push_back(chunkUnits(units, 8192));
    } else if (auto it = groupUnits.find(op); it != groupUnits.end()) {
      chunks.push_back(chunkUnits(it->second, isVec8(op) ? 1024 : 8192));
    }
    return chunks;
  }

  /// The last member of each multi-tensor group of two or more in `f`
  /// (cnn.update_group, cnn.cast_group), with the units of all its
  /// members' tensors (their first results; vectors of 8 in the "vec8"
  /// form, which cnn-select-lowering gives every member).
  DenseMap<Operation *, int64_t> multiTensorGroups(func::FuncOp f) const {
    struct Group {
      Operation *last = nullptr;
      int64_t members = 0, elements = 0;
    };
    std::map<std::pair<int, int64_t>, Group> groups;
    for (Operation &op : f.getBody().front())
      for (auto [kind, attr] :
           {std::pair{0, "cnn.update_group"}, std::pair{1, "cnn.cast_group"}})
        if (auto g = op.getAttrOfType<IntegerAttr>(attr)) {
          Group &group = groups[{kind, g.getValue().getSExtValue()}];
          group.last = &op;
          ++group.members;
          group.elements += numElements(op.getResult(0));
        }
    DenseMap<Operation *, int64_t> units;
    for (auto &[key, g] : groups)
      if (g.members > 1)
        units[g.last] = g.elements / (isVec8(g.last) ? 8 : 1);
    return units;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<TargetAttr> target = chooseTarget(module);
    if (failed(target))
      return signalPassFailure();
    // The kernels are compiled for blocks of kKernelBlock threads.
    if (target->getMaxThreads() < kKernelBlock) {
      module.emitError("cnn-prepare-for-emission: the CUDA target's kernels "
                       "launch ")
          << kKernelBlock << " threads per block, #cnn.target allows "
          << target->getMaxThreads();
      return signalPassFailure();
    }
    module->setAttr(kTargetAttr, *target);
    sms = target->getSms();
    maxThreads = target->getMaxThreads();
    // The printer knows elementwise ops in their fused form only (a step
    // built outside the pipeline may still hold plain ones).
    lowerElementwise(module);

    MLIRContext *ctx = module.getContext();
    int64_t gridLimit = sms * kBlocksPerSM;
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isExternal() || f.getBlocks().size() != 1)
        continue;
      DenseMap<Operation *, int64_t> groupUnits = multiTensorGroups(f);
      for (Operation &op : f.getBody().front()) {
        if (!launchesKernel(&op)) {
          op.removeAttr(kLaunchAttr);
          continue;
        }
        StringAttr reduction;
        if (needsReductionStrategy(&op)) {
          reduction = StringAttr::get(ctx, reductionStrategy(&op));
          ++(reduction.getValue() == "block_per_result" ? numBlockPerResult
                                                        : numThreadPerResult);
        }
        SmallVector<int64_t> chunks = multiTensorChunks(&op, groupUnits);
        numMultiTensor += chunks.size();
        op.setAttr(kLaunchAttr,
                   LaunchAttr::get(ctx, gridLimit, kKernelBlock, kVectorWidth,
                                   reduction,
                                   chunks.empty()
                                       ? DenseI64ArrayAttr()
                                       : DenseI64ArrayAttr::get(ctx, chunks),
                                   partialBlocks(&op), reduceBlock(&op)));
        ++numLaunch;
      }
    }
  }

  /// The most blocks of `op`'s partial-sum kernel, or 0 without one.
  int64_t partialBlocks(Operation *op) const {
    // The cross-entropy loss: a warp per row, as many blocks of eight rows
    // as the prelude's scratch holds.
    if (isa<SoftmaxCrossEntropyOp>(op))
      return kXentMaxBlocks;
    if (usesChannelPartialSums(op))
      return std::max<int64_t>(1, sms * kPartialBlocksH100 / kSMsH100);
    return 0;
  }

  /// The threads of `op`'s one-block reductions, or 0 without them.
  int64_t reduceBlock(Operation *op) const {
    if (!usesReduceBlock(op))
      return 0;
    // Counting the labels not ignored: one block, as wide as the target
    // allows (the rows are few; one launch).
    if (isa<SoftmaxCrossEntropyGradOp>(op))
      return maxThreads;
    return std::min(kChannelBlock, maxThreads);
  }

  int64_t sms = 0, maxThreads = 0;
};

} // namespace
