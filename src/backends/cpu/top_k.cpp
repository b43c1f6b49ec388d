// top_k over logit rows for sampling: greedy decode asks for k = 1, sampling for
// top_k + 1, over a vocabulary of up to ~150k. Once k candidates are held, a later
// logit can only displace the lowest of them by being larger (an equal one has a
// higher index, which ranks below) or by being NaN while the lowest is not; so eight
// logits at a time are compared against that lowest, and the few groups that hold such
// a logit are ranked one by one. A row's cost is one vector compare per eight logits.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "backends/cpu/kernels.h"

namespace shardlm::backends::cpu {
namespace {

struct Candidate {
  float value;
  int32_t index;
};

// Whether a ranks above b: NaN first (as torch.topk), then larger values, then lower indices.
bool ranks_above(const Candidate& a, const Candidate& b) {
  const bool a_nan = std::isnan(a.value), b_nan = std::isnan(b.value);
  if (a_nan || b_nan) return a_nan && (!b_nan || a.index < b.index);
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

// The k best of one row, kept as a heap whose front ranks lowest.
class BestOf {
 public:
  explicit BestOf(std::vector<Candidate>& heap, int64_t k) : heap_(heap), k_(static_cast<size_t>(k)) { heap_.clear(); }

  bool full() const { return heap_.size() == k_; }
  const Candidate& lowest() const { return heap_.front(); }

  void offer(float value, int64_t index) {
    const Candidate candidate{value, static_cast<int32_t>(index)};
    if (!full()) {
      heap_.push_back(candidate);
      std::push_heap(heap_.begin(), heap_.end(), ranks_above);
    } else if (ranks_above(candidate, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), ranks_above);
      heap_.back() = candidate;
      std::push_heap(heap_.begin(), heap_.end(), ranks_above);
    }
  }

  // Best first, then -inf / -1 for the places a row shorter than k leaves empty.
  void write(float* values, int32_t* indices) {
    std::sort(heap_.begin(), heap_.end(), ranks_above);
    for (size_t j = 0; j < k_; ++j) {
      const bool found = j < heap_.size();
      values[j] = found ? heap_[j].value : -std::numeric_limits<float>::infinity();
      indices[j] = found ? heap_[j].index : -1;
    }
  }

 private:
  std::vector<Candidate>& heap_;
  size_t k_;
};

// Whether any of the eight logits at `logits` is larger than `threshold` or is NaN:
// "not (x <= threshold)" is both.
bool any_can_displace(const float* logits, float threshold) {
#if defined(__SSE2__)
  const __m128 limit = _mm_set1_ps(threshold);
  const __m128 hits = _mm_or_ps(_mm_cmpnle_ps(_mm_loadu_ps(logits), limit), _mm_cmpnle_ps(_mm_loadu_ps(logits + 4), limit));
  return _mm_movemask_ps(hits) != 0;
#else
  for (int j = 0; j < 8; ++j)
    if (!(logits[j] <= threshold)) return true;
  return false;
#endif
}

void top_k_row(const float* logits, int64_t vocab, BestOf& best) {
  int64_t i = 0;
  for (; i < vocab && !best.full(); ++i) best.offer(logits[i], i);
  if (!best.full()) return;  // k >= vocab: every logit is held
  for (; i + 8 <= vocab; i += 8) {
    const float threshold = best.lowest().value;
    if (std::isnan(threshold)) return;  // k NaNs at the lowest indices: nothing later ranks above them
    if (!any_can_displace(logits + i, threshold)) continue;
    for (int64_t j = i; j < i + 8; ++j) best.offer(logits[j], j);
  }
  for (; i < vocab; ++i) best.offer(logits[i], i);
}

}  // namespace

void top_k(ThreadPool& pool, const Tensor& logits, const Tensor& values, const Tensor& indices) {
  const int64_t rows = logits.shape()[0], vocab = logits.shape()[1], k = values.shape()[1];
  const float* data = logits.data<float>();
  float* best_values = values.mutable_data<float>();
  int32_t* best_indices = indices.mutable_data<int32_t>();
  // A row on each task: a batch's rows are independent, and one row (decode) stays on
  // the calling thread.
  pool.run(rows, [&](int64_t r) {
    thread_local std::vector<Candidate> heap;
    BestOf best(heap, k);
    if (k > 0) top_k_row(data + r * vocab, vocab, best);
    best.write(best_values + r * k, best_indices + r * k);
  });
}

}  // namespace shardlm::backends::cpu
