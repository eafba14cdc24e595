//===- Fuse.cpp - cnn-fuse (scaffold: being implemented) ---===//
#include "cnnc/Transforms/Passes.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNFUSE
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

namespace {
struct FusePass : public cnnc::impl::CNNFuseBase<FusePass> {
  void runOnOperation() override {}
};
} // namespace
