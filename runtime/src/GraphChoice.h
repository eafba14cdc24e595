//===- GraphChoice.h - a graph-or-split choice in the algorithm cache -----===//
//
// Host-only (no CUDA): the value the algorithm cache stores for a fused
// convolution that runs either as one cuDNN graph plan or as its split
// form, and its parser (the cache is a text file anyone can edit or
// truncate, so a malformed value is reported, never trusted).
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_SRC_GRAPHCHOICE_H
#define CNNRT_SRC_GRAPHCHOICE_H

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <sstream>
#include <string>

namespace cnnrt {

/// "<index>" (the plan's heuristics position, -1 = the split form), then
/// for a plan:
///   " reproduced=<runs>" when the reproducibility probe admitted it (the
///   number of executions that gave bitwise-identical outputs; a plan
///   chosen without the probe, CNNRT_DETERMINISTIC=0 or a family that needs
///   none, has reproduced = 0 and no such token);
///   " engine=<tag>", the engine config the position named when it was
///   chosen (cudnn_graph::ConvPlan::engineTag; empty: not known).
/// Values written before these tokens existed hold the index alone.
struct GraphChoice {
  int index = -1;
  int reproduced = 0;
  std::string engine;
};

inline std::string formatGraphChoice(const GraphChoice &c) {
  std::string v = std::to_string(c.index);
  if (c.index >= 0 && c.reproduced > 0)
    v += " reproduced=" + std::to_string(c.reproduced);
  if (c.index >= 0 && !c.engine.empty())
    v += " engine=" + c.engine;
  return v;
}

namespace detail {
/// A whole decimal int in [lo, INT_MAX] (no sign for lo >= 0, no spaces).
inline bool parseInt(const std::string &s, long lo, int &out) {
  if (s.empty() || (s[0] != '-' && (s[0] < '0' || s[0] > '9')))
    return false;
  errno = 0;
  char *end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (errno || *end || v < lo || v > INT_MAX)
    return false;
  out = static_cast<int>(v);
  return true;
}
} // namespace detail

/// Parses a cached graph-or-split value into `out`; false with `why` (what
/// is wrong, quoting the value) when it is malformed.
inline bool parseGraphChoice(const std::string &value, GraphChoice &out,
                             std::string &why) {
  std::istringstream in(value);
  std::string first, token;
  in >> first;
  auto bad = [&](const std::string &what) {
    why = "malformed graph-or-split entry '" + value + "': " + what;
    return false;
  };
  GraphChoice c;
  if (!detail::parseInt(first, -1, c.index))
    return bad("expected a plan index (-1 = split form) first");
  bool sawReproduced = false, sawEngine = false;
  const std::string reproducedTag = "reproduced=", engineTag = "engine=";
  while (in >> token) {
    if (c.index < 0)
      return bad("the split form (-1) carries nothing after it, got '" + token +
                 "'");
    if (token.compare(0, reproducedTag.size(), reproducedTag) == 0) {
      if (sawReproduced)
        return bad("'reproduced=' given twice");
      sawReproduced = true;
      if (!detail::parseInt(token.substr(reproducedTag.size()), 1,
                            c.reproduced))
        return bad("the run count of 'reproduced=' must be a positive "
                   "integer");
    } else if (token.compare(0, engineTag.size(), engineTag) == 0) {
      if (sawEngine)
        return bad("'engine=' given twice");
      sawEngine = true;
      c.engine = token.substr(engineTag.size());
      if (c.engine.empty())
        return bad("'engine=' without an engine");
    } else {
      return bad("unexpected '" + token +
                 "' (expected reproduced=<runs> or engine=<tag>)");
    }
  }
  out = c;
  return true;
}

} // namespace cnnrt

#endif // CNNRT_SRC_GRAPHCHOICE_H
