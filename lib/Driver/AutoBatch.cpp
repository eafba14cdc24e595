//===- AutoBatch.cpp - --batch auto ---------------------------------------===//
//
// The largest batch whose static memory plan (the planning passes only, no
// nvcc) fits the GPU's free memory.
//
//===----------------------------------------------------------------------===//
#include "cnnc/Driver/Driver.h"

#include "cnnc/Dialect/CNN/CNNOps.h"
#include "cnnc/Transforms/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <optional>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::driver;

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
  if (!o.optimize || !pipelineOptions(o)->memoryPlan)
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
