//===- CudnnGraph.h - convolutions through cuDNN's graph (backend) API ----===//
//
// On Hopper, cuDNN 9's legacy entry points (cudnnFind*/cudnnConvolution*)
// do not reach the engines its graph API offers: measured on an H100
// (runtime/test/cudnn_fusion_check.cu, docs/benchmarks.md) a ResNet-50 3x3
// conv in NHWC f16 runs 1.3-2x faster as a one-op graph. The Context times
// these plans against the legacy algorithm and keeps the faster one.
//
//===----------------------------------------------------------------------===//

#ifndef CNNRT_CUDNNGRAPH_H
#define CNNRT_CUDNNGRAPH_H

#include <cudnn.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace cnnrt::cudnn_graph {

/// FwdStats: the forward convolution with cuDNN's GenStats epilogue, the
/// per-channel sum and sum of squares of y (f32, uids 4 and 5): the
/// BatchNorm statistics of the MLPerf ResNet recipe (fused_conv2d_stats).
/// BwdDataAddRelu: the backward-data convolution with the residual-gradient
/// epilogue, dx = relu_bwd(dgrad(dy, w) + addend, reluOut) (uids: dx 1,
/// w 2, dy 3, addend 8, reluOut 9; the dgrad and the sum stay on chip as
/// virtual f32 tensors): MLPerf's "dgrad + drelu" (fused_conv2d_bwd_data).
/// BwdFilter with the geometry's prologue: dw = wgrad(relu(x * scale +
/// shift), dy), the normalized input never stored (fused_conv2d_bwd_filter).
/// BwdDataStats: the backward-data convolution with the BatchNorm weight
/// gradient's reductions in its epilogue (MLPerf's "dgrad + drelu + dBN
/// weight"): dz = relu_bwd(dgrad(dy, w) [+ addend], mask) written as dx
/// (uid 1), and per input channel sum(dz) (uid 4) and sum(dz * bnIn)
/// (uid 5), f32 [1, C, 1, 1], bnIn (uid 10) the BatchNorm's input. The
/// mask is reluOut (uid 9) or, with the geometry's `maskFromBnIn`,
/// bnIn * scale + shift (uids 6, 7: the forward BN apply recomputed).
enum class Dir {
  Fwd = 0,
  BwdData = 1,
  BwdFilter = 2,
  FwdStats = 3,
  BwdDataAddRelu = 4,
  BwdDataStats = 5
};

/// One convolution as cuDNN sees it: x [N, C, H, W], w [K, C/groups, R, S],
/// y [N, K, P, Q] (logical order; `nhwc` selects the strides of all three).
struct ConvGeometry {
  int64_t N, C, H, W, K, R, S, P, Q;
  int64_t padH, padW, strideH, strideW, dilH, dilW, groups;
  cudnnDataType_t dtype;
  bool nhwc;
  /// FwdStats and BwdFilter only: x goes through relu(x * scale + shift)
  /// per input channel first (scale, shift: [1, C, 1, 1] of `dtype`, uids 6
  /// and 7).
  bool prologue = false;
  /// BwdDataStats only: an addend (uid 8) is summed before the ReLU
  /// backward, and the mask is recomputed from bnIn (see Dir).
  bool addend = false;
  bool maskFromBnIn = false;
};

/// An owned backend descriptor.
class Desc {
public:
  Desc() = default;
  explicit Desc(cudnnBackendDescriptorType_t type);
  Desc(const Desc &) = delete;
  Desc &operator=(const Desc &) = delete;
  Desc(Desc &&o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc &operator=(Desc &&o) noexcept;
  ~Desc();
  cudnnBackendDescriptor_t get() const { return d_; }
  explicit operator bool() const { return d_ != nullptr; }

private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

/// A finalized execution plan of a one-convolution graph with alpha 1,
/// beta 0 (overwrite). Tensors: x = uid 1, w = uid 2, y = uid 3 (for the
/// backward directions dx and dw take the uids of x and w).
class ConvPlan {
public:
  size_t workspaceBytes() const { return workspace_; }
  /// The position of the engine config in the heuristics' list (mode A),
  /// which recreates this plan (convPlanAt) for the same cuDNN and shape.
  int index() const { return index_; }
  /// The engine config as "e<global engine index>[.k<knob type>=<value>...]"
  /// ("" when cuDNN does not say): what the heuristics position names now.
  /// The algorithm cache keeps it next to the position, so that a process
  /// whose heuristics list differs cannot run another engine under a
  /// cached position without noticing.
  const std::string &engineTag() const { return engineTag_; }
  /// Enqueues the convolution on the handle's stream.
  cudnnStatus_t execute(cudnnHandle_t h, const void *x, const void *w,
                        const void *y, void *workspace) const;
  /// A FwdStats plan: y = conv(x, w), sum and sumSq of y per channel
  /// (with the prologue's scale and shift when the geometry has one).
  cudnnStatus_t executeStats(cudnnHandle_t h, const void *x, const void *w,
                             void *y, float *sum, float *sumSq,
                             const void *scale, const void *shift,
                             void *workspace) const;
  /// A BwdDataAddRelu plan: dx = reluOut > 0 ? dgrad(dy, w) + addend : 0
  /// (addend, reluOut and dx have x's shape).
  cudnnStatus_t executeDgradAddRelu(cudnnHandle_t h, const void *dy,
                                    const void *w, const void *addend,
                                    const void *reluOut, void *dx,
                                    void *workspace) const;
  /// A BwdDataStats plan: dx = relu_bwd(dgrad(dy, w) [+ addend], mask),
  /// sumDx[c] = sum(dx), sumDxBnIn[c] = sum(dx * bnIn) (f32, overwritten);
  /// mask is reluOut, or bnIn * scale + shift with maskFromBnIn (scale and
  /// shift: C each of the data type). Unused pointers may be null.
  cudnnStatus_t executeDgradStats(cudnnHandle_t h, const void *dy,
                                  const void *w, const void *addend,
                                  const void *reluOut, const void *bnIn,
                                  const void *scale, const void *shift,
                                  void *dx, float *sumDx, float *sumDxBnIn,
                                  void *workspace) const;
  /// A BwdFilter plan with the prologue: dw = wgrad(relu(x * scale +
  /// shift), dy) (scale, shift: C each of the data type).
  cudnnStatus_t executeWgradPrologue(cudnnHandle_t h, const void *x,
                                     const void *dy, void *dw,
                                     const void *scale, const void *shift,
                                     void *workspace) const;

private:
  friend struct Builder;
  std::shared_ptr<std::deque<Desc>> graph_; // the graph, shared by its plans
  Desc config_, plan_;
  size_t workspace_ = 0;
  int index_ = -1;
  std::string engineTag_;
};

/// Up to `maxPlans` plans, in the heuristics' order over every engine
/// configuration they rank, whose configs finalize and whose workspace is
/// from `minWorkspace` to `maxWorkspace`; non-deterministic engines are skipped when
/// `deterministic`. Empty (with `why`) when no engine is left.
std::vector<std::unique_ptr<ConvPlan>>
convPlans(cudnnHandle_t h, const ConvGeometry &g, Dir dir, int maxPlans,
          bool deterministic, std::string *why,
          size_t maxWorkspace = SIZE_MAX, size_t minWorkspace = 0);

/// The plan at heuristics position `index` (a cached choice), or null.
std::unique_ptr<ConvPlan> convPlanAt(cudnnHandle_t h, const ConvGeometry &g,
                                     Dir dir, int index, std::string *why);

} // namespace cnnrt::cudnn_graph

#endif // CNNRT_CUDNNGRAPH_H
