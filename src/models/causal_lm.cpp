#include "models/causal_lm.h"

#include <unistd.h>

#include <limits>

namespace shardlm::models {
namespace {

// a * b, or nullopt when it would overflow.
std::optional<uint64_t> multiply(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return std::nullopt;
  return a * b;
}

}  // namespace

StaticCache CausalLM::allocate_cache(backends::Backend& backend, int64_t batch, int64_t max_cache_len) const {
  SHARDLM_CHECK(batch > 0 && max_cache_len > 0, "KV cache: batch (", batch, ") and max_cache_len (", max_cache_len,
                ") must be positive");
  // Checked before allocating: a typo in max_cache_len must be an error, not an OOM kill.
  std::optional<uint64_t> bytes = uint64_t{2} * dtype_size(kv_cache_dtype_);
  for (int64_t factor : {config_.num_hidden_layers, batch, config_.num_key_value_heads, max_cache_len, config_.head_dim})
    if (bytes) bytes = multiply(*bytes, static_cast<uint64_t>(factor));
  const uint64_t physical = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (!bytes || *bytes > physical)
    fail("a KV cache of ", batch, " rows × ", max_cache_len, " positions needs ",
         bytes ? str_cat(*bytes, " bytes") : std::string("more bytes than fit in 64 bits"), " but this machine has ",
         physical, " bytes of memory: lower max_cache_len (or the batch size)");

  StaticCache cache;
  cache.batch = batch;
  cache.max_cache_len = max_cache_len;
  const Shape shape{batch, config_.num_key_value_heads, max_cache_len, config_.head_dim};
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i)
    cache.layers.push_back({backend.allocate(shape, kv_cache_dtype_), backend.allocate(shape, kv_cache_dtype_)});
  return cache;
}

void CausalLM::set_kv_cache_dtype(DType dtype) {
  if (dtype != DType::f32 && dtype != DType::bf16)
    fail("kv_cache_dtype ", dtype_name(dtype), " is not supported: use float32 or bfloat16");
  kv_cache_dtype_ = dtype;
}

}  // namespace shardlm::models
