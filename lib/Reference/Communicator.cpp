//===- Communicator.cpp - in-process all-reduce for the reference ---------===//
#include "cnnc/Reference/Communicator.h"
#include "cnnc/Reference/Interpreter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace cnnc::reference {

bool parseReduceKind(const std::string &s, ReduceKind &out) {
  if (s == "avg")
    out = ReduceKind::Avg;
  else if (s == "sum")
    out = ReduceKind::Sum;
  else if (s == "max")
    out = ReduceKind::Max;
  else if (s == "min")
    out = ReduceKind::Min;
  else
    return false;
  return true;
}

namespace {
thread_local Communicator *current = nullptr;
} // namespace

Communicator *currentCommunicator() { return current; }
void setCurrentCommunicator(Communicator *c) { current = c; }

class LocalMember : public Communicator {
public:
  LocalMember(LocalGroup &g, int rank) : g_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_.size(); }
  bool allReduce(float *data, size_t n, ReduceKind kind, bool f16,
                 std::string &err) override {
    return g_.allReduce(rank_, data, n, kind, f16, err);
  }

private:
  LocalGroup &g_;
  int rank_;
};

LocalGroup::LocalGroup(int size, double timeoutSeconds)
    : size_(size), timeout_(timeoutSeconds), slots_(size, nullptr),
      counts_(size, 0) {
  for (int r = 0; r < size; ++r)
    members_.push_back(std::make_unique<LocalMember>(*this, r));
}

LocalGroup::~LocalGroup() = default;

Communicator *LocalGroup::member(int rank) { return members_.at(rank).get(); }

void LocalGroup::abort(int rank, const std::string &why) {
  std::lock_guard<std::mutex> lk(m_);
  if (!aborted_) {
    aborted_ = true;
    abortWhy_ = "rank " + std::to_string(rank) + " failed: " + why;
  }
  cv_.notify_all();
}

bool LocalGroup::aborted() const {
  std::lock_guard<std::mutex> lk(m_);
  return aborted_;
}

bool LocalGroup::allReduce(int rank, float *data, size_t n, ReduceKind kind,
                           bool f16, std::string &err) {
  std::unique_lock<std::mutex> lk(m_);
  if (aborted_) {
    err = abortWhy_;
    return false;
  }
  const uint64_t gen = generation_;
  slots_[rank] = data;
  counts_[rank] = n;
  if (++arrived_ == size_) {
    for (int r = 0; r < size_; ++r)
      if (counts_[r] != n) {
        aborted_ = true;
        abortWhy_ = "all-reduce #" + std::to_string(gen) + ": rank " +
                    std::to_string(r) + " passed " +
                    std::to_string(counts_[r]) + " values but rank " +
                    std::to_string(rank) + " " + std::to_string(n) +
                    " (the ranks run different steps)";
        cv_.notify_all();
        err = abortWhy_;
        return false;
      }
    // In rank order, so that every run (and every rank) gets the same bits.
    auto round = [&](float x) { return f16 ? roundToHalf(x) : x; };
    result_.assign(slots_[0], slots_[0] + n);
    for (int r = 1; r < size_; ++r) {
      const float *x = slots_[r];
      for (size_t i = 0; i < n; ++i) {
        float &a = result_[i];
        switch (kind) {
        case ReduceKind::Avg:
        case ReduceKind::Sum:
          a = round(a + x[i]);
          break;
        case ReduceKind::Max:
          a = std::isnan(x[i]) ? x[i] : std::max(a, x[i]);
          break;
        case ReduceKind::Min:
          a = std::isnan(x[i]) ? x[i] : std::min(a, x[i]);
          break;
        }
      }
    }
    if (kind == ReduceKind::Avg)
      for (float &a : result_)
        a = round(a / static_cast<float>(size_));
    arrived_ = 0;
    std::fill(slots_.begin(), slots_.end(), nullptr);
    ++generation_;
    cv_.notify_all();
  } else {
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::duration<double>(timeout_));
    while (generation_ == gen && !aborted_) {
      if (cv_.wait_until(lk, deadline) == std::cv_status::timeout &&
          generation_ == gen && !aborted_) {
        std::string missing;
        for (int r = 0; r < size_; ++r)
          if (!slots_[r])
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        char secs[32];
        std::snprintf(secs, sizeof(secs), "%g", timeout_);
        aborted_ = true;
        abortWhy_ = "all-reduce #" + std::to_string(gen) + " timed out after " +
                    secs + " s: rank " + missing + " of " +
                    std::to_string(size_) +
                    " never arrived (it died or hangs); giving up";
        cv_.notify_all();
      }
    }
    if (generation_ == gen) {
      err = abortWhy_;
      return false;
    }
  }
  std::copy(result_.begin(), result_.end(), data);
  return true;
}

} // namespace cnnc::reference
