//===- Precision.cpp - cnn-precision (scaffold: being implemented) ---===//
#include "cnnc/Transforms/Passes.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNPRECISION
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

namespace {
struct PrecisionPass : public cnnc::impl::CNNPrecisionBase<PrecisionPass> {
  void runOnOperation() override {}
};
} // namespace
