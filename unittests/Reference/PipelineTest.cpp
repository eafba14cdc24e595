//===- PipelineTest.cpp - pipelined step vs accumulation over micro-steps -===//
//
// The step split into S stages (cnn-pipeline-partition + cnn-pipeline-split)
// and run by runPipelineStep on M micro-batches must compute exactly what
// the unpartitioned step built with accumulate=M computes over the same M
// micro-batches run one after the other: the same ops on the same values in
// the same order per micro-batch (send/recv copy), and the accumulation sums
// the micro-batches' gradients in the same order, so the results are
// bitwise equal, with BatchNorm (normalized per micro-batch, as PyTorch's
// micro-batched loop and its pipeline APIs do) and without.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Reference/Pipeline.h"
#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Reference/Interpreter.h"
#include "cnnc/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "gtest/gtest.h"

#include <random>

using namespace mlir;
using namespace cnnc::reference;

namespace {

// conv+bias, relu, [a residual block: conv, relu, add,] conv, [BN,] relu,
// global pool, flatten, linear: enough forward ops for four stages; the
// residual's skip crosses a cut when one falls inside the block (its
// gradient is then the sum of the two paths' on the earlier stage).
std::string model(bool bn, bool residual) {
  std::string s = R"(
func.func @forward(%x: tensor<2x3x8x8xf32> {cnn.input},
                   %w1: tensor<4x3x3x3xf32> {cnn.param = "conv1.weight"},
                   %b1: tensor<4xf32> {cnn.param = "conv1.bias"},
                   %w2: tensor<8x4x3x3xf32> {cnn.param = "conv2.weight"},
                   %s: tensor<8xf32> {cnn.param = "bn.weight"},
                   %b: tensor<8xf32> {cnn.param = "bn.bias"},
                   %m: tensor<8xf32> {cnn.buffer = "bn.running_mean"},
                   %v: tensor<8xf32> {cnn.buffer = "bn.running_var"},
                   %w3: tensor<10x8xf32> {cnn.param = "fc.weight"},
                   %w4: tensor<4x4x3x3xf32> {cnn.param = "res.weight"}) -> tensor<2x10xf32> {
  %c = cnn.conv2d %x, %w1 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %cb = cnn.bias_add %c, %b1 : (tensor<2x4x8x8xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %r0 = cnn.relu %cb : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
)";
  s +=
      residual
          ? R"(  %c3 = cnn.conv2d %r0, %w4 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %r3 = cnn.relu %c3 : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %r = cnn.add %r3, %r0 : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
)"
          : R"(  %r = cnn.scale %r0 {factor = 1.0 : f32} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
)";
  s +=
      R"(  %c2 = cnn.conv2d %r, %w2 {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<2x8x4x4xf32>
)";
  s +=
      bn ? R"(  %n = cnn.batch_norm %c2, %s, %b, %m, %v {epsilon = 1.0e-5 : f32} : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
)"
         : R"(  %n = cnn.scale %c2 {factor = 0.5 : f32} : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
)";
  s += R"(  %r2 = cnn.relu %n : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %g = cnn.global_avg_pool %r2 : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
  %f = cnn.flatten %g {axis = 1} : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  %y = cnn.matmul %f, %w3 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<10x8xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}
)";
  return s;
}

class PipelineTest
    : public ::testing::TestWithParam<std::tuple<bool, bool, int>> {
protected:
  PipelineTest() {
    DialectRegistry registry;
    registry.insert<cnnc::cnn::CNNDialect, func::FuncDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
    cnnc::registerCNNPasses();
    handler.emplace(&ctx, [this](Diagnostic &d) {
      diagnostics += d.str() + "\n";
      return success();
    });
  }

  OwningOpRef<ModuleOp> build(const std::string &src, const std::string &pipe) {
    OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(src, &ctx);
    EXPECT_TRUE(m) << diagnostics;
    if (!m)
      return m;
    // `pipe` is a list of module passes (the manager is anchored on the
    // module already).
    PassManager pm(&ctx);
    EXPECT_TRUE(succeeded(parsePassPipeline(pipe, pm))) << pipe;
    EXPECT_TRUE(succeeded(pm.run(*m))) << diagnostics;
    return m;
  }

  MLIRContext ctx;
  std::optional<ScopedDiagnosticHandler> handler;
  std::string diagnostics;
};

Tensor random(RankedTensorType type, std::mt19937 &rng, float scale) {
  Tensor t = Tensor::zeros(type);
  std::normal_distribution<float> d(0.0f, scale);
  for (float &v : t.data)
    v = d(rng);
  return t;
}

TEST_P(PipelineTest, EqualsAccumulationOverMicroBatches) {
  auto [bn, residual, stages] = GetParam();
  const int M = 4;
  std::string autodiff = "cnn-autodiff{accumulate=" + std::to_string(M) + "}";
  OwningOpRef<ModuleOp> plain = build(model(bn, residual), autodiff);
  OwningOpRef<ModuleOp> piped = build(
      model(bn, residual),
      autodiff + ",cnn-pipeline-partition{stages=" + std::to_string(stages) +
          " micro-batches=" + std::to_string(M) +
          " link-gbps=0 launch-us=0},cnn-pipeline-split");
  // The same stages unrolled per stage by cnn-pipeline-schedule (one
  // @stage<s>_step each, stages on threads of their own), in both orders.
  std::vector<OwningOpRef<ModuleOp>> scheduled;
  for (const char *order : {"gpipe", "1f1b"})
    scheduled.push_back(build(
        model(bn, residual),
        autodiff + ",cnn-pipeline-partition{stages=" + std::to_string(stages) +
            " micro-batches=" + std::to_string(M) +
            " link-gbps=0 launch-us=0},cnn-pipeline-split,"
            "cnn-pipeline-schedule{schedule=" +
            order +
            "}"));
  ASSERT_TRUE(plain && piped && scheduled[0] && scheduled[1]);
  auto step = plain->lookupSymbol<func::FuncOp>("train_step");
  ASSERT_TRUE(step);
  ASSERT_FALSE(piped->lookupSymbol<func::FuncOp>("train_step"));
  auto plan = (*piped)->getAttrOfType<DictionaryAttr>("cnn.pipeline");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan.getAs<IntegerAttr>("stages").getInt(), stages);
  // With the residual block, two stages cut inside it: the skip and the
  // block's convolution cross (and both gradients come back), so the
  // split's multi-reader transfers and the gradient sum are exercised
  // (link-gbps=0 launch-us=0: the roofline's compute balance alone chooses
  // that cut; the transfers' or the launches' cost would move it).
  if (residual && stages == 2) {
    EXPECT_EQ(plan.getAs<DenseI64ArrayAttr>("cut_tensors")[0], 4);
  }

  // Two steps of M micro-batches: the second starts from the first's
  // update, so the update itself (applied once per M) is compared too.
  std::mt19937 rng(7);
  std::vector<Tensor> args(step.getNumArguments());
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto type = cast<RankedTensorType>(step.getArgument(i).getType());
    bool state = bool(step.getArgAttr(i, cnnc::cnn::kStateAttr));
    auto name = step.getArgAttrOfType<StringAttr>(i, cnnc::cnn::kBufferAttr);
    args[i] = state ? Tensor::zeros(type)
              : name && name.getValue().ends_with("var")
                  ? Tensor::zeros(type, 1.0f)
                  : random(type, rng, 0.5f);
    if (step.getArgAttr(i, cnnc::cnn::kLRAttr))
      args[i] = Tensor::zeros(type, 0.1f);
  }
  std::vector<Tensor> seqArgs = args, pipeArgs = args;
  int64_t micro = 0;
  for (int k = 0; k < 2; ++k) {
    std::vector<std::vector<Tensor>> microArgs;
    std::vector<float> seqLoss;
    for (int m = 0; m < M; ++m) {
      ++micro;
      std::vector<Tensor> a = seqArgs;
      for (unsigned i = 0; i < step.getNumArguments(); ++i) {
        auto type = cast<RankedTensorType>(step.getArgument(i).getType());
        if (step.getArgAttr(i, cnnc::cnn::kInputAttr))
          a[i] = random(type, rng, 1.0f);
        else if (step.getArgAttr(i, cnnc::cnn::kLabelsAttr)) {
          a[i] = Tensor::zeros(type);
          for (float &l : a[i].data)
            l = float(rng() % 10);
        } else if (step.getArgAttr(i, cnnc::cnn::kStepAttr))
          a[i] = Tensor::zeros(type, float(micro));
      }
      // The pipeline takes each micro-batch's own image, labels and step
      // with its current persistent state (runPipelineStep threads it).
      std::vector<Tensor> p = a;
      for (unsigned i = 0; i < step.getNumArguments(); ++i)
        if (step.getArgAttr(i, cnnc::cnn::kParamAttr) ||
            step.getArgAttr(i, cnnc::cnn::kBufferAttr) ||
            step.getArgAttr(i, cnnc::cnn::kStateAttr))
          p[i] = pipeArgs[i];
      microArgs.push_back(p);
      auto out = run(step, a);
      ASSERT_TRUE(succeeded(out)) << diagnostics;
      seqLoss.push_back((*out)[0].data[0]);
      // Results after the loss update the argument of the same name.
      for (unsigned r = 1; r < step.getNumResults(); ++r)
        for (const char *key : {cnnc::cnn::kParamAttr, cnnc::cnn::kBufferAttr,
                                cnnc::cnn::kStateAttr})
          if (auto n = step.getResultAttrOfType<StringAttr>(r, key))
            for (unsigned i = 0; i < step.getNumArguments(); ++i)
              if (step.getArgAttrOfType<StringAttr>(i, key) == n)
                seqArgs[i] = (*out)[r];
    }
    std::vector<float> pipeLoss;
    auto out = runPipelineStep(*piped, microArgs, &pipeLoss);
    ASSERT_TRUE(succeeded(out)) << diagnostics;
    for (int m = 0; m < M; ++m)
      EXPECT_EQ(pipeLoss[m], seqLoss[m])
          << "step " << k << " micro-batch " << m;
    for (size_t o = 0; o < scheduled.size(); ++o) {
      std::vector<float> schedLoss;
      auto sched =
          runScheduledPipelineStep(*scheduled[o], microArgs, &schedLoss);
      ASSERT_TRUE(succeeded(sched)) << diagnostics;
      EXPECT_EQ(schedLoss, seqLoss) << "schedule " << o << " step " << k;
      ASSERT_EQ(sched->size(), out->size());
      for (size_t r = 0; r < out->size(); ++r)
        EXPECT_EQ((*sched)[r].data, (*out)[r].data)
            << "schedule " << o << " result " << r << " step " << k;
    }
    ASSERT_EQ(out->size(), step.getNumResults());
    for (unsigned r = 1; r < step.getNumResults(); ++r)
      for (const char *key : {cnnc::cnn::kParamAttr, cnnc::cnn::kBufferAttr,
                              cnnc::cnn::kStateAttr})
        if (auto n = step.getResultAttrOfType<StringAttr>(r, key))
          for (unsigned i = 0; i < step.getNumArguments(); ++i)
            if (step.getArgAttrOfType<StringAttr>(i, key) == n) {
              pipeArgs[i] = (*out)[r];
              // Bitwise: the same f32 operations in the same order.
              EXPECT_EQ(pipeArgs[i].data, seqArgs[i].data)
                  << n.str() << " after step " << k;
            }
  }
  // A stage that never sends (its sends erased) stops the others with an
  // error naming the tag they wait for, never a hang.
  if (!bn && !residual && stages == 2) {
    auto s0 = scheduled[0]->lookupSymbol<func::FuncOp>("stage0_step");
    ASSERT_TRUE(s0);
    s0.walk([](cnnc::cnn::SendOp op) { op.erase(); });
    std::vector<std::vector<Tensor>> microArgs(M, pipeArgs);
    diagnostics.clear();
    EXPECT_TRUE(failed(runScheduledPipelineStep(*scheduled[0], microArgs)));
    EXPECT_NE(diagnostics.find("stage 1 waits for tag 0 from stage 0, but "
                               "every other stage is waiting or done"),
              std::string::npos)
        << diagnostics;
  }
  // The update happened: the weights moved (the BN-free model leaves its
  // unused bn.* parameters alone).
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto n = step.getArgAttrOfType<StringAttr>(i, cnnc::cnn::kParamAttr);
    if (n && (bn || !n.getValue().starts_with("bn.")) &&
        (residual || !n.getValue().starts_with("res."))) {
      EXPECT_NE(pipeArgs[i].data, args[i].data) << n.str();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(StagesAndBN, PipelineTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Bool(),
                                            ::testing::Values(2, 4)));

} // namespace
