//===- NvccCompile.cpp - building the generated CUDA with nvcc ------------===//
//
// The nvcc invocation of the driver (NvccCompile.h).
//
//===----------------------------------------------------------------------===//
#include "cnnc/Driver/NvccCompile.h"
#include "cnnc/Driver/ObjectCache.h"
#include "cnnc/Target/CUDA/SplitCUDA.h"

#include "cnnrt/TensorFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <optional>

using namespace mlir;
using namespace cnnc;
using namespace cnnc::driver;

namespace {
/// The runtime (headers + libcnnrt.a): --runtime-dir, $CNNC_RUNTIME_DIR, or
/// the build tree next to this cnnc (build/bin/cnnc -> build/lib/libcnnrt.a,
/// <source>/runtime/include).
bool findRuntime(const NvccOptions &o, std::string &include,
                 std::string &lib) {
  auto check = [&](StringRef inc, StringRef l) {
    SmallString<256> h(inc);
    llvm::sys::path::append(h, "cnnrt", "cnnrt.h");
    if (!llvm::sys::fs::exists(h) || !llvm::sys::fs::exists(l))
      return false;
    include = inc.str();
    lib = l.str();
    return true;
  };
  std::vector<std::string> dirs;
  if (!o.runtimeDir.empty())
    dirs.push_back(o.runtimeDir);
  if (const char *e = std::getenv("CNNC_RUNTIME_DIR"))
    dirs.push_back(e);
  for (const std::string &d : dirs)
    for (const char *l : {"lib/libcnnrt.a", "libcnnrt.a"})
      if (check(d + "/include", d + "/" + l))
        return true;
  std::string exe =
      llvm::sys::fs::getMainExecutable(o.argv0.c_str(), (void *)&findRuntime);
  SmallString<256> bin(llvm::sys::path::parent_path(exe));
  SmallString<256> build(llvm::sys::path::parent_path(bin));
  SmallString<256> lib0(build), inc0(llvm::sys::path::parent_path(build));
  llvm::sys::path::append(lib0, "lib", "libcnnrt.a");
  llvm::sys::path::append(inc0, "runtime", "include");
  if (check(inc0, lib0))
    return true;
#ifdef CNNC_RUNTIME_INCLUDE_DIR
  if (check(CNNC_RUNTIME_INCLUDE_DIR, CNNC_RUNTIME_LIBRARY))
    return true;
#endif
  return false;
}

/// cuDNN as nvcc should link it: "-lcudnn" where the development symlink
/// exists, else the versioned library by path (GPU machines often only have
/// libcudnn.so.9).
std::string cudnnLinkArg() {
  for (const char *dir :
       {"/usr/local/cuda/lib64", "/usr/local/cuda/lib",
        "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"}) {
    std::string base = std::string(dir) + "/libcudnn.so";
    if (llvm::sys::fs::exists(base))
      return "-L" + std::string(dir) + " -lcudnn";
    if (llvm::sys::fs::exists(base + ".9"))
      return base + ".9";
  }
  return "-lcudnn";
}

/// NCCL as nvcc should link it (data-parallel steps): $CNNC_NCCL_LIB (a
/// libnccl.so* path), else "-L<dir> -lnccl" where the development symlink
/// exists, else libnccl.so.2 by path (GPU machines with only the runtime
/// package); "" when none is found.
std::string ncclLinkArg() {
  if (const char *e = std::getenv("CNNC_NCCL_LIB"))
    return e;
  for (const char *dir :
       {"/usr/local/cuda/lib64", "/usr/local/cuda/lib",
        "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"}) {
    std::string base = std::string(dir) + "/libnccl.so";
    if (llvm::sys::fs::exists(base))
      return "-L" + std::string(dir) + " -lnccl";
    if (llvm::sys::fs::exists(base + ".2"))
      return base + ".2";
  }
  return "";
}
} // namespace

unsigned cnnc::driver::defaultHostUnits(unsigned jobs) {
  return jobs < kHostUnitsFromJobs ? 1 : std::min(jobs / 4, 8u);
}

std::string cnnc::driver::findNvcc() {
  if (const char *e = std::getenv("CNNC_NVCC"))
    return e;
  if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/nvcc"))
    return "/usr/local/cuda/bin/nvcc";
  if (auto p = llvm::sys::findProgramByName("nvcc"))
    return *p;
  return "";
}

LogicalResult cnnc::driver::buildWithNvcc(Compilation &c, const std::string &cu,
                                          const NvccOptions &o,
                                          const std::string &exePath) {
  std::string err;
  // An executable: <exe>.cu kept beside it, weights in <exe>.cnnw. All three
  // are staged in temporary files and published together only after nvcc
  // succeeded: a failed build leaves nothing new behind and keeps old
  // outputs. Side files are not written for a special output (/dev/null,
  // a fifo, stdout).
  std::string cuPath = exePath + ".cu", weightsPath = exePath + ".cnnw";
  std::string nvcc = findNvcc(), include, lib;
  if (nvcc.empty())
    return fail(c, "nvcc not found (looked at $CNNC_NVCC, /usr/local/cuda/bin, "
                   "PATH); --emit cuda -o FILE.cu writes the CUDA source");
  if (!findRuntime(o, include, lib))
    return fail(c, "the cnnc runtime (include/cnnrt/cnnrt.h and libcnnrt.a) "
                   "was not found; pass --runtime-dir or set CNNC_RUNTIME_DIR");
  cnnrt::OutputFile exeOut, cuOut, weightsOut;
  if (!exeOut.open(exePath, err))
    return fail(c, "cannot write '" + exePath + "': " + err);
  bool sideFiles = !exeOut.isSpecial();
  if (sideFiles) {
    if (!cuOut.open(cuPath, err, ".cu"))
      return fail(c, "cannot write '" + cuPath + "': " + err);
    if (!weightsOut.open(weightsPath, err))
      return fail(c, "cannot write '" + weightsPath + "': " + err);
    if (failed(writeWeights(weightsOut.stagingPath(), c.weights, err)))
      return fail(c, "cannot write '" + weightsPath + "': " + err);
    // The whole text beside the executable (nvcc compiles its units).
    std::error_code ec;
    llvm::raw_fd_ostream cuStream(cuOut.stagingPath(), ec);
    if (!ec)
      cuStream << cu;
    cuStream.close();
    if (ec || cuStream.has_error())
      return fail(c, "cannot write '" + cuPath +
                         "': " + (ec ? ec : cuStream.error()).message());
  }
  // The CUDA is compiled as several translation units (SplitCUDA.h) by
  // parallel nvcc processes, each object cached under the hash of its text,
  // flags, nvcc and runtime headers (ObjectCache.h), then linked: a
  // recompile with other weights or another learning rate compiles nothing.
  ObjectBuild build;
  build.nvcc = nvcc;
  build.flags = {"-O3", "-std=c++17", "-arch=" + o.arch, "-I" + include};
  if (o.library)
    build.flags.insert(build.flags.end(), {"-Xcompiler", "-fPIC"});
  build.jobs = nvccJobs(err);
  if (build.jobs == 0)
    return fail(c, err);
  build.cacheDir = defaultObjectCacheDir();
  if (!objectCacheMaxBytes(build.cacheMaxBytes, err))
    return fail(c, err);
  build.keySalt = objectKeySalt(nvcc, include);
  // CNNC_NVCC_HOST_UNITS: how many units the host code compiles in (1 keeps
  // it whole; the default follows the jobs, defaultHostUnits): SplitCUDA
  // moves its functions, and parts of the cut step, into units of their
  // own. That is only right while no kernel keeps state in a namespace-scope
  // __device__ variable (each unit would have its own: session 24's
  // nhwcScratch trained dm-NFNet wrong), so such a variable is an error
  // where the units were asked for, and one host unit by default.
  unsigned hostUnits = defaultHostUnits(build.jobs);
  bool hostUnitsSet = std::getenv("CNNC_NVCC_HOST_UNITS") != nullptr;
  if (const char *e = std::getenv("CNNC_NVCC_HOST_UNITS")) {
    if (StringRef(e).getAsInteger(10, hostUnits) || hostUnits == 0 ||
        hostUnits > 64)
      return fail(c, "CNNC_NVCC_HOST_UNITS must be a number of host units "
                     "from 1 (the host code in one unit) to 64, not '" +
                         Twine(e) + "'");
  }
  if (hostUnits > 1) {
    std::vector<std::string> vars = mutableDeviceVariables(cu);
    if (!vars.empty() && !hostUnitsSet)
      hostUnits = 1;
    else if (!vars.empty())
      return fail(c, "CNNC_NVCC_HOST_UNITS=" + Twine(hostUnits) +
                         ": the CUDA defines the namespace-scope __device__ "
                         "variable '" +
                         vars.front() +
                         "', of which each host unit would have its own "
                         "copy; compile the host code in one unit");
  }
  // One kernel unit per core besides the host units; CNNC_NVCC_SPLIT=0
  // compiles the whole text as one unit (as before the split).
  unsigned kernelUnits =
      std::max(1u, build.jobs > hostUnits ? build.jobs - hostUnits : 1u);
  if (const char *e = std::getenv("CNNC_NVCC_SPLIT")) {
    if (StringRef(e).getAsInteger(10, kernelUnits))
      return fail(c, "CNNC_NVCC_SPLIT must be a number of kernel units "
                     "(0: no split), not '" +
                         Twine(e) + "'");
  }
  if (o.wholeUnit)
    kernelUnits = 0;
  std::vector<CUDATranslationUnit> units =
      splitCUDATranslationUnits(cu, kernelUnits, hostUnits);
  // The units of a split build run their host compiler at -O0: their host
  // code (the step's launches, the kernels' stubs) runs when the step is
  // captured into a CUDA graph (the executable's and the C API's default),
  // not per step; only --no-graph runs it every step, where each launch
  // costs far more than the unoptimized code around it. ResNet-50 on 16
  // jobs: a host unit 1.86 s at -O0 against 2.13 at -O1, a kernel unit
  // ~0.1 s less than at -O3. nvcc's -O is the host compiler's level only:
  // cicc's and ptxas's command lines, and so the device code, are the same
  // at every level. The whole text as one unit (pipeline stages, whose
  // host code runs per step) keeps -O3.
  if (units.size() > 1)
    build.flags.front() = "-O0";
  SmallString<128> workDir;
  if (auto ec = llvm::sys::fs::createUniqueDirectory("cnnc-nvcc", workDir))
    return fail(c, "cannot create a temporary directory: " + ec.message());
  std::vector<CompiledUnit> objects;
  {
    TimingScope compileTiming = c.timing.nest("nvcc compile");
    if (!compileUnits(build, units, std::string(workDir), objects, err,
                      compileTiming)) {
      std::string unit;
      for (const CompiledUnit &u : objects)
        if (u.failed)
          unit = u.name;
      return fail(c, err + " on the CUDA of '" + exePath +
                         "'; nothing was written (unit '" + unit +
                         "' of the split CUDA: its source and nvcc's "
                         "output are in '" +
                         workDir + "')");
    }
  }
  std::vector<std::string> args = {nvcc, "-arch=" + o.arch};
  for (const CompiledUnit &u : objects)
    args.push_back(u.object);
  std::string versionScript;
  if (o.library) {
    // All of libcnnrt (its C API) goes into the library; only the C API is
    // exported, so that the runtime's and CUDA's symbols cannot clash with
    // another copy in the process (PyTorch's).
    SmallString<128> script;
    if (auto ec = llvm::sys::fs::createTemporaryFile("cnnc-lib", "map", script))
      return fail(c, "cannot create a temporary file: " + ec.message());
    versionScript = std::string(script);
    if (!cnnrt::writeFileAtomic(versionScript,
                                "{ global: cnnrt_*; local: *; };\n", err))
      return fail(c, "cannot write '" + versionScript + "': " + err);
    args.insert(args.end(),
                {"-shared", "-Xcompiler", "-fPIC", "-Xlinker",
                 "--version-script=" + versionScript,
                 // One -Xlinker keeps the three in order on the link line.
                 "-Xlinker", "--whole-archive," + lib + ",--no-whole-archive"});
  } else {
    args.push_back(lib);
  }
  std::string cudnn = cudnnLinkArg();
  for (StringRef a : llvm::split(cudnn, ' '))
    args.push_back(a.str());
  // A data-parallel step (cnn.all_reduce) calls NCCL through cnnrt/Nccl.h.
  if (cu.find("#include \"cnnrt/Nccl.h\"") != std::string::npos) {
    std::string nccl = ncclLinkArg();
    if (nccl.empty())
      return fail(c, "the data-parallel step needs NCCL, but libnccl.so(.2) "
                     "was not found (looked in $CNNC_NCCL_LIB, "
                     "/usr/local/cuda/lib64, /usr/local/cuda/lib, "
                     "/usr/lib/x86_64-linux-gnu)");
    SmallString<256> ncclRt(llvm::sys::path::parent_path(lib));
    llvm::sys::path::append(ncclRt, "libcnnrt_nccl.a");
    if (!llvm::sys::fs::exists(ncclRt))
      return fail(c, "the data-parallel step needs the runtime's NCCL part '" +
                         ncclRt +
                         "' (libcnnrt was built without NCCL: nccl.h not "
                         "found)");
    // Before libcnnrt.a: it uses the runtime's Context.
    args.insert(llvm::find(args, lib), std::string(ncclRt));
    for (StringRef a : llvm::split(nccl, ' '))
      args.push_back(a.str());
  }
  args.insert(args.end(), {"-lcublasLt", "-lcublas"});
  // What the runtime's host part links against (libjpeg-turbo, libpng,
  // pthreads), as its build recorded it beside the library. A shared library
  // takes "libcnnrt.a.link-shared" where there is one: a carried runtime
  // links static, non-PIC libjpeg-turbo into executables, which a shared
  // object cannot take.
  auto linkFile = llvm::MemoryBuffer::getFile(lib + ".link-shared");
  if (!o.library || !linkFile)
    linkFile = llvm::MemoryBuffer::getFile(lib + ".link");
  std::string hostLibs =
      linkFile ? (*linkFile)->getBuffer().trim().str() : "-lpthread";
  // "{libdir}": the library's directory (a carried runtime with its own
  // static libjpeg-turbo/libpng, scripts/prepare-device-carry.sh).
  for (size_t at; (at = hostLibs.find("{libdir}")) != std::string::npos;)
    hostLibs.replace(at, 8, llvm::sys::path::parent_path(lib).str());
  for (StringRef a : llvm::split(hostLibs, ' '))
    if (!a.empty())
      args.push_back(a.str());
  args.insert(args.end(), {"-o", exeOut.stagingPath()});
  std::vector<StringRef> argRefs(args.begin(), args.end());
  std::string msg;
  TimingScope linkTiming = c.timing.nest("nvcc link");
  int rc =
      llvm::sys::ExecuteAndWait(nvcc, argRefs, std::nullopt, {}, 0, 0, &msg);
  linkTiming.stop();
  if (!versionScript.empty())
    llvm::sys::fs::remove(versionScript);
  if (rc != 0)
    return fail(c, "nvcc failed (exit " + Twine(rc) +
                       (msg.empty() ? "" : ": " + msg) + ") linking '" +
                       exePath + "' (objects in '" + workDir +
                       "'); nothing was written");
  llvm::sys::fs::remove_directories(workDir);
  if (c.timingManager.isEnabled()) {
    unsigned cached = 0;
    for (const CompiledUnit &u : objects)
      cached += u.cached;
    llvm::errs() << "cnnc: nvcc: " << objects.size() << " unit(s), "
                 << objects.size() - cached << " compiled (" << build.jobs
                 << " at a time), " << cached << " from the cache"
                 << (build.cacheDir.empty() ? std::string(" (no cache)")
                                            : " '" + build.cacheDir + "'")
                 << "\n";
  }
  if (sideFiles && (!weightsOut.commit(err) || !cuOut.commit(err)))
    return fail(c, "cannot write the outputs of '" + exePath + "': " + err);
  if (!exeOut.commit(err))
    return fail(c, "cannot write '" + exePath + "': " + err);
  if (sideFiles)
    llvm::errs() << "cnnc: built '" << exePath << "' (weights '" << weightsPath
                 << "', source '" << cuPath << "')\n";
  else
    llvm::errs() << "cnnc: built '" << exePath
                 << "' (a special file: no weights or source written beside "
                    "it)\n";
  return success();
}
