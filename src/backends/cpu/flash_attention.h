#pragma once
// Flash attention for prefill, written once over any instruction set's f32 matmul
// micro-kernel: a block of query rows that share one KV head meets the keys 128 at a
// time. Scores S = Q K^T and the update O += P V both run on the micro-kernel; a K tile
// is packed into its panels, a V tile laid out as the instruction set's side chooses
// (read in place where its rows already are the panels the micro-kernel wants). An
// online softmax (decode_attention.h) means no score row ever spans the whole cache.
// attention_avx2.cpp runs it on 8 lanes, matmul_avx512.cpp on 16. Internal linkage, as
// native_vectors.h.
//
// Products, the instruction set's side:
//   panel_width, micro_rows: the micro-kernel's columns and rows.
//   pack_keys<Cache>(keys, t0, width, head_dim, panel): cached keys [t0, t0 + width) as
//     the panel [head_dim][panel_width], zero past width.
//   multiply<Lda>(rows, a, b, ldb, steps, c, ldc, width, accumulate): c[rows, 0..width)
//     (+)= a . b for rows <= micro_rows of a, Lda floats apart, and b [steps][ldb].
//   value_panels<Cache>(values, t0, count, head_dim, buffer): where cached values
//     [t0, t0 + count) lie as panels, in place or in buffer [key_tile * head_dim floats].
#include <algorithm>
#include <cstdint>

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
// base + d0 / panel_width * panel_stride, a key's row of it ldb floats after the last.
struct ValuePanels {
  const float* base;
  int64_t panel_stride, ldb;
};

template <typename Products, DType Cache>
void flash_block(const float* const* queries, const int32_t* positions, int64_t rows, const void* keys,
                 const void* values, int64_t head_dim, float scale, int64_t sliding_window, float* const* outputs) {
  constexpr int64_t width = Products::panel_width, micro_rows = Products::micro_rows;
  constexpr int64_t q_stride = flash_max_head_dim;  // a compile-time row stride for the micro-kernel
  alignas(64) float q[flash_max_rows * q_stride];                    // [rows, flash_max_head_dim], pre-scaled
  alignas(64) float o[flash_max_rows * flash_max_head_dim];          // [rows, head_dim]
  alignas(64) float s[flash_max_rows * key_tile];                    // [rows, key_tile]
  alignas(64) float k_panels[key_tile * flash_max_head_dim];         // [key_tile / width][head_dim][width]
  alignas(64) float value_buffer[key_tile * flash_max_head_dim];     // as Products::value_panels lays it out
  float maximum[flash_max_rows], sum[flash_max_rows];
  // head_dim is a multiple of 16 (kernel_for): whole vectors, here and at the end.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < head_dim; d += native::lanes)
      native::store(q + r * q_stride + d, native::load(queries[r] + d) * scale);
  const auto [first_key, end_key] = start_flash_rows(positions, rows, sliding_window, head_dim, o, maximum, sum);
  const WeightView key_rows{keys, Cache, head_dim};
  for (int64_t t0 = first_key; t0 < end_key; t0 += key_tile) {
    const int64_t count = std::min(key_tile, end_key - t0), panels = (count + width - 1) / width;
    const auto columns = [&](int64_t panel) { return std::min(width, count - panel * width); };
    for (int64_t p = 0; p < panels; ++p)
      Products::template pack_keys<Cache>(key_rows, t0 + p * width, columns(p), head_dim,
                                          k_panels + p * head_dim * width);
    for (int64_t r0 = 0; r0 < rows; r0 += micro_rows)
      for (int64_t p = 0; p < panels; ++p)
        Products::template multiply<q_stride>(std::min(micro_rows, rows - r0), q + r0 * q_stride,
                                              k_panels + p * head_dim * width, width, head_dim,
                                              s + r0 * key_tile + p * width, key_tile, columns(p), false);
    for (int64_t r = 0; r < rows; ++r) {
      const KeyRange seen = visible_keys(positions[r], sliding_window);
      decode_attention::online_softmax_tile(s + r * key_tile, count, seen.first - t0, std::min(seen.end, end_key) - t0,
                                            maximum[r], sum[r], o + r * head_dim, head_dim);
    }
    const ValuePanels v = Products::template value_panels<Cache>(values, t0, count, head_dim, value_buffer);
    for (int64_t r0 = 0; r0 < rows; r0 += micro_rows)
      for (int64_t d0 = 0; d0 < head_dim; d0 += width)
        Products::template multiply<key_tile>(std::min(micro_rows, rows - r0), s + r0 * key_tile,
                                              v.base + d0 / width * v.panel_stride, v.ldb, count,
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
