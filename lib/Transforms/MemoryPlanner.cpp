//===- MemoryPlanner.cpp - offsets for buffers with live ranges ----------===//
#include "cnnc/Transforms/MemoryPlanner.h"

#include <algorithm>
#include <numeric>
#include <sstream>

using namespace cnnc::memplan;

namespace {

struct Placed {
  uint64_t offset, end;
  int64_t first, last;
};

bool liveTogether(int64_t f1, int64_t l1, int64_t f2, int64_t l2) {
  return f1 <= l2 && f2 <= l1;
}

const char *orderName(Order o) {
  switch (o) {
  case Order::SizeDecreasing:
    return "size";
  case Order::SizeTimesLifetime:
    return "size*lifetime";
  case Order::LifetimeDecreasing:
    return "lifetime";
  case Order::Schedule:
    return "schedule";
  }
  return "?";
}

} // namespace

Plan cnnc::memplan::placeWith(const std::vector<Interval> &iv, Order order,
                              Fit fit) {
  size_t n = iv.size();
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  auto life = [&](size_t i) {
    return (uint64_t)(iv[i].last - iv[i].first + 1);
  };
  auto bySize = [&](size_t a, size_t b) {
    if (iv[a].size != iv[b].size)
      return iv[a].size > iv[b].size;
    if (life(a) != life(b))
      return life(a) > life(b);
    return a < b;
  };
  switch (order) {
  case Order::SizeDecreasing:
    std::sort(idx.begin(), idx.end(), bySize);
    break;
  case Order::SizeTimesLifetime:
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      // size * lifetime compared without overflow (sizes < 2^50 in practice).
      long double ka = (long double)iv[a].size * life(a),
                  kb = (long double)iv[b].size * life(b);
      if (ka != kb)
        return ka > kb;
      return bySize(a, b);
    });
    break;
  case Order::LifetimeDecreasing:
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      if (life(a) != life(b))
        return life(a) > life(b);
      return bySize(a, b);
    });
    break;
  case Order::Schedule:
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      if (iv[a].first != iv[b].first)
        return iv[a].first < iv[b].first;
      return bySize(a, b);
    });
    break;
  }

  Plan p;
  p.offsets.assign(n, 0);
  std::vector<Placed> placed; // sorted by offset
  placed.reserve(n);
  for (size_t i : idx) {
    const Interval &b = iv[i];
    uint64_t align = std::max<uint64_t>(b.alignment, 1);
    if (b.size == 0) {
      p.offsets[i] = 0;
      continue;
    }
    uint64_t prevEnd = 0;
    uint64_t bestOffset = UINT64_MAX, bestGap = UINT64_MAX;
    for (const Placed &q : placed) {
      if (!liveTogether(b.first, b.last, q.first, q.last))
        continue;
      uint64_t start = alignTo(prevEnd, align);
      if (q.offset >= start && q.offset - start >= b.size) {
        uint64_t gap = q.offset - start;
        if (fit == Fit::First) {
          bestOffset = start;
          break;
        }
        if (gap < bestGap)
          bestGap = gap, bestOffset = start;
      }
      prevEnd = std::max(prevEnd, q.end);
    }
    if (bestOffset == UINT64_MAX)
      bestOffset = alignTo(prevEnd, align);
    p.offsets[i] = bestOffset;
    Placed q{bestOffset, bestOffset + b.size, b.first, b.last};
    auto pos = std::upper_bound(
        placed.begin(), placed.end(), q,
        [](const Placed &x, const Placed &y) { return x.offset < y.offset; });
    placed.insert(pos, q);
    p.peak = std::max(p.peak, q.end);
  }
  for (const Interval &b : iv)
    p.sumBytes += b.size;
  p.lowerBound = lowerBound(iv);
  p.strategy = std::string(fit == Fit::Best ? "best-fit/" : "first-fit/") +
               orderName(order);
  return p;
}

Plan cnnc::memplan::plan(const std::vector<Interval> &iv) {
  Plan best;
  bool have = false;
  for (Fit fit : {Fit::Best, Fit::First})
    for (Order order : {Order::SizeDecreasing, Order::SizeTimesLifetime,
                        Order::LifetimeDecreasing, Order::Schedule}) {
      Plan p = placeWith(iv, order, fit);
      if (!have || p.peak < best.peak) {
        best = std::move(p);
        have = true;
      }
      if (best.peak == best.lowerBound)
        return best; // optimal
    }
  return best;
}

uint64_t cnnc::memplan::lowerBound(const std::vector<Interval> &iv) {
  // (time, delta): removals at last + 1 sort before additions at the same
  // time, so back-to-back buffers are not counted together.
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(2 * iv.size());
  for (const Interval &b : iv) {
    if (b.size == 0)
      continue;
    events.push_back({b.first, (int64_t)b.size});
    events.push_back({b.last + 1, -(int64_t)b.size});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, best = 0;
  for (auto [t, d] : events) {
    live += d;
    best = std::max(best, live);
  }
  return (uint64_t)best;
}

std::string cnnc::memplan::verify(const std::vector<Interval> &iv,
                                  const std::vector<uint64_t> &offsets,
                                  uint64_t peak) {
  std::ostringstream err;
  if (offsets.size() != iv.size()) {
    err << offsets.size() << " offsets for " << iv.size() << " intervals";
    return err.str();
  }
  uint64_t top = 0;
  for (size_t i = 0; i < iv.size(); ++i) {
    if (iv[i].size == 0)
      continue;
    if (alignTo(offsets[i], iv[i].alignment) != offsets[i]) {
      err << "buffer " << i << " at offset " << offsets[i]
          << " is not aligned to " << iv[i].alignment;
      return err.str();
    }
    top = std::max(top, offsets[i] + iv[i].size);
  }
  if (top > peak) {
    err << "buffers reach " << top << " bytes, above the peak " << peak;
    return err.str();
  }
  // Sweep by first use; compare each buffer with those still live.
  std::vector<size_t> order(iv.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return iv[a].first < iv[b].first; });
  std::vector<size_t> active;
  for (size_t i : order) {
    if (iv[i].size == 0)
      continue;
    active.erase(
        std::remove_if(active.begin(), active.end(),
                       [&](size_t j) { return iv[j].last < iv[i].first; }),
        active.end());
    for (size_t j : active) {
      bool apart = offsets[i] + iv[i].size <= offsets[j] ||
                   offsets[j] + iv[j].size <= offsets[i];
      if (!apart) {
        err << "buffers " << j << " [" << offsets[j] << ", "
            << offsets[j] + iv[j].size << ") live [" << iv[j].first << ", "
            << iv[j].last << "] and " << i << " [" << offsets[i] << ", "
            << offsets[i] + iv[i].size << ") live [" << iv[i].first << ", "
            << iv[i].last << "] overlap";
        return err.str();
      }
    }
    active.push_back(i);
  }
  return "";
}
