//===- Driver.cpp - the cnnc compiler driver ------------------------------===//
#include "cnnc/Driver/Driver.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Frontend/ONNXImporter.h"
#include "cnnc/Reference/TensorEntry.h"
#include "cnnc/Target/CUDA/EmitCUDA.h"
#include "cnnc/Transforms/Passes.h"
#include "cnnrt/HyperParams.h"
#include "cnnrt/TensorFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/Statistic.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::driver;

namespace {
bool hasExtension(StringRef path, StringRef ext) {
  return llvm::sys::path::extension(path).equals_insensitive(ext);
}

/// The entries of a --weights file that name nothing of the module: no
/// parameter, buffer or state of a function, no optimizer or loss-scale
/// state of its parameters (a --save-state or checkpoint file holds those),
/// no PyTorch BatchNorm counter (num_batches_tracked, which cnnc does not
/// keep). Such an entry is a misspelt or foreign name that would otherwise
/// be dropped without a word.
std::vector<std::string> unmatchedWeights(ModuleOp module,
                                          const std::map<std::string,
                                                         reference::Tensor> &w) {
  llvm::StringSet<> known, params;
  module.walk([&](func::FuncOp f) {
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      for (const char *key : {cnn::kParamAttr, cnn::kBufferAttr,
                              cnn::kStateAttr})
        if (auto name = f.getArgAttrOfType<StringAttr>(i, key)) {
          known.insert(name.getValue());
          if (key == cnn::kParamAttr)
            params.insert(name.getValue());
        }
  });
  std::vector<std::string> unmatched;
  for (const auto &entry : w) {
    StringRef n(entry.first);
    auto [param, suffix] = n.rsplit('.');
    bool optimizerState =
        params.contains(param) &&
        llvm::is_contained({"momentum_buffer", "exp_avg", "exp_avg_sq",
                            "grad_accum"},
                           suffix);
    if (!known.contains(n) && !optimizerState && n != "__step__" &&
        n != "__loader__" && !n.starts_with("optimizer.") &&
        !n.starts_with("loss_scale") && !n.ends_with(".num_batches_tracked"))
      unmatched.push_back(entry.first);
  }
  return unmatched;
}
} // namespace

std::unique_ptr<CNNPipelineOptions>
cnnc::driver::pipelineOptions(const DriverOptions &o) {
  auto p = std::make_unique<CNNPipelineOptions>();
  // validateOptions parsed the same text (the fuzz targets' and the command
  // line's options both pass through it): a failure here is a bug.
  if (failed(p->parseFromString(o.pipeline)))
    llvm::report_fatal_error("cnnc: the pipeline options '" +
                             Twine(o.pipeline) + "' do not parse");
  p->target = o.targetGPU ? "gpu" : "cpu";
  p->optimize = o.optimize;
  p->worldSize = o.dataParallel ? o.worldSize : 0;
  // loadInput ran the import's clean-up on an ONNX model; a .mlir file is
  // compiled as written.
  p->importCleanup = false;
  // cnn-prepare-for-emission's target (the resolved --arch; "native" is
  // still unresolved when no CUDA is emitted: the pass's default).
  if (o.arch != "native")
    p->arch = o.arch;
  return p;
}

bool cnnc::driver::validateOptions(const DriverOptions &o, std::string &err) {
  using namespace cnnrt;
  const double inf = HUGE_VAL;
  if (o.lr && !checkParam("--lr", *o.lr, lrRange(), err))
    return false;
  // The pipeline's options: the option parser's checks (types), then the
  // pipeline's own (names, ranges).
  {
    CNNPipelineOptions parsed;
    std::string parseError;
    llvm::raw_string_ostream parseOS(parseError);
    if (failed(parsed.parseFromString(o.pipeline, parseOS))) {
      // (llvm::cl prints a bad value's message itself.)
      StringRef why = StringRef(parseError).trim();
      err = "cannot parse the pipeline options '" + o.pipeline + "'" +
            (why.empty() ? std::string() : ": " + why.str());
      return false;
    }
  }
  std::unique_ptr<CNNPipelineOptions> p = pipelineOptions(o);
  if (failed(verifyCNNPipelineOptions(
          *p, [&](const Twine &msg) { err = msg.str(); }, "--")))
    return false;
  if (!checkParam("--momentum", p->momentum, momentumRange(), err) ||
      !checkParam("--dampening", p->dampening, dampeningRange(), err) ||
      !checkParam("--weight-decay", p->weightDecay, weightDecayRange(), err) ||
      !checkParam("--beta1", p->beta1, betaRange(), err) ||
      !checkParam("--beta2", p->beta2, betaRange(), err) ||
      !checkParam("--eps", p->eps, epsRange(), err) ||
      !checkParam("--label-smoothing", p->labelSmoothing, labelSmoothingRange(),
                  err) ||
      !checkParam("--aux-loss-weight", p->auxLossWeight, {0, inf, false, true},
                  err) ||
      !checkParam("--bucket-mb", p->bucketMB, {0, inf, false, true}, err))
    return false;
  // 0 is "no clipping" as the pipeline's default; a given value is checked.
  if (p->clipGradNorm.hasValue() &&
      !checkParam("--clip-grad-norm", p->clipGradNorm, {0, inf, true, true},
                  err))
    return false;
  // The data loader, the runtime and the CUDA launch code keep the batch,
  // the micro-step count and the rank count in an int: a larger value would
  // wrap (--batch 4294967298 became 2), so it is refused here.
  const int64_t intMax = std::numeric_limits<int32_t>::max();
  auto intFlag = [&](const char *flag, int64_t v, int64_t lo, int64_t hi) {
    if (v >= lo && v <= hi)
      return true;
    err = std::string(flag) + " must be in [" + std::to_string(lo) + ", " +
          std::to_string(hi) + "], got " + std::to_string(v);
    return false;
  };
  // The ceiling only goes down: the default keeps products of a few sizes
  // (flatten, matmul, im2col extents) far from int64's end.
  return intFlag("--max-tensor-elements", o.maxTensorElements, 1,
                 kDefaultMaxTensorElements) &&
         intFlag("--batch", o.batch, 0, intMax) &&
         intFlag("--accumulate", p->accumulate, 1, intMax) &&
         intFlag("--gpus/--world-size", o.worldSize, 1, 65536) &&
         intFlag("--steps", o.steps, 0, INT64_MAX / 2);
}

// Tensor conversions: cnnc/Reference/TensorEntry.h.
using reference::fromEntry;
using reference::toEntry;

LogicalResult cnnc::driver::readWeights(const std::string &path,
                                        reference::TensorMap &weights,
                                        std::string &err) {
  std::vector<cnnrt::TensorEntry> entries;
  if (!cnnrt::readTensorFile(path, entries, err))
    return failure();
  for (const auto &e : entries)
    weights[e.name] = fromEntry(e);
  return success();
}

LogicalResult cnnc::driver::writeWeights(const std::string &path,
                                         const reference::TensorMap &weights,
                                         std::string &err) {
  std::vector<cnnrt::TensorEntry> entries;
  entries.reserve(weights.size());
  for (const auto &[name, t] : weights)
    entries.push_back(toEntry(name, t));
  return success(cnnrt::writeTensorFileAtomic(path, entries, err));
}

LogicalResult cnnc::driver::readTensor(const std::string &path,
                                       reference::Tensor &t, std::string &err) {
  cnnrt::TensorEntry e;
  bool ok;
  if (hasExtension(path, ".npy"))
    ok = cnnrt::readNpy(path, e, err);
  else if (hasExtension(path, ".bin"))
    ok = cnnrt::readRawTensor(path, e, err);
  else {
    err = "tensor file '" + path + "' must end in .npy or .bin";
    return failure();
  }
  if (!ok)
    return failure();
  t = fromEntry(e);
  return success();
}

LogicalResult cnnc::driver::writeTensor(const std::string &path,
                                        const reference::Tensor &t,
                                        std::string &err) {
  cnnrt::TensorEntry e = toEntry(path, t);
  if (hasExtension(path, ".npy"))
    return success(cnnrt::writeNpy(path, e, err));
  if (hasExtension(path, ".bin"))
    return success(cnnrt::writeRawTensor(path, e, err));
  err = "tensor file '" + path + "' must end in .npy or .bin";
  return failure();
}

//===----------------------------------------------------------------------===//
// Actions
//===----------------------------------------------------------------------===//

void Compilation::enableTimingFromCommandLine() {
  applyDefaultTimingManagerCLOptions(timingManager);
  timing = timingManager.getRootScope();
}

LogicalResult cnnc::driver::runPasses(PassManager &pm, Compilation &c) {
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  pm.enableTiming(c.timing);
  return pm.run(*c.module);
}

namespace {
/// Resolves the cnn.weights path of `mlirPath`: as written, else next to the
/// .mlir file.
std::string resolveWeightsPath(StringRef mlirPath, StringRef weights) {
  if (llvm::sys::fs::exists(weights) || llvm::sys::path::is_absolute(weights))
    return weights.str();
  SmallString<256> p(llvm::sys::path::parent_path(mlirPath));
  llvm::sys::path::append(p, llvm::sys::path::filename(weights));
  return llvm::sys::fs::exists(p) ? std::string(p) : weights.str();
}

/// cnn-import-cleanup (the first pass of cnn-train-pipeline) on an
/// imported ONNX model: the specialized forms of its broadcasting ops.
LogicalResult canonicalizeImport(ModuleOp module) {
  PassManager pm(module.getContext());
  pm.addPass(createCNNImportCleanup());
  return pm.run(module);
}

func::FuncOp findForward(Compilation &c) {
  return c.module->lookupSymbol<func::FuncOp>("forward");
}
} // namespace

LogicalResult cnnc::driver::loadInput(const DriverOptions &options,
                                      Compilation &c) {
  const std::string &path = options.inputFile;
  bool isOnnx = hasExtension(path, ".onnx");
  bool isMlir = hasExtension(path, ".mlir");
  if (!isOnnx && !isMlir)
    return fail(c, "input file '" + path +
                       "' must have the extension .onnx or .mlir");
  if (!llvm::sys::fs::exists(path))
    return fail(c, "cannot open input file '" + path +
                       "': No such file or directory");
  if (options.batch < 0)
    return fail(c, "--batch must be positive, got " + Twine(options.batch));
  // The shape rule's ceiling (ShapeLimits.h), read by the importer and by
  // every cnn op's verifier in this context.
  c.context.getOrLoadDialect<cnn::CNNDialect>()->setMaxTensorElements(
      options.maxTensorElements);

  if (isOnnx) {
    ONNXImportOptions importOptions;
    importOptions.batch = options.batch;
    importOptions.forTraining = options.train;
    importOptions.runForward = options.runReference && !options.train;
    TimingScope importTiming = c.timing.nest("ONNX import");
    c.module = importONNX(path, c.context, importOptions, c.weights);
    if (!c.module)
      return failure();
    if (failed(canonicalizeImport(*c.module)))
      return failure();
  } else {
    if (options.batch > 0)
      return fail(c, "--batch applies to ONNX input only");
    std::string err;
    auto buffer = llvm::MemoryBuffer::getFile(path);
    if (!buffer)
      return fail(c, "cannot open input file '" + path +
                         "': " + buffer.getError().message());
    c.sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
    c.context.loadDialect<cnn::CNNDialect, func::FuncDialect>();
    TimingScope parseTiming = c.timing.nest("Parse MLIR");
    c.module = parseSourceFile<ModuleOp>(c.sourceMgr, ParserConfig(&c.context));
    if (!c.module)
      return failure();
    if (options.weightsFile.empty()) {
      if (auto attr = (*c.module)->getAttrOfType<StringAttr>(kWeightsAttr)) {
        std::string wpath = resolveWeightsPath(path, attr.getValue());
        if (failed(readWeights(wpath, c.weights, err)))
          return fail(c, "cannot read the weights '" + wpath + "' named by " +
                             kWeightsAttr + ": " + err);
      }
    }
  }
  if (!options.weightsFile.empty()) {
    std::string err;
    c.weights.clear();
    if (failed(readWeights(options.weightsFile, c.weights, err)))
      return fail(c,
                  "cannot read weights '" + options.weightsFile + "': " + err);
    std::vector<std::string> unmatched = unmatchedWeights(*c.module, c.weights);
    if (!unmatched.empty()) {
      std::string names;
      for (size_t i = 0; i < unmatched.size() && i < 8; ++i)
        names += (i ? ", '" : "'") + unmatched[i] + "'";
      if (unmatched.size() > 8)
        names += ", ...";
      return fail(c, "--weights '" + options.weightsFile + "' has " +
                         Twine(unmatched.size()) +
                         (unmatched.size() == 1 ? " entry that matches"
                                                : " entries that match") +
                         " no parameter or buffer of the model: " + names);
    }
  }
  return success();
}

LogicalResult cnnc::driver::emitMLIR(const DriverOptions &options,
                                     Compilation &c) {
  OpPrintingFlags flags;
  if (options.printLocations)
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  if (options.outputFile.empty()) {
    c.module->print(llvm::outs(), flags);
    llvm::outs().flush();
    return success();
  }
  // The IR and its weights side file are staged and published together; a
  // special output (/dev/null, a fifo) gets the IR only.
  std::string weightsPath = options.outputFile + ".cnnw";
  std::string err;
  cnnrt::OutputFile irOut, weightsOut;
  if (!irOut.open(options.outputFile, err))
    return fail(c, "cannot write '" + options.outputFile + "': " + err);
  if (!irOut.isSpecial()) {
    if (!weightsOut.open(weightsPath, err) ||
        failed(writeWeights(weightsOut.stagingPath(), c.weights, err)))
      return fail(c, "cannot write weights '" + weightsPath + "': " + err);
    (*c.module)->setAttr(kWeightsAttr,
                         StringAttr::get(&c.context, weightsPath));
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(irOut.stagingPath(), ec);
    if (!ec)
      c.module->print(os, flags);
    os.close();
    if (ec || os.has_error())
      return fail(c, "cannot write '" + options.outputFile +
                         "': " + (ec ? ec : os.error()).message());
  }
  if ((!irOut.isSpecial() && !weightsOut.commit(err)) || !irOut.commit(err))
    return fail(c, "cannot write '" + options.outputFile + "': " + err);
  return success();
}

LogicalResult cnnc::driver::runReference(const DriverOptions &options,
                                         Compilation &c) {
  if (options.inputTensor.empty() || options.outputTensor.empty())
    return fail(c, "--run-reference needs --input FILE and --output FILE");
  func::FuncOp func = findForward(c);
  if (!func)
    return fail(c, "the module has no function @forward");
  std::string err;
  reference::Tensor input;
  if (failed(readTensor(options.inputTensor, input, err)))
    return fail(c, "cannot read input tensor: " + err);
  FailureOr<reference::Tensor> output = runForward(c, input);
  if (failed(output))
    return failure();
  if (failed(writeTensor(options.outputTensor, *output, err)))
    return fail(c, "cannot write output tensor: " + err);
  return success();
}

FailureOr<reference::Tensor>
cnnc::driver::runForward(Compilation &c, const reference::Tensor &input) {
  func::FuncOp func = findForward(c);
  if (!func)
    return fail(c, "the module has no function @forward");
  auto args = reference::bindArguments(func, c.weights, {input});
  if (failed(args))
    return failure();
  auto results = reference::run(func, *args);
  if (failed(results))
    return failure();
  if (results->empty())
    return fail(c, "@forward returned no results");
  return std::move(results->front());
}

namespace {
/// The ONNX location NameLoc("<node>", FileLineColLoc("<file>", 0, 0)), if
/// `loc` is one, as "<file>:<node>".
std::optional<std::string> onnxLocation(Location loc) {
  auto name = dyn_cast<NameLoc>(loc);
  if (!name)
    return std::nullopt;
  auto file = dyn_cast<FileLineColLoc>(name.getChildLoc());
  if (!file || file.getLine() != 0)
    return std::nullopt;
  return (file.getFilename().getValue() + ":" + name.getName().getValue())
      .str();
}

const char *severityName(DiagnosticSeverity s) {
  switch (s) {
  case DiagnosticSeverity::Error:
    return "error";
  case DiagnosticSeverity::Warning:
    return "warning";
  case DiagnosticSeverity::Note:
    return "note";
  case DiagnosticSeverity::Remark:
    return "remark";
  }
  return "error";
}

void printPlain(llvm::raw_ostream &os, const std::string &where,
                Diagnostic &d) {
  os << where << ": " << severityName(d.getSeverity()) << ": " << d << "\n";
  for (Diagnostic &note : d.getNotes()) {
    auto loc = onnxLocation(note.getLocation());
    os << (loc ? *loc : where) << ": note: " << note << "\n";
  }
}
} // namespace

int cnnc::driver::runDriver(const DriverOptions &options) {
  if (!options.listOnnxOps.empty()) {
    printONNXOpTable(llvm::outs(), options.listOnnxOps == "markdown");
    return 0;
  }
  Compilation c;
  c.enableTimingFromCommandLine();
  // Every diagnostic goes to stderr as "<loc>: error: <msg>": MLIR source
  // locations through the SourceMgr handler (with the source line), ONNX
  // node locations as "<file>:<node>", location-less ones as "cnnc".
  c.context.printOpOnDiagnostic(false);
  SourceMgrDiagnosticHandler diagHandler(c.sourceMgr, &c.context, llvm::errs());
  ScopedDiagnosticHandler plainHandler(&c.context, [](Diagnostic &d) {
    if (auto where = onnxLocation(d.getLocation())) {
      printPlain(llvm::errs(), *where, d);
      return success();
    }
    if (isa<UnknownLoc>(d.getLocation())) {
      printPlain(llvm::errs(), "cnnc", d);
      return success();
    }
    return failure(); // to the SourceMgr handler
  });

  if (!options.emit.empty() && options.emit != "mlir" &&
      options.emit != "cuda" && options.emit != "exe" &&
      options.emit != "lib") {
    emitError(UnknownLoc::get(&c.context))
        << "unknown --emit kind '" << options.emit
        << "' (expected: mlir, cuda, exe or lib)";
    return 1;
  }
  // `cnnc model.onnx -o train` (no --emit, an output that is not .mlir/.cu)
  // builds the training executable: --train is implied.
  DriverOptions o = options;
  // `-o model.cu` without --emit: the CUDA source.
  if (o.emit.empty() && !o.outputFile.empty() &&
      hasExtension(o.outputFile, ".cu") && !o.runReference)
    o.emit = "cuda";
  bool exeOutput = !o.outputFile.empty() &&
                   !hasExtension(o.outputFile, ".mlir") &&
                   !hasExtension(o.outputFile, ".cu") &&
                   !hasExtension(o.outputFile, ".onnx");
  const bool planOnly = o.dumpPlan || !o.dumpPlanSvg.empty();
  if (o.emit.empty() && exeOutput && !o.runReference && !planOnly)
    o.train = true;
  if (o.emit == "exe" || o.emit == "cuda" || o.emit == "lib")
    o.train = true;
  bool wantsCuda = o.emit == "cuda" || o.emit == "exe" || o.emit == "lib" ||
                   (o.train && o.emit.empty() && exeOutput && !o.runReference);
  if ((planOnly || o.trainAndRun) && !o.train) {
    emitError(UnknownLoc::get(&c.context))
        << "--dump-plan and 'cnnc train' need the training step: add --train";
    return 1;
  }
  if (wantsCuda || o.trainAndRun) {
    o.arch = resolveArch(o.arch);
    if (o.emit != "cuda" && !isSupportedArch(o.arch)) {
      emitError(UnknownLoc::get(&c.context))
          << "unsupported --arch '" << o.arch << "' (expected native, "
          << kSupportedArchs << ")";
      return 1;
    }
  }
  if (!o.target.empty() && o.target != "gpu" && o.target != "cpu") {
    emitError(UnknownLoc::get(&c.context))
        << "unknown --target '" << o.target << "' (expected gpu or cpu)";
    return 1;
  }
  if (o.target == "cpu" && (wantsCuda || planOnly)) {
    emitError(UnknownLoc::get(&c.context))
        << "--target cpu cannot emit CUDA or plan GPU memory (drop --target "
           "or use --target gpu)";
    return 1;
  }
  // The executable takes --checkpoint/--resume when it runs; at compile
  // time they belong to a run on the reference interpreter or `cnnc train`.
  if ((!o.checkpoint.empty() || !o.resume.empty()) &&
      !(o.train && (o.runReference || o.trainAndRun))) {
    emitError(UnknownLoc::get(&c.context))
        << "--checkpoint/--resume need a training run: --train "
           "--run-reference or 'cnnc train' (a built executable takes them "
           "when it runs)";
    return 1;
  }
  // --save-state is written after training: its problems (a directory, a
  // missing or read-only folder) are found now, by the same rules, before
  // anything is compiled or trained.
  if (!o.saveState.empty()) {
    cnnrt::OutputFile probe;
    std::string err;
    if (!probe.open(o.saveState, err)) {
      emitError(UnknownLoc::get(&c.context))
          << "cannot write --save-state '" << o.saveState << "': " << err;
      return 1;
    }
  }
  o.targetGPU = o.target == "gpu" || wantsCuda || planOnly ||
                (o.target.empty() && o.trainAndRun && hasGPU());
  if (o.batchAuto && failed(chooseAutoBatch(o)))
    return 1;
  if (failed(loadInput(o, c)))
    return 1;
  if (o.train && failed(buildTrainStep(o, c)))
    return 1;
  if (o.trainAndRun)
    return trainAndRun(o, c);
  if (!o.dumpPlanSvg.empty()) {
    std::string svg, err;
    llvm::raw_string_ostream svgOS(svg);
    if (failed(writeBufferPlanSVG(*c.module, svgOS)))
      return 1;
    svgOS.flush();
    if (!cnnrt::writeFileAtomic(o.dumpPlanSvg, svg, err)) {
      emitError(UnknownLoc::get(&c.context))
          << "cannot write --dump-plan-svg '" << o.dumpPlanSvg << "': " << err;
      return 1;
    }
  }
  if (planOnly) {
    if (o.dumpPlan && failed(dumpBufferPlan(*c.module, llvm::outs())))
      return 1;
    llvm::outs().flush();
    if (!wantsCuda && o.emit.empty() && !o.runReference)
      return 0;
  }
  if (wantsCuda) {
    std::string exe;
    return failed(compileCUDA(o, c, exe)) ? 1 : 0;
  }
  if (o.runReference && o.train) {
    if (failed(trainReference(options, c)))
      return 1;
  } else if (o.runReference && failed(runReference(options, c))) {
    return 1;
  }
  // IR is emitted when asked for, when written to a file with -o, or when
  // no other action was requested.
  bool emit = o.emit == "mlir" || !o.runReference || !o.outputFile.empty();
  if (emit && failed(emitMLIR(o, c)))
    return 1;
  return 0;
}

LogicalResult cnnc::driver::fail(Compilation &c, const Twine &msg) {
  emitError(UnknownLoc::get(&c.context)) << msg;
  return failure();
}
