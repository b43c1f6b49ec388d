// Attention over the static cache. Prefill (several query rows per KV head) runs the
// flash kernel of attention_kernels.h on blocks of rows where the CPU has one, a task
// per (batch row, KV head, block of query positions). Otherwise, flash-decoding style:
// a task per (row, KV head), and per part of the row's cached positions when those
// tasks are too few for the threads; the query heads that share a KV head
// (grouped-query attention) walk its keys and values together, so each cached row is
// loaded once per group, in tiles of 64 positions with an online softmax (a running
// maximum and sum), so the scratch is a fixed stack tile whatever max_cache_len is.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/simd.h"
#include "core/dtype.h"
#include "core/error.h"

namespace shardlm::backends::cpu {
namespace {

constexpr int64_t key_tile = 64, heads_per_pass = decode_max_heads, max_head_dim = 1024;
// The fewest positions a decode task's part of a split cache gets: four key tiles, so
// that its fixed costs (the query, the merge) stay small against its keys.
constexpr int64_t min_split_positions = 4 * key_tile;

// Row t of a [positions, head_dim] cache slice as f32: the row itself, or widened into `buffer`.
const float* cache_row(const void* rows, DType dtype, int64_t t, int64_t head_dim, float* buffer) {
  if (dtype == DType::f32) return static_cast<const float*>(rows) + t * head_dim;
  convert_to_f32(static_cast<const uint16_t*>(rows) + t * head_dim, dtype, buffer, static_cast<size_t>(head_dim));
  return buffer;
}

// DecodeAttentionKernel's partial softmax, without AVX2.
void attend(const float* query, int64_t heads, const void* keys, const void* values, DType cache_dtype,
            int64_t first, int64_t visible, int64_t head_dim, float scale, float* result, float* maximum,
            float* sum) {
  float row_buffer[max_head_dim];
  float scores[heads_per_pass][key_tile];
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
}

// result[0, head_dim) /= sum; no keys (sum 0) leaves zeros, as padding rows get.
void normalize(float* result, int64_t head_dim, float sum) {
  const float inverse = sum > 0 ? 1.0f / sum : 0.0f;
  for (int64_t d = 0; d < head_dim; ++d) result[d] *= inverse;
}

// out [group, head_dim] = the softmax over all of a pair's keys from its parts' partial
// softmaxes, partials [parts, group * (head_dim + 2)] as the decode tasks left them:
// each part's terms rescaled from its own maximum to the largest.
void merge_parts(const float* partials, int64_t parts, int64_t group, int64_t head_dim, float* out) {
  const int64_t part_floats = group * (head_dim + 2);
  for (int64_t g = 0; g < group; ++g) {
    const auto part_maximum = [&](int64_t p) { return partials[p * part_floats + group * head_dim + g]; };
    const auto part_sum = [&](int64_t p) { return partials[p * part_floats + group * head_dim + group + g]; };
    float largest = -INFINITY;
    for (int64_t p = 0; p < parts; ++p) largest = std::max(largest, part_maximum(p));
    float* target = out + g * head_dim;
    std::fill(target, target + head_dim, 0.0f);
    float total = 0;
    for (int64_t p = 0; p < parts; ++p) {
      if (part_maximum(p) == -INFINITY) continue;  // a part with no keys
      const float weight = std::exp(part_maximum(p) - largest);
      total += weight * part_sum(p);
      axpy(weight, partials + p * part_floats + g * head_dim, target, head_dim);
    }
    normalize(target, head_dim, total);
  }
}

// Element `offset` of a cache tensor, whatever its element size.
const void* cache_slice(const Tensor& cache, int64_t offset) {
  return static_cast<const std::byte*>(cache.raw()) + offset * static_cast<int64_t>(dtype_size(cache.dtype()));
}

}  // namespace

void attention(ThreadPool& pool, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const Tensor& positions, const Tensor& cache_rows, float scale, int64_t sliding_window,
               const Tensor& out) {
  const int64_t batch = q.shape()[0], seq = q.shape()[1], heads = q.shape()[2], head_dim = q.shape()[3];
  const int64_t kv_heads = k_cache.shape()[1], max_cache_len = k_cache.shape()[2];
  const int64_t group = heads / kv_heads;
  const int32_t* position = positions.data<int32_t>();
  const int32_t* row_of = cache_rows.data<int32_t>();
  check_cache_rows(row_of, batch, k_cache.shape()[0], "attention");
  for (int64_t i = 0; i < batch * seq; ++i)
    SHARDLM_CHECK(position[i] < max_cache_len, "attention: position ", position[i],
                  " is outside the KV cache (max_cache_len ", max_cache_len, ")");
  const DType cache_dtype = k_cache.dtype();
  SHARDLM_CHECK((cache_dtype == DType::f32 || cache_dtype == DType::bf16) && v_cache.dtype() == cache_dtype &&
                    head_dim <= max_head_dim,
                "attention: unsupported KV cache ", k_cache.describe(), " / ", v_cache.describe());
  const int64_t pairs = batch * seq * kv_heads;
  int64_t longest = 0;
  for (int64_t row = 0; row < batch * seq; ++row) {
    const auto [first, visible] = visible_keys(position[row], sliding_window);
    longest = std::max(longest, visible - first);
  }
  // With few KV heads (or many threads) the (row, KV head) pairs alone leave threads
  // idle, so then each pair's positions are split, flash-decoding style, into parts of
  // at least min_split_positions whose partial softmaxes are merged after.
  const int64_t wanted = pairs >= 2 * pool.threads() ? 1 : (2 * pool.threads() + pairs - 1) / pairs;
  const int64_t splits = std::clamp<int64_t>(longest / min_split_positions, 1, wanted);
  const CpuKernels& table = cpu_kernels();
  const FlashBlockKernel flash = table.flash_block ? table.flash_block(head_dim) : nullptr;
  const DecodeAttentionKernel decode = table.decode_attention ? table.decode_attention(head_dim) : nullptr;
  if (flash && seq * group >= 6 && group <= flash_max_rows && splits == 1) {
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
      const int64_t cache_offset = (row_of[b] * kv_heads + kv_head) * max_cache_len * head_dim;
      flash(queries, row_positions, rows, cache_slice(k_cache, cache_offset), cache_slice(v_cache, cache_offset),
            cache_dtype, head_dim, scale, sliding_window, outputs);
    });
    return;
  }
  // Decode: tasks of (row, KV head, part of the row's visible positions).
  const DecodeAttentionKernel kernel = decode ? decode : attend;
  const int64_t part_length = ((longest + splits - 1) / splits + key_tile - 1) / key_tile * key_tile;
  // Each part's unnormalized result and its maximum and sum: [pairs, splits, group, head_dim + 2].
  const int64_t partial_floats = group * (head_dim + 2);
  thread_local std::vector<float> partial_buffer;  // the calling thread's; tasks use its address
  if (splits > 1) partial_buffer.resize(static_cast<size_t>(pairs * splits * partial_floats));
  float* const partials = partial_buffer.data();
  pool.run(pairs * splits, [&](int64_t task) {
    const int64_t pair = task / splits, part = task % splits, row = pair / kv_heads, kv_head = pair % kv_heads;
    const auto [first, visible] = visible_keys(position[row], sliding_window);
    const int64_t part_first = std::min(visible, first + part * part_length);
    const int64_t part_end = std::min(visible, part_first + part_length);
    float* result = splits > 1 ? partials + task * partial_floats
                               : out.mutable_data<float>() + (row * heads + kv_head * group) * head_dim;  // [group, head_dim]
    float local_maximum[heads_per_pass], local_sum[heads_per_pass];
    float* maximum = splits > 1 ? result + group * head_dim : local_maximum;  // [group] or one pass's heads
    float* sum = splits > 1 ? maximum + group : local_sum;
    const float* query = q.data<float>() + (row * heads + kv_head * group) * head_dim;  // [group, head_dim]
    const int64_t cache_offset = (row_of[row / seq] * kv_heads + kv_head) * max_cache_len * head_dim;
    for (int64_t g = 0; g < group; g += heads_per_pass) {
      const int64_t pass_heads = std::min(heads_per_pass, group - g);
      float* pass_maximum = splits > 1 ? maximum + g : maximum;
      float* pass_sum = splits > 1 ? sum + g : sum;
      kernel(query + g * head_dim, pass_heads, cache_slice(k_cache, cache_offset), cache_slice(v_cache, cache_offset),
             cache_dtype, part_first, part_end, head_dim, scale, result + g * head_dim, pass_maximum, pass_sum);
      if (splits == 1)
        for (int64_t h = 0; h < pass_heads; ++h) normalize(result + (g + h) * head_dim, head_dim, pass_sum[h]);
    }
  });
  if (splits == 1) return;
  pool.run(pairs, [&](int64_t pair) {
    const int64_t row = pair / kv_heads, kv_head = pair % kv_heads;
    const float* pair_partials = partials + pair * splits * partial_floats;
    merge_parts(pair_partials, splits, group, head_dim,
                out.mutable_data<float>() + (row * heads + kv_head * group) * head_dim);
  });
}

}  // namespace shardlm::backends::cpu
