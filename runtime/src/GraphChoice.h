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
/// for a plan the reproducibility probe admitted " reproduced=<runs>": the
/// number of executions that gave bitwise-identical outputs. A plan chosen
/// without the probe (CNNRT_DETERMINISTIC=0, or a family that needs none)
/// has reproduced = 0 and no suffix.
struct GraphChoice {
  int index = -1;
  int reproduced = 0;
};

inline std::string formatGraphChoice(const GraphChoice &c) {
  std::string v = std::to_string(c.index);
  if (c.index >= 0 && c.reproduced > 0)
    v += " reproduced=" + std::to_string(c.reproduced);
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
  std::string first, second, extra;
  in >> first >> second >> extra;
  auto bad = [&](const std::string &what) {
    why = "malformed graph-or-split entry '" + value + "': " + what;
    return false;
  };
  GraphChoice c;
  if (!detail::parseInt(first, -1, c.index))
    return bad("expected a plan index (-1 = split form) first");
  if (!second.empty()) {
    const std::string tag = "reproduced=";
    if (second.compare(0, tag.size(), tag) != 0)
      return bad("expected 'reproduced=<runs>' after the index");
    if (!detail::parseInt(second.substr(tag.size()), 1, c.reproduced))
      return bad("the run count of 'reproduced=' must be a positive integer");
    if (c.index < 0)
      return bad("the split form (-1) carries no 'reproduced=' verdict");
  }
  if (!extra.empty())
    return bad("unexpected '" + extra + "' at the end");
  out = c;
  return true;
}

} // namespace cnnrt

#endif // CNNRT_SRC_GRAPHCHOICE_H
