//===- Session.h - shared machinery of trainMain and the C API ---*- C++
//-*-===//
//
// Internal header (not installed).
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_SRC_SESSION_H
#define CNNRT_SRC_SESSION_H

#include "cnnrt/Dataset.h"
#include "cnnrt/cnnrt.h"

#include <string>
#include <vector>

namespace cnnrt {

/// How staged images become the InputImage tensor: x = byte / 255 (or the
/// float as is), then (x - mean[c]) / std[c] for numNorm == C channels
/// (numNorm == 0: no normalization). The same arithmetic as
/// cnnrt::normalizeBatch on the CPU.
struct InputFormat {
  static constexpr int kMaxChannels = 16;
  bool f32 = false;
  int numNorm = 0;
  float mean[kMaxChannels] = {};
  float std[kMaxChannels] = {};
};

/// The elements of the InputLabel tensor: the batch, or N x H x W per-pixel
/// labels of a dense-prediction step.
inline int64_t labelCount(const TensorSpec &lab) {
  int64_t n = 1;
  for (int r = 0; r < lab.rank; ++r)
    n *= lab.dims[r];
  return n;
}

/// Converts `batch` staged images/int32 labels on the device into the
/// InputImage/InputLabel tensors (enqueued on ctx.stream()).
void launchInputConvert(Context &ctx, const void *dImages,
                        const int32_t *dLabels,
                        const InputFormat &format = InputFormat());
/// The same for float32 NCHW images and int64 labels already on the device
/// (the Python entry's tensors): x is copied as is (converted to the input
/// tensor's dtype and layout). Either pointer may be null (eval: no labels).
void launchInputConvertF32(Context &ctx, const float *dImages,
                           const int64_t *dLabels);
/// Converts `n` elements of an f32 or f16 arena tensor to f32 at `dst`
/// (device memory), on ctx.stream().
void launchToF32(Context &ctx, const TensorSpec &t, float *dst, int64_t n);
/// Writes ScalarLR and ScalarStep (if the model has them) on ctx.stream().
void launchSetScalars(Context &ctx, float lr, int64_t step);
/// Writes `value` into the one-element f32/f16 arena tensor `t` on
/// ctx.stream() (no host synchronization).
void launchSetScalar(Context &ctx, const TensorSpec &t, float value);

/// Copies Param/Buffer/OptState/LossScale tensors from `entries` into the
/// arena. Param and Buffer entries are required; a missing OptState starts at
/// zero; a missing LossScale starts at 65536. f32 <-> f16 is converted.
bool loadStateIntoArena(Context &ctx, const std::vector<TensorEntry> &entries,
                        const std::string &source, std::string &err);
/// Reads the persistent state (Param/Buffer/OptState/LossScale) to the host.
/// Synchronizes ctx.stream().
std::vector<TensorEntry> readStateFromArena(Context &ctx);

/// The state a checkpoint holds: Param, Buffer, OptState, LossScale.
bool persistent(Role r);
/// Reads a scalar f32/f16 tensor (synchronizes ctx.stream()).
float readScalar(Context &ctx, const TensorSpec &t);

/// spec.trainStep(ctx) while ctx.stream() is being captured into a CUDA
/// graph: an error thrown inside ends the capture (the partial graph is
/// dropped) before it propagates, so that the stream is not left capturing.
void captureStep(Context &ctx, const ModelSpec &spec);

/// A pipeline stage's first step, before it runs for real: the step once
/// with its asynchronous transfers off (DistHooks::stageAlone: sends do
/// nothing, receives read zeros), and every tensor but the temporaries
/// (parameters, optimizer state, statistics, loss scale, inputs, scalars)
/// put back as it was. The libraries' set-up happens in a step's first
/// run: algorithms timed, workspaces grown, kernels loaded at their first
/// launch (CUDA's lazy loading); each of those may synchronize the whole
/// device, and a stage that posts its receives ahead (interleaved stages
/// post all of them at the top) has receive kernels spinning on its link
/// streams until a neighbour sends, which it does only after its own
/// set-up: the stages then wait for each other (2 H200s, session 35: both
/// stages stuck in their first step, every receive pending and no send
/// issued). Alone, a stage's device holds no transfer, and the real first
/// step finds everything set up. A step without asynchronous transfers:
/// nothing. Synchronizes ctx.stream().
void runStageAlone(Context &ctx, const ModelSpec &spec);

/// Whether the step is captured in segments between its pipeline transfers
/// (DistHooks::captureSegments) rather than run uncaptured: the compiler
/// marked it uncaptured (ModelSpec::uncapturedWhy) and
/// CNNRT_SEGMENTED_CAPTURE (default on) asks for segments.
bool segmentedStep(const Context &ctx, const ModelSpec &spec);

/// Said once at start-up where the step is not captured whole (stderr).
void noteUncapturedStep(const Context &ctx, const ModelSpec &spec);

/// How the executable and the C API enqueue a training step, one call a
/// step: a pipeline stage's first step runs once alone before it
/// (runStageAlone); steps run uncaptured until the `captureAt`-th of this
/// process (the libraries' lazy set-up cannot be captured: the C API
/// captures the third, the executable the second, or the third when it
/// profiles the second); then, with graphs on, the step is captured once
/// and replayed: whole as one CUDA graph, or in segments between its
/// pipeline transfers where the compiler marked it uncaptured
/// (segmentedStep), or not at all (marked uncaptured, no segments).
class StepRunner {
public:
  explicit StepRunner(bool useGraph) : useGraph(useGraph) {}
  ~StepRunner();
  StepRunner(const StepRunner &) = delete;
  StepRunner &operator=(const StepRunner &) = delete;

  /// Enqueues the next step on ctx.stream().
  void enqueue(Context &ctx, const ModelSpec &spec, int64_t captureAt);
  /// Whether the step replays as one CUDA graph.
  bool wholeGraph() const { return exec != nullptr; }

private:
  bool useGraph;
  int64_t stepsRun = 0;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool segments = false; ///< captured in segments (DistHooks)
};

} // namespace cnnrt

#endif // CNNRT_SRC_SESSION_H
