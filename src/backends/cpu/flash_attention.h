#pragma once
// Flash attention for prefill, written once over any instruction set's matmul
// micro-kernel: a block of query rows that share one KV head meets the keys 128 at a
// time. Scores S = Q K^T and the update O += P V both run on the micro-kernel; a K tile
// is packed into its panels, a V tile laid out as the instruction set's side chooses
// (read in place where its rows already are the panels the micro-kernel wants). An
// online softmax (decode_attention.h) means no score row ever spans the whole cache.
// attention_avx2.cpp runs it on 8 lanes of f32, matmul_avx512.cpp on 16, and
// attention_avx512_bf16.cpp on bf16 pairs (VDPBF16PS). Internal linkage, as
// native_vectors.h.
//
// Products, the instruction set's side:
//   Element: what the micro-kernel multiplies, f32 (F32Products below) or a bf16 pair.
//   panel_width, micro_rows: the micro-kernel's columns and rows.
//   steps(n): the Elements a run of n values takes.
//   load_query(query, scale, head_dim, row): query [head_dim] times scale as a row of
//     steps(head_dim) Elements.
//   pack_keys<Cache>(keys, t0, width, head_dim, panel): cached keys [t0, t0 + width) as
//     the panel [steps(head_dim)][panel_width], zero past width.
//   multiply<Lda>(rows, a, b, ldb, steps, c, ldc, width, accumulate): c[rows, 0..width)
//     (f32) (+)= a . b for rows <= micro_rows of a, Lda Elements apart, and b [steps][ldb].
//   weights(s, rows, count, buffer): the softmax weights s [rows, key_tile] (f32) as rows of
//     p_stride Elements, in place or in buffer [flash_max_rows * p_stride].
//   value_panels<Cache>(values, t0, count, head_dim, buffer): where cached values
//     [t0, t0 + count) lie as panels [steps(count)][panel_width], in place or in buffer
//     [key_tile * flash_max_head_dim Elements].
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/decode_attention.h"
#include "backends/cpu/native_vectors.h"

namespace shardlm::backends::cpu {
namespace {
namespace flash_attention {

// A block's P V step adds every tile into the block's output, loaded and stored once per
// micro-kernel call: 128 keys a tile halve those (pp512 attention 5 - 7% faster than 64,
// in-process A/B at two threads on AVX2; 256 gained nothing more).
constexpr int64_t key_tile = 128;

// A V tile as the micro-kernel reads it: the panel of columns [d0, d0 + panel_width) at
// base + d0 / panel_width * panel_stride, a step of it ldb Elements after the last.
template <typename Element>
struct ValuePanels {
  const Element* base;
  int64_t panel_stride, ldb;
};

// The f32 side that the AVX2 and AVX-512 Products share: queries scaled in place, the
// softmax weights read where they lie.
struct F32Products {
  using Element = float;
  static constexpr int64_t steps(int64_t n) { return n; }
  static constexpr int64_t p_stride = key_tile;

  // head_dim is a multiple of 16 (kernel_for): whole vectors, here and at the end.
  static void load_query(const float* query, float scale, int64_t head_dim, float* row) {
    for (int64_t d = 0; d < head_dim; d += native::lanes) native::store(row + d, native::load(query + d) * scale);
  }
  static const float* weights(const float* s, int64_t, int64_t, float*) { return s; }
};

template <typename Products, DType Cache>
void flash_block(const float* const* queries, const int32_t* positions, int64_t rows, const void* keys,
                 const void* values, int64_t head_dim, float scale, int64_t sliding_window, float* const* outputs) {
  using Element = typename Products::Element;
  constexpr int64_t width = Products::panel_width, micro_rows = Products::micro_rows;
  // Compile-time row strides for the micro-kernel.
  constexpr int64_t q_stride = Products::steps(flash_max_head_dim), p_stride = Products::p_stride;
  alignas(64) Element q[flash_max_rows * q_stride];              // [rows, head_dim], pre-scaled
  alignas(64) float o[flash_max_rows * flash_max_head_dim];      // [rows, head_dim]
  alignas(64) float s[flash_max_rows * key_tile];                // [rows, key_tile]
  // As Products::weights lays them out; none where they are read in place.
  alignas(64) Element p_buffer[std::is_same_v<Element, float> ? 1 : flash_max_rows * p_stride];
  alignas(64) Element k_panels[key_tile * flash_max_head_dim];   // [key_tile / width][steps(head_dim)][width]
  alignas(64) Element value_buffer[key_tile * flash_max_head_dim];  // as Products::value_panels lays it out
  float maximum[flash_max_rows], sum[flash_max_rows];
  const int64_t dim_steps = Products::steps(head_dim);
  for (int64_t r = 0; r < rows; ++r) Products::load_query(queries[r], scale, head_dim, q + r * q_stride);
  const auto [first_key, end_key] = start_flash_rows(positions, rows, sliding_window, head_dim, o, maximum, sum);
  const WeightView key_rows{keys, Cache, head_dim};
  for (int64_t t0 = first_key; t0 < end_key; t0 += key_tile) {
    const int64_t count = std::min(key_tile, end_key - t0), panels = (count + width - 1) / width;
    const auto columns = [&](int64_t panel) { return std::min(width, count - panel * width); };
    for (int64_t p = 0; p < panels; ++p)
      Products::template pack_keys<Cache>(key_rows, t0 + p * width, columns(p), head_dim,
                                          k_panels + p * dim_steps * width);
    for (int64_t r0 = 0; r0 < rows; r0 += micro_rows)
      for (int64_t p = 0; p < panels; ++p)
        Products::template multiply<q_stride>(std::min(micro_rows, rows - r0), q + r0 * q_stride,
                                              k_panels + p * dim_steps * width, width, dim_steps,
                                              s + r0 * key_tile + p * width, key_tile, columns(p), false);
    for (int64_t r = 0; r < rows; ++r) {
      const KeyRange seen = visible_keys(positions[r], sliding_window);
      decode_attention::online_softmax_tile(s + r * key_tile, count, seen.first - t0, std::min(seen.end, end_key) - t0,
                                            maximum[r], sum[r], o + r * head_dim, head_dim);
    }
    const Element* p = Products::weights(s, rows, count, p_buffer);
    const ValuePanels<Element> v = Products::template value_panels<Cache>(values, t0, count, head_dim, value_buffer);
    for (int64_t r0 = 0; r0 < rows; r0 += micro_rows)
      for (int64_t d0 = 0; d0 < head_dim; d0 += width)
        Products::template multiply<p_stride>(std::min(micro_rows, rows - r0), p + r0 * p_stride,
                                              v.base + d0 / width * v.panel_stride, v.ldb, Products::steps(count),
                                              o + r0 * head_dim + d0, head_dim, std::min(width, head_dim - d0), true);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float inverse = sum[r] > 0 ? 1.0f / sum[r] : 0.0f;  // padding rows stay zero
    for (int64_t d = 0; d < head_dim; d += native::lanes)
      native::store(outputs[r] + d, native::load(o + r * head_dim + d) * inverse);
  }
}

template <typename Products>
void flash_block_any(const float* const* queries, const int32_t* positions, int64_t rows, const void* keys,
                     const void* values, DType cache_dtype, int64_t head_dim, float scale, int64_t sliding_window,
                     float* const* outputs) {
  (cache_dtype == DType::bf16 ? flash_block<Products, DType::bf16> : flash_block<Products, DType::f32>)(
      queries, positions, rows, keys, values, head_dim, scale, sliding_window, outputs);
}

// The kernel for head_dim (a multiple of 16 up to flash_max_head_dim) on Products, else
// null for attention.cpp's own loops: what a table's flash_block entry returns.
template <typename Products>
FlashBlockKernel kernel_for(int64_t head_dim) {
  return head_dim % 16 == 0 && head_dim <= flash_max_head_dim ? flash_block_any<Products> : nullptr;
}

}  // namespace flash_attention
}  // namespace
}  // namespace shardlm::backends::cpu
