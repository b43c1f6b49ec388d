#pragma once
// Which part of a dimension a rank holds. A part is a list of index ranges in order;
// ranges may repeat (two of a rank's query-head groups reading one KV head).

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "parallel/process_group.h"
#include "parallel/tp_plan.h"

namespace shardlm::parallel {

struct Segments {
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [begin, end) each
  int64_t size() const {
    int64_t total = 0;
    for (const auto& [begin, end] : ranges) total += end - begin;
    return total;
  }
  bool operator==(const Segments&) const = default;
};

// Rank `rank`'s share of `count` units of `unit` indices each, split as evenly as
// whole units allow (the first `count % size` ranks take one unit more).
Segments even_split(int64_t count, int64_t unit, int rank, int size);
// The same share of each of `parts` packed blocks of count * unit indices, in block order
// (a fused gate_up weight: the rank's gate rows, then its matching up rows).
Segments packed_split(int64_t parts, int64_t count, int64_t unit, int rank, int size);
// Every rank's size of even_split(count, unit, r, size).
std::vector<int64_t> even_split_sizes(int64_t count, int64_t unit, int size);

// The key and value heads rank `rank` computes when it computes query heads
// `query_heads` of `heads` (grouped-query attention with `kv_heads`): for every run of
// its query heads that read one KV head, that head; runs are cut to one common length
// so that local query head j reads local KV head j / (local heads / local KV heads), as
// the attention kernels expect. Returns KV head indices (repeated where two runs read
// one head).
std::vector<int64_t> kv_heads_for_query_heads(int64_t first_query_head, int64_t query_head_count, int64_t heads,
                                              int64_t kv_heads);

// The tensor-parallel setting of one process: its group and the plan in force.
struct TensorParallel {
  std::shared_ptr<ProcessGroup> group;
  TpPlan plan;
  int rank() const { return group ? group->rank() : 0; }
  int size() const { return group ? group->size() : 1; }
};

}  // namespace shardlm::parallel
