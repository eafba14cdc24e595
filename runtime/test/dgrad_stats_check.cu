// Probe and check for cuDNN's "dgrad + dReLU + dBN weight" graph
// (cudnn_graph::Dir::BwdDataStats, issue 13), run on the GPU machine before
// the compiler relies on it. For ResNet-50's backward-data convolutions
// whose output gradient feeds a BatchNorm gradient (NHWC, f16) it builds
//   "dgrad"         : the backward-data convolution alone (graph API),
//   "dgrad+add+drelu": the residual-gradient epilogue the runtime runs now,
//   "dgrad+stats"   : the epilogue that also reduces sum(dz) and
//                     sum(dz * bnIn) per channel, with the ReLU mask read
//                     from the block output (residual form, with addend) or
//                     recomputed from the BN input (bnIn * scale + shift),
// keeps the fastest plan of each and prints the times next to what the
// separate reduction pass it replaces would cost at 2.8 TB/s. Every plan
// of the stats graph that ran is checked against a reference (the plain
// dgrad plan's output, then the mask, the addend and the sums in f32).
// Exit code: 0 when every stats plan that ran matched, 1 on a mismatch,
// 3 without a GPU (ctest's SKIPPED). Arguments: batch (128), and how many
// of the shapes to run (all; ctest runs the first three: each graph is
// compiled at run time, about 2 s apiece).
#include "../src/CudnnGraph.h"
#include "GpuCheck.cuh"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace cnnrt::cudnn_graph;
using namespace gpucheck;

namespace {

struct Shape {
  const char *name;
  int n, c, h, w, k, r, stride, pad;
  bool residual; // the block output's gradient: addend + mask from reluOut
  int p() const { return (h + 2 * pad - r) / stride + 1; }
  int q() const { return (w + 2 * pad - r) / stride + 1; }
};

// dz = mask > 0 ? dgrad (+ addend) : 0 in place on dgrad (f16, as the
// unfused step stores it), and the per-channel sums of dz and dz * bnIn.
__global__ void reference(__half *dgrad, const __half *addend,
                          const __half *reluOut, const __half *bnIn,
                          const __half *scale, const __half *shift,
                          size_t rows, int c, float *sum, float *sumX) {
  int ch = blockIdx.y * blockDim.x + threadIdx.x;
  if (ch >= c)
    return;
  float s = 0, sx = 0;
  for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    size_t i = r * c + ch;
    float v = __half2float(dgrad[i]) + (addend ? __half2float(addend[i]) : 0);
    float x = __half2float(bnIn[i]);
    float m = reluOut ? __half2float(reluOut[i])
                      : x * __half2float(scale[ch]) + __half2float(shift[ch]);
    float dz = m > 0 ? v : 0;
    dgrad[i] = __float2half(dz);
    s += dz;
    sx += dz * x;
  }
  atomicAdd(&sum[ch], s);
  atomicAdd(&sumX[ch], sx);
}

} // namespace

int main(int argc, char **argv) {
  if (gpucheck::skippedWithoutGpu("dgrad_stats_check"))
    return 3;
  int batch = argc > 1 ? std::atoi(argv[1]) : 128;
  int limit = argc > 2 ? std::atoi(argv[2]) : 1 << 30;
  cudnnHandle_t h;
  if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cudnnCreate failed\n");
    return 2;
  }
  std::printf("dgrad_stats_check: cuDNN %zu, batch %d\n", cudnnGetVersion(),
              batch);
  // name, N, C (dx channels), H, W, K (dy channels), R, stride, pad, residual
  const Shape shapes[] = {
      {"l1 next.conv1 1x1 256<-64 @56", batch, 256, 56, 56, 64, 1, 1, 0, true},
      {"l1 conv2 3x3 64<-64 @56", batch, 64, 56, 56, 64, 3, 1, 1, false},
      {"l1 conv3 1x1 64<-256 @56", batch, 64, 56, 56, 256, 1, 1, 0, false},
      {"l2.0 conv2 3x3/2 128<-128 @56", batch, 128, 56, 56, 128, 3, 2, 1,
       false},
      {"l2 next.conv1 1x1 512<-128 @28", batch, 512, 28, 28, 128, 1, 1, 0,
       true},
      {"l2 conv2 3x3 128<-128 @28", batch, 128, 28, 28, 128, 3, 1, 1, false},
      {"l2 conv3 1x1 128<-512 @28", batch, 128, 28, 28, 512, 1, 1, 0, false},
      {"l3 next.conv1 1x1 1024<-256 @14", batch, 1024, 14, 14, 256, 1, 1, 0,
       true},
      {"l3 conv2 3x3 256<-256 @14", batch, 256, 14, 14, 256, 3, 1, 1, false},
      {"l3 conv3 1x1 256<-1024 @14", batch, 256, 14, 14, 1024, 1, 1, 0, false},
      {"l4 next.conv1 1x1 2048<-512 @7", batch, 2048, 7, 7, 512, 1, 1, 0,
       true},
      {"l4 conv2 3x3 512<-512 @7", batch, 512, 7, 7, 512, 3, 1, 1, false},
  };
  size_t wsBytes = 64u << 20;
  void *ws;
  CUDA_OK(cudaMalloc(&ws, wsBytes));
  bool failed = false;
  double totalOld = 0, totalNew = 0;
  std::printf("%-34s %8s %8s %8s %8s %8s %8s  %s\n", "shape", "dgrad", "+drelu",
              "+red@2.8", "+stats", "dx err", "sum err", "plans / why not");
  for (const Shape &s : shapes) {
    if (limit-- <= 0)
      break;
    size_t xn = (size_t)s.n * s.c * s.h * s.w, wn = (size_t)s.k * s.c * s.r * s.r;
    size_t yn = (size_t)s.n * s.k * s.p() * s.q(), rows = xn / s.c;
    __half *dy, *w, *dx, *ref, *addend, *reluOut, *bnIn, *scale, *shift;
    float *sum, *sumX, *sumRef, *sumXRef;
    CUDA_OK(cudaMalloc(&dy, yn * 2));
    CUDA_OK(cudaMalloc(&w, wn * 2));
    for (__half **p : {&dx, &ref, &addend, &reluOut, &bnIn})
      CUDA_OK(cudaMalloc(p, xn * 2));
    CUDA_OK(cudaMalloc(&scale, s.c * 2));
    CUDA_OK(cudaMalloc(&shift, s.c * 2));
    for (float **p : {&sum, &sumX, &sumRef, &sumXRef})
      CUDA_OK(cudaMalloc(p, s.c * 4));
    fillHalf<<<1024, 256>>>(dy, yn, 1, 2.0f, 0);
    fillHalf<<<1024, 256>>>(w, wn, 2, 2.0f / std::sqrt((float)s.k * s.r * s.r),
                            0);
    fillHalf<<<1024, 256>>>(addend, xn, 3, 1.0f, 0);
    fillHalf<<<1024, 256>>>(reluOut, xn, 4, 2.0f, 0.3f); // ~35 % zeros below
    fillHalf<<<1024, 256>>>(bnIn, xn, 5, 4.0f, 0.5f);
    fillHalf<<<16, 256>>>(scale, s.c, 6, 2.0f, 0.2f);
    fillHalf<<<16, 256>>>(shift, s.c, 7, 1.0f, 0);
    CUDA_OK(cudaDeviceSynchronize());
    // reluOut's negative values stand for the ReLU's zeros.
    ConvGeometry g{s.n, s.c, s.h, s.w, s.k, s.r, s.r, s.p(), s.q(),
                   s.pad, s.pad, s.stride, s.stride, 1, 1, 1,
                   CUDNN_DATA_HALF, true};
    std::string why;
    auto best = [&](Dir dir, auto run, std::unique_ptr<ConvPlan> *keep) {
      std::string w2;
      auto plans = convPlans(h, g, dir, 8, false, &w2);
      double bestMs = -1;
      for (auto &p : plans) {
        if (p->workspaceBytes() > wsBytes)
          continue;
        if (run(*p) != CUDNN_STATUS_SUCCESS)
          continue;
        double ms = timeMs([&] { run(*p); });
        if (bestMs < 0 || ms < bestMs) {
          bestMs = ms;
          if (keep)
            *keep = std::move(p);
        }
      }
      if (bestMs < 0 && why.empty())
        why = w2.empty() ? "no plan ran" : w2;
      return bestMs;
    };
    std::unique_ptr<ConvPlan> plain;
    double plainMs = best(
        Dir::BwdData,
        [&](ConvPlan &p) { return p.execute(h, ref, w, dy, ws); }, &plain);
    double dreluMs = -1;
    if (s.residual)
      dreluMs = best(
          Dir::BwdDataAddRelu,
          [&](ConvPlan &p) {
            return p.executeDgradAddRelu(h, dy, w, addend, reluOut, dx, ws);
          },
          nullptr);
    g.addend = s.residual;
    g.maskFromBnIn = !s.residual;
    auto runStats = [&](ConvPlan &p) {
      return p.executeDgradStats(h, dy, w, s.residual ? addend : nullptr,
                                 s.residual ? reluOut : nullptr, bnIn,
                                 s.residual ? nullptr : scale,
                                 s.residual ? nullptr : shift, dx, sum, sumX,
                                 ws);
    };
    std::unique_ptr<ConvPlan> stats;
    double statsMs = best(Dir::BwdDataStats, runStats, &stats);
    // The separate pass the epilogue removes reads dz and bnIn once.
    double redMs = 2.0 * xn * 2 / 2.8e12 * 1e3;
    double dxErr = -1, sumErr = -1;
    if (stats && plain) {
      CUDA_OK(cudaMemset(sumRef, 0, s.c * 4));
      CUDA_OK(cudaMemset(sumXRef, 0, s.c * 4));
      plain->execute(h, ref, w, dy, ws);
      dim3 grid(std::min<size_t>(rows, 512), (s.c + 127) / 128);
      reference<<<grid, 128>>>(ref, s.residual ? addend : nullptr,
                               s.residual ? reluOut : nullptr, bnIn, scale,
                               shift, rows, s.c, sumRef, sumXRef);
      CUDA_OK(cudaMemset(dx, 0, xn * 2));
      runStats(*stats);
      CUDA_OK(cudaDeviceSynchronize());
      dxErr = relErr(toHost(dx, xn, true), toHost(ref, xn, true));
      sumErr = std::max(
          relErr(toHost(sum, s.c, false), toHost(sumRef, s.c, false)),
          relErr(toHost(sumX, s.c, false), toHost(sumXRef, s.c, false)));
      if (!(dxErr < 2e-2 && sumErr < 2e-2))
        failed = true;
    }
    double oldMs = (s.residual ? dreluMs : plainMs) + redMs;
    if (statsMs > 0 && oldMs > redMs) {
      totalOld += oldMs;
      totalNew += statsMs;
    }
    std::printf("%-34s %8.3f %8.3f %8.3f %8.3f %8.1e %8.1e  %s\n", s.name,
                plainMs, dreluMs, redMs, statsMs, dxErr, sumErr,
                statsMs < 0 ? why.c_str() : "");
    for (void *p : {(void *)dy, (void *)w, (void *)dx, (void *)ref,
                    (void *)addend, (void *)reluOut, (void *)bnIn,
                    (void *)scale, (void *)shift, (void *)sum, (void *)sumX,
                    (void *)sumRef, (void *)sumXRef})
      cudaFree(p);
  }
  std::printf("shapes with a stats plan: separate %.3f ms, fused %.3f ms\n",
              totalOld, totalNew);
  cudaFree(ws);
  cudnnDestroy(h);
  std::printf("dgrad_stats_check: %s\n", failed ? "MISMATCH" : "ok");
  return failed ? 1 : 0;
}
