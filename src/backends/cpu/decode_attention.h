#pragma once
// Decode attention (attention_kernels.h's DecodeAttentionKernel) and the flash kernels'
// online softmax, written once for every vector width (native_vectors.h): matmul_portable.cpp
// includes this for 4 lanes, attention_avx2.cpp for 8, matmul_avx512.cpp for 16, and
// attention_avx512_bf16.cpp for 16 with VDPBF16PS products over a bf16 cache. Internal linkage, as
// row_kernels.h: the copies made under different flags must never be merged. The
// reference is reference_attention.cpp; tests/backends/test_attention_kernels.cpp runs
// every table's kernel against it.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX512BF16__)
#include <immintrin.h>

#include "backends/cpu/avx512_bf16_gemm.h"
#endif

#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/native_vectors.h"
#include "backends/cpu/vector_math.h"
#include "backends/cpu/weight_rows.h"

namespace shardlm::backends::cpu {
namespace {
namespace decode_attention {

using native::f32xN, native::lanes, native::load, native::store;
using i32xN = decltype(f32xN{} < f32xN{});
using f32x4 = float __attribute__((vector_size(16)));
static_assert(lanes >= 4 && lanes <= 16);

inline f32xN splat(float value) { return f32xN{} + value; }
inline f32xN maximum_of(f32xN a, f32xN b) { return a > b ? a : b; }

// v folded into four lanes: lane i sums v's lanes i, i + 4, i + 8, ...
template <typename V>
inline f32x4 fold_to_four(V v) {
  if constexpr (sizeof(V) == 64) {
    using f32x8 = float __attribute__((vector_size(32)));
    const f32x8 half = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                       __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    return __builtin_shufflevector(half, half, 0, 1, 2, 3) + __builtin_shufflevector(half, half, 4, 5, 6, 7);
  } else if constexpr (sizeof(V) == 32) {
    return __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
  } else {
    return v;
  }
}

inline float sum_lanes(f32xN v) {
  const f32x4 four = fold_to_four(v);
  return (four[0] + four[2]) + (four[1] + four[3]);
}

inline float max_lanes(f32xN v) {
  float largest = v[0];
  for (int64_t i = 1; i < lanes; ++i) largest = std::max(largest, v[i]);
  return largest;
}

// The four sums of a0 .. a3's lanes, in that order.
inline f32x4 sums_of_four(f32xN a0, f32xN a1, f32xN a2, f32xN a3) {
  const f32x4 a = fold_to_four(a0), b = fold_to_four(a1), c = fold_to_four(a2), d = fold_to_four(a3);
  const f32x4 ab = __builtin_shufflevector(a, b, 0, 4, 1, 5) + __builtin_shufflevector(a, b, 2, 6, 3, 7);
  const f32x4 cd = __builtin_shufflevector(c, d, 0, 4, 1, 5) + __builtin_shufflevector(c, d, 2, 6, 3, 7);
  return __builtin_shufflevector(ab, cd, 0, 1, 4, 5) + __builtin_shufflevector(ab, cd, 2, 3, 6, 7);
}

// `lanes` cached values from element d of a row, as f32: f32 as it lies, bf16 widened.
template <DType Cache>
inline f32xN load_cached(const void* row, int64_t d) {
  if constexpr (Cache == DType::f32) {
    return load(static_cast<const float*>(row) + d);
  } else {
    using u16xN = uint16_t __attribute__((vector_size(lanes * 2)));
    using u32xN = uint32_t __attribute__((vector_size(lanes * 4)));
    u16xN bits;
    std::memcpy(&bits, static_cast<const uint16_t*>(row) + d, sizeof bits);
    return reinterpret_cast<f32xN>(__builtin_convertvector(bits, u32xN) << 16);
  }
}

template <DType Cache>
inline const void* cached_row(const void* rows, int64_t t, int64_t head_dim) {
  return static_cast<const std::byte*>(rows) + t * head_dim * element_bytes<Cache>;
}

// One row of a score tile [count], in place (head_dim a multiple of lanes, the row's room
// `count` rounded up to them): keys outside [first, end) (causal mask, window, padding, the
// tail) are masked to 0, the rest become e^(score - running maximum); the running maximum
// and sum, and the row's output o [head_dim] accumulated so far, are rescaled when the
// maximum grows.
inline void online_softmax_tile(float* row, int64_t count, int64_t first, int64_t end, float& maximum, float& sum,
                                float* o, int64_t head_dim) {
  end = std::clamp<int64_t>(end, 0, count);
  first = std::clamp<int64_t>(first, 0, count);
  const int64_t padded = (count + lanes - 1) / lanes * lanes;
  i32xN index{};
  for (int32_t i = 0; i < lanes; ++i) index[i] = i;
  const f32xN minus_infinity = splat(-INFINITY);
  f32xN tile_maxima = minus_infinity;
  for (int64_t t = 0; t < padded; t += lanes) {
    const i32xN at = index + static_cast<int32_t>(t);
    const i32xN seen = (at >= static_cast<int32_t>(first)) & (at < static_cast<int32_t>(end));
    const f32xN scores = seen ? load(row + t) : minus_infinity;
    store(row + t, scores);
    tile_maxima = maximum_of(tile_maxima, scores);
  }
  const float tile_maximum = max_lanes(tile_maxima);
  if (tile_maximum == -INFINITY) {  // nothing visible to this row here
    std::fill(row, row + padded, 0.0f);
    return;
  }
  const float new_maximum = std::max(maximum, tile_maximum);
  const float rescale = std::exp(maximum - new_maximum);  // 0 on the row's first tile
  if (rescale != 1.0f)
    for (int64_t d = 0; d < head_dim; d += lanes) store(o + d, load(o + d) * rescale);
  maximum = new_maximum;
  f32xN tile_sum{};
  for (int64_t t = 0; t < padded; t += lanes) {
    const f32xN weights = exp_lanes(load(row + t) - new_maximum);
    store(row + t, weights);
    tile_sum += weights;
  }
  sum = sum * rescale + sum_lanes(tile_sum);
}

// With AVX512_BF16 (the avx512_bf16 table's copy of this file), both products over a bf16
// cache whose head_dim is a multiple of 32 run on VDPBF16PS, as the flash kernel's do
// (attention_avx512_bf16.cpp): the scores multiply the keys as they lie, in bf16 pairs, by
// the query rounded to bf16 once; the values pass multiplies two value rows at a time,
// interleaved into pairs, by their softmax weights rounded to bf16. No widening of the cache,
// and a third of the f32 FMAs' instructions; 2^-9 relative per query element and weight, as a
// bf16 model's attention runs in transformers. The keys scored one by one (a tile's last few)
// see the same rounded query.
#if defined(__AVX512BF16__)
constexpr bool bf16_dot_products = lanes == 16;
#else
constexpr bool bf16_dot_products = false;
#endif
constexpr int64_t bf16_dot_max_head_dim = flash_max_head_dim;  // the rounded queries' room, on the stack
template <DType Cache>
constexpr int64_t rounded_query_floats = bf16_dot_products && Cache == DType::bf16
                                             ? decode_max_heads * bf16_dot_max_head_dim
                                             : 1;
template <DType Cache>
bool on_bf16_pairs(int64_t head_dim) {
  return rounded_query_floats<Cache> > 1 && head_dim % 32 == 0 && head_dim <= bf16_dot_max_head_dim;
}

// query [head_dim] rounded to bf16 (nearest even), as bf16 pairs and as f32, head_dim a
// multiple of 32 (on_bf16_pairs): 32 at a time on VCVTNE2PS2BF16 (pairs_of), which rounds
// as f32_to_bf16 does, flushing denormals.
#if defined(__AVX512BF16__)
inline void round_query(const float* query, int64_t head_dim, float* rounded, uint16_t* pairs) {
  for (int64_t d = 0; d < head_dim; d += 32)
    _mm512_storeu_si512(pairs + d, avx512_bf16::pairs_of(query, d, head_dim));
  for (int64_t d = 0; d < head_dim; d += lanes) store(rounded + d, load_cached<DType::bf16>(pairs, d));
}
#endif

// Decode reads each cached row once, so its tile only bounds the score scratch.
constexpr int64_t key_tile = 64;

// The values pass of one tile: result[g][d0, d0 + C) += sum over the tile's rows t of
// weights[g][t] * values[t][d0, d0 + C), C = V vectors, for every column chunk. The
// accumulators stay in registers over a block of rows (G x V of them), so the value rows
// are read once per chunk rather than each output once per row. Where a row is more than
// one chunk, in blocks of eight rows: the values come from memory, and a line of each of
// the tile's rows in turn read them at half the speed of a pass in order (as
// add_weighted_value_columns); a line of each of a few rows in turn, ~1.3x slower.
template <DType Cache, int G, int V>
void add_weighted_values(const float (*weights)[key_tile], const void* values, int64_t t0, int64_t count,
                         int64_t head_dim, float* result) {
  const int64_t block_rows = head_dim == lanes * V ? count : 8;
  for (int64_t b0 = 0; b0 < count; b0 += block_rows)
    for (int64_t d0 = 0; d0 < head_dim; d0 += lanes * V) {
      f32xN acc[G][V];
      SHARDLM_UNROLL
      for (int g = 0; g < G; ++g)
        SHARDLM_UNROLL
        for (int v = 0; v < V; ++v) acc[g][v] = load(result + g * head_dim + d0 + lanes * v);
      for (int64_t t = b0; t < std::min(count, b0 + block_rows); ++t) {
        const void* row = cached_row<Cache>(values, t0 + t, head_dim);
        f32xN value[V];
        SHARDLM_UNROLL
        for (int v = 0; v < V; ++v) value[v] = load_cached<Cache>(row, d0 + lanes * v);
        SHARDLM_UNROLL
        for (int g = 0; g < G; ++g) {
          const f32xN weight = splat(weights[g][t]);
          SHARDLM_UNROLL
          for (int v = 0; v < V; ++v) acc[g][v] = fused_multiply_add(weight, value[v], acc[g][v]);
        }
      }
      SHARDLM_UNROLL
      for (int g = 0; g < G; ++g)
        SHARDLM_UNROLL
        for (int v = 0; v < V; ++v) store(result + g * head_dim + d0 + lanes * v, acc[g][v]);
    }
}

#if defined(__AVX512BF16__)
// add_weighted_values over a bf16 cache on VDPBF16PS for G heads, on columns [c0, c0 + 32 B)
// (B steps of 32): rows t and t + 1 of the values interleaved by VPUNPCK{L,H}WD, whose 32-bit
// lane i then holds the pair of column 8 (i / 4) + i % 4 (low) or that + 4 (high) of its
// step, against the pair of weights (w[t], w[t + 1]) rounded to bf16 (`pairs`). The
// accumulators hold each step's columns in that order, put back in order once per tile.
// The rows are read in order, each pair's B steps side by side: the cache comes from
// memory, and column by column across the tile's rows (a line of each row in turn) read it
// at half the speed of a pass in order, whatever was prefetched.
template <int G, int B>
void add_weighted_value_columns(const uint32_t (*pairs)[key_tile / 2], const uint16_t* rows, int64_t count,
                                int64_t head_dim, int64_t c0, float* result) {
  const __m512i low_order = _mm512_set_epi32(27, 26, 25, 24, 19, 18, 17, 16, 11, 10, 9, 8, 3, 2, 1, 0);
  const __m512i high_order = _mm512_add_epi32(low_order, _mm512_set1_epi32(4));
  // Column d of a step: low's lane (d / 8) * 4 + d % 8 where d % 8 < 4, else high's lane
  // (d / 8) * 4 + d % 8 - 4 (index 16 + that).
  const __m512i first_half = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i second_half = _mm512_add_epi32(first_half, _mm512_set1_epi32(8));
  __m512 low[G][B], high[G][B];
  SHARDLM_UNROLL
  for (int g = 0; g < G; ++g)
    SHARDLM_UNROLL
    for (int b = 0; b < B; ++b) {
      const float* columns = result + g * head_dim + c0 + 32 * b;
      const __m512 x = _mm512_loadu_ps(columns), y = _mm512_loadu_ps(columns + 16);
      low[g][b] = _mm512_permutex2var_ps(x, low_order, y);
      high[g][b] = _mm512_permutex2var_ps(x, high_order, y);
    }
  for (int64_t t = 0; t < count; t += 2) {
    __m512bh weight[G];
    SHARDLM_UNROLL
    for (int g = 0; g < G; ++g) weight[g] = (__m512bh)_mm512_set1_epi32(static_cast<int>(pairs[g][t / 2]));
    SHARDLM_UNROLL
    for (int b = 0; b < B; ++b) {
      const __m512i first = _mm512_loadu_si512(rows + t * head_dim + c0 + 32 * b);
      const __m512i second =
          t + 1 < count ? _mm512_loadu_si512(rows + (t + 1) * head_dim + c0 + 32 * b) : _mm512_setzero_si512();
      const auto low_pairs = (__m512bh)_mm512_unpacklo_epi16(first, second);
      const auto high_pairs = (__m512bh)_mm512_unpackhi_epi16(first, second);
      SHARDLM_UNROLL
      for (int g = 0; g < G; ++g) {
        low[g][b] = _mm512_dpbf16_ps(low[g][b], low_pairs, weight[g]);
        high[g][b] = _mm512_dpbf16_ps(high[g][b], high_pairs, weight[g]);
      }
    }
  }
  SHARDLM_UNROLL
  for (int g = 0; g < G; ++g)
    SHARDLM_UNROLL
    for (int b = 0; b < B; ++b) {
      float* columns = result + g * head_dim + c0 + 32 * b;
      _mm512_storeu_ps(columns, _mm512_permutex2var_ps(low[g][b], first_half, high[g][b]));
      _mm512_storeu_ps(columns + 16, _mm512_permutex2var_ps(low[g][b], second_half, high[g][b]));
    }
}

// The values pass on bf16 pairs for `heads` heads, two at a time (one pass over the tile's
// rows each; the tile stays in L1 for the next), on as many steps of 32 columns at once as
// keep 16 accumulators: all of a 128-column head's.
inline void add_weighted_values_on_pairs(const float (*weights)[key_tile], int64_t heads, const void* values,
                                         int64_t t0, int64_t count, int64_t head_dim, float* result) {
  // [head, t / 2]: (w[t], w[t + 1]) as bf16, 0 past count
  alignas(64) uint32_t pairs[decode_max_heads][key_tile / 2];
  for (int64_t g = 0; g < heads; ++g)
    for (int64_t t = 0; t < count; t += 32)
      _mm512_store_si512(pairs[g] + t / 2, avx512_bf16::pairs_of(weights[g], t, count));
  const auto* rows = static_cast<const uint16_t*>(values) + t0 * head_dim;
  const int64_t steps = head_dim / 32;
  for (int64_t g = 0; g < heads; g += 2) {
    const bool two = g + 1 < heads;
    float* head_result = result + g * head_dim;
    // Steps of 32 columns at once: 8 for one head (a 256-column row whole), 4 for two.
    for (int64_t c = 0; c < steps;) {
      const int64_t left = steps - c, at_once = !two && left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
      (at_once == 8  ? add_weighted_value_columns<1, 8>
       : at_once == 4 ? (two ? add_weighted_value_columns<2, 4> : add_weighted_value_columns<1, 4>)
       : at_once == 2 ? (two ? add_weighted_value_columns<2, 2> : add_weighted_value_columns<1, 2>)
                      : (two ? add_weighted_value_columns<2, 1> : add_weighted_value_columns<1, 1>))(
          pairs + g, rows, count, head_dim, 32 * c, head_result);
      c += at_once;
    }
  }
}
#endif

// The values pass for `heads` <= decode_max_heads. On 16 lanes, where head_dim is a
// multiple of 128, two heads at a time in chunks of 128 columns: their 16 accumulators
// and the loads beside them fit 32 registers, and a 128-column row is read whole, in order
// (see add_weighted_value_columns). Else four heads at a time: one or two heads in chunks
// of four vectors where head_dim allows (32 columns on 8 lanes), else in chunks of 16
// columns (head_dim is a multiple of 16; 8 on 4 lanes, with 16 registers).
template <DType Cache>
void add_weighted_values(const float (*weights)[key_tile], int64_t heads, const void* values, int64_t t0,
                         int64_t count, int64_t head_dim, float* result) {
#if defined(__AVX512BF16__)
  if (on_bf16_pairs<Cache>(head_dim))
    return add_weighted_values_on_pairs(weights, heads, values, t0, count, head_dim, result);
#endif
  if constexpr (lanes == 16) {
    if (head_dim % 128 == 0) {
      for (int64_t g = 0; g < heads; g += 2)
        (g + 1 < heads ? add_weighted_values<Cache, 2, 8> : add_weighted_values<Cache, 1, 8>)(
            weights + g, values, t0, count, head_dim, result + g * head_dim);
      return;
    }
  }
  constexpr int wide = 4, narrow = lanes >= 8 ? 16 / lanes : 2;
  for (int64_t g = 0; g < heads; g += 4) {
    const float(*group_weights)[key_tile] = weights + g;
    float* group_result = result + g * head_dim;
    const int64_t group = std::min<int64_t>(4, heads - g);
    if (group <= 2 && head_dim % (lanes * wide) == 0)
      (group == 1 ? add_weighted_values<Cache, 1, wide> : add_weighted_values<Cache, 2, wide>)(
          group_weights, values, t0, count, head_dim, group_result);
    else
      (group == 1   ? add_weighted_values<Cache, 1, narrow>
       : group == 2 ? add_weighted_values<Cache, 2, narrow>
       : group == 3 ? add_weighted_values<Cache, 3, narrow>
                    : add_weighted_values<Cache, 4, narrow>)(group_weights, values, t0, count, head_dim,
                                                             group_result);
  }
}

// Decode scores of K consecutive cached keys (t, t + 1, ...) for G query heads:
// scores[g][t + j] = query[g] . key[t + j] * scale. G x K accumulators, one per (head,
// key), are independent FMA chains, and their sums come out four at a time: one
// accumulator per (row, head) left each score waiting on a chain of head_dim / lanes FMAs
// and a horizontal sum of its own.
//
// The keys' pass is also where the rows to come are prefetched (PrefetchSpans: bytes
// from a start, none past its end), spread over its steps: a burst of a group's
// prefetches at once stalled on the misses it left outstanding.
struct PrefetchSpan {
  const char* start = nullptr;
  int64_t bytes = 0;
};
using PrefetchSpans = std::array<PrefetchSpan, 2>;

template <DType Cache, int G, int K>
void key_scores(const float* query, [[maybe_unused]] const uint16_t* query_pairs, const void* keys, int64_t t,
                int64_t head_dim, float scale, float (*scores)[key_tile], int64_t tile_t, const PrefetchSpans& prefetch) {
  static_assert(K % 4 == 0 && G * K <= std::max<int64_t>(8, lanes));
  // Row j of the keys prefetches row j of each span (K rows each).
  const int64_t row_bytes = head_dim * element_bytes<Cache>;
  const auto prefetch_row = [&](int j) {
    for (int64_t offset = j * row_bytes; offset < (j + 1) * row_bytes; offset += 64)
      for (const PrefetchSpan& span : prefetch)
        if (offset < span.bytes) __builtin_prefetch(span.start + offset);
  };
  f32xN acc[G][K];
  SHARDLM_UNROLL
  for (int g = 0; g < G; ++g)
    SHARDLM_UNROLL
    for (int j = 0; j < K; ++j) acc[g][j] = f32xN{};
  // Row by row, each whole: the keys come from memory, and a line of each of the K rows in
  // turn read them markedly slower than a pass in order (as add_weighted_value_columns).
  SHARDLM_UNROLL
  for (int j = 0; j < K; ++j) {
    const void* row = cached_row<Cache>(keys, t + j, head_dim);
    prefetch_row(j);
#if defined(__AVX512BF16__)
    if (bf16_dot_products && query_pairs) {
      for (int64_t d = 0; d < head_dim; d += 32) {
        const auto key = (__m512bh)_mm512_loadu_si512(static_cast<const uint16_t*>(row) + d);
        SHARDLM_UNROLL
        for (int g = 0; g < G; ++g) {
          const auto q = (__m512bh)_mm512_loadu_si512(query_pairs + g * head_dim + d);
          acc[g][j] = (f32xN)_mm512_dpbf16_ps((__m512)acc[g][j], q, key);
        }
      }
      continue;
    }
#endif
    for (int64_t d = 0; d < head_dim; d += lanes) {
      const f32xN key = load_cached<Cache>(row, d);
      SHARDLM_UNROLL
      for (int g = 0; g < G; ++g) acc[g][j] = fused_multiply_add(load(query + g * head_dim + d), key, acc[g][j]);
    }
  }
  SHARDLM_UNROLL
  for (int g = 0; g < G; ++g)
    SHARDLM_UNROLL
    for (int j = 0; j < K; j += 4) {
      const f32x4 four = sums_of_four(acc[g][j], acc[g][j + 1], acc[g][j + 2], acc[g][j + 3]) * scale;
      std::memcpy(&scores[g][tile_t + j], &four, sizeof four);
    }
}

// key_scores for `heads` <= decode_max_heads, two heads at a time over `pair_keys` keys
// (one head: twice those), then the keys past the last whole group one by one. The first
// pass over the tile prefetches prefetch(t, n) during the scores of its keys [t, t + n).
// 16 lanes come with 32 registers: eight keys a pair.
constexpr int pair_keys = lanes >= 16 ? 8 : 4;

// query_pairs: the query as bf16 pairs (on_bf16_pairs), else null.
template <DType Cache, typename Prefetch>
void tile_scores(const float* query, const uint16_t* query_pairs, int64_t heads, const void* keys, int64_t t0,
                 int64_t count, int64_t head_dim, float scale, float (*scores)[key_tile], Prefetch prefetch) {
  constexpr int single_keys = 2 * pair_keys;
  const PrefetchSpans none{};
  const auto pairs_of_head = [&](int64_t g) { return query_pairs ? query_pairs + g * head_dim : nullptr; };
  int64_t g = 0;
  for (; g + 2 <= heads; g += 2)
    for (int64_t t = 0; t + pair_keys <= count; t += pair_keys)
      key_scores<Cache, 2, pair_keys>(query + g * head_dim, pairs_of_head(g), keys, t0 + t, head_dim, scale,
                                      scores + g, t, g == 0 ? prefetch(t, pair_keys) : none);
  if (g < heads)
    for (int64_t t = 0; t + single_keys <= count; t += single_keys)
      key_scores<Cache, 1, single_keys>(query + g * head_dim, pairs_of_head(g), keys, t0 + t, head_dim, scale,
                                        scores + g, t, g == 0 ? prefetch(t, single_keys) : none);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t t = h < g ? count / pair_keys * pair_keys : count / single_keys * single_keys; t < count; ++t) {
      const void* key = cached_row<Cache>(keys, t0 + t, head_dim);
      f32xN sum{};
      for (int64_t d = 0; d < head_dim; d += lanes)
        sum = fused_multiply_add(load(query + h * head_dim + d), load_cached<Cache>(key, d), sum);
      scores[h][t] = sum_lanes(sum) * scale;
    }
}

// Decode: one query position of `heads` query heads that share a KV head. Keys are
// read in place, each cached row once for every two heads; values as above.
template <DType Cache>
void attend_rows(const float* query, int64_t heads, const void* keys, const void* values, int64_t first,
                 int64_t visible, int64_t head_dim, float scale, float* result, float* maximum, float* sum) {
  alignas(64) float scores[decode_max_heads][key_tile];  // [head, key in the tile]
  const uint16_t* query_pairs = nullptr;
#if defined(__AVX512BF16__)
  alignas(64) float rounded[rounded_query_floats<Cache>];  // [head, head_dim]: the query rounded to bf16
  alignas(64) uint16_t pairs[rounded_query_floats<Cache>];  // the same as bf16 pairs
  if (on_bf16_pairs<Cache>(head_dim)) {
    for (int64_t g = 0; g < heads; ++g) round_query(query + g * head_dim, head_dim, rounded + g * head_dim,
                                                    pairs + g * head_dim);
    query = rounded;
    query_pairs = pairs;
  }
#endif
  for (int64_t g = 0; g < heads; ++g) {
    maximum[g] = -INFINITY;
    sum[g] = 0;
    std::fill(result + g * head_dim, result + (g + 1) * head_dim, 0.0f);
  }
  // A head's cached rows are two short streams (keys, values) taken in turns, too short
  // for the hardware prefetcher to ramp up (and key_scores reads four rows side by
  // side): the scores of a tile's keys prefetch the same rows of its values and of the
  // next tile's keys. Against one key and a burst of its rows' prefetches at a time:
  // 128 - 192 cached positions in bf16 out of cache, two threads, ~10% faster.
  const int64_t row_bytes = head_dim * element_bytes<Cache>;
  const auto rows_span = [&](const void* rows, int64_t t, int64_t count) {
    return PrefetchSpan{static_cast<const char*>(rows) + t * row_bytes, std::max<int64_t>(0, count) * row_bytes};
  };
  for (int64_t t0 = first; t0 < visible; t0 += key_tile) {
    const int64_t count = std::min(key_tile, visible - t0);
    tile_scores<Cache>(query, query_pairs, heads, keys, t0, count, head_dim, scale, scores, [&](int64_t t, int64_t n) {
      return PrefetchSpans{rows_span(values, t0 + t, n),
                           rows_span(keys, t0 + key_tile + t, std::min(n, visible - t0 - key_tile - t))};
    });
    for (int64_t g = 0; g < heads; ++g)
      online_softmax_tile(scores[g], count, 0, count, maximum[g], sum[g], result + g * head_dim, head_dim);
    add_weighted_values<Cache>(scores, heads, values, t0, count, head_dim, result);
  }
}

// DecodeAttentionKernel: head_dim a multiple of 16.
inline void attend_rows_any(const float* query, int64_t heads, const void* keys, const void* values,
                            DType cache_dtype, int64_t first, int64_t visible, int64_t head_dim, float scale,
                            float* result, float* maximum, float* sum) {
  (cache_dtype == DType::bf16 ? attend_rows<DType::bf16> : attend_rows<DType::f32>)(
      query, heads, keys, values, first, visible, head_dim, scale, result, maximum, sum);
}

// The kernel for head_dim on this build's vectors, or null (head_dim not a multiple of 16)
// for attention.cpp's own loop: what a table's decode_attention entry returns.
inline DecodeAttentionKernel kernel_for(int64_t head_dim) { return head_dim % 16 == 0 ? attend_rows_any : nullptr; }

}  // namespace decode_attention
}  // namespace
}  // namespace shardlm::backends::cpu
