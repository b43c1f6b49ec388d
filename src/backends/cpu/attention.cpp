// Attention over the static cache. Prefill (several query rows per KV head) runs the
// flash kernel of attention_kernels.h on blocks of rows where the CPU has one.
// Otherwise, flash-decoding style: one task per (row, query
// position, KV head): the query heads that share a KV head (grouped-query attention)
// walk its keys and values together, so each cached row is loaded once per group,
// in tiles of 64 positions with an online softmax (a running maximum and sum), so
// the scratch is a fixed stack tile whatever max_cache_len is. Tasks spread over the
// pool: decode splits over batch and KV heads, prefill also over query positions.
#include <algorithm>
#include <cmath>

#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/simd.h"
#include "core/dtype.h"
#include "core/error.h"

namespace shardlm::backends::cpu {
namespace {

constexpr int64_t key_tile = 64, heads_per_pass = decode_max_heads, max_head_dim = 1024;

// Row t of a [positions, head_dim] cache slice as f32: the row itself, or widened into `buffer`.
const float* cache_row(const void* rows, DType dtype, int64_t t, int64_t head_dim, float* buffer) {
  if (dtype == DType::f32) return static_cast<const float*>(rows) + t * head_dim;
  convert_to_f32(static_cast<const uint16_t*>(rows) + t * head_dim, dtype, buffer, static_cast<size_t>(head_dim));
  return buffer;
}

// result[g] = softmax(query[g] . keys[first..visible) * scale) . values, for g < heads.
void attend(const float* query, int64_t heads, const void* keys, const void* values, DType cache_dtype,
            int64_t first, int64_t visible, int64_t head_dim, float scale, float* result) {
  float row_buffer[max_head_dim];
  float scores[heads_per_pass][key_tile];
  float maximum[heads_per_pass], sum[heads_per_pass];
  std::fill(maximum, maximum + heads, -INFINITY);
  std::fill(sum, sum + heads, 0.0f);
  std::fill(result, result + heads * head_dim, 0.0f);
  for (int64_t t0 = first; t0 < visible; t0 += key_tile) {
    const int64_t count = std::min(key_tile, visible - t0);
    for (int64_t t = 0; t < count; ++t) {
      const float* key = cache_row(keys, cache_dtype, t0 + t, head_dim, row_buffer);
      for (int64_t g = 0; g < heads; ++g) scores[g][t] = dot(query + g * head_dim, key, head_dim) * scale;
    }
    for (int64_t g = 0; g < heads; ++g) {
      const float tile_maximum = *std::max_element(scores[g], scores[g] + count);
      const float new_maximum = std::max(maximum[g], tile_maximum);
      const float rescale = std::exp(maximum[g] - new_maximum);  // 0 on the first tile
      if (rescale != 1.0f) {
        float* accumulated = result + g * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) accumulated[d] *= rescale;
      }
      sum[g] *= rescale;
      maximum[g] = new_maximum;
      for (int64_t t = 0; t < count; ++t) sum[g] += scores[g][t] = std::exp(scores[g][t] - new_maximum);
    }
    for (int64_t t = 0; t < count; ++t) {
      const float* value = cache_row(values, cache_dtype, t0 + t, head_dim, row_buffer);
      for (int64_t g = 0; g < heads; ++g) axpy(scores[g][t], value, result + g * head_dim, head_dim);
    }
  }
  for (int64_t g = 0; g < heads; ++g) {
    const float inverse = 1.0f / sum[g];
    for (int64_t d = 0; d < head_dim; ++d) result[g * head_dim + d] *= inverse;
  }
}

// Element `offset` of a cache tensor, whatever its element size.
const void* cache_slice(const Tensor& cache, int64_t offset) {
  return static_cast<const std::byte*>(cache.raw()) + offset * static_cast<int64_t>(dtype_size(cache.dtype()));
}

}  // namespace

void attention(ThreadPool& pool, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const Tensor& positions, float scale, int64_t sliding_window, const Tensor& out) {
  const int64_t batch = q.shape()[0], seq = q.shape()[1], heads = q.shape()[2], head_dim = q.shape()[3];
  const int64_t kv_heads = k_cache.shape()[1], max_cache_len = k_cache.shape()[2];
  const int64_t group = heads / kv_heads;
  const int32_t* position = positions.data<int32_t>();
  for (int64_t i = 0; i < batch * seq; ++i)
    SHARDLM_CHECK(position[i] < max_cache_len, "attention: position ", position[i],
                  " is outside the KV cache (max_cache_len ", max_cache_len, ")");
  const DType cache_dtype = k_cache.dtype();
  SHARDLM_CHECK((cache_dtype == DType::f32 || cache_dtype == DType::bf16) && v_cache.dtype() == cache_dtype &&
                    head_dim <= max_head_dim,
                "attention: unsupported KV cache ", k_cache.describe(), " / ", v_cache.describe());
  const FlashBlockKernel flash = avx2_flash_block(head_dim);
  const DecodeAttentionKernel decode = avx2_decode_attention(head_dim);
  if (flash && seq * group >= 6 && group <= flash_max_rows) {
    // Tasks: (batch row, KV head, block of query positions); a block's rows are its
    // positions times the group's query heads.
    const int64_t block_positions = std::max<int64_t>(1, flash_max_rows / group);
    const int64_t blocks = (seq + block_positions - 1) / block_positions;
    pool.run(batch * kv_heads * blocks, [&](int64_t task) {
      const int64_t block = task % blocks, kv_head = task / blocks % kv_heads, b = task / blocks / kv_heads;
      const float* queries[flash_max_rows];
      float* outputs[flash_max_rows];
      int32_t row_positions[flash_max_rows];
      int64_t rows = 0;
      for (int64_t s = block * block_positions; s < std::min(seq, (block + 1) * block_positions); ++s)
        for (int64_t g = 0; g < group; ++g, ++rows) {
          const int64_t offset = ((b * seq + s) * heads + kv_head * group + g) * head_dim;
          queries[rows] = q.data<float>() + offset;
          outputs[rows] = out.mutable_data<float>() + offset;
          row_positions[rows] = position[b * seq + s];
        }
      const int64_t cache_offset = (b * kv_heads + kv_head) * max_cache_len * head_dim;
      flash(queries, row_positions, rows, cache_slice(k_cache, cache_offset), cache_slice(v_cache, cache_offset),
            cache_dtype, head_dim, scale, sliding_window, outputs);
    });
    return;
  }
  pool.run(batch * seq * kv_heads, [&](int64_t task) {
    const int64_t kv_head = task % kv_heads, row = task / kv_heads;  // row = b * seq + s
    const int64_t b = row / seq, visible = position[row] + 1;
    float* result = out.mutable_data<float>() + (row * heads + kv_head * group) * head_dim;  // [group, head_dim]
    if (visible <= 0) {  // padding
      std::fill(result, result + group * head_dim, 0.0f);
      return;
    }
    const int64_t first = sliding_window > 0 ? std::max<int64_t>(0, visible - sliding_window) : 0;
    const float* query = q.data<float>() + (row * heads + kv_head * group) * head_dim;  // [group, head_dim]
    const int64_t cache_offset = (b * kv_heads + kv_head) * max_cache_len * head_dim;
    for (int64_t g = 0; g < group; g += heads_per_pass)
      (decode ? decode : attend)(query + g * head_dim, std::min(heads_per_pass, group - g),
                                 cache_slice(k_cache, cache_offset), cache_slice(v_cache, cache_offset), cache_dtype,
                                 first, visible, head_dim, scale, result + g * head_dim);
  });
}

}  // namespace shardlm::backends::cpu
