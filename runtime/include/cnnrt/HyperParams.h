//===- HyperParams.h - one rule per hyper-parameter -------------*- C++ -*-===//
//
// The ranges the optimizer and loss settings must lie in, shared by cnnc's
// driver (lib/Driver/Driver.cpp, which `cnnc train` and the Python package's
// flags go through), its --param-groups file and the generated executable's
// own flags (runtime/src/TrainMain.cu): a value outside its range is an error
// naming the flag, never replaced by a default. Plain C++17, header-only, so
// the nvcc-built runtime includes it too.
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_HYPERPARAMS_H
#define CNNRT_HYPERPARAMS_H

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

namespace cnnrt {

/// A closed or half-open interval of finite doubles.
struct ParamRange {
  double lo, hi;
  bool loOpen = false, hiOpen = false;
  std::string text() const {
    std::ostringstream os;
    os << (loOpen ? "(" : "[") << lo << ", ";
    if (std::isinf(hi))
      os << "inf)";
    else
      os << hi << (hiOpen ? ")" : "]");
    return os.str();
  }
  bool contains(double v) const {
    // NaN fails every comparison, so it is never in range.
    return std::isfinite(v) && (loOpen ? v > lo : v >= lo) &&
           (hiOpen ? v < hi : v <= hi);
  }
};

// The rules. PyTorch's where it has one (betas in [0, 1), label smoothing in
// [0, 1], non-negative lr, momentum and weight decay); eps must be > 0
// because eps = 0 divides 0 by 0 on a parameter whose gradient is 0.
inline ParamRange lrRange() { return {0, HUGE_VAL, false, true}; }
inline ParamRange momentumRange() { return {0, HUGE_VAL, false, true}; }
inline ParamRange dampeningRange() { return {0, 1}; }
inline ParamRange weightDecayRange() { return {0, HUGE_VAL, false, true}; }
inline ParamRange betaRange() { return {0, 1, false, true}; }
inline ParamRange epsRange() { return {0, HUGE_VAL, true, true}; }
inline ParamRange labelSmoothingRange() { return {0, 1}; }

/// true when `v` lies in `r`; otherwise `err` names `flag`, the value and
/// the range.
inline bool checkParam(const std::string &flag, double v, const ParamRange &r,
                       std::string &err) {
  if (r.contains(v))
    return true;
  std::ostringstream os;
  os << flag << " must be a finite number in " << r.text() << ", got " << v;
  err = os.str();
  return false;
}

/// Parses a whole decimal integer in [lo, hi]: no trailing characters, no
/// silent wrap-around (strtoll's ERANGE and the bounds are both errors).
inline bool parseIntInRange(const std::string &v, int64_t lo, int64_t hi,
                            int64_t &out) {
  if (v.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (*end || errno == ERANGE || x < lo || x > hi)
    return false;
  out = static_cast<int64_t>(x);
  return true;
}

/// Parses a whole number (strtod syntax, no trailing characters) and checks
/// it against `r`; `err` names `flag` on failure.
inline bool parseParam(const std::string &flag, const std::string &v,
                       const ParamRange &r, double &out, std::string &err) {
  char *end = nullptr;
  double x = v.empty() ? 0 : std::strtod(v.c_str(), &end);
  if (v.empty() || *end) {
    err = "invalid value '" + v + "' for " + flag + " (expected a number)";
    return false;
  }
  if (!checkParam(flag, x, r, err))
    return false;
  out = x;
  return true;
}

} // namespace cnnrt

#endif // CNNRT_HYPERPARAMS_H
