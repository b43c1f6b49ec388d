#include "parallel/sharding.h"

#include <numeric>

#include "core/error.h"

namespace shardlm::parallel {

Segments even_split(int64_t count, int64_t unit, int rank, int size) {
  SHARDLM_CHECK(size > 0 && rank >= 0 && rank < size, "even_split: rank ", rank, " of ", size);
  const int64_t base = count / size, extra = count % size;
  const int64_t first = rank * base + std::min<int64_t>(rank, extra);
  const int64_t units = base + (rank < extra ? 1 : 0);
  return {{{first * unit, (first + units) * unit}}};
}

Segments packed_split(int64_t parts, int64_t count, int64_t unit, int rank, int size) {
  const auto [begin, end] = even_split(count, unit, rank, size).ranges.front();
  Segments segments;
  for (int64_t part = 0; part < parts; ++part)
    segments.ranges.emplace_back(part * count * unit + begin, part * count * unit + end);
  return segments;
}

std::vector<int64_t> even_split_sizes(int64_t count, int64_t unit, int size) {
  std::vector<int64_t> sizes;
  for (int rank = 0; rank < size; ++rank) sizes.push_back(even_split(count, unit, rank, size).size());
  return sizes;
}

std::vector<int64_t> kv_heads_for_query_heads(int64_t first_query_head, int64_t query_head_count, int64_t heads,
                                              int64_t kv_heads) {
  SHARDLM_CHECK(kv_heads > 0 && heads % kv_heads == 0 && query_head_count > 0, "attention: ", heads,
                " query heads cannot share ", kv_heads, " KV heads");
  const int64_t group = heads / kv_heads;
  // Runs of consecutive local query heads reading the same KV head.
  std::vector<std::pair<int64_t, int64_t>> runs;  // (kv head, length)
  for (int64_t h = first_query_head; h < first_query_head + query_head_count; ++h) {
    if (!runs.empty() && runs.back().first == h / group)
      ++runs.back().second;
    else
      runs.emplace_back(h / group, 1);
  }
  int64_t common = 0;
  for (const auto& [kv_head, length] : runs) common = std::gcd(common, length);
  std::vector<int64_t> result;
  for (const auto& [kv_head, length] : runs)
    for (int64_t i = 0; i < length / common; ++i) result.push_back(kv_head);
  return result;
}

}  // namespace shardlm::parallel
