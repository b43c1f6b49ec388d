#pragma once
// Prefill attention kernels that take a block of query rows sharing one KV head.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <shardlm/dtype.h>

namespace shardlm::backends::cpu {

constexpr int64_t flash_max_rows = 48, flash_max_head_dim = 256;

// The keys [first, end) a query row at `position` sees: those up to its own, only the last
// `sliding_window` of them when > 0; none for padding (a negative position).
struct KeyRange {
  int64_t first = 0, end = 0;
};
inline KeyRange visible_keys(int64_t position, int64_t sliding_window) {
  const int64_t end = std::max<int64_t>(0, position + 1);
  return {sliding_window > 0 ? std::max<int64_t>(0, end - sliding_window) : 0, end};
}

// A flash block's rows before its first key tile: each row's output o [rows, head_dim]
// zero, its running maximum -inf and sum 0. Returns the keys any of them sees (empty
// where all are padding).
inline KeyRange start_flash_rows(const int32_t* positions, int64_t rows, int64_t sliding_window, int64_t head_dim,
                                 float* o, float* maximum, float* sum) {
  KeyRange all{INT64_MAX, 0};
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(o + r * head_dim, o + (r + 1) * head_dim, 0.0f);
    maximum[r] = -INFINITY;
    sum[r] = 0;
    const KeyRange seen = visible_keys(positions[r], sliding_window);
    if (seen.end == 0) continue;  // padding row
    all = {std::min(all.first, seen.first), std::max(all.end, seen.end)};
  }
  return all;
}

// outputs[r] = softmax over the visible keys of (queries[r] . keys[t] * scale) . values[t],
// for rows <= flash_max_rows; row r sees keys up to positions[r] (and only the last
// sliding_window of them when > 0); a negative position is padding and gets zeros.
// keys, values: [cache positions, head_dim] of one KV head, of `cache_dtype` (f32 or bf16).
using FlashBlockKernel = void (*)(const float* const* queries, const int32_t* positions, int64_t rows,
                                  const void* keys, const void* values, DType cache_dtype, int64_t head_dim,
                                  float scale, int64_t sliding_window, float* const* outputs);

// Decode, one softmax over keys [first, visible) for the heads <= decode_max_heads query
// heads (rows of query, [heads, head_dim]) that share one KV head, left unnormalized so
// that softmaxes over parts of the cache can be merged: maximum[g] = the largest score
// (query[g] . keys[t] * scale), sum[g] = sum over t of e^(score - maximum[g]), and
// result[g] = sum over t of e^(score - maximum[g]) values[t]. No keys: result 0,
// maximum -inf, sum 0.
constexpr int64_t decode_max_heads = 8;
using DecodeAttentionKernel = void (*)(const float* query, int64_t heads, const void* keys, const void* values,
                                       DType cache_dtype, int64_t first, int64_t visible, int64_t head_dim,
                                       float scale, float* result, float* maximum, float* sum);

// The AVX2 kernels (flash_attention.h and decode_attention.h on 8 lanes) when this CPU has
// AVX2/FMA/F16C and head_dim is a multiple of 16 (up to flash_max_head_dim for the flash
// kernel); otherwise nullptr.
FlashBlockKernel avx2_flash_block(int64_t head_dim);
DecodeAttentionKernel avx2_decode_attention(int64_t head_dim);
// The AVX512-BF16 flash kernel where this CPU has AVX512_BF16 and head_dim is a multiple
// of 32 up to flash_max_head_dim (over a bf16 cache; over an f32 one the AVX-512 table's);
// otherwise nullptr. It rounds the queries and the softmax weights to bf16.
FlashBlockKernel avx512_bf16_flash_block(int64_t head_dim);
// decode_attention.h on 16 lanes with AVX512_BF16 where this CPU has it and head_dim is a
// multiple of 16; otherwise nullptr. Over a bf16 cache whose head_dim is a multiple of 32 (up
// to flash_max_head_dim) it rounds the queries to bf16 and takes the scores on VDPBF16PS.
DecodeAttentionKernel avx512_bf16_decode_attention(int64_t head_dim);

}  // namespace shardlm::backends::cpu
