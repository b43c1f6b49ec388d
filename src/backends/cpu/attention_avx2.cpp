// Flash attention for prefill on AVX2: a block of query rows that share one KV head
// meets the keys 64 at a time. Scores S = Q K^T and the update O += P V both run on
// the matmul micro-kernel (avx2_gemm.h): K is packed per tile, V is read in place
// (its rows are already the [k][n] panels the micro-kernel wants). An online softmax
// (running maximum and sum per row) means no score row ever spans the whole cache.
#include "backends/cpu/attention_kernels.h"

#include <cmath>

#include "backends/cpu/avx2_gemm.h"

namespace shardlm::backends::cpu {
namespace {

using namespace avx2;

constexpr int64_t key_tile = 64;

template <DType Cache>
void flash_block(const float* const* queries, const int32_t* positions, int64_t rows, const void* keys,
                 const void* values, int64_t head_dim, float scale, int64_t sliding_window, float* const* outputs) {
  alignas(64) float q[flash_max_rows * flash_max_head_dim];            // [rows, head_dim], pre-scaled
  alignas(64) float o[flash_max_rows * flash_max_head_dim];            // [rows, head_dim]
  alignas(64) float s[flash_max_rows * key_tile];                      // [rows, key_tile]
  alignas(64) float packed[key_tile / panel_width * flash_max_head_dim * panel_width];  // K tile, [panel][d][16]
  alignas(64) float widened_values[Cache == DType::f32 ? 1 : key_tile * flash_max_head_dim];  // [key_tile, head_dim]
  float maximum[flash_max_rows], sum[flash_max_rows];
  int64_t first_key = INT64_MAX, end_key = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t d = 0; d < head_dim; ++d) q[r * head_dim + d] = queries[r][d] * scale;
    std::fill(o + r * head_dim, o + (r + 1) * head_dim, 0.0f);
    maximum[r] = -INFINITY;
    sum[r] = 0;
    const int64_t visible = positions[r] + 1;
    if (visible <= 0) continue;  // padding row
    first_key = std::min(first_key, sliding_window > 0 ? std::max<int64_t>(0, visible - sliding_window) : 0);
    end_key = std::max(end_key, visible);
  }
  const WeightView key_rows{keys, Cache, head_dim}, value_rows{values, Cache, head_dim};
  for (int64_t t0 = first_key; t0 < end_key; t0 += key_tile) {
    const int64_t count = std::min(key_tile, end_key - t0), panels = (count + panel_width - 1) / panel_width;
    for (int64_t p = 0; p < panels; ++p)
      pack_panel<Cache>(key_rows, t0 + p * panel_width, std::min(panel_width, count - p * panel_width), 0,
                             head_dim, packed + p * head_dim * panel_width);
    for (int64_t r0 = 0; r0 < rows; r0 += micro_rows)
      for (int64_t p = 0; p < panels; ++p)
        micro_kernel_rows(std::min(micro_rows, rows - r0), q + r0 * head_dim, head_dim,
                          packed + p * head_dim * panel_width, panel_width, head_dim,
                          s + r0 * key_tile + p * panel_width, key_tile,
                          std::min(panel_width, count - p * panel_width), false);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = s + r * key_tile;
      const int64_t visible = positions[r] + 1;
      const int64_t first = sliding_window > 0 ? std::max<int64_t>(0, visible - sliding_window) : 0;
      float tile_maximum = -INFINITY;
      for (int64_t t = 0; t < count; ++t) {
        if (t0 + t < first || t0 + t >= visible) row[t] = -INFINITY;  // causal mask, window, padding
        tile_maximum = std::max(tile_maximum, row[t]);
      }
      if (tile_maximum == -INFINITY) {  // nothing visible to this row here
        std::fill(row, row + count, 0.0f);
        continue;
      }
      const float new_maximum = std::max(maximum[r], tile_maximum);
      const float rescale = std::exp(maximum[r] - new_maximum);  // 0 on the row's first tile
      if (rescale != 1.0f)
        for (int64_t d = 0; d < head_dim; ++d) o[r * head_dim + d] *= rescale;
      sum[r] *= rescale;
      maximum[r] = new_maximum;
      for (int64_t t = 0; t < count; ++t) sum[r] += row[t] = std::exp(row[t] - new_maximum);
    }
    // V rows are [k][n] panels as they lie; a bf16 tile is widened first.
    const float* value_tile = static_cast<const float*>(values) + t0 * head_dim;
    if constexpr (Cache != DType::f32) {
      for (int64_t t = 0; t < count; ++t) widen_row<Cache>(value_rows, t0 + t, 0, head_dim, widened_values + t * head_dim);
      value_tile = widened_values;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += micro_rows)
      for (int64_t d0 = 0; d0 < head_dim; d0 += panel_width)
        micro_kernel_rows(std::min(micro_rows, rows - r0), s + r0 * key_tile, key_tile, value_tile + d0, head_dim,
                          count, o + r0 * head_dim + d0, head_dim, panel_width, true);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float inverse = sum[r] > 0 ? 1.0f / sum[r] : 0.0f;  // padding rows stay zero
    for (int64_t d = 0; d < head_dim; ++d) outputs[r][d] = o[r * head_dim + d] * inverse;
  }
}

void flash_block_any(const float* const* queries, const int32_t* positions, int64_t rows, const void* keys,
                     const void* values, DType cache_dtype, int64_t head_dim, float scale, int64_t sliding_window,
                     float* const* outputs) {
  (cache_dtype == DType::bf16 ? flash_block<DType::bf16> : flash_block<DType::f32>)(
      queries, positions, rows, keys, values, head_dim, scale, sliding_window, outputs);
}

}  // namespace

FlashBlockKernel avx2_flash_block(int64_t head_dim) {
  const bool supported =
      cpu_has_avx2_fma_f16c();
  return supported && head_dim % panel_width == 0 && head_dim <= flash_max_head_dim ? flash_block_any : nullptr;
}

}  // namespace shardlm::backends::cpu
