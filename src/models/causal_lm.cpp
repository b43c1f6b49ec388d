#include "models/causal_lm.h"

namespace shardlm::models {

StaticCache CausalLM::allocate_cache(backends::Backend& backend, int64_t batch, int64_t max_cache_len) const {
  StaticCache cache;
  cache.batch = batch;
  cache.max_cache_len = max_cache_len;
  const Shape shape{batch, config_.num_key_value_heads, max_cache_len, config_.head_dim};
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i)
    cache.layers.push_back({backend.allocate(shape, DType::f32), backend.allocate(shape, DType::f32)});
  return cache;
}

}  // namespace shardlm::models
