// Flash attention for prefill on AVX2: a block of query rows that share one KV head
// meets the keys 128 at a time. Scores S = Q K^T and the update O += P V both run on
// the matmul micro-kernel (avx2_gemm.h): K is packed per tile, V is read in place
// (its rows are already the [k][n] panels the micro-kernel wants). An online softmax
// (running maximum and sum per row) means no score row ever spans the whole cache.
#include "backends/cpu/attention_kernels.h"

#include <array>
#include <cmath>

#include "backends/cpu/avx2_gemm.h"

namespace shardlm::backends::cpu {

namespace avx2 {

// attention_kernels.h
void online_softmax_tile(float* row, int64_t count, int64_t first, int64_t end, float& maximum, float& sum, float* o,
                         int64_t head_dim) {
  end = std::min(end, count);
  const int64_t padded = (count + 7) / 8 * 8;  // <= the tile's length: its row has the room
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i first_lane = _mm256_set1_epi32(static_cast<int32_t>(std::max<int64_t>(first, -1)) - 1);
  const __m256i end_lane = _mm256_set1_epi32(static_cast<int32_t>(std::max<int64_t>(end, 0)));
  const __m256 minus_infinity = _mm256_set1_ps(-INFINITY);
  __m256 tile_maximum = minus_infinity;
  for (int64_t t = 0; t < padded; t += 8) {
    const __m256i index = _mm256_add_epi32(lanes, _mm256_set1_epi32(static_cast<int32_t>(t)));
    const __m256 visible = _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_cmpgt_epi32(index, first_lane), _mm256_cmpgt_epi32(end_lane, index)));
    const __m256 scores = _mm256_blendv_ps(minus_infinity, _mm256_loadu_ps(row + t), visible);
    _mm256_storeu_ps(row + t, scores);
    tile_maximum = _mm256_max_ps(tile_maximum, scores);
  }
  const float tile_max = horizontal_max(tile_maximum);
  if (tile_max == -INFINITY) {  // nothing visible to this row here
    std::fill(row, row + padded, 0.0f);
    return;
  }
  const float new_maximum = std::max(maximum, tile_max);
  const float rescale = std::exp(maximum - new_maximum);  // 0 on the row's first tile
  if (rescale != 1.0f) {
    const __m256 factor = _mm256_set1_ps(rescale);
    for (int64_t d = 0; d < head_dim; d += 8) _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), factor));
  }
  maximum = new_maximum;
  const __m256 shift = _mm256_set1_ps(new_maximum);
  __m256 tile_sum = _mm256_setzero_ps();
  for (int64_t t = 0; t < padded; t += 8) {
    const __m256 weights = exp8(_mm256_sub_ps(_mm256_loadu_ps(row + t), shift));
    _mm256_storeu_ps(row + t, weights);
    tile_sum = _mm256_add_ps(tile_sum, weights);
  }
  sum = sum * rescale + horizontal_sum(tile_sum);
}

}  // namespace avx2

namespace {

using namespace avx2;

// Decode reads each cached row once, so its tile only bounds the score scratch. A flash
// block's P V step adds every tile into the block's output, loaded and stored once per
// micro-kernel call: 128 keys a tile halve those (pp512 attention 5 - 7% faster than 64,
// in-process A/B at two threads; 256 gained nothing more).
constexpr int64_t key_tile = 64, flash_key_tile = 128;

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

// Decode, the values pass of one tile: result[g][d0, d0 + 8 V) += sum over the tile's
// rows t of weights[g][t] * values[t][d0, d0 + 8 V), for every column chunk. The
// accumulators stay in registers over the tile (G x V of them), so the value rows
// (an L1-resident tile) are read once per chunk rather than each output once per row.
template <DType Cache, int G, int V>
void add_weighted_values(const float (*weights)[key_tile], const void* values, int64_t t0, int64_t count,
                         int64_t head_dim, float* result) {
  for (int64_t d0 = 0; d0 < head_dim; d0 += 8 * V) {
    __m256 acc[G][V];
    SHARDLM_UNROLL
    for (int g = 0; g < G; ++g)
      SHARDLM_UNROLL
      for (int v = 0; v < V; ++v) acc[g][v] = _mm256_loadu_ps(result + g * head_dim + d0 + 8 * v);
    for (int64_t t = 0; t < count; ++t) {
      const void* row = row_pointer<Cache>(WeightView{values, Cache, head_dim}, t0 + t);
      __m256 value[V];
      SHARDLM_UNROLL
      for (int v = 0; v < V; ++v) value[v] = load8<Cache>(row, d0 + 8 * v);
      SHARDLM_UNROLL
      for (int g = 0; g < G; ++g) {
        const __m256 weight = _mm256_broadcast_ss(&weights[g][t]);
        SHARDLM_UNROLL
        for (int v = 0; v < V; ++v) acc[g][v] = _mm256_fmadd_ps(weight, value[v], acc[g][v]);
      }
    }
    SHARDLM_UNROLL
    for (int g = 0; g < G; ++g)
      SHARDLM_UNROLL
      for (int v = 0; v < V; ++v) _mm256_storeu_ps(result + g * head_dim + d0 + 8 * v, acc[g][v]);
  }
}

// The values pass for `heads` <= decode_max_heads, four heads at a time, with eight
// accumulators.
template <DType Cache>
void add_weighted_values(const float (*weights)[key_tile], int64_t heads, const void* values, int64_t t0,
                         int64_t count, int64_t head_dim, float* result) {
  for (int64_t g = 0; g < heads; g += 4) {
    const float(*group_weights)[key_tile] = weights + g;
    float* group_result = result + g * head_dim;
    const int64_t group = std::min<int64_t>(4, heads - g);
    if (group <= 2 && head_dim % 32 == 0)  // 32-column chunks
      (group == 1 ? add_weighted_values<Cache, 1, 4> : add_weighted_values<Cache, 2, 4>)(
          group_weights, values, t0, count, head_dim, group_result);
    else  // 16-column chunks: head_dim is a multiple of 16
      (group == 1   ? add_weighted_values<Cache, 1, 2>
       : group == 2 ? add_weighted_values<Cache, 2, 2>
       : group == 3 ? add_weighted_values<Cache, 3, 2>
                    : add_weighted_values<Cache, 4, 2>)(group_weights, values, t0, count, head_dim, group_result);
  }
}

// The four sums of a0 .. a3's lanes, in that order.
inline __m128 horizontal_sums4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 pairs = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(pairs), _mm256_extractf128_ps(pairs, 1));
}

// Decode scores of K consecutive cached keys (t, t + 1, ...) for G query heads:
// scores[g][t + j] = query[g] . key[t + j] * scale. G x K accumulators, one per (head,
// key), are independent FMA chains, and their sums come out four at a time: one
// accumulator per (row, head) left each score waiting on a chain of head_dim / 16 FMAs
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
void key_scores(const float* query, const void* keys, int64_t t, int64_t head_dim, float scale,
                float (*scores)[key_tile], int64_t tile_t, const PrefetchSpans& prefetch) {
  static_assert(K % 4 == 0 && G * K <= 8);
  // Lines per span and step: K rows of head_dim elements are K * head_dim * size / 64
  // lines, over head_dim / 8 steps.
  constexpr int64_t lines_per_step = std::max<int64_t>(1, K * element_bytes<Cache> / 8);
  const void* rows[K];
  SHARDLM_UNROLL
  for (int j = 0; j < K; ++j) rows[j] = row_pointer<Cache>(WeightView{keys, Cache, head_dim}, t + j);
  __m256 acc[G][K];
  SHARDLM_UNROLL
  for (int g = 0; g < G; ++g)
    SHARDLM_UNROLL
    for (int j = 0; j < K; ++j) acc[g][j] = _mm256_setzero_ps();
  for (int64_t d = 0; d < head_dim; d += 8) {
    SHARDLM_UNROLL
    for (int64_t line = 0; line < lines_per_step; ++line) {
      const int64_t offset = (d / 8 * lines_per_step + line) * 64;
      for (const PrefetchSpan& span : prefetch)
        if (offset < span.bytes) _mm_prefetch(span.start + offset, _MM_HINT_T0);
    }
    __m256 q[G];
    SHARDLM_UNROLL
    for (int g = 0; g < G; ++g) q[g] = _mm256_loadu_ps(query + g * head_dim + d);
    SHARDLM_UNROLL
    for (int j = 0; j < K; ++j) {
      const __m256 key = load8<Cache>(rows[j], d);
      SHARDLM_UNROLL
      for (int g = 0; g < G; ++g) acc[g][j] = _mm256_fmadd_ps(q[g], key, acc[g][j]);
    }
  }
  const __m128 scaling = _mm_set1_ps(scale);
  SHARDLM_UNROLL
  for (int g = 0; g < G; ++g)
    SHARDLM_UNROLL
    for (int j = 0; j < K; j += 4)
      _mm_storeu_ps(&scores[g][tile_t + j],
                    _mm_mul_ps(horizontal_sums4(acc[g][j], acc[g][j + 1], acc[g][j + 2], acc[g][j + 3]), scaling));
}

// key_scores for `heads` <= decode_max_heads, two heads and four keys at a time (one
// head: eight keys), then the keys past the last whole group one by one. The first
// pass over the tile prefetches prefetch(t, n) during the scores of its keys [t, t + n).
template <DType Cache, typename Prefetch>
void tile_scores(const float* query, int64_t heads, const void* keys, int64_t t0, int64_t count, int64_t head_dim,
                 float scale, float (*scores)[key_tile], Prefetch prefetch) {
  const PrefetchSpans none{};
  int64_t g = 0;
  for (; g + 2 <= heads; g += 2)
    for (int64_t t = 0; t + 4 <= count; t += 4)
      key_scores<Cache, 2, 4>(query + g * head_dim, keys, t0 + t, head_dim, scale, scores + g, t,
                              g == 0 ? prefetch(t, 4) : none);
  if (g < heads)
    for (int64_t t = 0; t + 8 <= count; t += 8)
      key_scores<Cache, 1, 8>(query + g * head_dim, keys, t0 + t, head_dim, scale, scores + g, t,
                              g == 0 ? prefetch(t, 8) : none);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t t = h < g ? count / 4 * 4 : count / 8 * 8; t < count; ++t) {
      const void* key = row_pointer<Cache>(WeightView{keys, Cache, head_dim}, t0 + t);
      __m256 sum = _mm256_setzero_ps();
      for (int64_t d = 0; d < head_dim; d += 8)
        sum = _mm256_fmadd_ps(_mm256_loadu_ps(query + h * head_dim + d), load8<Cache>(key, d), sum);
      scores[h][t] = horizontal_sum(sum) * scale;
    }
}

// Decode: one query position of `heads` query heads that share a KV head. Keys are
// read in place, each cached row once for every two heads; values as above.
template <DType Cache>
void attend_rows(const float* query, int64_t heads, const void* keys, const void* values, int64_t first,
                 int64_t visible, int64_t head_dim, float scale, float* result, float* maximum, float* sum) {
  alignas(32) float scores[decode_max_heads][key_tile];  // [head, key in the tile]
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
    tile_scores<Cache>(query, heads, keys, t0, count, head_dim, scale, scores, [&](int64_t t, int64_t n) {
      return PrefetchSpans{rows_span(values, t0 + t, n),
                           rows_span(keys, t0 + key_tile + t, std::min(n, visible - t0 - key_tile - t))};
    });
    for (int64_t g = 0; g < heads; ++g)
      online_softmax_tile(scores[g], count, 0, count, maximum[g], sum[g], result + g * head_dim, head_dim);
    add_weighted_values<Cache>(scores, heads, values, t0, count, head_dim, result);
  }
}

void attend_rows_any(const float* query, int64_t heads, const void* keys, const void* values, DType cache_dtype,
                     int64_t first, int64_t visible, int64_t head_dim, float scale, float* result, float* maximum,
                     float* sum) {
  (cache_dtype == DType::bf16 ? attend_rows<DType::bf16> : attend_rows<DType::f32>)(
      query, heads, keys, values, first, visible, head_dim, scale, result, maximum, sum);
}

// Whether these kernels run on this CPU for head_dim.
bool kernels_fit(int64_t head_dim) {
  return cpu_has_avx2_fma_f16c() && head_dim % panel_width == 0 && head_dim <= flash_max_head_dim;
}

}  // namespace

DecodeAttentionKernel avx2_decode_attention(int64_t head_dim) {
  return kernels_fit(head_dim) ? attend_rows_any : nullptr;
}

FlashBlockKernel avx2_flash_block(int64_t head_dim) { return kernels_fit(head_dim) ? flash_block_any : nullptr; }

}  // namespace shardlm::backends::cpu
