//===- CNNLaunchAttrs.cpp - #cnn.target and #cnn.launch -------------------===//
//
// The CUDA target's decisions as verified attributes: the GPU it prints for
// (#cnn.target on the module) and how each op's generated kernels launch
// (#cnn.launch), both set by cnn-prepare-for-emission and only read by the
// printer. What can be checked without the op is checked here; the
// dialect's attribute verifier adds what depends on it.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <limits>

using namespace mlir;
using namespace cnnc::cnn;

LogicalResult TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef arch, int64_t sms,
                                 int64_t maxThreads, int64_t smemPerBlock) {
  if (arch.empty())
    return emitError() << "#cnn.target needs an architecture (arch = "
                          "\"sm_90\", ...)";
  // A GPU of more SMs than this does not exist; the bound keeps the grids
  // computed from the count (sms * 32 blocks) far from int overflow.
  if (sms < 1 || sms > 4096)
    return emitError() << "#cnn.target: sms must be in [1, 4096], got " << sms;
  if (maxThreads < 32 || maxThreads > 1024 || maxThreads % 32)
    return emitError() << "#cnn.target: max_threads must be a multiple of 32 "
                          "in [32, 1024], got "
                       << maxThreads;
  if (smemPerBlock < 1)
    return emitError() << "#cnn.target: smem_per_block must be positive, got "
                       << smemPerBlock;
  return success();
}

LogicalResult LaunchAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t gridLimit, int64_t block,
                                 int64_t vector, StringAttr reduction,
                                 DenseI64ArrayAttr chunks,
                                 int64_t partialBlocks, int64_t reduceBlock) {
  // gridDim.x is at most 2^31 - 1.
  if (gridLimit < 1 || gridLimit > std::numeric_limits<int32_t>::max())
    return emitError() << "#cnn.launch: grid_limit must be in [1, 2^31 - 1], "
                          "got "
                       << gridLimit;
  // The prelude's kernels and the printed ones are compiled for 256-thread
  // blocks (__launch_bounds__(256), shared arrays of 256): another size
  // would launch them wrong, not just slower.
  if (block != kKernelBlock)
    return emitError() << "#cnn.launch: block must be " << kKernelBlock
                       << " (the threads the kernels are compiled for), got "
                       << block;
  if (vector != 1 && vector != 8)
    return emitError() << "#cnn.launch: vector must be 1 or 8 (16-byte "
                          "accesses of eight elements), got "
                       << vector;
  // blockSum and its kin reduce over warps: a multiple of 32 threads, at
  // most 1024 (a warp's partial sums in one warp).
  if (reduceBlock != 0 &&
      (reduceBlock < 32 || reduceBlock > 1024 || reduceBlock % 32))
    return emitError() << "#cnn.launch: reduce_block must be a multiple of 32 "
                          "in [32, 1024] where given, got "
                       << reduceBlock;
  if (reduction && reduction.getValue() != "block_per_result" &&
      reduction.getValue() != "thread_per_result")
    return emitError() << "#cnn.launch: reduction must be "
                          "\"block_per_result\" or \"thread_per_result\", got "
                       << reduction;
  if (chunks) {
    if (chunks.empty())
      return emitError() << "#cnn.launch: chunks, where given, has one entry "
                            "per multi-tensor kernel";
    // A block's 256 threads stride over its chunk.
    for (int64_t c : chunks.asArrayRef())
      if (c < 256 || c % 256)
        return emitError() << "#cnn.launch: each chunk must be a positive "
                              "multiple of 256 units, got "
                           << c;
  }
  if (partialBlocks < 0 || partialBlocks > std::numeric_limits<int32_t>::max())
    return emitError() << "#cnn.launch: partial_blocks must be in [1, 2^31 - "
                          "1] where given, got "
                       << partialBlocks;
  return success();
}

bool cnnc::cnn::usesChannelPartialSums(Operation *op) {
  if (isa<ReduceSumOp, ReduceMeanOp>(op)) {
    auto lowering = op->getAttrOfType<StringAttr>("cnn.lowering");
    return lowering && lowering.getValue().starts_with("channel_sum");
  }
  return isNHWC(op) &&
         isa<BiasGradOp, BatchNormTrainOp, BatchNormStatsOp, BatchNormSumsOp,
             BatchNormGradSumsOp, FusedBatchNormAffineReluGradSumsOp,
             FusedBatchNormReluGradOp, FusedBatchNormAffineReluGradOp,
             BatchNormGradOp, FusedDualBatchNormGradOp,
             FusedMaxPool2DBatchNormReluGradOp, FusedConv2DStatsOp>(op);
}

bool cnnc::cnn::usesPartialBlocks(Operation *op) {
  return usesChannelPartialSums(op) || isa<SoftmaxCrossEntropyOp>(op);
}

bool cnnc::cnn::usesReduceBlock(Operation *op) {
  if (isa<SoftmaxCrossEntropyGradOp>(op))
    return true;
  return !isNHWC(op) &&
         isa<BiasGradOp, BatchNormTrainOp, BatchNormStatsOp, BatchNormSumsOp,
             BatchNormGradSumsOp, FusedBatchNormAffineReluGradSumsOp,
             FusedBatchNormReluGradOp, FusedBatchNormAffineReluGradOp,
             BatchNormGradOp, FusedDualBatchNormGradOp>(op);
}

bool cnnc::cnn::needsReductionStrategy(Operation *op) {
  if (isa<SoftmaxOp>(op))
    return true;
  if (!isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(op))
    return false;
  auto lowering = op->getAttrOfType<StringAttr>("cnn.lowering");
  return !lowering || !(lowering.getValue().starts_with("channel_sum") ||
                        lowering.getValue() == "spatial_sum");
}

bool cnnc::cnn::launchesKernel(Operation *op) {
  return !isa<func::ReturnOp, ReshapeOp, FlattenOp, Conv2DOp, Conv2DBwdDataOp,
              Conv2DBwdFilterOp, MatmulOp, AllReduceOp>(op);
}

//===----------------------------------------------------------------------===//
// Kernel-call descriptions (KernelCallOpInterface)
//===----------------------------------------------------------------------===//

/// "operand #i" or "result #i" of `op`, or empty where `v` is neither.
static std::string roleOf(Operation *op, Value v) {
  for (OpOperand &o : op->getOpOperands())
    if (o.get() == v)
      return "operand #" + std::to_string(o.getOperandNumber());
  for (OpResult r : op->getResults())
    if (r == v)
      return "result #" + std::to_string(r.getResultNumber());
  return "";
}

/// A 32-bit integer argument (or field of a record) that does not fit.
static const KernelArg *wideI32(const KernelArg &a) {
  if (a.kind == KernelArg::Kind::I32 &&
      (a.integer < std::numeric_limits<int32_t>::min() ||
       a.integer > std::numeric_limits<int32_t>::max()))
    return &a;
  for (const KernelArg &f : a.fields)
    if (const KernelArg *w = wideI32(f))
      return w;
  return nullptr;
}

LogicalResult
cnnc::cnn::verifyKernelCall(Operation *op, const KernelCall &call,
                            function_ref<InFlightDiagnostic()> emitError) {
  auto fail = [&]() {
    return emitError() << "kernel call '" << call.kernel << "': ";
  };
  if (call.kernel.empty())
    return emitError() << "a kernel call names no kernel";
  for (const KernelTemplateArg &t : call.templateArgs)
    if (t.kind == KernelTemplateArg::Kind::ElementType &&
        !(t.type && (t.type.isF32() || t.type.isF16() ||
                     t.type.isSignlessInteger(32) ||
                     t.type.isSignlessInteger(64))))
      return fail() << "template element type must be f32, f16, i32 or i64 "
                       "(labels), got "
                    << t.type;
  const KernelGrid &grid = call.grid;
  switch (grid.kind) {
  case KernelGrid::Kind::ThreadPerElement: {
    std::string role = grid.value ? roleOf(op, grid.value) : "";
    auto t = grid.value ? dyn_cast<RankedTensorType>(grid.value.getType())
                        : RankedTensorType();
    if (role.empty() || !t || !t.hasStaticShape())
      return fail() << "the grid's one thread per element names "
                    << (role.empty() ? "a value that is not an operand or "
                                       "result of the op"
                                     : role)
                    << ", which must be a tensor of static shape";
    if (grid.perThread < 1 || t.getNumElements() % grid.perThread)
      return fail() << "the grid's one thread per " << grid.perThread
                    << " elements of " << role << " " << t << " needs "
                    << "a multiple of " << grid.perThread << " elements, got "
                    << t.getNumElements();
    break;
  }
  case KernelGrid::Kind::ThreadPerUnit:
    if (grid.units < 0)
      return fail() << "the grid's units must not be negative, got "
                    << grid.units;
    break;
  case KernelGrid::Kind::BlockPerUnit:
    // gridDim.x is at most 2^31 - 1.
    if (grid.units < 1 || grid.units > std::numeric_limits<int32_t>::max())
      return fail() << "one block per unit needs 1 to 2^31 - 1 units, got "
                    << grid.units;
    break;
  }
  // A one-thread block is a scalar update: one block of it, not a grid.
  if (call.block == KernelBlock::Single &&
      !(grid.kind == KernelGrid::Kind::BlockPerUnit && grid.units == 1))
    return fail() << "a block of one thread launches one block, got a grid "
                     "of more";
  for (auto [i, a] : llvm::enumerate(call.args)) {
    if (a.kind == KernelArg::Kind::Buffer) {
      if (!a.value || roleOf(op, a.value).empty())
        return fail() << "argument #" << i
                      << " is a buffer that is not an operand or result of "
                         "the op";
      if (call.wrap && a.name.empty())
        return fail() << "argument #" << i
                      << " is a buffer of a wrapped call without a name";
    }
    if (a.kind == KernelArg::Kind::Table &&
        (a.integer < 0 || a.integer >= (int64_t)call.tables.size()))
      return fail() << "argument #" << i << " names table #" << a.integer
                    << " of " << call.tables.size();
    if (a.kind == KernelArg::Kind::Scratch && a.integer < 1)
      return fail() << "argument #" << i
                    << " is a reduction scratch of " << a.integer
                    << " doubles; it needs at least one";
    if (const KernelArg *w = wideI32(a))
      return fail() << "argument #" << i << " holds " << w->integer
                    << ", which the kernel's 32-bit int cannot";
  }
  for (auto [k, t] : llvm::enumerate(call.tables))
    for (const KernelArg &row : t.rows)
      if (const KernelArg *w = wideI32(row))
        return fail() << "table #" << k << " holds " << w->integer
                      << ", which its 32-bit int cannot";
  return success();
}

LogicalResult cnnc::cnn::verifyKernelCalls(
    KernelCallOpInterface op, LaunchAttr launch,
    function_ref<InFlightDiagnostic()> emitError) {
  SmallVector<KernelCall, 1> calls;
  op.describeKernelCalls(launch, calls);
  for (const KernelCall &call : calls)
    if (failed(verifyKernelCall(op, call, emitError)))
      return failure();
  return success();
}
