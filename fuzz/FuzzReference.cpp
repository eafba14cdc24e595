//===- FuzzReference.cpp - ONNX models through the reference interpreter --===//
//
// Two targets run an ONNX model the way cnnc does, through the driver's own
// functions (lib/Driver, the CNNCDriver library):
//  - `reference`: loadInput (import and its clean-up, as `cnnc model.onnx`)
//    with --batch 2, then runForward, the run of `cnnc --run-reference`, on a
//    deterministic input of the model's input shape;
//  - `train-step` (CNNC_FUZZ_TRAIN): loadInput, buildTrainStep (cnn-autodiff
//    and the reference pipeline, as --train for the CPU) and trainReference
//    for one step on synthetic data (`cnnc --train --run-reference --steps 1
//    --data synthetic --batch 2 --workers 0`).
// The model is written to a private folder, the only one its external data
// may come from. The interpreter runs under a 64 MiB ceiling
// (reference::setHostMemoryLimit), so a model that would need more ends in
// its out-of-memory report, not in the fuzzer's memory limit; an input
// larger than the ceiling is not made (a user could not pass it either).
// Bad input must fail with an error diagnostic; a crash, a sanitizer report
// or a failure without a diagnostic is a finding. Both targets use the
// structure-aware mutator of onnx-model with its shape-blowup mutations and
// its validity-keeping mutations (most mutants reach the interpreter).
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"
#include "ONNXMutator.h"

#include "cnnc/Driver/Driver.h"
#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/xxhash.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <unordered_set>
#include <vector>

using namespace mlir;
using namespace cnnc;

namespace {
constexpr uint64_t kMemoryCeiling = uint64_t(64) << 20;

/// A private folder holding the model file; removed at exit.
struct Workspace {
  std::string dir, model;
  Workspace() {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/cnnc-fuzz-XXXXXX";
    if (!mkdtemp(&pattern[0])) {
      std::perror("cnnc-fuzz: mkdtemp");
      std::abort();
    }
    dir = pattern;
    model = dir + "/model.onnx";
  }
  ~Workspace() {
    unlink(model.c_str());
    rmdir(dir.c_str());
  }
  void write(const uint8_t *data, size_t size) const {
    int fd = open(model.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
      std::perror("cnnc-fuzz: open");
      std::abort();
    }
    for (size_t done = 0; done < size;) {
      ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) {
        std::perror("cnnc-fuzz: write");
        std::abort();
      }
      done += size_t(n);
    }
    close(fd);
  }
};

/// The options of the command line this target stands for.
driver::DriverOptions commandLine(const std::string &model) {
  driver::DriverOptions o;
  o.inputFile = model;
  o.batch = 2;
  o.runReference = true;
#if CNNC_FUZZ_TRAIN
  o.train = true;
  o.steps = 1;
  o.data = "synthetic";
  o.trainFlags.workers = 0;
#endif
  std::string err;
  if (!driver::validateOptions(o, err)) { // the harness's own mistake
    std::fprintf(stderr, "cnnc-fuzz: %s\n", err.c_str());
    std::abort();
  }
  return o;
}

#if !CNNC_FUZZ_TRAIN
/// The input of @forward (its first argument that is not a parameter, a
/// buffer or state), filled with a fixed pattern; false when its type is not
/// static or it is larger than the interpreter may hold.
bool makeInput(driver::Compilation &c, reference::Tensor &input) {
  auto forward = (*c.module).lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return true; // runForward reports it
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    if (forward.getArgAttr(i, cnn::kParamAttr) ||
        forward.getArgAttr(i, cnn::kBufferAttr) ||
        forward.getArgAttr(i, cnn::kStateAttr))
      continue;
    auto type = dyn_cast<RankedTensorType>(forward.getArgument(i).getType());
    if (!type || !type.hasStaticShape() ||
        type.getNumElements() > int64_t(kMemoryCeiling / sizeof(float) / 4))
      return false;
    input = reference::Tensor::zeros(type);
    bool integer = input.kind == reference::ElemKind::I32 ||
                   input.kind == reference::ElemKind::I64;
    for (size_t k = 0; k < input.data.size(); ++k)
      input.data[k] = integer ? float(k % 3) : float((k * 37) % 11) / 4 - 1;
    return true;
  }
  return true; // no data input: bindArguments says so
}
#endif

/// How far the inputs got (CNNC_FUZZ_STATS=1 prints it at exit): the share
/// that reaches the interpreter measures the mutator (docs/robustness.md).
struct Stages {
  uint64_t inputs = 0, imported = 0, reached = 0, ran = 0;
  ~Stages() {
    if (std::getenv("CNNC_FUZZ_STATS"))
      std::fprintf(stderr,
                   "cnnc-fuzz stages: %llu inputs, %llu imported, %llu reached "
                   "the interpreter, %llu ran without error\n",
                   (unsigned long long)inputs, (unsigned long long)imported,
                   (unsigned long long)reached, (unsigned long long)ran);
  }
} stages;

/// Models that imported, by hash, and up to kPoolSize of them: most of the
/// corpus (the coverage of hostile mutations) does not import, and a
/// validity-keeping mutation of such a model still does not; so the mutator
/// starts three times in four from a model that imported instead.
struct ImportedPool {
  static constexpr size_t kPoolSize = 512;
  std::unordered_set<uint64_t> hashes;
  std::vector<std::string> models;
  static uint64_t hash(const uint8_t *data, size_t size) {
    return llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(data, size));
  }
  void add(const uint8_t *data, size_t size, uint64_t random) {
    if (!hashes.insert(hash(data, size)).second)
      return;
    std::string m(reinterpret_cast<const char *>(data), size);
    if (models.size() < kPoolSize)
      models.push_back(std::move(m));
    else
      models[random % kPoolSize] = std::move(m);
  }
} pool;
} // namespace

#if CNNC_FUZZ_STRUCTURED
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  // CNNC_FUZZ_MUTATOR=hostile: session 22's mutator (no validity-keeping
  // mutations, no pool), to compare the share of inputs reaching the
  // interpreter.
  static const bool keepValid = [] {
    const char *m = std::getenv("CNNC_FUZZ_MUTATOR");
    return !m || llvm::StringRef(m) != "hostile";
  }();
  if (keepValid && seed % 4 != 0 && !pool.models.empty() &&
      !pool.hashes.count(ImportedPool::hash(data, size))) {
    const std::string &m = pool.models[(seed / 4) % pool.models.size()];
    if (m.size() <= maxSize) {
      std::memcpy(data, m.data(), m.size());
      size = m.size();
    }
  }
  fuzz::ONNXMutatorOptions options;
  options.shapeBlowup = true;
  options.keepValid = keepValid;
  return fuzz::mutateONNXModel(data, size, maxSize, seed, options);
}
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const Workspace workspace;
  static const driver::DriverOptions options = [] {
    reference::setHostMemoryLimit(kMemoryCeiling);
    // As parseCommandLine: the driver's runPasses applies these options (at
    // their defaults here) and fails if they were never registered.
    registerAsmPrinterCLOptions();
    registerMLIRContextCLOptions();
    registerPassManagerCLOptions();
    registerDefaultTimingManagerCLOptions();
#if CNNC_FUZZ_TRAIN
    // The training loop's progress lines (llvm::outs()); libFuzzer and the
    // replay driver report on stderr.
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      close(null);
    }
#endif
    return commandLine(workspace.model);
  }();
  workspace.write(data, size);

  driver::Compilation c;
  c.context.disableMultithreading();
  c.context.printOpOnDiagnostic(false);
  bool sawError = false;
  ScopedDiagnosticHandler handler(&c.context, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error) {
      sawError = true;
      // The importer's safety net for a handler that failed silently: still
      // a bug to find.
      if (llvm::StringRef(d.str()).contains("failed without a diagnostic"))
        std::abort();
    }
    return success();
  });
  auto check = [&](LogicalResult r) {
    if (failed(r) && !sawError) // a failure must come with a diagnostic
      std::abort();
    return succeeded(r);
  };
  ++stages.inputs;
  if (!check(driver::loadInput(options, c)))
    return 0;
  ++stages.imported;
  pool.add(data, size, stages.inputs * 0x9E3779B97F4A7C15ull);
#if CNNC_FUZZ_TRAIN
  if (!check(driver::buildTrainStep(options, c)))
    return 0;
  ++stages.reached;
  if (check(driver::trainReference(options, c)))
    ++stages.ran;
#else
  reference::Tensor input;
  if (!makeInput(c, input))
    return 0;
  ++stages.reached;
  FailureOr<reference::Tensor> output = driver::runForward(c, input);
  if (!check(output))
    return 0;
  ++stages.ran;
  if (output->data.size() != size_t(output->numel()))
    std::abort(); // a result that does not hold its shape's elements
#endif
  return 0;
}
