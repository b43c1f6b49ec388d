// Flash attention for prefill on AVX2: a block of query rows that share one KV head
// meets the keys 128 at a time. Scores S = Q K^T and the update O += P V both run on
// the matmul micro-kernel (avx2_gemm.h): K is packed per tile, V is read in place
// (its rows are already the [k][n] panels the micro-kernel wants). An online softmax
// (running maximum and sum per row) means no score row ever spans the whole cache.
#include "backends/cpu/attention_kernels.h"

#include <cmath>

#include "backends/cpu/avx2_gemm.h"
#include "backends/cpu/decode_attention.h"

namespace shardlm::backends::cpu {

namespace {

using namespace avx2;
using decode_attention::online_softmax_tile;

// A flash block's P V step adds every tile into the block's output, loaded and stored once
// per micro-kernel call: 128 keys a tile halve those (pp512 attention 5 - 7% faster than 64,
// in-process A/B at two threads; 256 gained nothing more).
constexpr int64_t flash_key_tile = 128;

template <DType Cache>
void flash_block(const float* const* queries, const int32_t* positions, int64_t rows, const void* keys,
                 const void* values, int64_t head_dim, float scale, int64_t sliding_window, float* const* outputs) {
  alignas(64) float q[flash_max_rows * flash_max_head_dim];            // [rows, head_dim], pre-scaled
  alignas(64) float o[flash_max_rows * flash_max_head_dim];            // [rows, head_dim]
  alignas(64) float s[flash_max_rows * flash_key_tile];                // [rows, flash_key_tile]
  alignas(64) float packed[flash_key_tile / panel_width * flash_max_head_dim * panel_width];  // K tile, [panel][d][16]
  // [flash_key_tile, head_dim]
  alignas(64) float widened_values[Cache == DType::f32 ? 1 : flash_key_tile * flash_max_head_dim];
  float maximum[flash_max_rows], sum[flash_max_rows];
  for (int64_t r = 0; r < rows; ++r)
    // head_dim is a multiple of 16 (avx2_flash_block): whole vectors, here and below.
    for (int64_t d = 0; d < head_dim; d += 8)
      _mm256_store_ps(q + r * head_dim + d, _mm256_mul_ps(_mm256_loadu_ps(queries[r] + d), _mm256_set1_ps(scale)));
  const auto [first_key, end_key] = start_flash_rows(positions, rows, sliding_window, head_dim, o, maximum, sum);
  const WeightView key_rows{keys, Cache, head_dim}, value_rows{values, Cache, head_dim};
  for (int64_t t0 = first_key; t0 < end_key; t0 += flash_key_tile) {
    const int64_t count = std::min(flash_key_tile, end_key - t0), panels = (count + panel_width - 1) / panel_width;
    for (int64_t p = 0; p < panels; ++p)
      pack_panel<Cache>(key_rows, t0 + p * panel_width, std::min(panel_width, count - p * panel_width), 0,
                             head_dim, packed + p * head_dim * panel_width);
    for (int64_t r0 = 0; r0 < rows; r0 += micro_rows)
      for (int64_t p = 0; p < panels; ++p)
        micro_kernel_rows(std::min(micro_rows, rows - r0), q + r0 * head_dim, head_dim,
                          packed + p * head_dim * panel_width, panel_width, head_dim,
                          s + r0 * flash_key_tile + p * panel_width, flash_key_tile,
                          std::min(panel_width, count - p * panel_width), false);
    for (int64_t r = 0; r < rows; ++r) {
      const KeyRange seen = visible_keys(positions[r], sliding_window);
      online_softmax_tile(s + r * flash_key_tile, count, seen.first - t0, std::min(seen.end, end_key) - t0,
                          maximum[r], sum[r], o + r * head_dim, head_dim);
    }
    // V rows are [k][n] panels as they lie; a bf16 tile is widened first.
    const float* value_tile = static_cast<const float*>(values) + t0 * head_dim;
    if constexpr (Cache != DType::f32) {
      for (int64_t t = 0; t < count; ++t) widen_row<Cache>(value_rows, t0 + t, 0, head_dim, widened_values + t * head_dim);
      value_tile = widened_values;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += micro_rows)
      for (int64_t d0 = 0; d0 < head_dim; d0 += panel_width)
        micro_kernel_rows(std::min(micro_rows, rows - r0), s + r0 * flash_key_tile, flash_key_tile, value_tile + d0,
                          head_dim, count, o + r0 * head_dim + d0, head_dim, panel_width, true);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float inverse = sum[r] > 0 ? 1.0f / sum[r] : 0.0f;  // padding rows stay zero
    for (int64_t d = 0; d < head_dim; d += 8)
      _mm256_storeu_ps(outputs[r] + d, _mm256_mul_ps(_mm256_load_ps(o + r * head_dim + d), _mm256_set1_ps(inverse)));
  }
}

void flash_block_any(const float* const* queries, const int32_t* positions, int64_t rows, const void* keys,
                     const void* values, DType cache_dtype, int64_t head_dim, float scale, int64_t sliding_window,
                     float* const* outputs) {
  (cache_dtype == DType::bf16 ? flash_block<DType::bf16> : flash_block<DType::f32>)(
      queries, positions, rows, keys, values, head_dim, scale, sliding_window, outputs);
}

}  // namespace

DecodeAttentionKernel avx2_decode_attention(int64_t head_dim) {
  return cpu_has_avx2_fma_f16c() ? decode_attention::kernel_for(head_dim) : nullptr;
}

FlashBlockKernel avx2_flash_block(int64_t head_dim) {
  const bool fits = cpu_has_avx2_fma_f16c() && head_dim % panel_width == 0 && head_dim <= flash_max_head_dim;
  return fits ? flash_block_any : nullptr;
}

}  // namespace shardlm::backends::cpu
