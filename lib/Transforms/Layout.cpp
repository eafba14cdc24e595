//===- Layout.cpp - cnn-layout (scaffold: being implemented) ---===//
#include "cnnc/Transforms/Passes.h"

namespace cnnc {
#define GEN_PASS_DEF_CNNLAYOUT
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

namespace {
struct LayoutPass : public cnnc::impl::CNNLayoutBase<LayoutPass> {
  void runOnOperation() override {}
};
} // namespace
