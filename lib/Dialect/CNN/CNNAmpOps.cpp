//===- CNNAmpOps.cpp - verifiers and CUDA launches of the loss-scaling ops===//
#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace cnnc::cnn;

LogicalResult AllFiniteOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  return success();
}

LogicalResult LossScaleUpdateOp::verify() {
  if (getGrowthInterval() < 1)
    return emitOpError("'growth_interval' must be >= 1, got ")
           << getGrowthInterval();
  float g = getGrowthFactor().convertToFloat();
  if (!(g > 1.0f))
    return emitOpError("'growth_factor' must be > 1, got ") << g;
  float b = getBackoffFactor().convertToFloat();
  if (!(b > 0.0f && b < 1.0f))
    return emitOpError("'backoff_factor' must be in (0, 1), got ") << b;
  return success();
}

LogicalResult UnscaleOp::verify() {
  if (getInput().getType().getShape() != getType().getShape())
    return emitOpError("'input' ") << getInput().getType() << " and result "
                                   << getType() << " must have the same shape";
  return success();
}

LogicalResult ClipDivisorOp::verify() {
  if (getGrads().empty())
    return emitOpError("needs at least one gradient");
  float m = getMaxNorm().convertToFloat();
  if (!(m > 0.0f))
    return emitOpError("'max_norm' must be > 0, got ") << m;
  return success();
}

LogicalResult AccumulateGradOp::verify() {
  if (getEvery() < 2)
    return emitOpError("'every' must be >= 2, got ") << getEvery();
  auto acc = cast<RankedTensorType>(getAcc().getType());
  auto grad = cast<RankedTensorType>(getGrad().getType());
  if (getSum().getType() != acc || getNewAcc().getType() != acc ||
      grad.getShape() != acc.getShape() ||
      (grad != acc && !(grad.getElementType().isF16() &&
                        acc.getElementType().isF32())))
    return emitOpError("acc, sum and new_acc must have one type and grad "
                       "that type or its f16 form, got ")
           << acc << " and " << grad;
  return success();
}

LogicalResult AccumulationStepOp::verify() {
  if (getEvery() < 2)
    return emitOpError("'every' must be >= 2, got ") << getEvery();
  return success();
}

// CUDA lowering (KernelCallOpInterface): kernels/LossScale.cuh's
// lossScaleUpdate, one thread (a scalar update).
void LossScaleUpdateOp::describeKernelCalls(
    LaunchAttr, SmallVectorImpl<KernelCall> &calls) {
  KernelCall call;
  call.kernel = "lossScaleUpdate";
  call.grid = KernelGrid::blockPerUnit(1);
  call.block = KernelBlock::Single;
  call.args = {KernelArg::read(getScale()),
               KernelArg::read(getGrowthTracker()),
               KernelArg::read(getFinite()),
               KernelArg::write(getNewScale()),
               KernelArg::write(getNewGrowthTracker()),
               KernelArg::i64(getGrowthInterval()),
               KernelArg::f32(getGrowthFactor().convertToFloat()),
               KernelArg::f32(getBackoffFactor().convertToFloat())};
  calls.push_back(call);
}
