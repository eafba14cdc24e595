//===- Train.cpp - training-step actions of the cnnc driver ---------------===//
//
// --train (cnn-autodiff), reference-interpreter training, CUDA emission and
// nvcc, and `cnnc train` (compile + run, CPU fallback without a GPU).
//
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"
#include "cnnc/Driver/Driver.h"
#include "cnnc/Driver/NvccCompile.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Reference/Communicator.h"
#include "cnnc/Target/CUDA/EmitCUDA.h"
#include "cnnc/Transforms/MemoryPlan.h"
#include "cnnc/Transforms/Passes.h"
#include "cnnrt/Dataset.h"
#include "cnnrt/TensorFile.h"
#include "cnnrt/TrainLoop.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

using namespace mlir;

/// "16x3x3x3": a shape as diagnostics print it.
static std::string dimsText(ArrayRef<int64_t> dims) {
  return llvm::join(llvm::map_range(dims,
                                    [](int64_t d) { return std::to_string(d); }),
                    "x");
}
using namespace cnnc;
using namespace cnnc::driver;

namespace {
LogicalResult fail(Compilation &c, const Twine &msg) {
  emitError(UnknownLoc::get(&c.context)) << msg;
  return failure();
}

double learningRate(const DriverOptions &o) {
  if (o.lr)
    return *o.lr;
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
  if (!o.paramGroups.empty() &&
      failed(applyParamGroups(o.paramGroups, *c.module)))
    return failure();
  PassManager pm(&c.context);
  CNNAutodiffOptions ad;
  ad.optimizer = o.optimizer;
  ad.momentum = o.momentum;
  ad.dampening = o.dampening;
  ad.nesterov = o.nesterov;
  ad.weightDecay = o.weightDecay;
  ad.noBNWeightDecay = o.noBNWeightDecay;
  ad.clipGradNorm = o.clipGradNorm.value_or(0);
  ad.accumulate = o.accumulate;
  ad.beta1 = o.beta1;
  ad.beta2 = o.beta2;
  ad.epsilon = o.eps;
  ad.labelSmoothing = o.labelSmoothing;
  ad.ignoreIndex = o.ignoreIndex;
  ad.auxLossWeight = o.auxLossWeight;
  // Several outputs: every ONNX graph output after the first is an auxiliary
  // head (the file's output order decides); say what the loss is.
  if (auto fwd = (*c.module).lookupSymbol<func::FuncOp>(ad.forwardName))
    if (unsigned n = fwd.getNumResults(); n > 1) {
      char weight[32];
      std::snprintf(weight, sizeof weight, "%g", o.auxLossWeight);
      llvm::errs() << llvm::formatv(
          "cnnc: note: the model has {0} outputs: the loss is CE(output 0) + "
          "{1} x (the sum of CE of outputs 1..{2}): every graph output after "
          "the first is an auxiliary classifier weighted by "
          "--aux-loss-weight\n",
          n, weight, n - 1);
    }
  pm.addPass(createCNNAutodiff(ad));
  pm.addPass(createCSEPass());
  if (failed(runPasses(pm, c)))
    return failure();
  // State with an initial value (a param group's LR, --param-groups) goes
  // into the weights file, which the executable loads its state from (a
  // missing optimizer state would start at zero there).
  if (auto step = (*c.module).lookupSymbol<func::FuncOp>("train_step"))
    for (unsigned i = 0; i < step.getNumArguments(); ++i) {
      auto name = step.getArgAttrOfType<StringAttr>(i, cnn::kStateAttr);
      auto init = step.getArgAttrOfType<FloatAttr>(i, "cnn.init");
      if (name && init && !c.weights.count(name.str()))
        c.weights[name.str()] = reference::Tensor::zeros(
            cast<RankedTensorType>(step.getArgument(i).getType()),
            static_cast<float>(init.getValueAsDouble()));
    }
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
  CNNGPUPipelineOptions pipeline;
  pipeline.layout =
      layout == "nhwc" ? PipelineLayout::NHWC : PipelineLayout::NCHW;
  pipeline.precision =
      precision == "fp16" ? PipelinePrecision::FP16 : PipelinePrecision::FP32;
  pipeline.dataParallel = o.dataParallel;
  pipeline.bucketMB = o.bucketMB;
  pipeline.workspaceMB = o.workspaceMB;
  pipeline.syncBN = o.syncBN;
  pipeline.worldSize = o.worldSize;
  // The reference interpreter is the golden model: it runs the unfused
  // step unless --fuse asks otherwise (tests compare the two).
  pipeline.fuse = o.optimize && o.fuse && (o.targetGPU || o.fuseExplicit);
  // The CUDA target prints elementwise ops in their fused form only.
  pipeline.lowerElementwise = o.targetGPU;
  pipeline.remat = o.optimize && o.remat && pipeline.fuse;
  pipeline.rematMB = o.rematMB;
  pipeline.rematConvs = o.optimize && o.rematConvs && pipeline.fuse;
  pipeline.convStats = o.optimize && o.convStats;
  pipeline.dgradEpilogue = o.optimize && o.dgradEpilogue;
  pipeline.maxPoolIndex = o.maxPoolIndex;
  pipeline.poolBnGrad = o.poolBnGrad;
  pipeline.dualBnGrad = o.dualBnGrad;
  pipeline.wgradPrologue = o.wgradPrologue;
  pipeline.paramFormat = o.paramFormat;
  pipeline.convStatsPrologue = o.convPrologue;
  // The arena plan is for the CUDA target (the reference interpreter
  // allocates per value).
  // The CUDA target reads its arena plan from the IR, always; -O0 and
  // --no-memory-plan plan without sharing memory between temporaries.
  pipeline.memoryPlan = o.targetGPU;
  pipeline.memoryReuse = o.optimize && o.memoryPlan;
  // cnn-prepare-for-emission's target (the resolved --arch; "native" is
  // still unresolved when no CUDA is emitted: the pass's default).
  if (o.arch != "native")
    pipeline.arch = o.arch;
  PassManager pm(&c.context);
  buildCNNGPUPipeline(pm, pipeline);
  if (failed(runPasses(pm, c)))
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
    // cnn-fuse's statistics, in the names and order --stats always printed.
    for (Pass &pass : pm.getPasses())
      if (std::optional<FusionCounts> fused = getFusionCounts(pass)) {
        std::pair<const char *, int64_t> lines[] = {
            {"bn_relu_grad_ops", fused->bnReluGradOps},
            {"bn_relu_masks_recomputed", fused->bnReluMasksRecomputed},
            {"bn_grad_pairs", fused->bnGradPairs},
            {"bn_split", fused->bnSplits},
            {"conv_epilogue_ops", fused->convEpilogueOps},
            {"elementwise_merges", fused->elementwiseMerges},
            {"elementwise_ops", fused->elementwiseOps}};
        for (auto [name, count] : lines)
          llvm::errs() << "cnnc: stats: fusion " << name << " " << count
                       << "\n";
      }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Reference training
//===----------------------------------------------------------------------===//

namespace {
/// Where the step's batches come from: a dataset or one fixed batch.
struct BatchSource {
  std::unique_ptr<cnnrt::SampleSource> set, test;
  std::unique_ptr<cnnrt::StreamLoader> loader;
  cnnrt::Normalization norm;
  int workers = 0;
  reference::Tensor fixedImages, fixedLabels;
};

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// `imageType` and `labelsType` are one rank's input and labels (N, or
/// N x H x W per-pixel labels); the batches read hold `ranks` times its
/// batch (the global batch of data parallelism, rank r takes the r-th
/// slice: disjoint shards of one shuffle).
LogicalResult openData(const DriverOptions &o, Compilation &c,
                       RankedTensorType imageType, RankedTensorType labelsType,
                       int64_t classes, int64_t ignoreIndex, bool wantTest,
                       BatchSource &src, int64_t ranks = 1) {
  // The data sources keep N, C, H and W in an int (a larger dimension
  // wrapped: H = 2^31 became a negative size and a length_error), and a batch
  // that cannot fit this process's memory aborted inside the allocator: both
  // are refused before anything is read or allocated.
  if (imageType.hasStaticShape()) {
    int64_t elems = 1;
    bool overflow = false;
    for (auto [i, d] : llvm::enumerate(imageType.getShape())) {
      if (d > std::numeric_limits<int32_t>::max() / (i == 0 ? ranks : 1))
        return fail(c, "the model's input " + dimsText(imageType.getShape()) +
                           " has dimension #" + Twine(i) + " = " + Twine(d) +
                           (i == 0 && ranks > 1
                                ? " (x " + std::to_string(ranks) + " ranks)"
                                : std::string()) +
                           ": the training data loader supports dimensions "
                           "up to 2^31-1");
      overflow |= llvm::MulOverflow(elems, d, elems);
    }
    int64_t bytes = 0;
    overflow |= llvm::MulOverflow(elems, ranks * int64_t(sizeof(float)), bytes);
    // The interpreter's own limit (physical memory, ulimit -v/-d): the batch
    // and the step's tensors share it.
    uint64_t limit = reference::hostMemoryLimit();
    if (overflow || uint64_t(bytes) > limit)
      return fail(c, "one training batch of the model's input " +
                         dimsText(imageType.getShape()) +
                         (ranks > 1 ? " x " + std::to_string(ranks) + " ranks"
                                    : std::string()) +
                         " needs " +
                         (overflow ? std::string("more than 2^63")
                                   : std::to_string(bytes)) +
                         " bytes, more than this process can allocate (" +
                         Twine(limit) + " bytes); use a smaller --batch");
  }
  SmallVector<int64_t> labelsShape(labelsType.getShape());
  labelsShape[0] *= ranks;
  if (ranks > 1) {
    SmallVector<int64_t> shape(imageType.getShape());
    shape[0] *= ranks;
    imageType = RankedTensorType::get(shape, imageType.getElementType());
  }
  const bool dense = labelsShape.size() > 1;
  std::string err;
  if (!o.inputTensor.empty()) {
    if (o.labelsTensor.empty())
      return fail(c, "a fixed batch needs both --input and --labels");
    if (failed(readTensor(o.inputTensor, src.fixedImages, err)) ||
        failed(readTensor(o.labelsTensor, src.fixedLabels, err)))
      return fail(c, "cannot read the fixed batch: " + err);
    if (!src.fixedImages.matches(imageType))
      return fail(c, "--input has the wrong shape for the model's input");
    if (ArrayRef<int64_t>(src.fixedLabels.shape) != ArrayRef(labelsShape)) {
      if (dense)
        return fail(c, "--labels must be " + dimsText(labelsShape) +
                           ": one label per pixel of the model's " +
                           dimsText(imageType.getShape()) +
                           " input at its N x C x H x W output, got " +
                           dimsText(src.fixedLabels.shape));
      return fail(c, "--labels must be 1-D with one label per image (" +
                         Twine(imageType.getDimSize(0)) + "), got " +
                         dimsText(src.fixedLabels.shape));
    }
    for (auto [i, l] : llvm::enumerate(src.fixedLabels.data))
      if (l != (int64_t)l ||
          ((l < 0 || l >= classes) && (int64_t)l != ignoreIndex))
        return fail(c, "--labels holds " + Twine((int64_t)l) + " (element #" +
                           Twine(i) + "), not a class in [0, " +
                           Twine(classes) + ") nor the ignore index " +
                           Twine(ignoreIndex));
    src.fixedLabels.kind = reference::ElemKind::I32;
    return success();
  }
  if (o.data.empty())
    return fail(c, "training on the reference interpreter needs --data "
                   "DIR|FILE|synthetic or --input x.npy --labels y.npy");
  if (dense)
    return fail(c, "the model predicts per pixel (labels " +
                       dimsText(labelsShape) +
                       "): --data reads one label per image; give the batch "
                       "as --input x.npy --labels y.npy (no mask loader yet)");
  if (imageType.getRank() != 4)
    return fail(c, "--data needs a 4-D image input");
  cnnrt::SourceOptions d;
  d.C = imageType.getDimSize(1);
  d.H = imageType.getDimSize(2);
  d.W = imageType.getDimSize(3);
  d.numClasses = classes;
  d.batch = imageType.getDimSize(0);
  d.seed = o.seed;
  d.labels = o.labelsTensor;
  if (!cnnrt::openSource(o.data, cnnrt::Split::Train, d, src.set, err))
    return fail(c, "cannot read --data: " + err);
  if (src.set->size() < 1)
    return fail(c, "--data holds no images");
  if (!cnnrt::resolveNormalization(o.trainFlags, *src.set, src.norm, err))
    return fail(c, err);
  cnnrt::DataFormat format = cnnrt::detectFormat(o.data);
  src.workers = o.trainFlags.workers >= 0 ? o.trainFlags.workers
                                          : cnnrt::defaultWorkers(format);
  cnnrt::LoaderOptions lo;
  lo.batch = d.batch;
  lo.seed = o.seed;
  lo.shuffle = format != cnnrt::DataFormat::Synthetic;
  lo.workers = src.workers;
  src.loader = std::make_unique<cnnrt::StreamLoader>(*src.set, lo);
  if (wantTest && format != cnnrt::DataFormat::Synthetic &&
      cnnrt::hasTestSplit(o.data) &&
      !cnnrt::openSource(o.data, cnnrt::Split::Test, d, src.test, err))
    return fail(c, "cannot read the validation split of --data: " + err);
  return success();
}

LogicalResult nextBatch(Compilation &c, BatchSource &src,
                        reference::Tensor &images, reference::Tensor &labels) {
  if (!src.loader) {
    images = src.fixedImages;
    labels = src.fixedLabels;
    return success();
  }
  std::vector<int32_t> l(labels.numel());
  std::string err;
  if (!src.loader->nextF32(images.data.data(), l.data(), src.norm, err))
    return fail(c, err);
  for (size_t i = 0; i < l.size(); ++i)
    labels.data[i] = (float)l[i];
  return success();
}

/// Top-1/top-5 of @forward (inference-mode BN, running statistics) over the
/// whole validation split, as the GPU executable's evaluation.
FailureOr<cnnrt::EvalResult> evaluate(Compilation &c, func::FuncOp forward,
                                      const reference::TensorMap &state,
                                      BatchSource &src,
                                      RankedTensorType imageType, int64_t step,
                                      double epoch) {
  cnnrt::LoaderOptions lo;
  lo.batch = imageType.getDimSize(0);
  lo.shuffle = false;
  lo.workers = src.workers;
  cnnrt::StreamLoader loader(*src.test, lo);
  reference::Tensor images = reference::Tensor::zeros(imageType);
  std::vector<int32_t> labels(lo.batch);
  cnnrt::EvalResult r;
  r.step = step;
  r.epoch = epoch;
  std::string err;
  for (int64_t seen = 0, total = src.test->size(); seen < total;) {
    if (!loader.nextF32(images.data.data(), labels.data(), src.norm, err))
      return fail(c, err);
    auto args = reference::bindArguments(forward, state, {images});
    if (failed(args))
      return failure();
    auto out = reference::run(forward, *args);
    if (failed(out))
      return failure();
    const reference::Tensor &logits = out->front();
    int64_t valid = std::min<int64_t>(lo.batch, total - seen);
    for (int64_t n = 0; n < valid; ++n)
      cnnrt::accumulateTopK(&logits.data[n * logits.shape[1]],
                            static_cast<int>(logits.shape[1]), labels[n], r);
    seen += valid;
  }
  return r;
}
} // namespace

LogicalResult cnnc::driver::trainReference(const DriverOptions &options,
                                           Compilation &c) {
  DriverOptions o = options;
  auto step = c.module->lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return fail(c, "the module has no @train_step");
  // --resume: the checkpoint's state, last step and data position; its data
  // seed replaces --seed (as in the executable).
  ReferenceCheckpoint resumed;
  if (!o.resume.empty()) {
    if (failed(readReferenceCheckpoint(c, o.resume, step, resumed)))
      return failure();
    if (resumed.loader.seed != o.seed)
      llvm::errs() << "cnnc: note: using the checkpoint's data seed "
                   << resumed.loader.seed << "\n";
    o.seed = resumed.loader.seed;
  }
  if (o.steps <= 0 && o.trainFlags.epochs < 0)
    return fail(c, "--train --run-reference needs --steps K (K >= 1) or "
                   "--epochs E");

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
  int64_t classes = 0, ignoreIndex = o.ignoreIndex;
  step.walk([&](cnn::SoftmaxCrossEntropyOp op) {
    classes = op.getLogits().getType().getDimSize(1);
    ignoreIndex = op.getIgnoreIndex();
  });
  auto forward = c.module->lookupSymbol<func::FuncOp>("forward");
  const int ranks = static_cast<int>(o.worldSize);
  BatchSource src;
  if (failed(openData(o, c, imageType, labelsType, classes, ignoreIndex,
                      /*wantTest=*/bool(forward), src, ranks)))
    return failure();
  const int rankBatch = imageType.getDimSize(0);
  const int batch = rankBatch * ranks; // the global batch
  cnnrt::TrainFlags flags = o.trainFlags;
  flags.steps = o.steps > 0 ? o.steps : -1;
  flags.lr = learningRate(o);
  cnnrt::RunPlan plan;
  std::string err;
  if (!cnnrt::planRun(flags, src.set ? src.set->size() : batch, batch, o.steps,
                      flags.lr, /*defaultLogEvery=*/1, plan, err))
    return fail(c, err);
  if (plan.evalEvery > 0 && !src.test)
    return fail(c, "--eval-every needs a validation split in --data (" +
                       o.data + " has none)");
  if (!o.resume.empty() && src.loader) {
    if (resumed.loader.cursor > src.set->size())
      return fail(c, "cannot resume: " + o.resume + " is at sample " +
                         Twine(resumed.loader.cursor) +
                         " of an epoch but the data has " +
                         Twine(src.set->size()) + " samples");
    src.loader->setState(resumed.loader);
  }
  cnnrt::JsonLog json;
  if (!flags.logJson.empty() && !json.open(flags.logJson, err))
    return fail(c, err);
  if (src.set)
    llvm::outs() << cnnrt::runHeader(*src.set, src.test.get(), src.workers,
                                     src.norm, plan, batch);
  if (o.dataParallel) {
    auto dp = step->getAttrOfType<DictionaryAttr>("cnn.data_parallel");
    auto buckets = dp ? dp.getAs<IntegerAttr>("buckets") : nullptr;
    llvm::outs() << "data parallel: " << ranks
                 << (ranks == 1 ? " rank" : " ranks")
                 << " (threads of the CPU reference interpreter) x batch "
                 << rankBatch << " = global batch " << batch << "; "
                 << (buckets ? buckets.getInt() : 0)
                 << " gradient bucket(s) of <= "
                 << llvm::formatv("{0}", o.bucketMB) << " MiB\n";
  }
  auto epochAt = [&](int64_t k) {
    return src.set ? k * (double)batch / (double)src.set->size() : 0.0;
  };
  auto runEval = [&](const reference::TensorMap &state,
                     int64_t k) -> LogicalResult {
    auto r = evaluate(c, forward, state, src, imageType, k, epochAt(k));
    if (failed(r))
      return failure();
    llvm::outs() << cnnrt::evalLine(*r) << "\n";
    llvm::outs().flush();
    json.write(evalRecord(*r));
    return success();
  };

  // Persistent state by name: weights, statistics, optimizer state; one
  // map per rank, all starting from rank 0's (the broadcast of DDP).
  reference::TensorMap initial = c.weights;
  for (auto &[name, t] : resumed.state)
    initial[name] = t;
  std::vector<reference::TensorMap> states(ranks, initial);
  reference::TensorMap &state = states[0];
  reference::Tensor images = reference::Tensor::zeros(
      RankedTensorType::get(
          [&] {
            SmallVector<int64_t> s(imageType.getShape());
            s[0] = batch;
            return s;
          }(),
          imageType.getElementType()));
  std::vector<int64_t> labelsShape(labelsType.getShape());
  labelsShape[0] = batch; // one label per image or per pixel
  reference::Tensor labels(reference::elemKindOf(labelsType.getElementType()),
                           labelsShape);
  // Rank r's slice of the global batch.
  auto slice = [&](const reference::Tensor &t, int r,
                   RankedTensorType type) {
    reference::Tensor s = reference::Tensor::zeros(type);
    size_t n = s.data.size();
    std::copy(t.data.begin() + r * n, t.data.begin() + (r + 1) * n,
              s.data.begin());
    s.kind = t.kind;
    return s;
  };
  // Rank failure injection for tests: rank $CNNC_DP_FAIL_RANK stops at step
  // $CNNC_DP_FAIL_STEP without a word to the others (as a crashed process
  // would); they must give up after $CNNC_DIST_TIMEOUT seconds.
  int failRank = -1;
  int64_t failStep = -1;
  if (const char *e = std::getenv("CNNC_DP_FAIL_RANK"))
    failRank = std::atoi(e);
  if (const char *e = std::getenv("CNNC_DP_FAIL_STEP"))
    failStep = std::atoll(e);
  double timeout = 300;
  if (const char *e = std::getenv("CNNC_DIST_TIMEOUT"))
    timeout = std::max(0.1, std::atof(e));
  double tStart = now(), tLog = tStart, evalTime = 0;
  int64_t logSince = 0;
  const int64_t first = resumed.step + 1;
  if (!o.resume.empty() && first > plan.totalSteps)
    llvm::errs() << "cnnc: note: nothing to do: the checkpoint is at step "
                 << resumed.step << " and the run ends at step "
                 << plan.totalSteps << "\n";
  // Where the data stream stands after the step just taken (__loader__).
  auto loaderState = [&] {
    return src.loader ? src.loader->state()
                      : cnnrt::LoaderState{o.seed, 0, 0};
  };
  for (int64_t k = first; k <= plan.totalSteps; ++k) {
    if (failed(nextBatch(c, src, images, labels)))
      return failure();
    const double lr = plan.lr.at(k);
    std::vector<std::vector<reference::Tensor>> rankArgs(ranks);
    for (int r = 0; r < ranks; ++r) {
      std::vector<reference::Tensor> &args = rankArgs[r];
      args.resize(step.getNumArguments());
      for (unsigned i = 0; i < step.getNumArguments(); ++i) {
        auto type = cast<RankedTensorType>(step.getArgument(i).getType());
        std::string name = argName(step, i, cnn::kParamAttr);
        if (name.empty())
          name = argName(step, i, cnn::kBufferAttr);
        if (name.empty())
          name = argName(step, i, cnn::kStateAttr);
        if ((int)i == imageArg)
          args[i] = ranks == 1 ? images : slice(images, r, type);
        else if ((int)i == labelsArg)
          args[i] = ranks == 1 ? labels : slice(labels, r, type);
        else if ((int)i == lrArg)
          args[i] = reference::Tensor::zeros(type, (float)lr);
        else if ((int)i == stepArg)
          args[i] = reference::Tensor::zeros(type, (float)k);
        else if (states[r].count(name)) {
          args[i] = states[r][name];
          // cnn-param-format: the step reads the stored form.
          if (auto pub = step.getArgAttrOfType<DenseI64ArrayAttr>(
                  i, "cnn.public_shape");
              pub && ArrayRef<int64_t>(args[i].shape) == pub.asArrayRef())
            args[i] = reference::toStoredForm(args[i], type);
        }
        else if (step.getArgAttr(i, cnn::kStateAttr)) {
          // Optimizer state starts at zero; the loss scale at its cnn.init.
          auto init = step.getArgAttrOfType<FloatAttr>(i, "cnn.init");
          args[i] = reference::Tensor::zeros(
              type, init ? init.getValueAsDouble() : 0.0f);
        } else
          return fail(c, "no value for the parameter '" + name + "'");
        if (!args[i].matches(type)) {
          // The shape the user's value should have: the public one where
          // cnn-param-format stores another.
          auto pub =
              step.getArgAttrOfType<DenseI64ArrayAttr>(i, "cnn.public_shape");
          ArrayRef<int64_t> want = pub ? pub.asArrayRef() : type.getShape();
          // The batch and the labels have no name: say which they are (a
          // model whose output batch is not its input's made "the value of
          // ''").
          std::string what =
              (int)i == imageArg    ? std::string("the input batch")
              : (int)i == labelsArg ? std::string("the labels tensor")
                                    : "the value of '" + name + "'";
          return fail(
              c, llvm::formatv("{0} has the wrong shape ({1}, expected {2}){3}",
                               what, dimsText(args[i].shape), dimsText(want),
                               (int)i == labelsArg
                                   ? ": one label per input image, but the "
                                     "model's output has another batch than "
                                     "its input"
                                   : "")
                     .str());
        }
      }
    }
    // One step on every rank; with several, each a thread with its
    // communicator (cnn.all_reduce).
    std::vector<FailureOr<std::vector<reference::Tensor>>> results(
        ranks, failure());
    if (ranks == 1) {
      results[0] = reference::run(step, rankArgs[0]);
    } else {
      reference::LocalGroup group(ranks, timeout);
      std::vector<char> died(ranks, 0);
      std::vector<std::thread> threads;
      for (int r = 0; r < ranks; ++r)
        threads.emplace_back([&, r] {
          if (r == failRank && k == failStep) {
            died[r] = 1; // silently, as a crashed process
            return;
          }
          reference::setCurrentCommunicator(group.member(r));
          results[r] = reference::run(step, rankArgs[r]);
          reference::setCurrentCommunicator(nullptr);
          if (failed(results[r]))
            group.abort(r, "its step failed (see the error above)");
        });
      for (std::thread &t : threads)
        t.join();
      // Name the rank that died (or failed first) rather than the ones that
      // gave up waiting for it.
      std::string dead, broken;
      for (int r = 0; r < ranks; ++r) {
        if (died[r])
          dead += (dead.empty() ? "" : ", ") + std::to_string(r);
        else if (failed(results[r]))
          broken += (broken.empty() ? "" : ", ") + std::to_string(r);
      }
      if (!dead.empty() || !broken.empty())
        return fail(c, "data-parallel training stopped at step " + Twine(k) +
                           " of " + Twine(plan.totalSteps) + ": " +
                           (dead.empty() ? ""
                                         : "rank " + dead +
                                               " died (CNNC_DP_FAIL_RANK); ") +
                           (broken.empty() ? "" : "rank " + broken + " failed") +
                           " (world size " + Twine(ranks) +
                           "); no state was written");
    }
    if (failed(results[0]))
      return failure();
    float loss = 0;
    for (int r = 0; r < ranks; ++r)
      for (unsigned i = 0; i < step.getNumResults(); ++i) {
        DictionaryAttr d = step.getResultAttrDict(i);
        if (d && d.get(cnn::kLossAttr)) {
          if (r == 0)
            loss = (*results[r])[i].data[0];
          continue;
        }
        auto pub = d ? dyn_cast_or_null<DenseI64ArrayAttr>(
                           d.get("cnn.public_shape"))
                     : DenseI64ArrayAttr();
        for (const char *key :
             {cnn::kParamAttr, cnn::kBufferAttr, cnn::kStateAttr})
          if (auto s = d ? dyn_cast_or_null<StringAttr>(d.get(key)) : nullptr)
            states[r][s.str()] =
                pub ? reference::toPublicForm((*results[r])[i], pub)
                    : (*results[r])[i];
        if (auto s = d ? dyn_cast_or_null<StringAttr>(d.get(cnn::kGradAttr))
                       : nullptr)
          states[r][s.str() + ".grad"] = (*results[r])[i];
      }
    ++logSince;
    if (k % plan.logEvery == 0 || k == plan.totalSteps) {
      double t = now();
      cnnrt::Progress p;
      p.step = k;
      p.totalSteps = plan.totalSteps;
      p.epoch = epochAt(k);
      p.loss = loss;
      p.lr = lr;
      p.imagesPerSecond = logSince * (double)batch / std::max(t - tLog, 1e-9);
      p.etaSeconds = (plan.totalSteps - k) * (t - tStart - evalTime) /
                     (k - first + 1);
      llvm::outs() << cnnrt::progressLine(p) << "\n";
      llvm::outs().flush();
      json.write(progressRecord(p));
      logSince = 0;
      tLog = now();
    }
    if (src.test && forward && plan.evalEvery > 0 && k % plan.evalEvery == 0 &&
        k != plan.totalSteps) {
      double t0 = now();
      if (failed(runEval(state, k)))
        return failure();
      evalTime += now() - t0;
      tLog += now() - t0;
    }
    if (o.checkpointEvery > 0 && k % o.checkpointEvery == 0 &&
        k != plan.totalSteps &&
        failed(writeReferenceCheckpoint(c, o.checkpoint, step, state, k,
                                        loaderState())))
      return failure();
  }
  // Every rank applied the same averaged gradients to the same weights: a
  // difference in a parameter is a bug (BN running statistics may differ;
  // rank 0's are kept, as DDP broadcasts rank 0's buffers).
  for (int r = 1; r < ranks; ++r)
    for (unsigned i = 0; i < step.getNumResults(); ++i)
      if (auto s = step.getResultAttrOfType<StringAttr>(i, cnn::kParamAttr))
        if (states[r][s.str()].data != state[s.str()].data)
          return fail(c, "data parallel: the parameter '" + s.getValue() +
                             "' of rank " + Twine(r) +
                             " differs from rank 0's");

  if (src.test && forward && failed(runEval(state, plan.totalSteps)))
    return failure();
  if (!o.checkpoint.empty() && first <= plan.totalSteps &&
      failed(writeReferenceCheckpoint(c, o.checkpoint, step, state,
                                      plan.totalSteps, loaderState())))
    return failure();
  if (!o.saveState.empty()) {
    if (failed(writeWeights(o.saveState, state, err)))
      return fail(c, "cannot write --save-state '" + o.saveState + "': " + err);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// CUDA
//===----------------------------------------------------------------------===//


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
  // A step given as MLIR (already optimized, e.g. by cnnc-opt in a lit
  // test) may not have its lowering chosen yet: the emitter only prints.
  bool selected = true;
  c.module->walk([&](func::FuncOp f) {
    if (!f.isExternal() && !f->hasAttr("cnn.lowering_selected"))
      selected = false;
  });
  // Likewise its arena plan, the one the emitter reads (it plans nothing),
  // and its launch decisions for this --arch (cnn-prepare-for-emission).
  bool planned = c.module->getOperation()->hasAttr(kArenaBytesAttr);
  auto target = c.module->getOperation()->getAttrOfType<cnn::TargetAttr>(
      cnn::kTargetAttr);
  bool prepared = selected && planned && target && target.getArch() == o.arch;
  if (!prepared) {
    PassManager pm(&c.context);
    if (!selected) {
      // How its max poolings' gradients run is a lowering choice too
      // (before the arena plan: not once the step has one).
      if (o.maxPoolIndex && !planned) {
        CNNMaxPoolIndexOptions mpi;
        mpi.prologue = false; // a step given as MLIR keeps its fusions
        mpi.gradFusion = false;
        pm.addPass(createCNNMaxPoolIndex(mpi));
      }
      pm.addPass(createCNNSelectLowering());
    }
    if (!planned) {
      CNNMemoryPlanOptions mp;
      mp.reuse = o.optimize && o.memoryPlan;
      pm.addPass(createCNNMemoryPlan(mp));
    }
    CNNPrepareForEmissionOptions pe;
    pe.arch = o.arch;
    pm.addPass(createCNNPrepareForEmission(pe));
    if (failed(runPasses(pm, c)))
      return failure();
  }
  std::string cu;
  llvm::raw_string_ostream os(cu);
  {
    TimingScope emitTiming = c.timing.nest("Emit CUDA");
    if (failed(emitCUDA(*c.module, os, eo)))
      return failure();
  }
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
  // An executable (or shared library): built by nvcc (NvccCompile.cpp).
  exePath = o.outputFile.empty()
                ? std::string(eo.library ? "libstep.so" : "train")
                : o.outputFile;
  NvccOptions no;
  no.arch = o.arch;
  no.runtimeDir = o.runtimeDir;
  no.argv0 = o.argv0;
  no.library = eo.library;
  return buildWithNvcc(c, cu, no, exePath);
}

int cnnc::driver::trainAndRun(const DriverOptions &options, Compilation &c) {
  DriverOptions o = options;
  if (o.steps <= 0 && o.trainFlags.epochs < 0)
    o.steps = 100;
  if (o.data.empty()) {
    emitError(UnknownLoc::get(&c.context))
        << "cnnc train needs --data DIR|FILE|synthetic";
    return 1;
  }
  // The trained state (parameters, BN statistics, optimizer state) is kept
  // on both paths: --checkpoint, --save-state, else "<-o or
  // train>.trained.cnnw". The executable writes one state file (its
  // --checkpoint), so the two flags do not go together here.
  if (!o.checkpoint.empty() && !o.saveState.empty()) {
    emitError(UnknownLoc::get(&c.context))
        << "cnnc train writes the trained state to one file: give "
           "--checkpoint or --save-state, not both";
    return 1;
  }
  if (o.saveState.empty() && o.checkpoint.empty())
    o.saveState = (o.outputFile.empty() ? std::string("train") : o.outputFile) +
                  ".trained.cnnw";
  const std::string statePath =
      o.checkpoint.empty() ? o.saveState : o.checkpoint;
  auto kept = [&](int rc) {
    if (rc == 0)
      llvm::errs() << "cnnc: trained state written to '" << statePath
                   << "'\n";
    return rc;
  };
  auto fallback = [&](const std::string &why) {
    llvm::errs() << "cnnc: note: " << why
                 << "; training on the CPU reference interpreter instead\n";
    llvm::errs().flush();
    if (!o.targetGPU)
      return kept(failed(trainReference(o, c)) ? 1 : 0);
    // The module was compiled for the GPU (-o asked for an executable): its
    // step takes the image in the GPU's format (cnn-input-format) and is
    // fused for the GPU. The interpreter runs its own pipeline's step.
    DriverOptions ro = o;
    ro.targetGPU = false;
    Compilation rc;
    if (failed(loadInput(ro, rc)) || failed(buildTrainStep(ro, rc)))
      return 1;
    return kept(failed(trainReference(ro, rc)) ? 1 : 0);
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
                                   "--lr",
                                   std::to_string(learningRate(o)),
                                   "--seed",
                                   std::to_string(o.seed),
                                   "--checkpoint",
                                   statePath};
  if (o.checkpointEvery > 0)
    args.insert(args.end(),
                {"--checkpoint-every", std::to_string(o.checkpointEvery)});
  if (!o.resume.empty())
    args.insert(args.end(), {"--resume", o.resume});
  if (o.steps > 0)
    args.insert(args.end(), {"--steps", std::to_string(o.steps)});
  if (!o.labelsTensor.empty())
    args.insert(args.end(), {"--labels", o.labelsTensor});
  for (const std::string &a : o.trainFlags.toArgs())
    args.push_back(a);
  if (cnnrt::hasTestSplit(o.data))
    args.push_back("--eval");
  // Data parallel: the executable starts one process per GPU itself.
  if (o.worldSize > 1 || o.dataParallel)
    args.insert(args.end(), {"--gpus", std::to_string(o.worldSize)});
  std::vector<StringRef> argRefs(args.begin(), args.end());
  int rc = llvm::sys::ExecuteAndWait(args[0], argRefs);
  if (rc == 3) // the runtime's "no GPU" exit code
    return fallback("the executable found no usable GPU");
  return kept(rc);
}

//===----------------------------------------------------------------------===//
// --batch auto
//===----------------------------------------------------------------------===//

namespace {
/// What the executable allocates besides the arena is small but not zero:
/// the CUDA context with cuDNN/cuBLAS loaded (measured at 500-700 MiB on
/// H100s; 1 GiB is assumed) and the input staging buffers (per pipeline two
/// device slots of the batch as f32 at most; training + validation).
constexpr uint64_t kContextReserveBytes = 1024ull << 20;
constexpr double kMargin = 0.05;

/// Free memory of the first visible GPU: $CNNC_GPU_FREE_MIB (for tests and
/// for compiling on another machine), else nvidia-smi.
std::optional<uint64_t> gpuFreeBytes(std::string &source) {
  if (const char *e = std::getenv("CNNC_GPU_FREE_MIB")) {
    uint64_t mib = 0;
    if (StringRef(e).getAsInteger(10, mib) || mib == 0)
      return std::nullopt;
    source = "CNNC_GPU_FREE_MIB";
    return mib << 20;
  }
  auto smi = llvm::sys::findProgramByName("nvidia-smi");
  if (!smi)
    return std::nullopt;
  SmallString<128> out;
  if (llvm::sys::fs::createTemporaryFile("cnnc-smi", "txt", out))
    return std::nullopt;
  std::string device = "0";
  if (const char *v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    StringRef first = StringRef(v).split(',').first.trim();
    if (!first.empty() && llvm::all_of(first, llvm::isDigit))
      device = first.str();
  }
  std::vector<StringRef> args = {*smi, "--query-gpu=memory.free",
                                 "--format=csv,noheader,nounits", "-i", device};
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(out),
                                          StringRef("")};
  int rc = llvm::sys::ExecuteAndWait(*smi, args, std::nullopt, redirects);
  auto buf = llvm::MemoryBuffer::getFile(out);
  llvm::sys::fs::remove(out);
  uint64_t mib = 0;
  if (rc != 0 || !buf || (*buf)->getBuffer().trim().getAsInteger(10, mib) ||
      mib == 0)
    return std::nullopt;
  source = "nvidia-smi (GPU " + device + ")";
  return mib << 20;
}

struct BatchNeed {
  bool ok = false;
  uint64_t arena = 0, staging = 0;
  uint64_t total() const { return arena + staging + kContextReserveBytes; }
};

/// Runs the import and the planning passes (no CUDA emission) for `batch`.
BatchNeed planFor(const DriverOptions &base, int64_t batch) {
  DriverOptions o = base;
  o.batch = batch;
  o.batchAuto = false;
  Compilation c;
  BatchNeed n;
  if (failed(loadInput(o, c)) || failed(buildTrainStep(o, c)))
    return n;
  auto arena = (*c.module)->getAttrOfType<IntegerAttr>(kArenaBytesAttr);
  auto step = c.module->lookupSymbol<func::FuncOp>("train_step");
  if (!arena || !step)
    return n;
  uint64_t image = 0;
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    if (step.getArgAttr(i, cnn::kInputAttr)) {
      // Staged batches are the images' f32 N x C x H x W (cnn-input-format
      // may have given the argument the padded f16 NHWC type).
      image = cast<RankedTensorType>(step.getArgument(i).getType())
                  .getNumElements();
      if (auto shape =
              step.getArgAttrOfType<DenseI64ArrayAttr>(i, "cnn.image_shape"))
        image = shape[0] * shape[1] * shape[2] * shape[3];
      image *= 4;
    }
  n.ok = true;
  n.arena = arena.getInt();
  n.staging = 2 * 2 * (image + 8 * batch);
  return n;
}

std::string mib(uint64_t bytes) {
  return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB";
}
} // namespace

LogicalResult cnnc::driver::chooseAutoBatch(DriverOptions &o) {
  auto error = [](const Twine &msg) {
    llvm::errs() << "cnnc: error: " << msg << "\n";
    return failure();
  };
  if (!llvm::sys::path::extension(o.inputFile).equals_insensitive(".onnx"))
    return error("--batch auto needs an ONNX model (a .mlir file's batch is "
                 "fixed)");
  if (!o.targetGPU || (o.trainAndRun && !hasGPU())) {
    llvm::errs() << "cnnc: note: --batch auto sizes the batch for a GPU's "
                    "memory; without one (CPU reference interpreter) the "
                    "model's own batch is used\n";
    o.batch = 0;
    return success();
  }
  if (!o.optimize || !o.memoryPlan)
    return error("--batch auto needs the memory plan (not with -O0 or "
                 "--no-memory-plan)");
  std::string source;
  std::optional<uint64_t> free = gpuFreeBytes(source);
  if (!free)
    return error("--batch auto: cannot read the GPU's free memory (nvidia-smi "
                 "failed); give --batch N, or CNNC_GPU_FREE_MIB");
  const uint64_t budget = static_cast<uint64_t>(*free * (1.0 - kMargin));
  auto fits = [&](const BatchNeed &n) { return n.ok && n.total() <= budget; };
  BatchNeed best = planFor(o, 1);
  if (!best.ok)
    return failure(); // the diagnostics are out
  if (!fits(best))
    return error("--batch auto: even batch 1 needs " + mib(best.total()) +
                 " (arena " + mib(best.arena) + " + " +
                 mib(kContextReserveBytes) +
                 " CUDA context reserve), more than " + mib(budget) +
                 " (95 % of the " + mib(*free) + " free)");
  // Doubling, then bisection (to multiples of 8 from 16 on).
  int64_t lo = 1, hi = 0;
  BatchNeed over;
  for (int64_t b = 2; b <= 65536; b *= 2) {
    BatchNeed n = planFor(o, b);
    if (!fits(n)) {
      hi = b;
      over = n;
      break;
    }
    lo = b;
    best = n;
  }
  if (hi == 0)
    hi = lo; // 65536 fits: stop there
  while (hi - lo > (lo >= 16 ? 8 : 1)) {
    int64_t mid = lo + (hi - lo) / 2;
    if (mid >= 16)
      mid -= mid % 8;
    if (mid <= lo)
      break;
    BatchNeed n = planFor(o, mid);
    if (fits(n)) {
      lo = mid;
      best = n;
    } else {
      hi = mid;
      over = n;
    }
  }
  o.batch = lo;
  llvm::errs() << "cnnc: --batch auto: batch " << lo << " (arena "
               << mib(best.arena) << " + staging " << mib(best.staging) << " + "
               << mib(kContextReserveBytes)
               << " CUDA context reserve = " << mib(best.total())
               << " <= 95 % of the " << mib(*free) << " free per " << source
               << ")";
  if (hi > lo && over.ok)
    llvm::errs() << "; batch " << hi << " would need " << mib(over.total());
  llvm::errs() << "\n";
  return success();
}
