//===- LowerElementwise.cpp - cnn-lower-elementwise -----------------------===//
//
// Gives every remaining elementwise op the one form the CUDA target prints,
// cnn.fused_elementwise, built from the op's own scalar body.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNLOWERELEMENTWISE
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

using namespace mlir;
using namespace cnnc;
using namespace cnnc::cnn;

namespace {
struct LowerElementwisePass
    : public cnnc::impl::CNNLowerElementwiseBase<LowerElementwisePass> {
  void runOnOperation() override {
    numLowered += lowerElementwise(getOperation());
  }
};
} // namespace
