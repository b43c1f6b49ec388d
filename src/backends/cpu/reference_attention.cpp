#include <cmath>
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/reference_kernels.h"
#include "core/dtype.h"

namespace shardlm::backends::reference {

void kv_cache_write(const Tensor& cache, const Tensor& entries, const Tensor& positions, const Tensor& cache_rows) {
  const int64_t batch = entries.shape()[0], seq = entries.shape()[1], kv_heads = entries.shape()[2];
  const int64_t head_dim = entries.shape()[3], max_cache_len = cache.shape()[2];
  const int32_t* position = positions.data<int32_t>();
  const int32_t* row_of = cache_rows.data<int32_t>();
  check_cache_rows(row_of, batch, cache.shape()[0], "kv_cache_write");
  const size_t element = dtype_size(cache.dtype());
  auto* destination = static_cast<std::byte*>(cache.mutable_raw());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) {
      const int32_t p = position[b * seq + s];
      if (p < 0) continue;  // padding
      SHARDLM_CHECK(p < max_cache_len, "position ", p, " is outside the KV cache (max_cache_len ",
                    max_cache_len, ")");
      for (int64_t h = 0; h < kv_heads; ++h)
        convert_from_f32(entries.data<float>() + ((b * seq + s) * kv_heads + h) * head_dim,
                         destination + ((row_of[b] * kv_heads + h) * max_cache_len + p) * head_dim * element, cache.dtype(),
                         static_cast<size_t>(head_dim));
    }
}

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
               const Tensor& cache_rows, float scale, int64_t sliding_window, const Tensor& out) {
  const int64_t batch = q.shape()[0], seq = q.shape()[1], heads = q.shape()[2], head_dim = q.shape()[3];
  const int64_t kv_heads = k_cache.shape()[1], max_cache_len = k_cache.shape()[2];
  const int64_t group = heads / kv_heads;
  const int32_t* position = positions.data<int32_t>();
  const int32_t* row_of = cache_rows.data<int32_t>();
  check_cache_rows(row_of, batch, k_cache.shape()[0], "attention");
  // Grown once per thread, so steady-state decoding allocates nothing.
  thread_local std::vector<float> scores;
  if (scores.size() < static_cast<size_t>(max_cache_len)) scores.resize(static_cast<size_t>(max_cache_len));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t visible = position[b * seq + s] + 1;
        float* result = out.mutable_data<float>() + ((b * seq + s) * heads + h) * head_dim;
        if (visible <= 0) {  // padding
          std::fill(result, result + head_dim, 0.0f);
          continue;
        }
        SHARDLM_CHECK(visible <= max_cache_len, "attention: position ", visible - 1,
                      " is outside the KV cache (max_cache_len ", max_cache_len, ")");
        const int64_t first = sliding_window > 0 ? std::max<int64_t>(0, visible - sliding_window) : 0;
        const float* query = q.data<float>() + ((b * seq + s) * heads + h) * head_dim;
        const int64_t cache_row = (row_of[b] * kv_heads + h / group) * max_cache_len;  // of [.., max_cache_len, head_dim]
        const auto key = [&](int64_t t, int64_t d) { return load_f32(k_cache, (cache_row + t) * head_dim + d); };
        const auto value = [&](int64_t t, int64_t d) { return load_f32(v_cache, (cache_row + t) * head_dim + d); };
        float maximum = -INFINITY;
        for (int64_t t = first; t < visible; ++t) {
          float dot = 0;
          for (int64_t d = 0; d < head_dim; ++d) dot += query[d] * key(t, d);
          scores[t] = dot * scale;
          maximum = std::max(maximum, scores[t]);
        }
        float sum = 0;
        for (int64_t t = first; t < visible; ++t) sum += scores[t] = std::exp(scores[t] - maximum);
        for (int64_t d = 0; d < head_dim; ++d) {
          float acc = 0;
          for (int64_t t = first; t < visible; ++t) acc += scores[t] * value(t, d);
          result[d] = acc / sum;
        }
      }
}

}  // namespace shardlm::backends::reference
