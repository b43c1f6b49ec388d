// Attention over the static cache, one query row at a time: scores with vector dots,
// a softmax, and the weighted sum of value rows as vector axpys.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/simd.h"
#include "core/error.h"

namespace shardlm::backends::cpu {

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions, float scale,
               int64_t sliding_window, const Tensor& out) {
  const int64_t batch = q.shape()[0], seq = q.shape()[1], heads = q.shape()[2], head_dim = q.shape()[3];
  const int64_t kv_heads = k_cache.shape()[1], max_cache_len = k_cache.shape()[2];
  const int64_t group = heads / kv_heads;
  const int32_t* position = positions.data<int32_t>();
  thread_local std::vector<float> scores;
  if (scores.size() < static_cast<size_t>(max_cache_len)) scores.resize(static_cast<size_t>(max_cache_len));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) {
      const int64_t visible = position[b * seq + s] + 1;
      SHARDLM_CHECK(visible <= max_cache_len, "attention: position ", visible - 1,
                    " is outside the KV cache (max_cache_len ", max_cache_len, ")");
      const int64_t first = sliding_window > 0 ? std::max<int64_t>(0, visible - sliding_window) : 0;
      for (int64_t h = 0; h < heads; ++h) {
        float* result = out.mutable_data<float>() + ((b * seq + s) * heads + h) * head_dim;
        std::fill(result, result + head_dim, 0.0f);
        if (visible <= 0) continue;  // padding
        const float* query = q.data<float>() + ((b * seq + s) * heads + h) * head_dim;
        const float* keys = k_cache.data<float>() + (b * kv_heads + h / group) * max_cache_len * head_dim;
        const float* values = v_cache.data<float>() + (b * kv_heads + h / group) * max_cache_len * head_dim;
        float maximum = -INFINITY;
        for (int64_t t = first; t < visible; ++t) {
          scores[t] = dot(query, keys + t * head_dim, head_dim) * scale;
          maximum = std::max(maximum, scores[t]);
        }
        float sum = 0;
        for (int64_t t = first; t < visible; ++t) sum += scores[t] = std::exp(scores[t] - maximum);
        const float inverse = 1.0f / sum;
        for (int64_t t = first; t < visible; ++t) axpy(scores[t] * inverse, values + t * head_dim, result, head_dim);
      }
    }
}

}  // namespace shardlm::backends::cpu
