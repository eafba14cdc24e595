// GPU check of runStageAlone (runtime/src/Session.h): a pipeline stage's
// first step run once with its transfers off, its state put back after it.
// A fake step adds 1 to a parameter, an optimizer state, a loss scale and
// a temporary; afterwards every tensor but the temporary holds its old
// values, the step ran once, the transfers were turned off and on again
// (also when the step throws), and a step without asynchronous transfers
// (the hook answers false) does not run at all. Exit 3 without a GPU.
#include "GpuCheck.cuh"
#include "Session.h"
#include "cnnrt/cnnrt.h"

#include <cstdio>
#include <stdexcept>
#include <vector>

using namespace cnnrt;

namespace {

int failures = 0;
void expect(bool ok, const char *what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what);
    ++failures;
  }
}

constexpr int kN = 64;
const TensorSpec kTensors[] = {
    {"w", DType::F32, 1, {kN}, 0, kN * 4, Role::Param},
    {"m", DType::F32, 1, {kN}, 256, kN * 4, Role::OptState},
    {"scale", DType::F32, 1, {1}, 512, 4, Role::LossScale},
    {"t", DType::F32, 1, {kN}, 768, kN * 4, Role::Temp},
};

int gStepRuns = 0, gOff = 0, gOn = 0;
bool gAsync = true, gThrow = false;

__global__ void addOne(float *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] += 1.f;
}

void fakeStep(Context &ctx) {
  ++gStepRuns;
  for (const TensorSpec &t : kTensors)
    addOne<<<1, kN, 0, ctx.stream()>>>(
        reinterpret_cast<float *>(ctx.arena() + t.offset),
        static_cast<int>(t.bytes / 4));
  if (gThrow)
    throw std::runtime_error("the step failed");
}

bool fakeStageAlone(Context &, bool alone) {
  if (!gAsync)
    return false;
  ++(alone ? gOff : gOn);
  return true;
}

std::vector<float> read(Context &ctx, const TensorSpec &t) {
  std::vector<float> v(t.bytes / 4);
  cudaStreamSynchronize(ctx.stream());
  cudaMemcpy(v.data(), ctx.arena() + t.offset, t.bytes,
             cudaMemcpyDeviceToHost);
  return v;
}

bool all(const std::vector<float> &v, float x) {
  for (float e : v)
    if (e != x)
      return false;
  return true;
}

} // namespace

int main() {
  if (gpucheck::skippedWithoutGpu("stage_alone_check"))
    return 3;
  DistHooks hooks{};
  hooks.stageAlone = fakeStageAlone;
  ModelSpec spec{"stage_alone_check", 1024, kTensors, 4, 1, 1, 1, 1, 1,
                 nullptr, fakeStep, nullptr};
  spec.dist = &hooks;
  Context ctx(spec);
  std::vector<float> fives(kN, 5.f);
  for (const TensorSpec &t : kTensors)
    cudaMemcpy(ctx.arena() + t.offset, fives.data(), t.bytes,
               cudaMemcpyHostToDevice);

  runStageAlone(ctx, spec);
  expect(gStepRuns == 1, "the step ran once alone");
  expect(gOff == 1 && gOn == 1, "transfers turned off, then on");
  expect(all(read(ctx, kTensors[0]), 5.f), "the parameter is put back");
  expect(all(read(ctx, kTensors[1]), 5.f), "the optimizer state is put back");
  expect(all(read(ctx, kTensors[2]), 5.f), "the loss scale is put back");
  expect(all(read(ctx, kTensors[3]), 6.f), "the temporary is the step's");

  gThrow = true;
  bool threw = false;
  try {
    runStageAlone(ctx, spec);
  } catch (const std::runtime_error &) {
    threw = true;
  }
  expect(threw, "the step's error propagates");
  expect(gOff == 2 && gOn == 2, "transfers back on after the step threw");

  gThrow = false;
  gAsync = false;
  runStageAlone(ctx, spec);
  expect(gStepRuns == 2, "no step alone without asynchronous transfers");
  expect(gOff == 2 && gOn == 2, "no transfers turned off then");

  std::printf("stage_alone_check: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
