//===- ObjectCache.h - parallel nvcc with a content-hashed cache -*- C++
//-*-===//
//
// The translation units of a split model.cu (Target/CUDA/SplitCUDA.h) are
// compiled to objects by parallel nvcc processes; each object is kept in a
// cache under the hash of what made it (the unit's text, the nvcc version,
// the flags, the runtime headers), so that a recompile whose units did not
// change (other weights, another learning rate) links cached objects only.
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_DRIVER_OBJECTCACHE_H
#define CNNC_DRIVER_OBJECTCACHE_H

#include "cnnc/Target/CUDA/SplitCUDA.h"

#include "mlir/Support/Timing.h"
#include "llvm/ADT/ArrayRef.h"

#include <string>
#include <vector>

namespace cnnc::driver {

struct ObjectBuild {
  std::string nvcc;
  /// The compile flags (without -c, -o and the source).
  std::vector<std::string> flags;
  /// "" compiles without a cache.
  std::string cacheDir;
  /// Parallel nvcc processes.
  unsigned jobs = 1;
  /// What else an object depends on: nvcc's --version, the runtime headers.
  std::string keySalt;
  /// The most bytes the cache's objects may take after a build (the least
  /// recently used go first; the build's own objects stay).
  uint64_t cacheMaxBytes = uint64_t(1024) << 20;
};

struct CompiledUnit {
  std::string name;
  std::string object; ///< the object to link (in the cache or workDir)
  bool cached = false;
  double seconds = 0;  ///< the nvcc process's wall time (0 when cached)
  std::string key;     ///< the cache key (hex)
  bool failed = false; ///< nvcc failed on it (compileUnits' err says how)
};

/// Compiles `units` to objects: a cached object where the cache holds the
/// unit's key, else nvcc (-c) in `workDir`, at most build.jobs at a time,
/// the largest first, then into the cache. nvcc's output is printed in unit
/// order. On a failure `err` holds nvcc's exit status and the unit is
/// marked `failed`; its source and nvcc's output stay in `workDir`.
/// Each unit's nvcc run is timed in a scope nested in `timing` (from the
/// thread that runs it; a cached unit as "<name> (cached)").
bool compileUnits(const ObjectBuild &build,
                  llvm::ArrayRef<CUDATranslationUnit> units,
                  const std::string &workDir, std::vector<CompiledUnit> &out,
                  std::string &err, mlir::TimingScope &timing);

/// The object cache: $CNNC_OBJECT_CACHE ("off" or "": none), else
/// $XDG_CACHE_HOME/cnnc/objects, else $HOME/.cache/cnnc/objects.
std::string defaultObjectCacheDir();

/// $CNNC_OBJECT_CACHE_MAX_MB in bytes when set (a non-negative number of
/// MiB; 0 keeps only the objects of the build that just ran; anything else
/// is an error in `err`, returning false), else 1024 MiB.
bool objectCacheMaxBytes(uint64_t &bytes, std::string &err);

/// $CNNC_NVCC_JOBS when set (a positive integer; anything else is an error
/// in `err`), else the machine's hardware threads.
unsigned nvccJobs(std::string &err);

/// What the objects depend on besides their text and flags: `nvcc
/// --version` and the content of every file under the runtime's
/// include/cnnrt directory.
std::string objectKeySalt(const std::string &nvcc,
                          const std::string &runtimeInclude);

} // namespace cnnc::driver

#endif
