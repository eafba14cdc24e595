//===- Communicator.h - the reference interpreter's collectives -*- C++ -*-===//
//
// cnn.all_reduce on the CPU: the interpreter calls the communicator of the
// running thread (none: one rank, the op is the identity). LocalGroup runs
// the ranks of a data-parallel job as threads of one process (`cnnc train
// --gpus N` / `--world-size N` on the CPU path) with an in-memory
// all-reduce that reduces in rank order (deterministic), times out instead
// of hanging when a rank never arrives, and fails every waiting rank at once
// when a rank reports an error (abort).
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_REFERENCE_COMMUNICATOR_H
#define CNNC_REFERENCE_COMMUNICATOR_H

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cnnc::reference {

enum class ReduceKind { Avg, Sum, Max, Min };
/// "avg" | "sum" | "max" | "min" (false for anything else).
bool parseReduceKind(const std::string &s, ReduceKind &out);

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Reduces `n` floats in place across the ranks; every rank gets the same
  /// values. `f16`: the values are f16 (the sum is rounded to f16 after
  /// every addition). False with `err` when the collective cannot complete
  /// (a rank failed or did not arrive in time, or the ranks disagree on n).
  virtual bool allReduce(float *data, size_t n, ReduceKind kind, bool f16,
                         std::string &err) = 0;
};

/// The communicator cnn.all_reduce uses on the calling thread (null: one
/// rank). Thread-local.
Communicator *currentCommunicator();
void setCurrentCommunicator(Communicator *c);

/// `size` ranks as threads of one process.
class LocalGroup {
public:
  LocalGroup(int size, double timeoutSeconds);
  ~LocalGroup();
  int size() const { return size_; }
  /// The communicator of `rank` (owned by the group).
  Communicator *member(int rank);
  /// Rank `rank` failed with `why`: every rank waiting in (or later
  /// entering) a collective fails with a message naming it.
  void abort(int rank, const std::string &why);
  bool aborted() const;

private:
  friend class LocalMember;
  bool allReduce(int rank, float *data, size_t n, ReduceKind kind, bool f16,
                 std::string &err);

  int size_;
  double timeout_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  uint64_t generation_ = 0, completed_ = 0;
  int arrived_ = 0;
  std::vector<float *> slots_;
  std::vector<size_t> counts_;
  std::vector<float> result_;
  bool aborted_ = false;
  std::string abortWhy_;
  std::vector<std::unique_ptr<Communicator>> members_;
};

} // namespace cnnc::reference

#endif
