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
#include "cnnc/Reference/TensorEntry.h"
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
    if (!cnnrt::readNpy(path, e, err)) {
      llvm::errs() << path << ": " << err << "\n";
      return 1;
    }
    Tensor t = reference::fromEntry(e);
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
    if (!cnnrt::writeNpy(path, reference::toEntry("", t), err)) {
      llvm::errs() << path << ": " << err << "\n";
      return 1;
    }
  }
  return 0;
}
