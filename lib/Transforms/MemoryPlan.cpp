//===- MemoryPlan.cpp - cnn-memory-plan (scaffold: being implemented) ---===//
#include "cnnc/Transforms/Passes.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNMEMORYPLAN
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

namespace {
struct MemoryPlanPass : public cnnc::impl::CNNMemoryPlanBase<MemoryPlanPass> {
  void runOnOperation() override {}
};
} // namespace
