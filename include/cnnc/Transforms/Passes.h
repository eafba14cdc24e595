//===- Passes.h - cnnc passes ----------------------------------*- C++ -*-===//
#ifndef CNNC_TRANSFORMS_PASSES_H
#define CNNC_TRANSFORMS_PASSES_H

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace cnnc {
#define GEN_PASS_DECL
#include "cnnc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cnnc/Transforms/Passes.h.inc"
} // namespace cnnc

#endif
