//===- MemoryPlanner.h - offsets for buffers with live ranges ---*- C++ -*-===//
//
// A reusable packing library with no MLIR dependency: given buffers, each a
// size, an alignment and a live range [first, last] (inclusive, in schedule
// steps), assign every buffer an offset in one region so that two buffers
// whose live ranges intersect never intersect in memory, and make the region
// (the peak, max over buffers of offset + size) small.
//
// The packer is a best-fit-decreasing heuristic ("greedy by size", Pisarchyk
// & Lee 2020, plus alternatives): buffers are placed one at a time in a
// chosen order; each goes into the smallest gap between the already placed
// buffers that are live at the same time, or on top of them if no gap fits.
// Several orders are tried (size, size x lifetime, lifetime, schedule order)
// and the smallest peak is kept.
//
// The lower bound is the largest total size of buffers live at one step: no
// placement can do better (alignment padding aside).
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_TRANSFORMS_MEMORYPLANNER_H
#define CNNC_TRANSFORMS_MEMORYPLANNER_H

#include <cstdint>
#include <string>
#include <vector>

namespace cnnc {
namespace memplan {

/// One buffer to place. `alignment` is a power of two (0 or 1: none).
struct Interval {
  uint64_t size = 0;
  uint64_t alignment = 1;
  int64_t first = 0, last = 0; ///< live range, inclusive; first <= last
};

/// The order in which buffers are placed.
enum class Order {
  SizeDecreasing,     ///< largest first (ties: longer lifetime first)
  SizeTimesLifetime,  ///< largest size x lifetime first
  LifetimeDecreasing, ///< longest-lived first (ties: larger first)
  Schedule,           ///< by first use (what a runtime allocator sees)
};

/// How a gap is chosen among those that fit.
enum class Fit {
  Best,  ///< the smallest gap that fits (lowest offset on ties)
  First, ///< the lowest gap that fits
};

struct Plan {
  std::vector<uint64_t> offsets; ///< one per interval, in input order
  uint64_t peak = 0;             ///< max over intervals of offset + size
  uint64_t lowerBound = 0;       ///< max over steps of live bytes
  uint64_t sumBytes = 0;         ///< sum of all sizes (no reuse at all)
  std::string strategy;          ///< e.g. "best-fit/size", the winner
};

/// Places `intervals` with one order and fit.
Plan placeWith(const std::vector<Interval> &intervals, Order order, Fit fit);

/// Tries every order with best fit (and first fit) and returns the plan of
/// smallest peak (ties: the first tried, best-fit by size decreasing).
Plan plan(const std::vector<Interval> &intervals);

/// The largest total size of intervals live at one step.
uint64_t lowerBound(const std::vector<Interval> &intervals);

/// Checks a placement: every offset aligned, no two intervals that are live
/// at a common step overlap in [offset, offset + size), peak correct. Returns
/// an empty string when valid, otherwise a description of the first problem.
std::string verify(const std::vector<Interval> &intervals,
                   const std::vector<uint64_t> &offsets, uint64_t peak);

/// `x` rounded up to a multiple of `alignment` (a power of two, or 0/1).
inline uint64_t alignTo(uint64_t x, uint64_t alignment) {
  if (alignment <= 1)
    return x;
  return (x + alignment - 1) & ~(alignment - 1);
}

} // namespace memplan
} // namespace cnnc

#endif
