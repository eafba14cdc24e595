//===- Config.cu - the runtime's configuration from the environment -------===//
//
// Every CNNRT_* setting the Context honours is read here, once, into
// ContextOptions; the rest of the runtime reads the struct.
//
//===----------------------------------------------------------------------===//

#include "cnnrt/cnnrt.h"
#include "ProfileJson.h"

#include <cstdlib>
#include <string>

namespace cnnrt {

ContextOptions ContextOptions::fromEnv() {
  ContextOptions o;
  auto flag = [](const char *name, bool def) {
    const char *v = std::getenv(name);
    if (!v || !*v)
      return def;
    return !(v[0] == '0' || v[0] == 'n' || v[0] == 'N' || v[0] == 'f' ||
             v[0] == 'F');
  };
  o.allowTF32 = flag("CNNRT_ALLOW_TF32", false);
  o.deterministic = flag("CNNRT_DETERMINISTIC", true);
  o.syncCheck = flag("CNNRT_SYNC_CHECK", false);
  o.verbose = flag("CNNRT_VERBOSE", false);
  // CNNRT_PROFILE_JSON=FILE alone asks for the profile too; with
  // CNNRT_PROFILE=0 it cannot be written.
  if (const char *j = std::getenv("CNNRT_PROFILE_JSON"))
    o.profileJson = profileJsonPathForProcess(
        j, std::getenv("CNNC_WORLD_SIZE"), std::getenv("CNNC_RANK"));
  o.profile = flag("CNNRT_PROFILE", !o.profileJson.empty());
  if (!o.profile && !o.profileJson.empty())
    throw Error(ErrorKind::Config,
                "cnnrt: CNNRT_PROFILE_JSON=" + o.profileJson +
                    " needs the profile, but CNNRT_PROFILE turns it off");
  o.convGraph = flag("CNNRT_CONV_GRAPH", true);
  o.warmCached = flag("CNNRT_WARM_CACHED", true);
  o.segmentedCapture = flag("CNNRT_SEGMENTED_CAPTURE", true);
  if (const char *f = std::getenv("CNNRT_CONV_FUSION")) {
    std::string v = f;
    if (v == "cudnn")
      o.convFusion = ConvFusion::CuDNN;
    else if (v == "split")
      o.convFusion = ConvFusion::Split;
    else if (v != "auto" && !v.empty())
      throw Error(ErrorKind::Config,
                  "cnnrt: CNNRT_CONV_FUSION must be auto, cudnn or split, "
                  "not '" +
                      v + "'");
  }
  if (const char *p = std::getenv("CNNRT_ALGO_CACHE"))
    o.algoCachePath = p;
  else if (const char *h = std::getenv("HOME"))
    o.algoCachePath = std::string(h) + "/.cache/cnnc/algos.txt";
  if (const char *t = std::getenv("CNNRT_PROFILE_TOP"))
    o.profileTop = std::strtoul(t, nullptr, 10);
  if (const char *v = std::getenv("CNNRT_MATMUL_WORKSPACE_MB"))
    o.matmulWorkspaceBytes = std::strtoull(v, nullptr, 10) << 20;
  if (const char *v = std::getenv("CNNRT_WORKSPACE_LIMIT_MB"))
    o.tuneWorkspaceBytes = std::strtoull(v, nullptr, 10) << 20;
  if (const char *v = std::getenv("CNNRT_GRAPH_PLANS")) {
    int k = std::atoi(v);
    if (k > 0 && k <= 64)
      o.graphPlans = k;
  }
  if (const char *v = std::getenv("CNNRT_REPRO_RUNS")) {
    char *end = nullptr;
    long k = std::strtol(v, &end, 10);
    if (!*v || *end || k < 2 || k > 100)
      throw Error(ErrorKind::Config,
                  std::string("cnnrt: CNNRT_REPRO_RUNS must be an integer "
                              "from 2 to 100, not '") +
                      v + "'");
    o.reproRuns = static_cast<int>(k);
  }
  return o;
}

} // namespace cnnrt
