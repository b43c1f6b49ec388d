#pragma once
// Where a step's time goes, op kind by op kind: with SHARDLM_PROFILE_OPS=1 set, every
// compiled graph run on the CPU times each of its nodes, and the process prints the table
// to stderr when it exits. Each kind's median and 90th percentile sit beside its mean:
// a mean well above the median is a few calls far slower than the kind's typical one
// (on a VM, most often another task or the host taking a core in the middle of an op),
// which a faster kernel would not fix. Other devices run their ops asynchronously or as
// one program, so their host time per node would measure launches: they are not timed.
//
// Memory stays bounded however long a process runs: each kind keeps a histogram of
// 2^(1/16) steps, so its quantiles are within 2.2% of the true ones.

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "graph/graph.h"

namespace shardlm::graph {

class OpProfile {
 public:
  // The process's profile while SHARDLM_PROFILE_OPS is set to anything but "" or "0",
  // else null (read once).
  static OpProfile* active();

  // One call of `kind` that took `seconds`. Thread-safe (tensor-parallel ranks may share a process).
  void record(OpKind kind, double seconds);

  // The table as printed: one row per kind that ran, the slowest in total first, then the
  // total and what the calls would have taken at each kind's median. Empty if nothing ran.
  std::string table() const;

 private:
  static constexpr int steps_per_doubling = 16, bucket_count = 32 * steps_per_doubling;  // 100 ns to ~430 s
  struct Kind {
    int64_t calls = 0;
    double seconds = 0, longest = 0;
    std::array<int64_t, bucket_count> histogram{};
  };
  // The q-quantile of `kind`'s calls, in seconds: the geometric middle of its bucket.
  static double quantile(const Kind& kind, double q);

  mutable std::mutex mutex_;
  std::array<Kind, op_kind_count> kinds_{};
};

}  // namespace shardlm::graph
