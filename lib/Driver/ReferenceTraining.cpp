//===- ReferenceTraining.cpp - the CPU reference training loop ------------===//
//
// `cnnc --train --run-reference` (and `cnnc train` without a GPU): the
// training step on the reference interpreter, with the generated
// executable's data sources, schedules, evaluation, log lines and
// checkpoints (cnnrt/TrainLoop.h); data-parallel ranks are threads.
//
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"
#include "cnnc/Driver/Driver.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Reference/Communicator.h"
#include "cnnc/Reference/Pipeline.h"
#include "cnnc/Transforms/PipelinePlan.h"
#include "cnnrt/Dataset.h"
#include "cnnrt/TensorFile.h"
#include "cnnrt/TrainLoop.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::driver;

namespace {
/// "16x3x3x3": a shape as diagnostics print it.
std::string dimsText(ArrayRef<int64_t> dims) {
  return llvm::join(llvm::map_range(dims,
                                    [](int64_t d) { return std::to_string(d); }),
                    "x");
}

std::string argName(func::FuncOp f, unsigned i, const char *attr) {
  if (auto s = f.getArgAttrOfType<StringAttr>(i, attr))
    return s.str();
  return "";
}
} // namespace

//===----------------------------------------------------------------------===//
// Reference training
//===----------------------------------------------------------------------===//

namespace {
/// The image argument's form. cnn-input-format (the CUDA target's pipeline,
/// which `--target gpu --run-reference` runs) folds the batch's cast to f16,
/// transpose to NHWC and zero channel padding into the argument
/// (`cnn.image_shape`, `cnn.image_layout`), which the runtime's input
/// conversion writes; the data sources give f32 N x C x H x W batches, which
/// toArgument converts the same way.
struct ImageFormat {
  RankedTensorType loaded;   // what the data sources fill: f32 N, C, H, W
  RankedTensorType argument; // the step's image argument
  bool nhwc = false;

  ImageFormat(func::FuncOp f, unsigned arg)
      : loaded(cast<RankedTensorType>(f.getArgument(arg).getType())),
        argument(loaded) {
    auto shape = f.getArgAttrOfType<DenseI64ArrayAttr>(arg, "cnn.image_shape");
    if (!shape)
      return;
    loaded = RankedTensorType::get(shape.asArrayRef(),
                                   Float32Type::get(f.getContext()));
    auto layout = f.getArgAttrOfType<cnn::LayoutAttr>(arg, "cnn.image_layout");
    nhwc = layout && layout.getValue() == cnn::Layout::NHWC;
  }
  bool folded() const { return loaded != argument; }

  /// `nchw` (f32 N x C x H x W, any N) in the argument's form: transposed
  /// to NHWC, the channels beyond C zero, rounded to f16 where the argument
  /// is f16.
  reference::Tensor toArgument(const reference::Tensor &nchw) const {
    if (!folded())
      return nchw;
    std::vector<int64_t> shape(argument.getShape());
    shape[0] = nchw.shape[0];
    reference::Tensor out(reference::elemKindOf(argument.getElementType()),
                          shape);
    const bool half = argument.getElementType().isF16();
    const int64_t N = nchw.shape[0], C = nchw.shape[1], H = nchw.shape[2],
                  W = nchw.shape[3], padded = shape[nhwc ? 3 : 1];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t ch = 0; ch < C; ++ch)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            float v = nchw.data[((n * C + ch) * H + h) * W + w];
            int64_t at = nhwc ? ((n * H + h) * W + w) * padded + ch
                              : ((n * padded + ch) * H + h) * W + w;
            out.data[at] = half ? reference::roundToHalf(v) : v;
          }
    return out;
  }
};

/// Where the step's batches come from: a dataset or one fixed batch.
struct BatchSource {
  std::unique_ptr<cnnrt::SampleSource> set, test;
  std::unique_ptr<cnnrt::StreamLoader> loader;
  cnnrt::Normalization norm;
  int workers = 0;
  reference::Tensor fixedImages, fixedLabels; // images in the argument's form
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
                       const ImageFormat &image, RankedTensorType labelsType,
                       int64_t classes, int64_t ignoreIndex, bool wantTest,
                       BatchSource &src, int64_t ranks = 1) {
  RankedTensorType imageType = image.loaded;
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
  RankedTensorType argumentType = image.argument;
  if (ranks > 1) {
    auto global = [&](RankedTensorType t) {
      SmallVector<int64_t> shape(t.getShape());
      shape[0] *= ranks;
      return RankedTensorType::get(shape, t.getElementType());
    };
    imageType = global(imageType);
    argumentType = global(argumentType);
  }
  const bool dense = labelsShape.size() > 1;
  std::string err;
  if (!o.inputTensor.empty()) {
    if (o.labelsTensor.empty())
      return fail(c, "a fixed batch needs both --input and --labels");
    if (failed(readTensor(o.inputTensor, src.fixedImages, err)) ||
        failed(readTensor(o.labelsTensor, src.fixedLabels, err)))
      return fail(c, "cannot read the fixed batch: " + err);
    // --input is N x C x H x W f32 (converted here) or already in the
    // argument's form.
    if (src.fixedImages.matches(imageType))
      src.fixedImages = image.toArgument(src.fixedImages);
    else if (!src.fixedImages.matches(argumentType))
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
  // The sources keep the class count in an int (a count above 2^31-1
  // wrapped to a negative one, and the synthetic labels overflowed).
  if (classes < 1 || classes > std::numeric_limits<int32_t>::max())
    return fail(c, "the model's output has " + Twine(classes) +
                       " classes: the training data loader supports 1 to "
                       "2^31-1");
  d.numClasses = static_cast<int>(classes);
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

/// The next batch: `loaded` (f32 N x C x H x W) from the loader, `images`
/// in the image argument's form.
LogicalResult nextBatch(Compilation &c, BatchSource &src,
                        const ImageFormat &image, reference::Tensor &loaded,
                        reference::Tensor &images, reference::Tensor &labels) {
  if (!src.loader) {
    images = src.fixedImages;
    labels = src.fixedLabels;
    return success();
  }
  std::vector<int32_t> l(labels.numel());
  std::string err;
  if (!src.loader->nextF32(loaded.data.data(), l.data(), src.norm, err))
    return fail(c, err);
  images = image.toArgument(loaded);
  for (size_t i = 0; i < l.size(); ++i)
    labels.data[i] = (float)l[i];
  return success();
}

/// Top-1/top-5 of @forward (inference-mode BN, running statistics) over the
/// whole validation split, as the GPU executable's evaluation.
FailureOr<cnnrt::EvalResult> evaluate(Compilation &c, func::FuncOp forward,
                                      const reference::TensorMap &state,
                                      BatchSource &src,
                                      const ImageFormat &image, int64_t step,
                                      double epoch) {
  cnnrt::LoaderOptions lo;
  lo.batch = image.loaded.getDimSize(0);
  lo.shuffle = false;
  lo.workers = src.workers;
  cnnrt::StreamLoader loader(*src.test, lo);
  reference::Tensor images = reference::Tensor::zeros(image.loaded);
  std::vector<int32_t> labels(lo.batch);
  cnnrt::EvalResult r;
  r.step = step;
  r.epoch = epoch;
  std::string err;
  for (int64_t seen = 0, total = src.test->size(); seen < total;) {
    if (!loader.nextF32(images.data.data(), labels.data(), src.norm, err))
      return fail(c, err);
    auto args =
        reference::bindArguments(forward, state, {image.toArgument(images)});
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
  const ImageFormat imageFormat(step, imageArg);
  auto labelsType =
      cast<RankedTensorType>(step.getArgument(labelsArg).getType());
  int64_t classes = 0, ignoreIndex = pipelineOptions(o)->ignoreIndex;
  step.walk([&](cnn::SoftmaxCrossEntropyOp op) {
    classes = op.getLogits().getType().getDimSize(1);
    ignoreIndex = op.getIgnoreIndex();
  });
  auto forward = c.module->lookupSymbol<func::FuncOp>("forward");
  const int ranks = static_cast<int>(o.worldSize);
  // Pipeline stages (docs/pipeline-parallel.md): the step's batch is one
  // micro-batch; a step reads M of them and runs the stages of a split copy
  // of the module. `parts`: the slices of each batch read (ranks or
  // micro-batches; the options refuse both at once).
  OwningOpRef<ModuleOp> piped;
  const int micro = static_cast<int>(pipelineOptions(o)->microBatches);
  if (isPipelined(*pipelineOptions(o))) {
    // --pipeline-memory-mb alone: stages 0, the fewest that fit.
    FailureOr<OwningOpRef<ModuleOp>> p = splitIntoPipelineStages(
        *c.module, getPartitionOptions(*pipelineOptions(o)), &llvm::outs(),
        pipelineOptions(o)->pipelineSchedule,
        getSplitOptions(*pipelineOptions(o)));
    if (failed(p))
      return failure();
    piped = std::move(*p);
  }
  const int parts = piped ? micro : ranks;
  BatchSource src;
  if (failed(openData(o, c, imageFormat, labelsType, classes, ignoreIndex,
                      /*wantTest=*/bool(forward), src, parts)))
    return failure();
  const int rankBatch = imageType.getDimSize(0);
  const int batch = rankBatch * parts; // the global batch
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
                 << llvm::formatv("{0}", pipelineOptions(o)->bucketMB.getValue())
                 << " MiB\n";
  }
  auto epochAt = [&](int64_t k) {
    return src.set ? k * (double)batch / (double)src.set->size() : 0.0;
  };
  auto runEval = [&](const reference::TensorMap &state,
                     int64_t k) -> LogicalResult {
    auto r = evaluate(c, forward, state, src, imageFormat, k, epochAt(k));
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
  // The global batch as the loader fills it, and in the argument's form.
  reference::Tensor loaded = reference::Tensor::zeros(RankedTensorType::get(
      [&] {
        SmallVector<int64_t> s(imageFormat.loaded.getShape());
        s[0] = batch;
        return s;
      }(),
      imageFormat.loaded.getElementType()));
  reference::Tensor images;
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
    if (failed(nextBatch(c, src, imageFormat, loaded, images, labels)))
      return failure();
    const double lr = plan.lr.at(k);
    std::vector<std::vector<reference::Tensor>> rankArgs(parts);
    for (int r = 0; r < parts; ++r) {
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
          args[i] = parts == 1 ? images : slice(images, r, type);
        else if ((int)i == labelsArg)
          args[i] = parts == 1 ? labels : slice(labels, r, type);
        else if ((int)i == lrArg)
          args[i] = reference::Tensor::zeros(type, (float)lr);
        else if ((int)i == stepArg)
          // Micro-batch r of a pipelined step is micro-step (k-1)*M + r + 1.
          args[i] = reference::Tensor::zeros(
              type, piped ? (float)((k - 1) * micro + r + 1) : (float)k);
        else if (states[piped ? 0 : r].count(name)) {
          args[i] = states[piped ? 0 : r][name];
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
    std::vector<float> microLosses;
    if (piped) {
      // Each stage's unrolled step (cnn-pipeline-schedule) on a thread of
      // its own, as each would run on its GPU.
      results[0] = reference::runScheduledPipelineStep(*piped, rankArgs,
                                                       &microLosses);
    } else if (ranks == 1) {
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
    // A pipelined step's loss: the mean over its micro-batches (the
    // global batch's, as the data-parallel average).
    if (piped) {
      loss = 0;
      for (float l : microLosses)
        loss += l / (float)microLosses.size();
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
