//===- PipelineCUDA.cpp - pipeline stages for the CUDA target -------------===//
//
// One executable for S pipeline stages (docs/pipeline-parallel.md, "CUDA
// side"): each stage is compiled as a training step of its own (its own
// arena plan, lowering choices and launches) and printed by the ordinary
// emitter; the S texts share the kernel prelude and go into one CUDA file,
// each stage's generated code in a namespace of its own (their kernels'
// names repeat), with a main that hands the S ModelSpecs to the runtime's
// pipeline driver. The file compiles as one unit (SplitCUDA's cut assumes
// one step).
//
//===----------------------------------------------------------------------===//
#include "PipelineCUDA.h"

#include "cnnc/Driver/NvccCompile.h"
#include "cnnc/Target/CUDA/EmitCUDA.h"
#include "cnnc/Transforms/Passes.h"
#include "cnnc/Transforms/Pipeline.h"
#include "cnnc/Transforms/PipelinePlan.h"
#include "cnnrt/TensorFile.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace cnnc;
using namespace cnnc::driver;

static constexpr llvm::StringLiteral kKernelsMarker =
    "// ---- generated kernels ----\n";

LogicalResult cnnc::driver::compilePipelineCUDA(const DriverOptions &o,
                                                Compilation &c,
                                                std::string &exePath) {
  std::unique_ptr<CNNPipelineOptions> p = pipelineOptions(o);
  // The options were checked before the target was known (validateOptions):
  // the CUDA target's own refusals now.
  std::string err;
  if (failed(verifyCNNPipelineOptions(
          *p, [&](const Twine &msg) { err = msg.str(); }, "--")))
    return fail(c, err);
  if (o.trainAndRun)
    return fail(c, "cnnc train --pipeline-stages on the GPU is not built yet "
                   "(it validates on the test split, which pipeline stages "
                   "do not run): compile with -o train and run ./train, or "
                   "train on the reference interpreter (--run-reference)");
  if (!(*c.module).lookupSymbol("train_step"))
    return fail(c, "--pipeline-stages: the module has no @train_step");
  FailureOr<OwningOpRef<ModuleOp>> split = splitIntoPipelineStages(
      *c.module, getPartitionOptions(*p), &llvm::outs(),
      p->pipelineSchedule, getSplitOptions(*p));
  if (failed(split))
    return failure();
  auto plan = (**split)->getAttrOfType<DictionaryAttr>(kPipelineAttr);
  int64_t stages = cast<IntegerAttr>(plan.get("stages")).getInt();
  // --pipeline-memory-mb alone: the fewest stages that fit; one means the
  // step needs no pipeline on a GPU of that memory.
  if (stages < 2 && p->pipelineStages == 0)
    return fail(c, "--pipeline-memory-mb " + Twine(p->pipelineMemoryMB) +
                       ": the step fits one stage (the plan above), and the "
                       "CUDA target runs 2 or more: compile without "
                       "--pipeline-memory-mb to run it on one GPU");
  if (stages < 2)
    return fail(c, "--pipeline-stages: the plan has " + Twine(stages) +
                       " stage: the CUDA target runs 2 or more (without "
                       "--pipeline-stages the step runs on one GPU)");

  std::string header, stageTexts;
  for (int64_t s = 0; s < stages; ++s) {
    OwningOpRef<ModuleOp> m(cast<ModuleOp>((**split)->clone()));
    PassManager pm(&c.context);
    if (failed(applyPassManagerCLOptions(pm)))
      return failure();
    CNNPipelineStageOptions so;
    so.stage = s;
    pm.addPass(createCNNPipelineStage(so));
    CNNPipelineOptions stepOptions;
    stepOptions.copyOptionValuesFrom(*p);
    stepOptions.arch = o.arch;
    buildCNNStepPipeline(pm, stepOptions);
    if (failed(pm.run(*m)))
      return failure();
    CUDAEmitOptions eo;
    eo.modelName =
        (llvm::sys::path::stem(o.inputFile) + "_stage" + Twine(s)).str();
    eo.defaultLR = (float)learningRate(o);
    if (o.steps > 0)
      eo.defaultSteps = o.steps;
    std::string cu;
    llvm::raw_string_ostream os(cu);
    if (failed(emitCUDA(*m, os, eo)))
      return failure();
    os.flush();
    // The prelude (before the marker) is the same for every stage but for
    // the header comment's first two lines (the model's name and counts).
    size_t at = cu.find(kKernelsMarker.str());
    if (at == std::string::npos)
      return fail(c, "--pipeline-stages: stage " + Twine(s) +
                         "'s CUDA has no kernels marker");
    std::string head = cu.substr(0, at);
    size_t firstEnd = head.find('\n');
    size_t secondEnd = firstEnd == std::string::npos
                           ? std::string::npos
                           : head.find('\n', firstEnd + 1);
    if (secondEnd == std::string::npos)
      return fail(c, "--pipeline-stages: stage " + Twine(s) +
                         "'s CUDA has no two-line header comment");
    size_t afterComment = secondEnd + 1;
    // The step's all-reduce count (its data-parallel comment and
    // CNNC_NUM_BUCKETS) differs between stages: it moves to the stage's
    // own text, the macro redefined before the stage's code reads it.
    std::string buckets;
    for (llvm::StringRef prefix :
         {"// Data parallel: ", "#define CNNC_NUM_BUCKETS "}) {
      size_t at = head.find(prefix.str(), afterComment);
      if (at == std::string::npos)
        continue;
      size_t end = head.find('\n', at);
      end = end == std::string::npos ? head.size() : end + 1;
      buckets += head.substr(at, end - at);
      head.erase(at, end - at);
    }
    if (!buckets.empty())
      buckets = "#undef CNNC_NUM_BUCKETS\n" + buckets;
    if (s == 0)
      header = head.substr(afterComment);
    else if (head.substr(afterComment) != header)
      return fail(c, "--pipeline-stages: stage " + Twine(s) +
                         "'s CUDA prelude differs from stage 0's");
    std::string body = cu.substr(at + kKernelsMarker.size());
    // The stage has no main of its own: the pipeline's picks the stage.
    size_t mainAt = body.find("int main(int argc, char **argv)");
    if (mainAt != std::string::npos)
      body.erase(mainAt, body.find('\n', mainAt) + 1 - mainAt);
    stageTexts += head.substr(0, afterComment) + buckets +
                  "namespace cnnc_stage" +
                  std::to_string(s) + " {\n" + body +
                  "} // namespace cnnc_stage" + std::to_string(s) + "\n\n";
  }
  std::string cu = "// Generated by cnnc: a training step in " +
                   std::to_string(stages) +
                   " pipeline stages, one per GPU (docs/pipeline-parallel.md)"
                   ".\n" +
                   header + "#include \"cnnrt/Pipeline.h\"\n" +
                   kKernelsMarker.str() + stageTexts;
  std::string stageTable = "static const cnnrt::ModelSpec *const kStages[] = {";
  for (int64_t s = 0; s < stages; ++s)
    stageTable +=
        (s ? ", &cnnc_stage" : "&cnnc_stage") + std::to_string(s) + "::kModel";
  stageTable += "};\n";
  // Pipeline x data parallel (--gpus D): D replicas of every stage, each
  // stage's gradients averaged over its replicas (cnn-data-parallel on the
  // stage's step), S x D processes.
  const int64_t replicas = p->worldSize >= 1 ? p->worldSize : 1;
  if (o.emit == "lib") {
    // --emit lib: no main; the C API (cnnrt_c.h) creates a session of the
    // stage the calling process runs (the Python entry under torchrun:
    // stage = rank % S, python/cnnc/pipeline.py).
    cu += "// The stages of a shared library: the C API (cnnrt_c.h) creates "
          "a\n// session of the stage this process runs.\n" +
          stageTable +
          "#define CNNC_EXPORT extern \"C\" "
          "__attribute__((visibility(\"default\")))\n"
          "CNNC_EXPORT int cnnrt_pipeline_stages(void) { return " +
          std::to_string(stages) +
          "; }\n"
          "CNNC_EXPORT int cnnrt_pipeline_replicas(void) { return " +
          std::to_string(replicas) +
          "; }\n"
          "CNNC_EXPORT const void *cnnrt_pipeline_stage_spec(int stage) {\n"
          "  return stage >= 0 && stage < " +
          std::to_string(stages) +
          " ? kStages[stage] : nullptr;\n}\n";
  } else {
    cu += "int main(int argc, char **argv) {\n  " + stageTable +
          "  return cnnrt::trainPipelineMain(argc, argv, kStages, " +
          std::to_string(stages) +
          (replicas > 1 ? ", " + std::to_string(replicas) : std::string()) +
          ");\n}\n";
  }

  if (o.emit == "cuda")
    return writeCUDASource(o, c, cu);
  exePath = o.outputFile.empty()
                ? std::string(o.emit == "lib" ? "libstep.so" : "train")
                : o.outputFile;
  NvccOptions no;
  no.arch = o.arch;
  no.runtimeDir = o.runtimeDir;
  no.argv0 = o.argv0;
  no.wholeUnit = true;
  no.library = o.emit == "lib";
  return buildWithNvcc(c, cu, no, exePath);
}
