// The reference top_k: a min-heap of the k best seen, one pass over each row. NaN ranks
// above every number, as in torch.topk, so that sampling still sees (and rejects) it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/reference_kernels.h"

namespace shardlm::backends::reference {

void top_k(const Tensor& logits, const Tensor& values, const Tensor& indices) {
  const int64_t rows = logits.shape()[0], vocab = logits.shape()[1], k = values.shape()[1];
  // `first_before(a, b)` when a ranks above b: NaN first, then by value descending, equals by index.
  const float* data = logits.data<float>();
  auto first_before = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    const bool a_nan = std::isnan(a.first), b_nan = std::isnan(b.first);
    if (a_nan != b_nan) return a_nan;
    if (a_nan || a.first == b.first) return a.second < b.second;
    return a.first > b.first;
  };
  thread_local std::vector<std::pair<float, int32_t>> best;  // a heap whose front ranks lowest
  for (int64_t r = 0; r < rows; ++r) {
    best.clear();
    for (int64_t i = 0; i < vocab; ++i) {
      const std::pair<float, int32_t> candidate{data[r * vocab + i], static_cast<int32_t>(i)};
      if (static_cast<int64_t>(best.size()) < k) {
        best.push_back(candidate);
        std::push_heap(best.begin(), best.end(), first_before);
      } else if (k > 0 && first_before(candidate, best.front())) {
        std::pop_heap(best.begin(), best.end(), first_before);
        best.back() = candidate;
        std::push_heap(best.begin(), best.end(), first_before);
      }
    }
    std::sort(best.begin(), best.end(), first_before);
    for (int64_t j = 0; j < k; ++j) {
      const bool found = j < static_cast<int64_t>(best.size());
      values.mutable_data<float>()[r * k + j] = found ? best[j].first : -std::numeric_limits<float>::infinity();
      indices.mutable_data<int32_t>()[r * k + j] = found ? best[j].second : -1;
    }
  }
}

}  // namespace shardlm::backends::reference
