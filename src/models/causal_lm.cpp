#include "models/causal_lm.h"

#include <limits>

#include "core/limits.h"

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
  auto kv_heads_of = [&](int64_t layer) {
    return cache_kv_heads_.empty() ? config_.num_key_value_heads : cache_kv_heads_.at(layer);
  };
  std::optional<uint64_t> bytes = 0;
  for (int64_t layer = 0; layer < config_.num_hidden_layers && bytes; ++layer) {
    std::optional<uint64_t> layer_bytes = uint64_t{2} * dtype_size(kv_cache_dtype_);
    for (int64_t factor : {batch, kv_heads_of(layer), max_cache_len, config_.head_dim})
      if (layer_bytes) layer_bytes = multiply(*layer_bytes, static_cast<uint64_t>(factor));
    bytes = layer_bytes && *layer_bytes <= UINT64_MAX - *bytes ? std::optional<uint64_t>(*bytes + *layer_bytes)
                                                                : std::nullopt;
  }
  const uint64_t available = limits::available_memory_bytes();
  if (!bytes || *bytes > available)
    fail("a KV cache of ", batch, " rows × ", max_cache_len, " positions needs ",
         bytes ? str_cat(*bytes, " bytes") : std::string("more bytes than fit in 64 bits"), " but only ", available,
         " bytes of memory are available: lower max_cache_len (or the batch size)");

  // One allocation carved into the layers' keys and values: on the CPU a cache of 2 MB or
  // more lies in huge pages then, however small each layer's part (decode reads every
  // layer's part once a token: with 4 KB pages a TLB miss each 4 KB; at 192 positions of
  // Qwen3-0.6B's shape on a Sapphire Rapids VM, kv_cache_write 3.4 -> 2.1 us a call and
  // attention 31 -> 28 us).
  const auto layer_bytes = [&](int64_t layer) {  // each of keys and values, rounded up to whole cache lines
    const uint64_t bytes = static_cast<uint64_t>(batch * kv_heads_of(layer) * max_cache_len * config_.head_dim) *
                           dtype_size(kv_cache_dtype_);
    return (bytes + 63) / 64 * 64;
  };
  StaticCache cache;
  cache.batch = batch;
  cache.max_cache_len = max_cache_len;
  if (!backend.supports_views()) {  // opaque device buffers (PJRT): a pair of tensors per layer
    for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
      const Shape shape{batch, kv_heads_of(i), max_cache_len, config_.head_dim};
      // Split over an SPMD program's devices by KV head, where they divide evenly.
      cache.layers.push_back({backend.allocate_split(shape, kv_cache_dtype_, 1),
                              backend.allocate_split(shape, kv_cache_dtype_, 1)});
    }
    return cache;
  }
  uint64_t total = 0;
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) total += 2 * layer_bytes(i);
  const Tensor memory = backend.allocate({static_cast<int64_t>(total)}, DType::u8);
  uint64_t offset = 0;
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    const Shape shape{batch, kv_heads_of(i), max_cache_len, config_.head_dim};  // keys, values alike
    LayerCache& layer = cache.layers.emplace_back();
    layer.keys = memory.view_bytes(offset, shape, kv_cache_dtype_);
    layer.values = memory.view_bytes(offset + layer_bytes(i), shape, kv_cache_dtype_);
    offset += 2 * layer_bytes(i);
  }
  return cache;
}

void CausalLM::set_parallel_layout(std::shared_ptr<parallel::ProcessGroup> group, std::vector<int64_t> cache_kv_heads) {
  SHARDLM_CHECK(group != nullptr, "set_parallel_layout: no process group");
  SHARDLM_CHECK(cache_kv_heads.empty() || static_cast<int64_t>(cache_kv_heads.size()) == config_.num_hidden_layers,
                "set_parallel_layout: ", cache_kv_heads.size(), " cache layers for ", config_.num_hidden_layers,
                " layers");
  process_group_ = std::move(group);
  cache_kv_heads_ = std::move(cache_kv_heads);
}

void CausalLM::set_kv_cache_dtype(DType dtype) {
  if (dtype != DType::f32 && dtype != DType::bf16)
    fail("kv_cache_dtype ", dtype_name(dtype), " is not supported: use float32 or bfloat16");
  kv_cache_dtype_ = dtype;
}

}  // namespace shardlm::models
