//===- ProfileJson.h - CNNRT_PROFILE_JSON: a step's time by location ------===//
//
// Host-only (no CUDA). The profiled step's launch times summed by location
// (the ONNX node name cnnc gives every launch: forward, backward and
// optimizer kernels of one node share it), written as JSON so that the
// compiler can read them back: cnnc's --pipeline-profile gives each forward
// op of the pipeline partition its measured time instead of a roofline
// estimate. Format (version 1):
//   {"format": "cnnrt-profile", "version": 1, "title": "...",
//    "total_ms": T, "launches": N,
//    "by_location": {"<loc>": {"ms": t, "launches": n}, ...}}
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_SRC_PROFILEJSON_H
#define CNNRT_SRC_PROFILEJSON_H

#include <string>
#include <utility>
#include <vector>

namespace cnnrt {

/// One launch of the profiled step: its location and milliseconds.
struct ProfiledLaunch {
  std::string loc;
  double ms = 0;
};

/// The JSON text of a profile (launches in step order; equal locations
/// summed, the object's keys in first-launch order).
std::string locationProfileJson(const std::string &title,
                                const std::vector<ProfiledLaunch> &launches);

/// Writes locationProfileJson to `path` (the file CNNRT_PROFILE_JSON names;
/// created or replaced). Throws cnnrt::Error (kind Config) naming the path
/// when it cannot be written.
void writeLocationProfile(const std::string &path, const std::string &title,
                          const std::vector<ProfiledLaunch> &launches);

/// The file this process writes for CNNRT_PROFILE_JSON=`path`: `path`
/// itself, or `path`.rank<r> for rank r of a multi-process run (world size
/// over 1: data-parallel ranks and pipeline stages each profile their own
/// step, and one shared file would hold whichever rank wrote last).
/// `worldSize` and `rank` are CNNC_WORLD_SIZE's and CNNC_RANK's values (null
/// when unset).
std::string profileJsonPathForProcess(const std::string &path,
                                      const char *worldSize, const char *rank);

} // namespace cnnrt

#endif // CNNRT_SRC_PROFILEJSON_H
