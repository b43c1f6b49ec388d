// AVX-512 (F, BW, VL, DQ) matmul kernels. This file alone is compiled with those
// instructions enabled; cpu_kernels() calls into it only when the CPU and the OS
// run them. Same math as the AVX2 table (weights widened exactly to f32, f32 FMAs),
// on 16 lanes and 32 vector registers:
//
// gemv (decode): as matmul_avx2.cpp's, a 64-byte load a step: bf16 as 16 even and 16
// odd weights (shift, mask) against an input permuted per 32 to match, f16 through
// vcvtph2ps, int8 as 32 int16 in one vpmaddwd per block against int16 activations
// (the AVX2 table's layout and values, weight_rows.h), int4 as two blocks' nibbles
// widened to 16 bits against those activations reordered to match. Half the instructions
// per byte of weights: more lines in flight per out-of-order window.
//
// gemm (prefill): a 12x32 micro-kernel (24 accumulators; per k, two 16-lane weight
// loads and twelve broadcast FMAs pairs), the input packed once per op into 12-row
// k-major tiles, the weight packed a 32-column panel at a time into f32 [k][32].
// Twice the AVX2 table's FLOPs a cycle where the core has two 512-bit FMA ports.
#include <immintrin.h>

#include <algorithm>
#include <utility>

#include "backends/cpu/avx512_gemm.h"
#include "backends/cpu/decode_attention.h"
#include "backends/cpu/flash_attention.h"
#include "backends/cpu/ggml_block_kernels.h"
#include "backends/cpu/row_kernels.h"
#include "backends/cpu/transpose8.h"

namespace shardlm::backends::cpu {
namespace {

using avx512::first_lanes;

using avx512::PrefetchInto, avx512::prefetch_ahead;

// Sixteen consecutive weights of a row from element k, as f32 (int8 and int4 unscaled, k a
// multiple of 16 there: half a block), the lanes past `mask` zero.
template <DType D>
inline __m512 load16(const void* row, int64_t k, __mmask16 mask = 0xFFFF) {
  if constexpr (D == DType::f32) {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(row) + k);
  } else if constexpr (D == DType::i8) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, static_cast<const int8_t*>(row) + k)));
  } else if constexpr (D == DType::i4) {  // a block's byte j holds element j (low nibble) and j + 16
    const auto* block_bytes = static_cast<const uint8_t*>(row) + k / block * 16;
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block_bytes));
    const __m128i nibbles = k % block ? _mm_srli_epi16(bytes, 4) : bytes;
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(nibbles, _mm_set1_epi8(0x0F))),
                                               _mm512_set1_epi32(8)));
  } else {
    const __m256i bits = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(row) + k);
    if constexpr (D == DType::bf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
    else return _mm512_cvtph_ps(bits);
  }
}

// out[r, o + s * part] for R input rows and S output rows `part` apart, read side by
// side as S forward streams (matmul_avx2.cpp's gemv_tile: the same reasons, the same
// prefetch); two accumulator chains per (row, stream) at one input row.
template <DType D, int R, int S, PrefetchInto Into>
void gemv_tile(const float* x, const WeightView& w, int64_t o, int64_t part, float* out, int64_t out_stride) {
  constexpr int chains = R == 1 ? 2 : 1;
  const int64_t in = w.in;
  const void* rows[S];
  SHARDLM_UNROLL
  for (int s = 0; s < S; ++s) rows[s] = row_pointer<D>(w, o + s * part);
  __m512 acc[R][S][chains];
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s)
      SHARDLM_UNROLL
      for (int c = 0; c < chains; ++c) acc[r][s][c] = _mm512_setzero_ps();
  int64_t k = 0;
  if constexpr (D == DType::bf16) {
    // x as pack_bf16_gemv_input left it: per 32, the 16 even elements, then the 16 odd.
    const __m512i odd_mask = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (; k + 32 <= in; k += 32)
      SHARDLM_UNROLL
      for (int s = 0; s < S; ++s) {
        prefetch_ahead<Into>(rows[s], k * 2);
        const __m512i pairs = _mm512_loadu_si512(static_cast<const uint16_t*>(rows[s]) + k);
        const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
        const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(pairs, odd_mask));
        SHARDLM_UNROLL
        for (int r = 0; r < R; ++r) {
          acc[r][s][0] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * in + k), even, acc[r][s][0]);
          acc[r][s][chains - 1] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * in + k + 16), odd, acc[r][s][chains - 1]);
        }
      }
  }
  for (; k + 16 * chains <= in; k += 16 * chains)
    SHARDLM_UNROLL
    for (int c = 0; c < chains; ++c)
      SHARDLM_UNROLL
      for (int s = 0; s < S; ++s) {
        const int64_t at = k + 16 * c;
        if (at * element_bytes<D> % 64 == 0) prefetch_ahead<Into>(rows[s], at * element_bytes<D>);
        const __m512 weights = load16<D>(rows[s], at);
        SHARDLM_UNROLL
        for (int r = 0; r < R; ++r)
          acc[r][s][c] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * in + at), weights, acc[r][s][c]);
      }
  for (; k < in; k += 16) {  // the last whole vector, then the tail under a mask
    const __mmask16 mask = first_lanes(std::min<int64_t>(16, in - k));
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) {
      const __m512 weights = load16<D>(rows[s], k, mask);
      SHARDLM_UNROLL
      for (int r = 0; r < R; ++r)
        acc[r][s][0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, x + r * in + k), weights, acc[r][s][0]);
    }
  }
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) {
      SHARDLM_UNROLL
      for (int c = 1; c < chains; ++c) acc[r][s][0] = _mm512_add_ps(acc[r][s][0], acc[r][s][c]);
      out[r * out_stride + o + s * part] = _mm512_reduce_add_ps(acc[r][s][0]);
    }
}

// Activations for bf16 weights: each whole group of 32 as its 16 even elements, then its
// 16 odd ones, the order gemv_tile widens a 64-byte load of weights in; the tail past
// the last group stays as it is.
void pack_bf16_gemv_input(const float* x, int64_t rows, int64_t in, float* packed) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t r = 0; r < rows; ++r) {
    const float* source = x + r * in;
    float* target = packed + r * in;
    int64_t k = 0;
    for (; k + 32 <= in; k += 32) {
      const __m512 low = _mm512_loadu_ps(source + k), high = _mm512_loadu_ps(source + k + 16);
      _mm512_storeu_ps(target + k, _mm512_permutex2var_ps(low, even, high));
      _mm512_storeu_ps(target + k + 16, _mm512_permutex2var_ps(low, odd, high));
    }
    for (; k < in; ++k) target[k] = source[k];
  }
}

// Activations for int8 weights (weight_rows.h's layout): each block of 32 as int16 with
// one f32 scale, its largest |x| / 32767, as the AVX2 table packs them (the same values,
// 16 lanes at a time).
void pack_int8_gemv_input(const float* x, int64_t rows, int64_t in, float* packed) {
  for (int64_t r = 0; r < rows; ++r) {
    auto* values = reinterpret_cast<int16_t*>(packed + r * int8_gemv_row_floats(in));
    float* scales = packed + r * int8_gemv_row_floats(in) + in / 2;
    for (int64_t b = 0; b < in / block; ++b) {
      const float* source = x + r * in + b * block;
      const __m512 low = _mm512_loadu_ps(source), high = _mm512_loadu_ps(source + 16);
      const float maximum = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(low), _mm512_abs_ps(high)));
      const __m512 inverse = _mm512_set1_ps(maximum > 0 ? 32767.0f / maximum : 0.0f);
      scales[b] = maximum / 32767.0f;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(values + b * block),
                          _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(low, inverse))));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(values + b * block + 16),
                          _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(high, inverse))));
    }
  }
}

// int8 weights against the int16 activations (rows of `row_floats` floats), output rows
// o + s * part as in gemv_tile: per block, 32 int8 x int16 products summed pairwise in int32 by one
// vpmaddwd, converted and scaled once by weight scale x input scale. Scales are
// combined sixteen blocks at a time as vectors.
template <int R, int S, PrefetchInto Into>
void gemv_int8_tile(const float* packed_x, int64_t row_floats, const WeightView& w, int64_t o, int64_t part, float* out,
                    int64_t out_stride) {
  const int64_t blocks = w.in / block;
  const Int8TileStreams<R, S> streams(packed_x, row_floats, w, o, part);
  const auto& [rows, weight_scales, values, input_scales] = streams;
  __m512 acc[R][S];
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) acc[r][s] = _mm512_setzero_ps();
  for (int64_t b0 = 0; b0 < blocks; b0 += 16) {
    const int64_t group = std::min<int64_t>(16, blocks - b0);
    const __mmask16 mask = first_lanes(group);
    alignas(64) float combined[R][S][16];  // [r][s][b]: the scale of block b0 + b of row s against input row r
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) {
      const __m512 weight_scale = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, weight_scales[s] + b0));
      SHARDLM_UNROLL
      for (int r = 0; r < R; ++r)
        _mm512_store_ps(combined[r][s], _mm512_mul_ps(weight_scale, _mm512_maskz_loadu_ps(mask, input_scales[r] + b0)));
    }
    for (int64_t b = 0; b < group; ++b) {
      const int64_t k = (b0 + b) * block;
      if (b % 2 == 0)  // one line of each stream per two blocks
        SHARDLM_UNROLL
        for (int s = 0; s < S; ++s)
          prefetch_ahead<Into>(rows[s], k);
      SHARDLM_UNROLL
      for (int s = 0; s < S; ++s) {
        const __m512i weights = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[s] + k)));
        SHARDLM_UNROLL
        for (int r = 0; r < R; ++r) {
          const __m512i sums = _mm512_madd_epi16(weights, _mm512_loadu_si512(values[r] + k));
          acc[r][s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_set1_ps(combined[r][s][b]), acc[r][s]);
        }
      }
    }
  }
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) out[r * out_stride + o + s * part] = _mm512_reduce_add_ps(acc[r][s]);
}

// int4 activations, per row: the int8 layout (`in` int16 values, one f32 scale a block)
// with each pair of blocks A, B reordered as A0-15 B0-15 A16-31 B16-31, to match the
// nibbles of 32 weight bytes (the low ones of both blocks, then the high ones), then one
// f32 a block: its scale times the sum of its int16 values, for the weights' offset of 8.
int64_t int4_gemv_row_floats(int64_t in) { return int8_gemv_row_floats(in) + in / block; }

void pack_int4_gemv_input(const float* x, int64_t rows, int64_t in, float* packed) {
  const int64_t blocks = in / block, int8_floats = int8_gemv_row_floats(in);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = packed + r * int4_gemv_row_floats(in);
    pack_int8_gemv_input(x + r * in, 1, in, row);
    auto* values = reinterpret_cast<int16_t*>(row);
    const float* scales = row + in / 2;
    float* sums = row + int8_floats;
    for (int64_t b = 0; b < blocks; ++b) {
      int32_t total = 0;
      for (int64_t i = 0; i < block; ++i) total += values[b * block + i];
      sums[b] = scales[b] * static_cast<float>(total);
    }
    for (int64_t b = 0; b + 1 < blocks; b += 2) {  // swap A16-31 with B0-15
      const __m256i a_high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + b * block + 16));
      const __m256i b_low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + (b + 1) * block));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(values + b * block + 16), b_low);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(values + (b + 1) * block), a_high);
    }
  }
}

// int4 weights against pack_int4_gemv_input's rows, output rows o + s * part as in
// gemv_tile: two blocks a step, their 32 bytes split into low and high nibbles (0..15:
// the stored q + 8) and widened to 32 int16 each, multiplied and summed pairwise in int32
// against the activations (vpmaddwd), each block's eight sums scaled by weight scale x
// input scale. The offset of 8 comes off once at the end: 8 x the sum over blocks of
// weight scale x the block's activation sum.
template <int R, int S, PrefetchInto Into>
void gemv_int4_tile(const float* packed_x, int64_t row_floats, const WeightView& w, int64_t o, int64_t part,
                    float* out, int64_t out_stride) {
  const int64_t blocks = w.in / block, int8_floats = int8_gemv_row_floats(w.in);
  const Int8TileStreams<R, S, DType::i4> streams(packed_x, row_floats, w, o, part);
  const auto& [rows, weight_scales, values, input_scales] = streams;
  const __m512i low_nibbles = _mm512_set1_epi16(0x0F);
  __m512 acc[R][S], offset[R][S];
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) acc[r][s] = offset[r][s] = _mm512_setzero_ps();
  // Lanes 0-7 take block b's scale, lanes 8-15 block b + 1's, of the sixteen in `combined`.
  const __m512i pair_lanes = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int64_t b0 = 0; b0 < blocks; b0 += 16) {
    const int64_t group = std::min<int64_t>(16, blocks - b0);
    const __mmask16 mask = first_lanes(group);
    __m512 combined[R][S];  // [r][s], lane b: the scale of block b0 + b of row s against input row r
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) {
      const __m512 weight_scale = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, weight_scales[s] + b0));
      SHARDLM_UNROLL
      for (int r = 0; r < R; ++r) {
        combined[r][s] = _mm512_mul_ps(weight_scale, _mm512_maskz_loadu_ps(mask, input_scales[r] + b0));
        const float* sums = reinterpret_cast<const float*>(values[r]) + int8_floats;
        offset[r][s] = _mm512_fmadd_ps(weight_scale, _mm512_maskz_loadu_ps(mask, sums + b0), offset[r][s]);
      }
    }
    int64_t b = 0;
    for (; b + 2 <= group; b += 2) {
      const int64_t k = (b0 + b) * block;
      if (b % 4 == 0)  // one line of each stream per four blocks
        SHARDLM_UNROLL
        for (int s = 0; s < S; ++s)
          prefetch_ahead<Into>(rows[s], k / 2);
      const __m512i lanes = _mm512_add_epi32(pair_lanes, _mm512_set1_epi32(static_cast<int>(b)));
      SHARDLM_UNROLL
      for (int s = 0; s < S; ++s) {
        // Bytes widened to 16 bits: the high nibble is the lane shifted, the low one masked.
        const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[s] + k / 2)));
        const __m512i low = _mm512_and_si512(bytes, low_nibbles);  // A0-15 B0-15
        const __m512i high = _mm512_srli_epi16(bytes, 4);          // A16-31 B16-31
        SHARDLM_UNROLL
        for (int r = 0; r < R; ++r) {
          const __m512i sums = _mm512_add_epi32(_mm512_madd_epi16(low, _mm512_loadu_si512(values[r] + k)),
                                                _mm512_madd_epi16(high, _mm512_loadu_si512(values[r] + k + 32)));
          acc[r][s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_permutexvar_ps(lanes, combined[r][s]),
                                      acc[r][s]);
        }
      }
    }
    if (b < group) {  // an odd last block, in the int8 order
      const int64_t k = (b0 + b) * block;
      const __m512i one_block = _mm512_set1_epi32(static_cast<int>(b));
      SHARDLM_UNROLL
      for (int s = 0; s < S; ++s) {
        const __m256i bytes = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[s] + k / 2)));
        const __m512i both = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_and_si256(bytes, _mm256_set1_epi16(0x0F))),
            _mm256_and_si256(_mm256_srli_epi16(bytes, 4), _mm256_set1_epi16(0x0F)), 1);  // 0-15, 16-31
        SHARDLM_UNROLL
        for (int r = 0; r < R; ++r) {
          const __m512i sums = _mm512_madd_epi16(both, _mm512_loadu_si512(values[r] + k));
          acc[r][s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_permutexvar_ps(one_block, combined[r][s]),
                                      acc[r][s]);
        }
      }
    }
  }
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s)
      out[r * out_stride + o + s * part] = _mm512_reduce_add_ps(acc[r][s]) - 8 * _mm512_reduce_add_ps(offset[r][s]);
}

int64_t gemv_input_row_floats(DType weight_dtype, int64_t in) {
  if (weight_dtype == DType::i8) return int8_gemv_row_floats(in);
  if (weight_dtype == DType::i4) return int4_gemv_row_floats(in);
  return weight_dtype == DType::bf16 ? in : 0;
}

void pack_gemv_input(const float* x, int64_t rows, int64_t in, DType weight_dtype, float* packed) {
  if (weight_dtype == DType::i8) pack_int8_gemv_input(x, rows, in, packed);
  else if (weight_dtype == DType::i4) pack_int4_gemv_input(x, rows, in, packed);
  else if (weight_dtype == DType::bf16) pack_bf16_gemv_input(x, rows, in, packed);
}

template <DType D, PrefetchInto Into>
void gemv_typed(const float* x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
                int64_t stride) {
  // Rows of x: f32 [in] (for bf16 weights, permuted), or the int8 packer's rows.
  const int64_t row_floats = block_quantized<D> ? gemv_input_row_floats(D, w.in) : w.in;
  for_gemv_row_groups(rows, [&](int64_t r, auto group) {
    constexpr int R = decltype(group)::value;
    const float* xr = x + r * row_floats;
    float* outr = out + r * stride;
    for_gemv_stream_tiles<D, R>(o_begin, o_end, [&]<int Streams>(int64_t o, int64_t part) {
      if constexpr (D == DType::i4) gemv_int4_tile<R, Streams, Into>(xr, row_floats, w, o, part, outr, stride);
      else if constexpr (D == DType::i8) gemv_int8_tile<R, Streams, Into>(xr, row_floats, w, o, part, outr, stride);
      else gemv_tile<D, R, Streams, Into>(xr, w, o, part, outr, stride);
    });
  });
}

using avx512::micro_rows;
constexpr int64_t panel_width = 32, k_block = 256, column_block = 128;

// Tile t of x, rows [12t, 12t + 12) (past the end: zero), as k-major [k][12] floats, one
// 256-k block at a time: block k0 of every tile lies together ([k block][tile][k][12]),
// so the gemm reads a run of tiles at one k block as one forward stream.
int64_t packed_tile_offset(int64_t tiles, int64_t in, int64_t t, int64_t k0) {
  return k0 * tiles * micro_rows + t * std::min(k_block, in - k0) * micro_rows;
}

// Eight columns at a time: rows 0-7 and rows 8-11 (four zero rows beside them) each
// transposed in registers as an 8x8 block (transpose8.h), then each column's twelve values
// stored as eight and four; columns and rows past the end are masked off or zero.
void pack_input(const float* x, int64_t rows, int64_t in, DType, int64_t tile_begin, int64_t tile_end,
                float* packed) {
  const int64_t tiles = (rows + micro_rows - 1) / micro_rows;
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const int64_t tile_rows = std::min(micro_rows, rows - t * micro_rows);
    const float* row = x + t * micro_rows * in;
    for (int64_t k0 = 0; k0 < in; k0 += k_block) {
      float* tile = packed + packed_tile_offset(tiles, in, t, k0);
      const int64_t kc = std::min(k_block, in - k0);
      for (int64_t k = 0; k < kc; k += 8) {
        const int64_t count = std::min<int64_t>(8, kc - k);
        const auto mask = static_cast<__mmask8>((1u << count) - 1u);
        __m256 low[8], high[8];
        SHARDLM_UNROLL
        for (int i = 0; i < 8; ++i) {
          low[i] = i < tile_rows ? _mm256_maskz_loadu_ps(mask, row + i * in + k0 + k) : _mm256_setzero_ps();
          high[i] = i < 4 && i + 8 < tile_rows ? _mm256_maskz_loadu_ps(mask, row + (i + 8) * in + k0 + k)
                                               : _mm256_setzero_ps();
        }
        transpose8(low);   // low[j]: rows 0..7 of column k + j
        transpose8(high);  // high[j]: rows 8..11 (then four zeros) of column k + j
        SHARDLM_UNROLL
        for (int j = 0; j < 8; ++j)
          if (j < count) {
            _mm256_storeu_ps(tile + (k + j) * micro_rows, low[j]);
            _mm_storeu_ps(tile + (k + j) * micro_rows + 8, _mm256_castps256_ps128(high[j]));
          }
      }
    }
  }
}

// packed[k][j] = weight[n0 + j, k0 + k] for j < width, zero for width <= j < 32, the
// int8 and int4 block scales applied: eight rows' runs of sixteen k widened at once, then
// transposed as two 8x8 blocks (transpose8.h).
template <DType D>
void pack_panel(const WeightView& w, int64_t n0, int64_t width, int64_t k0, int64_t kc, float* packed) {
  for (int64_t j0 = 0; j0 < panel_width; j0 += 8)
    for (int64_t k = 0; k < kc; k += 16) {
      const __mmask16 mask = first_lanes(std::min<int64_t>(16, kc - k));
      __m256 low[8], high[8];  // row j0 + j's k .. k + 7, and k + 8 .. k + 15
      SHARDLM_UNROLL
      for (int j = 0; j < 8; ++j) {
        const int64_t row = n0 + j0 + j;
        __m512 values = _mm512_setzero_ps();
        if (j0 + j < width) {
          values = load16<D>(row_pointer<D>(w, row), k0 + k, mask);
          if constexpr (block_quantized<D>) {  // k0 + k and kc are whole blocks there
            const uint16_t scale = w.block_scales[row * (w.in / block) + (k0 + k) / block];
            values = _mm512_mul_ps(values, _mm512_set1_ps(_cvtsh_ss(scale)));
          }
        }
        low[j] = _mm512_castps512_ps256(values);
        high[j] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(values), 1));
      }
      transpose8(low);   // low[i]: column k + i of the eight rows
      transpose8(high);  // high[i]: column k + 8 + i
      SHARDLM_UNROLL
      for (int i = 0; i < 8; ++i) {
        if (k + i < kc) _mm256_store_ps(packed + (k + i) * panel_width + j0, low[i]);
        if (k + 8 + i < kc) _mm256_store_ps(packed + (k + 8 + i) * panel_width + j0, high[i]);
      }
    }
}

// One step per k: the row's f32 broadcast against the panel's [k][32] f32. A type, not a
// function pointer, so that the micro-kernel inlines it.
struct MultiplyAddF32 {
  __m512 operator()(__m512 sums, float value, __m512i weights) const {
    return _mm512_fmadd_ps(_mm512_set1_ps(value), _mm512_castsi512_ps(weights), sums);
  }
};

template <DType D>
void gemm_typed(const float* packed_x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
                int64_t stride) {
  // On the stack (128 KB), as matmul_avx2.cpp's: no per-thread heap buffer.
  alignas(64) float packed[k_block * column_block];
  const int64_t in = w.in, tiles = (rows + micro_rows - 1) / micro_rows;
  avx512::for_gemm_blocks(
      tiles, in, o_begin, o_end, k_block, column_block,
      [&](int64_t p, int64_t n, int64_t width, int64_t k0, int64_t kc) {
        pack_panel<D>(w, n, width, k0, kc, packed + p * k_block * panel_width);
      },
      [&](int64_t t, int64_t p, int64_t n, int64_t width, int64_t k0, int64_t kc) {
        avx512::micro_kernel_rows(std::min(micro_rows, rows - t * micro_rows),
                                  packed_x + packed_tile_offset(tiles, in, t, k0), packed + p * k_block * panel_width,
                                  kc, out + t * micro_rows * stride + n, stride, width, k0 > 0, MultiplyAddF32{});
      });
}

// The flash kernel's products (flash_attention.h) on this file's micro-kernel: a K tile
// packed as the gemm packs a weight panel, a V tile widened into panels [key][32] (a
// panel's row stride is fixed at 32 here, so V is never read in place).
struct FlashProducts : flash_attention::F32Products {
  static constexpr int64_t panel_width = 32, micro_rows = avx512::micro_rows;

  template <DType Cache>
  static void pack_keys(const WeightView& keys, int64_t t0, int64_t width, int64_t head_dim, float* panel) {
    pack_panel<Cache>(keys, t0, width, 0, head_dim, panel);
  }

  // b's rows are panel_width apart: the ldb of both layouts below.
  template <int64_t Lda>
  static void multiply(int64_t rows, const float* a, const float* b, int64_t /*ldb*/, int64_t steps, float* c,
                       int64_t ldc, int64_t width, bool accumulate) {
    avx512::micro_kernel_rows<avx512::RowMajor<Lda>>(rows, a, b, steps, c, ldc, width, accumulate, MultiplyAddF32{});
  }

  // Columns past head_dim (a multiple of 16) are zero in the last panel.
  template <DType Cache>
  static flash_attention::ValuePanels<float> value_panels(const void* values, int64_t t0, int64_t count,
                                                          int64_t head_dim, float* buffer) {
    const WeightView rows{values, Cache, head_dim};
    for (int64_t d0 = 0; d0 < head_dim; d0 += panel_width) {
      const __mmask16 high = first_lanes(std::min<int64_t>(16, head_dim - d0 - 16));
      float* panel = buffer + d0 / panel_width * count * panel_width;  // [count][32]
      for (int64_t t = 0; t < count; ++t) {
        const void* row = row_pointer<Cache>(rows, t0 + t);
        _mm512_store_ps(panel + t * panel_width, load16<Cache>(row, d0));
        _mm512_store_ps(panel + t * panel_width + 16, load16<Cache>(row, d0 + 16, high));
      }
    }
    return {buffer, count * panel_width, panel_width};
  }
};

void gemv(const float* x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
          int64_t stride) {
  with_dtype(w.dtype, [&](auto dtype) {
    avx512::with_prefetch_target(
        [&](auto into) { gemv_typed<dtype.value, into.value>(x, rows, w, o_begin, o_end, out, stride); });
  });
}

void gemm(const float* x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
          int64_t stride) {
  with_dtype(w.dtype, [&](auto dtype) { gemm_typed<dtype.value>(x, rows, w, o_begin, o_end, out, stride); });
}


}  // namespace

namespace {

// Built only once the CPU check has passed: its code may use this file's instructions.
[[gnu::noinline]] const CpuKernels& table() {
  static const CpuKernels kernels{.isa = "avx512", .gemv = gemv, .gemm = gemm, .pack_input = pack_input,
                                  .input_tile_rows = micro_rows, .gemm_column_block = column_block,
                                  .pack_gemv_input = pack_gemv_input,
                                  .gemv_input_row_floats = gemv_input_row_floats,
                                  .decode_blocks = decode_ggml_blocks, .gemv_blocks = ggml_blocks_gemv,
                                  .rows = row_kernels,
                                  .flash_block = flash_attention::kernel_for<FlashProducts>,
                                  .decode_attention = decode_attention::kernel_for};
  return kernels;
}

}  // namespace

const CpuKernels* avx512_cpu_kernels() { return cpu_has_avx512() ? &table() : nullptr; }

}  // namespace shardlm::backends::cpu
