#pragma once
// The static KV cache: allocated once at max_cache_len for a batch size and reused
// across generate() calls; positions decide where each step writes.

#include <vector>

#include "backends/backend.h"

namespace shardlm::models {

struct LayerCache {
  Tensor keys;    // f32 or bf16 [batch, kv_heads, max_cache_len, head_dim]
  Tensor values;  // f32 or bf16 [batch, kv_heads, max_cache_len, head_dim]
};

struct StaticCache {
  int64_t batch = 0;
  int64_t max_cache_len = 0;
  std::vector<LayerCache> layers;

  size_t bytes() const {
    size_t total = 0;
    for (const LayerCache& layer : layers) total += layer.keys.nbytes() + layer.values.nbytes();
    return total;
  }
};

}  // namespace shardlm::models
