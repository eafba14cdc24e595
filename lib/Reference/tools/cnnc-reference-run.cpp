//===- cnnc-reference-run.cpp - run a cnn function on .npy inputs ---------===//
//
//   cnnc-reference-run FILE.mlir [--func NAME] [-o PREFIX] [--repeat N]
//                      [--time] IN0.npy IN1.npy ...
//
// Parses FILE.mlir, runs function NAME (default: the first func.func) through
// the reference interpreter with the .npy files as its arguments, in order,
// and writes result #i to PREFIX<i>.npy (default PREFIX: "out"). With --time
// the wall time of each run is printed to stderr as "time_ms <t>".
// Inputs whose dtype differs from the argument's element type are converted
// (f32 data for an f16 argument is rounded to f16).
//
//===----------------------------------------------------------------------===//
#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Reference/Interpreter.h"
#include "cnnrt/TensorFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <cstring>

using namespace mlir;
using namespace cnnc;
using reference::ElemKind;
using reference::Tensor;

namespace {

float halfToFloat(uint16_t h) {
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0)
    return sign * std::ldexp(static_cast<float>(mant), -24);
  if (exp == 31)
    return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
}

/// `f` must be representable as a half (e.g. the output of roundToHalf).
uint16_t halfBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint16_t sign = (u >> 16) & 0x8000;
  if (std::isnan(f))
    return sign | 0x7e00;
  const float a = std::fabs(f);
  if (std::isinf(f) || a > 65504.0f)
    return sign | 0x7c00;
  if (a < 6.103515625e-05f)
    return sign | static_cast<uint16_t>(a * 16777216.0f);
  const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  return sign | static_cast<uint16_t>(exp << 10) |
         static_cast<uint16_t>((u >> 13) & 0x3ff);
}

bool toTensor(const cnnrt::TensorEntry &e, Tensor &t) {
  t.shape = e.shape;
  const int64_t n = e.numel();
  t.data.resize(n);
  switch (e.dtype) {
  case cnnrt::DType::F32:
    t.kind = ElemKind::F32;
    std::memcpy(t.data.data(), e.data.data(), n * sizeof(float));
    return true;
  case cnnrt::DType::F16:
    t.kind = ElemKind::F16;
    for (int64_t i = 0; i < n; ++i)
      t.data[i] = halfToFloat(e.as<uint16_t>()[i]);
    return true;
  case cnnrt::DType::I32:
    t.kind = ElemKind::I32;
    for (int64_t i = 0; i < n; ++i)
      t.data[i] = static_cast<float>(e.as<int32_t>()[i]);
    return true;
  case cnnrt::DType::I64:
    t.kind = ElemKind::I64;
    for (int64_t i = 0; i < n; ++i)
      t.data[i] = static_cast<float>(e.as<int64_t>()[i]);
    return true;
  }
  return false;
}

cnnrt::TensorEntry toEntry(const Tensor &t) {
  cnnrt::DType dt = cnnrt::DType::F32;
  switch (t.kind) {
  case ElemKind::F32:
    dt = cnnrt::DType::F32;
    break;
  case ElemKind::F16:
    dt = cnnrt::DType::F16;
    break;
  case ElemKind::I32:
    dt = cnnrt::DType::I32;
    break;
  case ElemKind::I64:
    dt = cnnrt::DType::I64;
    break;
  }
  cnnrt::TensorEntry e = cnnrt::TensorEntry::zeros("", dt, t.shape);
  for (int64_t i = 0, n = t.numel(); i < n; ++i) {
    switch (t.kind) {
    case ElemKind::F32:
      e.as<float>()[i] = t.data[i];
      break;
    case ElemKind::F16:
      e.as<uint16_t>()[i] = halfBits(reference::roundToHalf(t.data[i]));
      break;
    case ElemKind::I32:
      e.as<int32_t>()[i] = static_cast<int32_t>(t.data[i]);
      break;
    case ElemKind::I64:
      e.as<int64_t>()[i] = static_cast<int64_t>(t.data[i]);
      break;
    }
  }
  return e;
}

int usage() {
  llvm::errs() << "usage: cnnc-reference-run FILE.mlir [--func NAME] "
                  "[-o PREFIX] [--repeat N] [--time] INPUT.npy...\n";
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  std::string file, funcName, prefix = "out";
  std::vector<std::string> inputs;
  int repeat = 1;
  bool time = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--func" || a == "-o" || a == "--repeat") && i + 1 < argc) {
      std::string v = argv[++i];
      if (a == "--func")
        funcName = v;
      else if (a == "-o")
        prefix = v;
      else
        repeat = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--time") {
      time = true;
    } else if (a.size() > 1 && a[0] == '-') {
      return usage();
    } else if (file.empty()) {
      file = a;
    } else {
      inputs.push_back(a);
    }
  }
  if (file.empty())
    return usage();

  DialectRegistry registry;
  registry.insert<cnn::CNNDialect, func::FuncDialect>();
  MLIRContext ctx(registry);
  ctx.printOpOnDiagnostic(false);
  ctx.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &ctx);
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(file, sourceMgr, &ctx);
  if (!module)
    return 1;
  func::FuncOp func;
  module->walk([&](func::FuncOp f) {
    if (!func && (funcName.empty() || f.getName() == funcName))
      func = f;
  });
  if (!func) {
    llvm::errs() << file << ": no function"
                 << (funcName.empty() ? "" : " named " + funcName) << "\n";
    return 1;
  }

  std::vector<Tensor> args;
  for (auto [i, path] : llvm::enumerate(inputs)) {
    cnnrt::TensorEntry e;
    std::string err;
    Tensor t;
    if (!cnnrt::readNpy(path, e, err) || !toTensor(e, t)) {
      llvm::errs() << path << ": " << err << "\n";
      return 1;
    }
    if (i < func.getNumArguments())
      if (auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[i]))
        t.kind = reference::elemKindOf(type.getElementType());
    args.push_back(std::move(t));
  }

  FailureOr<std::vector<Tensor>> results;
  for (int r = 0; r < repeat; ++r) {
    auto start = std::chrono::steady_clock::now();
    results = reference::run(func, args);
    auto end = std::chrono::steady_clock::now();
    if (failed(results))
      return 1;
    if (time)
      llvm::errs()
          << "time_ms "
          << std::chrono::duration<double, std::milli>(end - start).count()
          << "\n";
  }
  for (auto [i, t] : llvm::enumerate(*results)) {
    std::string path = prefix + std::to_string(i) + ".npy", err;
    if (!cnnrt::writeNpy(path, toEntry(t), err)) {
      llvm::errs() << path << ": " << err << "\n";
      return 1;
    }
  }
  return 0;
}
