//===- InterpreterTest.cpp - reference::run and bindArguments -------------===//
#include "cnnc/Reference/Interpreter.h"
#include "cnnc/Dialect/CNN/CNNOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace mlir;
using namespace cnnc::reference;

namespace {

class InterpreterTest : public ::testing::Test {
protected:
  InterpreterTest() {
    DialectRegistry registry;
    registry.insert<cnnc::cnn::CNNDialect, func::FuncDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
    ctx.allowUnregisteredDialects();
    handler.emplace(&ctx, [this](Diagnostic &d) {
      diagnostics += d.str() + "\n";
      return success();
    });
  }

  func::FuncOp parse(const char *source) {
    module = parseSourceString<ModuleOp>(source, &ctx);
    EXPECT_TRUE(module) << diagnostics;
    func::FuncOp f;
    if (module)
      module->walk([&](func::FuncOp op) {
        if (!f)
          f = op;
      });
    return f;
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  std::optional<ScopedDiagnosticHandler> handler;
  std::string diagnostics;
};

Tensor f32(std::vector<int64_t> shape, std::vector<float> data) {
  Tensor t(ElemKind::F32, std::move(shape));
  t.data = std::move(data);
  return t;
}

} // namespace

TEST(TensorTest, Basics) {
  Tensor t(ElemKind::F16, {2, 3}, 1.5f);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.data.size(), 6u);
  EXPECT_EQ(t.data[5], 1.5f);
  Tensor s(ElemKind::F32, {});
  EXPECT_EQ(s.numel(), 1);
}

TEST_F(InterpreterTest, RunsConvReluAndReusesValues) {
  auto f = parse(R"(
    func.func @f(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x2x2xf32>)
        -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) {
      %c = cnn.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
      %r = cnn.relu %c : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
      %k = cnn.constant dense<[[[[1.0, -100.0], [2.0, 3.0]]]]> : tensor<1x1x2x2xf32>
      %a = cnn.add %r, %k : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
      %s = cnn.scale %c {factor = -1.0 : f32} : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
      %r2 = cnn.relu %s : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
      return %a, %r2 : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
    })");
  ASSERT_TRUE(f);
  auto out = run(f, {f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
                     f32({1, 1, 2, 2}, {1, 1, 1, 1})});
  ASSERT_TRUE(succeeded(out)) << diagnostics;
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].data, (std::vector<float>{13, -84, 26, 31}));
  EXPECT_EQ((*out)[1].data, (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{1, 1, 2, 2}));
}

TEST_F(InterpreterTest, RoundsF16Results) {
  auto f = parse(R"(
    func.func @f(%x: tensor<3xf32>) -> (tensor<3xf16>, tensor<3xf32>) {
      %h = cnn.cast %x : (tensor<3xf32>) -> tensor<3xf16>
      %s = cnn.scale %h {factor = 3.0 : f32} : (tensor<3xf16>) -> tensor<3xf16>
      %b = cnn.cast %s : (tensor<3xf16>) -> tensor<3xf32>
      return %h, %b : tensor<3xf16>, tensor<3xf32>
    })");
  ASSERT_TRUE(f);
  auto out = run(f, {f32({3}, {0.1f, 70000.0f, 1e-8f})});
  ASSERT_TRUE(succeeded(out)) << diagnostics;
  EXPECT_EQ((*out)[0].kind, ElemKind::F16);
  EXPECT_EQ((*out)[0].data[0], 0.0999755859375f);
  EXPECT_TRUE(std::isinf((*out)[0].data[1]));
  EXPECT_EQ((*out)[0].data[2], 0.0f);
  EXPECT_EQ((*out)[1].data[0], roundToHalf(0.0999755859375f * 3.0f));
}

TEST_F(InterpreterTest, LossWithIntegerLabels) {
  auto f = parse(R"(
    func.func @f(%l: tensor<1x3xf32>, %y: tensor<1xi64>) -> tensor<f32> {
      %loss = cnn.softmax_cross_entropy %l, %y : (tensor<1x3xf32>, tensor<1xi64>) -> tensor<f32>
      return %loss : tensor<f32>
    })");
  ASSERT_TRUE(f);
  Tensor labels(ElemKind::I64, {1});
  labels.data = {2};
  auto out = run(f, {f32({1, 3}, {1, 2, 3}), labels});
  ASSERT_TRUE(succeeded(out)) << diagnostics;
  EXPECT_TRUE((*out)[0].shape.empty());
  EXPECT_NEAR((*out)[0].data[0], 0.40760596, 1e-6);
  labels.data = {3};
  EXPECT_TRUE(failed(run(f, {f32({1, 3}, {1, 2, 3}), labels})));
  EXPECT_NE(diagnostics.find("label #0 is 3"), std::string::npos)
      << diagnostics;
}

TEST_F(InterpreterTest, ArgumentErrors) {
  auto f = parse(R"(
    func.func @f(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
      return %x : tensor<2x3xf32>
    })");
  ASSERT_TRUE(f);
  EXPECT_TRUE(failed(run(f, {})));
  EXPECT_NE(diagnostics.find("expected 1 arguments, got 0"), std::string::npos)
      << diagnostics;
  diagnostics.clear();
  EXPECT_TRUE(failed(run(f, {f32({3, 2}, std::vector<float>(6))})));
  EXPECT_NE(diagnostics.find("argument #0 is tensor<3x2xf32> but the function "
                             "expects tensor<2x3xf32>"),
            std::string::npos)
      << diagnostics;
}

TEST_F(InterpreterTest, UnknownOp) {
  auto f = parse(R"(
    func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
      %y = "test.mystery"(%x) : (tensor<2xf32>) -> tensor<2xf32>
      return %y : tensor<2xf32>
    })");
  ASSERT_TRUE(f);
  EXPECT_TRUE(failed(run(f, {f32({2}, {1, 2})})));
  EXPECT_NE(diagnostics.find(
                "reference interpreter: no implementation of 'test.mystery'"),
            std::string::npos)
      << diagnostics;
}

TEST_F(InterpreterTest, BindArguments) {
  auto f = parse(R"(
    func.func @f(%x: tensor<2xf32> {cnn.input},
                 %w: tensor<2xf32> {cnn.param = "fc.weight"},
                 %rm: tensor<2xf32> {cnn.buffer = "bn.running_mean"},
                 %m: tensor<2xf32> {cnn.state = "fc.weight.momentum"},
                 %y: tensor<2xf32>) -> tensor<2xf32> {
      return %x : tensor<2xf32>
    })");
  ASSERT_TRUE(f);
  TensorMap named;
  named["fc.weight"] = f32({2}, {1, 2});
  named["bn.running_mean"] = f32({2}, {3, 4});
  auto args = bindArguments(f, named, {f32({2}, {5, 6}), f32({2}, {7, 8})});
  ASSERT_TRUE(succeeded(args)) << diagnostics;
  ASSERT_EQ(args->size(), 5u);
  EXPECT_EQ((*args)[0].data, (std::vector<float>{5, 6}));
  EXPECT_EQ((*args)[1].data, (std::vector<float>{1, 2}));
  EXPECT_EQ((*args)[2].data, (std::vector<float>{3, 4}));
  EXPECT_EQ((*args)[3].data, (std::vector<float>{0, 0})); // missing state
  EXPECT_EQ((*args)[4].data, (std::vector<float>{7, 8}));

  named.erase("fc.weight");
  EXPECT_TRUE(
      failed(bindArguments(f, named, {f32({2}, {0, 0}), f32({2}, {0, 0})})));
  EXPECT_NE(diagnostics.find("\"fc.weight\""), std::string::npos)
      << diagnostics;
  diagnostics.clear();
  named["fc.weight"] = f32({3}, {1, 2, 3});
  EXPECT_TRUE(
      failed(bindArguments(f, named, {f32({2}, {0, 0}), f32({2}, {0, 0})})));
  EXPECT_NE(diagnostics.find("tensor<3xf32>"), std::string::npos)
      << diagnostics;
}
