//===- Train.cpp - training-step actions of the cnnc driver ---------------===//
//
// --train (cnn-autodiff), reference-interpreter training, CUDA emission and
// nvcc, and `cnnc train` (compile + run, CPU fallback without a GPU).
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Target/CUDA/EmitCUDA.h"
#include "cnnc/Transforms/Passes.h"
#include "cnnrt/Dataset.h"
#include "cnnrt/TensorFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::driver;

namespace {
LogicalResult fail(Compilation &c, const Twine &msg) {
  emitError(UnknownLoc::get(&c.context)) << msg;
  return failure();
}

double learningRate(const DriverOptions &o) {
  if (o.lr >= 0)
    return o.lr;
  return o.optimizer == "sgd" ? 0.01 : 0.001;
}

std::string argName(func::FuncOp f, unsigned i, const char *attr) {
  if (auto s = f.getArgAttrOfType<StringAttr>(i, attr))
    return s.str();
  return "";
}
} // namespace

LogicalResult cnnc::driver::buildTrainStep(const DriverOptions &o,
                                           Compilation &c) {
  if (o.optimizer != "sgd" && o.optimizer != "adam" && o.optimizer != "adamw" &&
      o.optimizer != "none")
    return fail(c, "unknown --optimizer '" + o.optimizer +
                       "' (expected sgd, adam, adamw or none)");
  if ((*c.module).lookupSymbol("train_step"))
    return success(); // a .mlir file that already holds the step
  PassManager pm(&c.context);
  CNNAutodiffOptions ad;
  ad.optimizer = o.optimizer;
  ad.momentum = o.momentum;
  ad.dampening = o.dampening;
  ad.nesterov = o.nesterov;
  ad.weightDecay = o.weightDecay;
  ad.beta1 = o.beta1;
  ad.beta2 = o.beta2;
  ad.epsilon = o.eps;
  ad.labelSmoothing = o.labelSmoothing;
  ad.auxLossWeight = o.auxLossWeight;
  pm.addPass(createCNNAutodiff(ad));
  pm.addPass(createCSEPass());
  if (failed(pm.run(*c.module)))
    return failure();
  return optimizeTrainStep(o, c);
}

std::string cnnc::driver::effectiveLayout(const DriverOptions &o) {
  if (!o.layout.empty())
    return o.layout;
  return o.optimize && o.targetGPU ? "nhwc" : "nchw";
}

std::string cnnc::driver::effectivePrecision(const DriverOptions &o) {
  if (!o.precision.empty())
    return o.precision;
  return o.optimize && o.targetGPU ? "fp16" : "fp32";
}

LogicalResult cnnc::driver::optimizeTrainStep(const DriverOptions &o,
                                              Compilation &c) {
  std::string layout = effectiveLayout(o), precision = effectivePrecision(o);
  if (layout != "nchw" && layout != "nhwc")
    return fail(c, "unknown --layout '" + layout + "' (expected nchw or nhwc)");
  if (precision != "fp32" && precision != "fp16")
    return fail(c, "unknown --precision '" + precision +
                       "' (expected fp32 or fp16)");
  int64_t opsBefore = 0;
  c.module->walk([&](Operation *op) {
    if (isa<cnn::CNNDialect>(op->getDialect()) && !isa<cnn::YieldOp>(op))
      ++opsBefore;
  });
  PassManager pm(&c.context);
  if (layout == "nhwc")
    pm.addPass(createCNNLayout());
  if (precision == "fp16")
    pm.addPass(createCNNPrecision());
  if (layout == "nhwc" || precision == "fp16") {
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  // The reference interpreter is the golden model: it runs the unfused
  // step unless --fuse asks otherwise (tests compare the two).
  if (o.optimize && o.fuse && (o.targetGPU || o.fuseExplicit))
    pm.addPass(createCNNFuse());
  // The CUDA target prints elementwise ops in their fused form only.
  if (o.targetGPU)
    pm.addPass(createCNNLowerElementwise());
  // The arena plan is for the CUDA target (the reference interpreter
  // allocates per value).
  if (o.optimize && o.memoryPlan && o.targetGPU)
    pm.addPass(createCNNMemoryPlan());
  if (failed(pm.run(*c.module)))
    return failure();
  if (o.stats) {
    int64_t opsAfter = 0;
    c.module->walk([&](Operation *op) {
      if (isa<cnn::CNNDialect>(op->getDialect()) && !isa<cnn::YieldOp>(op))
        ++opsAfter;
    });
    llvm::errs() << "cnnc: stats: layout " << layout << ", precision "
                 << precision << ", cnn ops " << opsBefore << " -> " << opsAfter
                 << "\n";
    if (auto st =
            (*c.module)->getAttrOfType<DictionaryAttr>("cnn.fusion_stats"))
      for (NamedAttribute a : st)
        llvm::errs() << "cnnc: stats: fusion " << a.getName().getValue() << " "
                     << cast<IntegerAttr>(a.getValue()).getInt() << "\n";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Reference training
//===----------------------------------------------------------------------===//

namespace {
/// Where the step's batches come from: a dataset or one fixed batch.
struct BatchSource {
  cnnrt::ImageSet set, test;
  std::unique_ptr<cnnrt::BatchLoader> loader;
  reference::Tensor fixedImages, fixedLabels;
  bool hasTest = false;
};

LogicalResult openData(const DriverOptions &o, Compilation &c,
                       RankedTensorType imageType, int64_t classes,
                       BatchSource &src) {
  std::string err;
  if (!o.inputTensor.empty() || !o.labelsTensor.empty()) {
    if (o.inputTensor.empty() || o.labelsTensor.empty())
      return fail(c, "a fixed batch needs both --input and --labels");
    if (failed(readTensor(o.inputTensor, src.fixedImages, err)) ||
        failed(readTensor(o.labelsTensor, src.fixedLabels, err)))
      return fail(c, "cannot read the fixed batch: " + err);
    if (!src.fixedImages.matches(imageType))
      return fail(c, "--input has the wrong shape for the model's input");
    if (src.fixedLabels.shape != std::vector<int64_t>{imageType.getDimSize(0)})
      return fail(c, "--labels must be 1-D with one label per image (" +
                         Twine(imageType.getDimSize(0)) + ")");
    for (float l : src.fixedLabels.data)
      if (l < 0 || l >= classes || l != (int64_t)l)
        return fail(c, "--labels holds " + Twine((int64_t)l) +
                           ", not a class in [0, " + Twine(classes) + ")");
    src.fixedLabels.kind = reference::ElemKind::I32;
    return success();
  }
  if (o.data.empty())
    return fail(c, "training on the reference interpreter needs --data "
                   "DIR|FILE|synthetic or --input x.npy --labels y.npy");
  if (imageType.getRank() != 4)
    return fail(c, "--data needs a 4-D image input");
  cnnrt::DatasetOptions d;
  d.C = imageType.getDimSize(1);
  d.H = imageType.getDimSize(2);
  d.W = imageType.getDimSize(3);
  d.numClasses = classes;
  d.batch = imageType.getDimSize(0);
  d.seed = o.seed;
  if (!cnnrt::openDataset(o.data, cnnrt::Split::Train, d, src.set, err))
    return fail(c, "cannot read --data: " + err);
  if (src.set.count < d.batch)
    return fail(c, "--data holds " + Twine(src.set.count) +
                       " images, fewer than one batch of " + Twine(d.batch));
  bool synthetic = o.data == "synthetic";
  src.loader = std::make_unique<cnnrt::BatchLoader>(src.set, d.batch, o.seed,
                                                    /*shuffle=*/!synthetic);
  std::vector<std::string> files;
  if (!synthetic && cnnrt::cifarFiles(o.data, cnnrt::Split::Test, files, err) &&
      !files.empty() &&
      cnnrt::openDataset(o.data, cnnrt::Split::Test, d, src.test, err))
    src.hasTest = true;
  return success();
}

void nextBatch(BatchSource &src, reference::Tensor &images,
               reference::Tensor &labels) {
  if (!src.loader) {
    images = src.fixedImages;
    labels = src.fixedLabels;
    return;
  }
  std::vector<int32_t> l(labels.numel());
  src.loader->nextBatchF32(images.data.data(), l.data());
  for (size_t i = 0; i < l.size(); ++i)
    labels.data[i] = (float)l[i];
}
} // namespace

LogicalResult cnnc::driver::trainReference(const DriverOptions &o,
                                           Compilation &c) {
  auto step = c.module->lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return fail(c, "the module has no @train_step");
  if (o.steps <= 0)
    return fail(c, "--train --run-reference needs --steps K (K >= 1)");

  // Argument roles.
  int imageArg = -1, labelsArg = -1, lrArg = -1, stepArg = -1;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    if (step.getArgAttr(i, cnn::kLabelsAttr))
      labelsArg = i;
    else if (step.getArgAttr(i, cnn::kLRAttr))
      lrArg = i;
    else if (step.getArgAttr(i, cnn::kStepAttr))
      stepArg = i;
    else if (step.getArgAttr(i, cnn::kInputAttr))
      imageArg = i;
  }
  if (imageArg < 0 || labelsArg < 0 || lrArg < 0 || stepArg < 0)
    return fail(c, "@train_step lacks its input, labels, lr or step argument");
  auto imageType = cast<RankedTensorType>(step.getArgument(imageArg).getType());
  auto labelsType =
      cast<RankedTensorType>(step.getArgument(labelsArg).getType());
  int64_t classes = 0;
  step.walk([&](cnn::SoftmaxCrossEntropyOp op) {
    classes = op.getLogits().getType().getDimSize(1);
  });
  BatchSource src;
  if (failed(openData(o, c, imageType, classes, src)))
    return failure();

  // Persistent state by name: weights, statistics, optimizer state.
  reference::TensorMap state = c.weights;
  reference::Tensor images = reference::Tensor::zeros(imageType);
  reference::Tensor labels = reference::Tensor::zeros(labelsType);
  double lr = learningRate(o);
  for (int64_t k = 1; k <= o.steps; ++k) {
    nextBatch(src, images, labels);
    std::vector<reference::Tensor> args(step.getNumArguments());
    for (unsigned i = 0; i < step.getNumArguments(); ++i) {
      auto type = cast<RankedTensorType>(step.getArgument(i).getType());
      std::string name = argName(step, i, cnn::kParamAttr);
      if (name.empty())
        name = argName(step, i, cnn::kBufferAttr);
      if (name.empty())
        name = argName(step, i, cnn::kStateAttr);
      if ((int)i == imageArg)
        args[i] = images;
      else if ((int)i == labelsArg)
        args[i] = labels;
      else if ((int)i == lrArg)
        args[i] = reference::Tensor::zeros(type, (float)lr);
      else if ((int)i == stepArg)
        args[i] = reference::Tensor::zeros(type, (float)k);
      else if (state.count(name))
        args[i] = state[name];
      else if (step.getArgAttr(i, cnn::kStateAttr)) {
        // Optimizer state starts at zero; the loss scale at its cnn.init.
        auto init = step.getArgAttrOfType<FloatAttr>(i, "cnn.init");
        args[i] = reference::Tensor::zeros(type, init ? init.getValueAsDouble()
                                                      : 0.0f);
      } else
        return fail(c, "no value for the parameter '" + name + "'");
      if (!args[i].matches(type))
        return fail(c, "the value of '" + name + "' has the wrong shape");
    }
    auto results = reference::run(step, args);
    if (failed(results))
      return failure();
    float loss = 0;
    for (unsigned r = 0; r < step.getNumResults(); ++r) {
      DictionaryAttr d = step.getResultAttrDict(r);
      if (d && d.get(cnn::kLossAttr)) {
        loss = (*results)[r].data[0];
        continue;
      }
      for (const char *key :
           {cnn::kParamAttr, cnn::kBufferAttr, cnn::kStateAttr})
        if (auto s = d ? dyn_cast_or_null<StringAttr>(d.get(key)) : nullptr)
          state[s.str()] = (*results)[r];
      if (auto s =
              d ? dyn_cast_or_null<StringAttr>(d.get(cnn::kGradAttr)) : nullptr)
        state[s.str() + ".grad"] = (*results)[r];
    }
    llvm::outs() << llvm::format("step %lld loss %.7g\n", (long long)k, loss);
    llvm::outs().flush();
  }

  // Held-out accuracy with @forward (inference-mode BN, running statistics).
  auto forward = c.module->lookupSymbol<func::FuncOp>("forward");
  if (src.hasTest && forward) {
    cnnrt::BatchLoader test(src.test, imageType.getDimSize(0), 0, false);
    int64_t batches = src.test.count / imageType.getDimSize(0), correct = 0;
    for (int64_t b = 0; b < batches; ++b) {
      std::vector<int32_t> l(labels.numel());
      test.nextBatchF32(images.data.data(), l.data());
      auto args = reference::bindArguments(forward, state, {images});
      if (failed(args))
        return failure();
      auto out = reference::run(forward, *args);
      if (failed(out))
        return failure();
      const reference::Tensor &logits = out->front();
      for (int64_t n = 0; n < logits.shape[0]; ++n) {
        int64_t best = 0;
        for (int64_t k = 1; k < logits.shape[1]; ++k)
          if (logits.data[n * logits.shape[1] + k] >
              logits.data[n * logits.shape[1] + best])
            best = k;
        correct += best == l[n];
      }
    }
    int64_t total = batches * imageType.getDimSize(0);
    llvm::outs() << llvm::format("held-out accuracy: %.2f%% (%lld/%lld)\n",
                                 total ? 100.0 * correct / total : 0.0,
                                 (long long)correct, (long long)total);
  }
  if (!o.saveState.empty()) {
    std::string err;
    if (failed(writeWeights(o.saveState, state, err)))
      return fail(c, "cannot write --save-state '" + o.saveState + "': " + err);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// CUDA
//===----------------------------------------------------------------------===//

namespace {
/// The runtime (headers + libcnnrt.a): --runtime-dir, $CNNC_RUNTIME_DIR, or
/// the build tree next to this cnnc (build/bin/cnnc -> build/lib/libcnnrt.a,
/// <source>/runtime/include).
bool findRuntime(const DriverOptions &o, std::string &include,
                 std::string &lib) {
  auto check = [&](StringRef inc, StringRef l) {
    SmallString<256> h(inc);
    llvm::sys::path::append(h, "cnnrt", "cnnrt.h");
    if (!llvm::sys::fs::exists(h) || !llvm::sys::fs::exists(l))
      return false;
    include = inc.str();
    lib = l.str();
    return true;
  };
  std::vector<std::string> dirs;
  if (!o.runtimeDir.empty())
    dirs.push_back(o.runtimeDir);
  if (const char *e = std::getenv("CNNC_RUNTIME_DIR"))
    dirs.push_back(e);
  for (const std::string &d : dirs)
    for (const char *l : {"lib/libcnnrt.a", "libcnnrt.a"})
      if (check(d + "/include", d + "/" + l))
        return true;
  std::string exe =
      llvm::sys::fs::getMainExecutable(o.argv0.c_str(), (void *)&findRuntime);
  SmallString<256> bin(llvm::sys::path::parent_path(exe));
  SmallString<256> build(llvm::sys::path::parent_path(bin));
  SmallString<256> lib0(build), inc0(llvm::sys::path::parent_path(build));
  llvm::sys::path::append(lib0, "lib", "libcnnrt.a");
  llvm::sys::path::append(inc0, "runtime", "include");
  if (check(inc0, lib0))
    return true;
#ifdef CNNC_RUNTIME_INCLUDE_DIR
  if (check(CNNC_RUNTIME_INCLUDE_DIR, CNNC_RUNTIME_LIBRARY))
    return true;
#endif
  return false;
}

std::string findNvcc() {
  if (const char *e = std::getenv("CNNC_NVCC"))
    return e;
  if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/nvcc"))
    return "/usr/local/cuda/bin/nvcc";
  if (auto p = llvm::sys::findProgramByName("nvcc"))
    return *p;
  return "";
}

/// cuDNN as nvcc should link it: "-lcudnn" where the development symlink
/// exists, else the versioned library by path (GPU machines often only have
/// libcudnn.so.9).
std::string cudnnLinkArg() {
  for (const char *dir :
       {"/usr/local/cuda/lib64", "/usr/local/cuda/lib",
        "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"}) {
    std::string base = std::string(dir) + "/libcudnn.so";
    if (llvm::sys::fs::exists(base))
      return "-L" + std::string(dir) + " -lcudnn";
    if (llvm::sys::fs::exists(base + ".9"))
      return base + ".9";
  }
  return "-lcudnn";
}

} // namespace

bool cnnc::driver::isSupportedArch(StringRef arch) {
  return arch == "sm_80" || arch == "sm_86" || arch == "sm_89" ||
         arch == "sm_90" || arch == "sm_90a";
}

std::string cnnc::driver::resolveArch(StringRef requested) {
  if (requested != "native")
    return requested.str();
  const char *fallback = "sm_90a";
  if (!hasGPU())
    return fallback;
  // The GPU's compute capability, "9.0", from nvidia-smi.
  auto smi = llvm::sys::findProgramByName("nvidia-smi");
  llvm::SmallString<128> outPath;
  if (!smi || llvm::sys::fs::createTemporaryFile("cnnc-smi", "txt", outPath)) {
    llvm::errs() << "cnnc: note: --arch native: nvidia-smi not found, using "
                 << fallback << "\n";
    return fallback;
  }
  llvm::FileRemover remove(outPath);
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(outPath),
                                          StringRef("")};
  StringRef args[] = {*smi, "--query-gpu=compute_cap", "--format=csv,noheader",
                      "--id=0"};
  int rc = llvm::sys::ExecuteAndWait(*smi, args, std::nullopt, redirects,
                                     /*SecondsToWait=*/20);
  auto text = llvm::MemoryBuffer::getFile(outPath);
  std::string cap = rc == 0 && text ? (*text)->getBuffer().trim().str() : "";
  std::string arch = cap == "9.0"   ? "sm_90a"
                     : cap == "8.0" ? "sm_80"
                     : cap == "8.6" ? "sm_86"
                     : cap == "8.9" ? "sm_89"
                                    : "";
  if (arch.empty()) {
    llvm::errs() << "cnnc: note: --arch native: the GPU's compute capability "
                 << (cap.empty() ? "could not be read" : "'" + cap + "'")
                 << " is not one cnnc targets, using " << fallback << "\n";
    return fallback;
  }
  return arch;
}

bool cnnc::driver::hasGPU() {
  if (const char *e = std::getenv("CNNC_ASSUME_NO_GPU"))
    if (std::string(e) == "1")
      return false;
  return llvm::sys::fs::exists("/dev/nvidia0") ||
         llvm::sys::fs::exists("/dev/nvidiactl");
}

LogicalResult cnnc::driver::compileCUDA(const DriverOptions &o, Compilation &c,
                                        std::string &exePath) {
  if (o.emit != "cuda" && !isSupportedArch(o.arch))
    return fail(c, "unsupported --arch '" + o.arch + "' (expected " +
                       kSupportedArchs + ")");
  CUDAEmitOptions eo;
  eo.modelName = llvm::sys::path::stem(o.inputFile).str();
  eo.library = o.emit == "lib";
  eo.defaultLR = (float)learningRate(o);
  if (o.steps > 0)
    eo.defaultSteps = o.steps;
  std::string cu;
  llvm::raw_string_ostream os(cu);
  if (failed(emitCUDA(*c.module, os, eo)))
    return failure();
  os.flush();
  if (o.stats) {
    // The emitter states the count in the header comment of the .cu file.
    size_t at = cu.find(" kernel launches and library calls per training step");
    size_t from = cu.rfind("': ", at);
    if (at != std::string::npos && from != std::string::npos)
      llvm::errs() << "cnnc: stats: " << cu.substr(from + 3, at - from - 3)
                   << " kernel launches and library calls per training step\n";
  }
  std::string err;
  if (o.emit == "cuda") {
    if (o.outputFile.empty()) {
      llvm::outs() << cu;
      return success();
    }
    if (!cnnrt::writeFileAtomic(o.outputFile, cu, err))
      return fail(c, "cannot write '" + o.outputFile + "': " + err);
    return success();
  }
  // An executable: <exe>.cu kept beside it, weights in <exe>.cnnw. All three
  // are staged in temporary files and published together only after nvcc
  // succeeded: a failed build leaves nothing new behind and keeps old
  // outputs. Side files are not written for a special output (/dev/null,
  // a fifo, stdout).
  exePath = o.outputFile.empty()
                ? std::string(eo.library ? "libstep.so" : "train")
                : o.outputFile;
  std::string cuPath = exePath + ".cu", weightsPath = exePath + ".cnnw";
  std::string nvcc = findNvcc(), include, lib;
  if (nvcc.empty())
    return fail(c, "nvcc not found (looked at $CNNC_NVCC, /usr/local/cuda/bin, "
                   "PATH); --emit cuda -o FILE.cu writes the CUDA source");
  if (!findRuntime(o, include, lib))
    return fail(c, "the cnnc runtime (include/cnnrt/cnnrt.h and libcnnrt.a) "
                   "was not found; pass --runtime-dir or set CNNC_RUNTIME_DIR");
  cnnrt::OutputFile exeOut, cuOut, weightsOut;
  if (!exeOut.open(exePath, err))
    return fail(c, "cannot write '" + exePath + "': " + err);
  bool sideFiles = !exeOut.isSpecial();
  std::string cuSource; // the .cu nvcc compiles
  llvm::SmallString<128> tmpCu;
  std::optional<llvm::FileRemover> removeTmpCu;
  if (sideFiles) {
    if (!cuOut.open(cuPath, err, ".cu"))
      return fail(c, "cannot write '" + cuPath + "': " + err);
    cuSource = cuOut.stagingPath();
    if (!weightsOut.open(weightsPath, err))
      return fail(c, "cannot write '" + weightsPath + "': " + err);
    if (failed(writeWeights(weightsOut.stagingPath(), c.weights, err)))
      return fail(c, "cannot write '" + weightsPath + "': " + err);
  } else {
    if (auto ec = llvm::sys::fs::createTemporaryFile("cnnc", "cu", tmpCu))
      return fail(c, "cannot create a temporary .cu file: " + ec.message());
    removeTmpCu.emplace(tmpCu);
    cuSource = std::string(tmpCu);
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream cuStream(cuSource, ec);
    if (!ec)
      cuStream << cu;
    cuStream.close();
    if (ec || cuStream.has_error())
      return fail(c, "cannot write '" + cuPath +
                         "': " + (ec ? ec : cuStream.error()).message());
  }
  std::vector<std::string> args = {
      nvcc, "-O3", "-std=c++17", "-arch=" + o.arch, "-I" + include, cuSource};
  std::string versionScript;
  if (eo.library) {
    // All of libcnnrt (its C API) goes into the library; only the C API is
    // exported, so that the runtime's and CUDA's symbols cannot clash with
    // another copy in the process (PyTorch's).
    SmallString<128> script;
    if (auto ec = llvm::sys::fs::createTemporaryFile("cnnc-lib", "map", script))
      return fail(c, "cannot create a temporary file: " + ec.message());
    versionScript = std::string(script);
    if (!cnnrt::writeFileAtomic(versionScript,
                                "{ global: cnnrt_*; local: *; };\n", err))
      return fail(c, "cannot write '" + versionScript + "': " + err);
    args.insert(args.end(),
                {"-shared", "-Xcompiler", "-fPIC", "-Xlinker",
                 "--version-script=" + versionScript,
                 // One -Xlinker keeps the three in order on the link line.
                 "-Xlinker", "--whole-archive," + lib + ",--no-whole-archive"});
  } else {
    args.push_back(lib);
  }
  std::string cudnn = cudnnLinkArg();
  for (StringRef a : llvm::split(cudnn, ' '))
    args.push_back(a.str());
  args.insert(args.end(),
              {"-lcublasLt", "-lcublas", "-o", exeOut.stagingPath()});
  std::vector<StringRef> argRefs(args.begin(), args.end());
  std::string msg;
  int rc =
      llvm::sys::ExecuteAndWait(nvcc, argRefs, std::nullopt, {}, 0, 0, &msg);
  if (!versionScript.empty())
    llvm::sys::fs::remove(versionScript);
  if (rc != 0)
    return fail(c, "nvcc failed (exit " + Twine(rc) +
                       (msg.empty() ? "" : ": " + msg) + ") on the CUDA of '" +
                       exePath + "'; nothing was written");
  if (sideFiles && (!weightsOut.commit(err) || !cuOut.commit(err)))
    return fail(c, "cannot write the outputs of '" + exePath + "': " + err);
  if (!exeOut.commit(err))
    return fail(c, "cannot write '" + exePath + "': " + err);
  if (sideFiles)
    llvm::errs() << "cnnc: built '" << exePath << "' (weights '" << weightsPath
                 << "', source '" << cuPath << "')\n";
  else
    llvm::errs() << "cnnc: built '" << exePath
                 << "' (a special file: no weights or source written beside "
                    "it)\n";
  return success();
}

int cnnc::driver::trainAndRun(const DriverOptions &options, Compilation &c) {
  DriverOptions o = options;
  if (o.steps <= 0)
    o.steps = 100;
  if (o.data.empty()) {
    emitError(UnknownLoc::get(&c.context))
        << "cnnc train needs --data DIR|FILE|synthetic";
    return 1;
  }
  // The trained state (parameters, BN statistics, optimizer state) is kept
  // on both paths: --save-state, else "<-o or train>.trained.cnnw".
  if (o.saveState.empty())
    o.saveState = (o.outputFile.empty() ? std::string("train") : o.outputFile) +
                  ".trained.cnnw";
  auto kept = [&](int rc) {
    if (rc == 0)
      llvm::errs() << "cnnc: trained state written to '" << o.saveState
                   << "'\n";
    return rc;
  };
  auto fallback = [&](const std::string &why) {
    llvm::errs() << "cnnc: note: " << why
                 << "; training on the CPU reference interpreter instead\n";
    llvm::errs().flush();
    return kept(failed(trainReference(o, c)) ? 1 : 0);
  };
  if (!hasGPU())
    return fallback("no CUDA GPU found");
  if (findNvcc().empty())
    return fallback("nvcc not found");
  o.emit = "exe";
  if (o.outputFile.empty())
    o.outputFile = "train";
  std::string exe;
  if (failed(compileCUDA(o, c, exe)))
    return 1;
  SmallString<256> abs(exe);
  llvm::sys::fs::make_absolute(abs);
  std::vector<std::string> args = {std::string(abs),
                                   "--data",
                                   o.data,
                                   "--steps",
                                   std::to_string(o.steps),
                                   "--lr",
                                   std::to_string(learningRate(o)),
                                   "--seed",
                                   std::to_string(o.seed),
                                   "--checkpoint",
                                   o.saveState};
  std::string err;
  std::vector<std::string> testFiles;
  if (o.data != "synthetic" &&
      cnnrt::cifarFiles(o.data, cnnrt::Split::Test, testFiles, err) &&
      !testFiles.empty())
    args.push_back("--eval");
  std::vector<StringRef> argRefs(args.begin(), args.end());
  int rc = llvm::sys::ExecuteAndWait(args[0], argRefs);
  if (rc == 3) // the runtime's "no GPU" exit code
    return fallback("the executable found no usable GPU");
  return kept(rc);
}
