// Flash attention for prefill on AVX512_BF16 over a bf16 KV cache: flash_attention.h's
// steps (128-key tiles, an online softmax), with both products, S = Q K^T
// and O += P V, on VDPBF16PS through the AVX-512 micro-kernel (avx512_bf16_gemm.h), twice
// the multiply-adds of an f32 FMA an instruction and no widening of the cache. The
// queries (scaled) and each tile's softmax weights P are rounded to bf16 once, as a bf16
// model's attention runs in transformers; the products and sums stay f32. Q and P are
// rows of bf16 pairs as they lie (the micro-kernel broadcasts from them); a K tile is
// packed as panels [d pair][32 keys], a V tile as panels [key pair][32 columns].
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/avx512_bf16_gemm.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/vector_math.h"

namespace shardlm::backends::cpu {
namespace {

using avx512::micro_rows;
using avx512_bf16::panel_width;

constexpr int64_t key_tile = 128;

// Rows [t0, t0 + count) of `values` [*, head_dim] bf16 as head_dim / 32 panels [pairs][32]
// of 32-bit pairs (V[t][d], V[t + 1][d]) for key pairs t = t0 + 2j, a key past count zero.
void pack_value_panels(const uint16_t* values, int64_t t0, int64_t count, int64_t head_dim, uint32_t* panels) {
  const int64_t pairs = (count + 1) / 2;
  for (int64_t j = 0; j < pairs; ++j) {
    const uint16_t* even = values + (t0 + 2 * j) * head_dim;
    const uint16_t* odd = 2 * j + 1 < count ? even + head_dim : nullptr;
    for (int64_t d = 0; d < head_dim; d += 16) {
      const __m512i low = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(even + d)));
      const __m512i high =
          odd ? _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(odd + d))),
                                  16)
              : _mm512_setzero_si512();
      _mm512_store_si512(panels + (d / panel_width * pairs + j) * panel_width + d % panel_width,
                         _mm512_or_si512(low, high));
    }
  }
}

// Lanes [first, end) of the 16 from t, as a mask.
__mmask16 lanes_between(int64_t t, int64_t first, int64_t end) {
  const int64_t low = std::clamp<int64_t>(first - t, 0, 16), high = std::clamp<int64_t>(end - t, 0, 16);
  return static_cast<__mmask16>(((1u << high) - 1u) & ~((1u << low) - 1u));
}

// One row of a score tile, row [count] (decode_attention.h's online_softmax_tile, on 16
// lanes): keys outside [first, end) are masked, the rest become e^(score - running
// maximum), written rounded to bf16 as pairs [(count + 1) / 2]; the running maximum and sum
// (of the f32 weights), and the row's output o [head_dim] so far, are rescaled when the
// maximum grows.
void softmax_to_pairs(const float* row, int64_t count, int64_t first, int64_t end, float& maximum, float& sum,
                      float* o, int64_t head_dim, uint32_t* pairs) {
  end = std::min(end, count);
  __m512 tile_maxima = _mm512_set1_ps(-INFINITY);
  for (int64_t t = 0; t < end; t += 16)
    tile_maxima = _mm512_mask_max_ps(tile_maxima, lanes_between(t, first, end), tile_maxima, _mm512_loadu_ps(row + t));
  const float tile_maximum = _mm512_reduce_max_ps(tile_maxima);
  if (tile_maximum == -INFINITY) {  // nothing visible to this row here
    std::fill(pairs, pairs + (count + 1) / 2, 0u);
    return;
  }
  const float new_maximum = std::max(maximum, tile_maximum);
  const float rescale = std::exp(maximum - new_maximum);  // 0 on the row's first tile
  if (rescale != 1.0f)
    for (int64_t d = 0; d < head_dim; d += 16)
      _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(o + d), _mm512_set1_ps(rescale)));
  maximum = new_maximum;
  const __m512 shift = _mm512_set1_ps(new_maximum);
  __m512 sums = _mm512_setzero_ps();
  for (int64_t t = 0; t < count; t += 32) {
    const __m512 low = _mm512_maskz_mov_ps(lanes_between(t, first, end),
                                           exp_lanes(_mm512_sub_ps(_mm512_loadu_ps(row + t), shift)));
    const __m512 high = _mm512_maskz_mov_ps(lanes_between(t + 16, first, end),
                                            exp_lanes(_mm512_sub_ps(_mm512_loadu_ps(row + t + 16), shift)));
    sums = _mm512_add_ps(sums, _mm512_add_ps(low, high));
    _mm512_storeu_si512(pairs + t / 2, (__m512i)_mm512_cvtne2ps_pbh(high, low));
  }
  sum = sum * rescale + _mm512_reduce_add_ps(sums);
}

void flash_block(const float* const* queries, const int32_t* positions, int64_t rows, const void* keys,
                 const void* values, int64_t head_dim, float scale, int64_t sliding_window, float* const* outputs) {
  constexpr int64_t q_stride = flash_max_head_dim / 2, p_stride = key_tile / 2;
  const int64_t dim_pairs = head_dim / 2;
  alignas(64) uint32_t q[flash_max_rows * q_stride];  // [rows, d pair], pre-scaled
  alignas(64) float o[flash_max_rows * flash_max_head_dim];  // [rows, head_dim]
  alignas(64) float s[flash_max_rows * key_tile];            // [rows, key_tile]
  alignas(64) uint32_t p[flash_max_rows * p_stride];         // [rows, key pair]
  alignas(64) uint32_t k_panels[key_tile / panel_width * flash_max_head_dim / 2 * panel_width];  // [panel][d pair][32]
  alignas(64) uint32_t v_panels[flash_max_head_dim / panel_width * key_tile / 2 * panel_width];  // [d panel][key pair][32]
  float maximum[flash_max_rows], sum[flash_max_rows];
  const __m512 scaling = _mm512_set1_ps(scale);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < head_dim; d += 32)  // head_dim is a multiple of 32 (avx512_bf16_flash_block)
      _mm512_store_si512(q + r * q_stride + d / 2,
                         (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(_mm512_loadu_ps(queries[r] + d + 16), scaling),
                                                      _mm512_mul_ps(_mm512_loadu_ps(queries[r] + d), scaling)));
  const auto [first_key, end_key] = start_flash_rows(positions, rows, sliding_window, head_dim, o, maximum, sum);
  const WeightView key_rows{keys, DType::bf16, head_dim};
  for (int64_t t0 = first_key; t0 < end_key; t0 += key_tile) {
    const int64_t count = std::min(key_tile, end_key - t0), panels = (count + panel_width - 1) / panel_width;
    const int64_t pairs = (count + 1) / 2;
    const auto width = [&](int64_t panel) { return std::min(panel_width, count - panel * panel_width); };
    for (int64_t panel = 0; panel < panels; ++panel)
      avx512_bf16::pack_panel(key_rows, t0 + panel * panel_width, width(panel), 0, head_dim,
                              k_panels + panel * dim_pairs * panel_width);
    for (int64_t r0 = 0; r0 < rows; r0 += micro_rows)
      for (int64_t panel = 0; panel < panels; ++panel)
        avx512::micro_kernel_rows<avx512::RowMajor<q_stride>>(
            std::min(micro_rows, rows - r0), q + r0 * q_stride, k_panels + panel * dim_pairs * panel_width, dim_pairs,
            s + r0 * key_tile + panel * panel_width, key_tile, width(panel), false, avx512_bf16::MultiplyAddPairs{});
    for (int64_t r = 0; r < rows; ++r) {
      const KeyRange seen = visible_keys(positions[r], sliding_window);
      softmax_to_pairs(s + r * key_tile, count, seen.first - t0, std::min(seen.end, end_key) - t0, maximum[r], sum[r],
                       o + r * head_dim, head_dim, p + r * p_stride);
    }
    pack_value_panels(static_cast<const uint16_t*>(values), t0, count, head_dim, v_panels);
    for (int64_t r0 = 0; r0 < rows; r0 += micro_rows)
      for (int64_t d0 = 0; d0 < head_dim; d0 += panel_width)
        avx512::micro_kernel_rows<avx512::RowMajor<p_stride>>(
            std::min(micro_rows, rows - r0), p + r0 * p_stride, v_panels + d0 / panel_width * pairs * panel_width,
            pairs, o + r0 * head_dim + d0, head_dim, panel_width, true, avx512_bf16::MultiplyAddPairs{});
  }
  for (int64_t r = 0; r < rows; ++r) {
    const __m512 inverse = _mm512_set1_ps(sum[r] > 0 ? 1.0f / sum[r] : 0.0f);  // padding rows stay zero
    for (int64_t d = 0; d < head_dim; d += 16)
      _mm512_storeu_ps(outputs[r] + d, _mm512_mul_ps(_mm512_load_ps(o + r * head_dim + d), inverse));
  }
}

// An f32 cache: the AVX-512 table's f32 kernel (flash_attention.h on its micro-kernel).
void flash_block_any(const float* const* queries, const int32_t* positions, int64_t rows, const void* keys,
                     const void* values, DType cache_dtype, int64_t head_dim, float scale, int64_t sliding_window,
                     float* const* outputs) {
  if (cache_dtype == DType::bf16)
    return flash_block(queries, positions, rows, keys, values, head_dim, scale, sliding_window, outputs);
  avx512_cpu_kernels()->flash_block(head_dim)(queries, positions, rows, keys, values, cache_dtype, head_dim, scale,
                                              sliding_window, outputs);
}

}  // namespace

FlashBlockKernel avx512_bf16_flash_block(int64_t head_dim) {
  const bool fits = avx512_bf16_cpu_kernels() && head_dim % panel_width == 0 && head_dim <= flash_max_head_dim;
  return fits ? flash_block_any : nullptr;
}

}  // namespace shardlm::backends::cpu
