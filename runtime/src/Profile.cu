//===- Profile.cu - CNNRT_PROFILE: where one step's time goes -------------===//
//
// With CNNRT_PROFILE=1 trainMain runs its second (uncaptured) step between
// beginProfile and endProfile: every launch and library call is followed by
// a CUDA event (profileMark), and the time between consecutive events is
// reported by op kind and for the slowest launches.
//
//===----------------------------------------------------------------------===//

#include "ContextImpl.h"
#include "ProfileJson.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace cnnrt {

void profileMark(Context &ctx, const char *loc, const char *what) {
  Context::Impl &I = *ctx.impl();
  if (!I.profiling)
    return;
  cudaEvent_t ev;
  ctx.check(cudaEventCreate(&ev), "profile");
  ctx.check(cudaEventRecord(ev, ctx.stream()), "profile");
  I.marks.push_back({ev, loc ? loc : "?", what ? what : "runtime kernel"});
}

void Context::checkLaunch(const char *loc, const char *what) {
  checkLaunch(loc);
  if (impl_->profiling && !impl_->marks.empty() &&
      impl_->marks.back().what == "runtime kernel")
    impl_->marks.back().what = what;
}

void Context::beginProfile() {
  Impl &I = *impl_;
  check(cudaStreamSynchronize(stream_), "profile");
  check(cudaEventCreate(&I.profileStart), "profile");
  check(cudaEventRecord(I.profileStart, stream_), "profile");
  I.marks.clear();
  I.profiling = true;
}

void Context::endProfile(const char *title) {
  Impl &I = *impl_;
  I.profiling = false;
  check(cudaStreamSynchronize(stream_), "profile");
  struct Row {
    double ms = 0;
    int calls = 0;
  };
  std::map<std::string, Row> byWhat;
  std::vector<std::pair<double, const Impl::Mark *>> each;
  std::vector<ProfiledLaunch> launches;
  double total = 0;
  cudaEvent_t prev = I.profileStart;
  for (const Impl::Mark &m : I.marks) {
    float ms = 0;
    cudaEventElapsedTime(&ms, prev, m.ev);
    prev = m.ev;
    total += ms;
    // Group by op kind: the first word of `what` ("cnn.conv2d_bwd_filter",
    // "cuDNN", ...), keeping library calls' full description.
    std::string key = m.what;
    if (key.rfind("cu", 0) != 0)
      key = key.substr(0, key.find(' '));
    Row &r = byWhat[key];
    r.ms += ms;
    r.calls += 1;
    each.push_back({ms, &m});
    // CNNRT_PROFILE_JSON=FILE: the same launches by location, for the
    // compiler (cnnc --pipeline-profile).
    if (!opts_.profileJson.empty())
      launches.push_back({m.loc, ms});
  }
  std::vector<std::pair<std::string, Row>> rows(byWhat.begin(), byWhat.end());
  std::sort(rows.begin(), rows.end(),
            [](auto &a, auto &b) { return a.second.ms > b.second.ms; });
  std::sort(each.begin(), each.end(),
            [](auto &a, auto &b) { return a.first > b.first; });
  std::fprintf(stderr,
               "cnnrt: profile of %s: %zu launches and library calls, %.3f "
               "ms (CUDA events between consecutive launches; no graph)\n",
               title, I.marks.size(), total);
  std::fprintf(stderr, "  %-34s %9s %6s %6s\n", "by op kind", "ms", "%",
               "calls");
  for (auto &[k, r] : rows)
    std::fprintf(stderr, "  %-34s %9.3f %6.1f %6d\n", k.c_str(), r.ms,
                 100.0 * r.ms / std::max(total, 1e-9), r.calls);
  // CNNRT_PROFILE_TOP=N lists the N slowest launches (default 20).
  size_t top = opts_.profileTop;
  std::fprintf(stderr, "  slowest launches:\n");
  for (size_t i = 0; i < each.size() && i < top; ++i)
    std::fprintf(stderr, "  %9.3f ms  %-40s %s\n", each[i].first,
                 each[i].second->what.c_str(), each[i].second->loc.c_str());
  for (const Impl::Mark &m : I.marks)
    cudaEventDestroy(m.ev);
  I.marks.clear();
  cudaEventDestroy(I.profileStart);
  I.profileStart = nullptr;
  if (!opts_.profileJson.empty()) {
    writeLocationProfile(opts_.profileJson, title, launches);
    std::fprintf(stderr, "cnnrt: profile by location written to %s\n",
                 opts_.profileJson.c_str());
  }
}

} // namespace cnnrt
