// AVX2 + FMA + F16C matmul kernels. This file alone is compiled with those
// instructions enabled; cpu_kernels() calls into it only when the CPU has them.
//
// gemv (decode): each weight row is read once from memory, in order, and multiplied
// into up to four input rows; independent accumulator chains per row keep the FMAs
// ahead of memory. Weights are widened in registers (bf16: sixteen a load, the even
// ones by a 16-bit shift and the odd ones by a mask, against an input permuted to
// match; f16: vcvtph2ps); int8 weights, and int4 ones widened from their nibbles, meet
// int16 activations in integer multiply-adds, one scale per 32-element block.
//
// gemm (prefill): the input is packed once per op into 6-row k-major tiles, grouped by
// 256-k block; the weight is packed, a panel of 16 output columns by 256 k at a time,
// into f32 [k][16] (16 KB, L1-resident), and a 6x16 micro-kernel keeps 12 accumulators in registers,
// broadcasting 6 input rows' values against two 8-lane weight vectors per k: 12 FMAs
// per 8 loads.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/avx2_gemm.h"
#include "backends/cpu/ggml_block_kernels.h"
#include "backends/cpu/row_kernels.h"

namespace shardlm::backends::cpu {
namespace {

using namespace avx2;

// out[r, o + s * part] for R input rows and S output rows, s < S, `part` rows apart. A
// task's rows are split into S parts read side by side, each part in order: S long
// forward streams, which on Zen 3 keep enough lines in flight for the full read
// bandwidth (one stream per core reaches ~80% of it; rows next to each other are
// short streams that the prefetcher restarts on every row). Two accumulator chains
// per (row, stream) at one input row hide the FMA latency; at more rows, one suffices.
template <DType D, int R, int S>
void gemv_tile(const float* x, const WeightView& w, int64_t o, int64_t part, float* out, int64_t out_stride) {
  constexpr int chains = R == 1 ? 2 : 1;
  const int64_t in = w.in;
  const void* rows[S];
  SHARDLM_UNROLL
  for (int s = 0; s < S; ++s) rows[s] = row_pointer<D>(w, o + s * part);
  __m256 acc[R][S][chains];
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s)
      SHARDLM_UNROLL
      for (int c = 0; c < chains; ++c) acc[r][s][c] = _mm256_setzero_ps();
  int64_t k = 0;
  if constexpr (D == DType::bf16) {
    // x as pack_bf16_gemv_input left it: per 16, the 8 even elements, then the 8 odd.
    const __m256i odd_mask = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (; k + 16 <= in; k += 16)
      SHARDLM_UNROLL
      for (int s = 0; s < S; ++s) {
        if (k % 32 == 0) prefetch_ahead(rows[s], k * 2);
        const __m256i pairs =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(rows[s]) + k));
        const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
        const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(pairs, odd_mask));
        SHARDLM_UNROLL
        for (int r = 0; r < R; ++r) {
          acc[r][s][0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * in + k), even, acc[r][s][0]);
          acc[r][s][chains - 1] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * in + k + 8), odd, acc[r][s][chains - 1]);
        }
      }
  }
  for (; k + 8 * chains <= in; k += 8 * chains)
    SHARDLM_UNROLL
    for (int c = 0; c < chains; ++c)
      SHARDLM_UNROLL
      for (int s = 0; s < S; ++s) {
        if (c == 0 && k * element_bytes<D> % 64 == 0) prefetch_ahead(rows[s], k * element_bytes<D>);
        const __m256 weights = load8<D>(rows[s], k + 8 * c);
        SHARDLM_UNROLL
        for (int r = 0; r < R; ++r)
          acc[r][s][c] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * in + k + 8 * c), weights, acc[r][s][c]);
      }
  for (; k + 8 <= in; k += 8)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) {
      const __m256 weights = load8<D>(rows[s], k);
      SHARDLM_UNROLL
      for (int r = 0; r < R; ++r)
        acc[r][s][0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * in + k), weights, acc[r][s][0]);
    }
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) {
      SHARDLM_UNROLL
      for (int c = 1; c < chains; ++c) acc[r][s][0] = _mm256_add_ps(acc[r][s][0], acc[r][s][c]);
      float sum = horizontal_sum(acc[r][s][0]);
      for (int64_t t = k; t < in; ++t) sum += x[r * in + t] * load1<D>(rows[s], t);
      out[r * out_stride + o + s * part] = sum;
    }
}

// Activations for bf16 weights: each whole group of 16 as its 8 even elements, then its
// 8 odd ones, the order gemv_tile widens a 32-byte load of weights in; the tail past
// the last group stays as it is.
void pack_bf16_gemv_input(const float* x, int64_t rows, int64_t in, float* packed) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* source = x + r * in;
    float* target = packed + r * in;
    int64_t k = 0;
    for (; k + 16 <= in; k += 16)
      for (int64_t i = 0; i < 8; ++i) {
        target[k + i] = source[k + 2 * i];
        target[k + 8 + i] = source[k + 2 * i + 1];
      }
    for (; k < in; ++k) target[k] = source[k];
  }
}

// Activations for int8 weights: each block of 32 as int16 with one f32 scale (its
// largest |x| / 32767: an error of at most 2^-16 of that value, far below the
// weights' own 2^-8), so that a block's products run as integer multiply-adds
// (vpmaddwd: 16 products an instruction) instead of widening every weight to f32.
void pack_int8_gemv_input(const float* x, int64_t rows, int64_t in, float* packed) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    auto* values = reinterpret_cast<int16_t*>(packed + r * int8_gemv_row_floats(in));
    float* scales = packed + r * int8_gemv_row_floats(in) + in / 2;
    for (int64_t b = 0; b < in / block; ++b) {
      const float* source = x + r * in + b * block;
      __m256 v[4], largest = _mm256_setzero_ps();
      SHARDLM_UNROLL
      for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(source + 8 * i);
        largest = _mm256_max_ps(largest, _mm256_andnot_ps(sign, v[i]));
      }
      const float maximum = horizontal_max(largest);
      const __m256 inverse = _mm256_set1_ps(maximum > 0 ? 32767.0f / maximum : 0.0f);
      scales[b] = maximum / 32767.0f;
      __m256i q[4];
      SHARDLM_UNROLL
      for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inverse));
      // packs works per 128-bit lane: the permute puts the four quarters back in order.
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(values + b * block),
                          _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(values + b * block + 16),
                          _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), 0xD8));
    }
  }
}

// Eight consecutive block scales from `scales` (`count` of them, the rest zero), as f32.
inline __m256 load_scales8(const uint16_t* scales, int64_t count) {
  if (count == 8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
  alignas(16) uint16_t part[8] = {};
  std::memcpy(part, scales, static_cast<size_t>(count) * sizeof(uint16_t));
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(part)));
}
inline __m256 load_scales8(const float* scales, int64_t count) {
  if (count == 8) return _mm256_loadu_ps(scales);
  alignas(32) float part[8] = {};
  std::memcpy(part, scales, static_cast<size_t>(count) * sizeof(float));
  return _mm256_load_ps(part);
}

// int8 (or int4) weights against pack_int8_gemv_input's rows, output rows o + s * part as
// in gemv_tile: per block, 32 int8 x int16 products summed exactly in int32, then scaled
// once by weight scale x input scale. Scales are loaded eight blocks at a time and
// multiplied together as vectors.
template <DType D, int R, int S>
void gemv_int8_tile(const float* packed_x, int64_t row_floats, const WeightView& w, int64_t o, int64_t part,
                    float* out, int64_t out_stride) {
  const int64_t blocks = w.in / block;
  const Int8TileStreams<R, S, D> streams(packed_x, row_floats, w, o, part);
  const auto& [rows, weight_scales, values, input_scales] = streams;
  __m256 acc[R][S];
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) acc[r][s] = _mm256_setzero_ps();
  for (int64_t b0 = 0; b0 < blocks; b0 += 8) {
    const int64_t group = std::min<int64_t>(8, blocks - b0);
    alignas(32) float combined[R][S][8];  // [r][s][b]: the scale of block b0 + b of row s against input row r
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) {
      const __m256 weight_scale = load_scales8(weight_scales[s] + b0, group);
      SHARDLM_UNROLL
      for (int r = 0; r < R; ++r)
        _mm256_store_ps(combined[r][s], _mm256_mul_ps(weight_scale, load_scales8(input_scales[r] + b0, group)));
    }
    for (int64_t b = 0; b < group; ++b) {
      const int64_t k = (b0 + b) * block;
      if (b % 2 == 0)  // one line of each stream per two blocks
        SHARDLM_UNROLL
        for (int s = 0; s < S; ++s)
          prefetch_ahead(rows[s], byte_offset<D>(k));
      SHARDLM_UNROLL
      for (int s = 0; s < S; ++s) {
        // Elements k .. k + 15 and k + 16 .. k + 31 of the block as int16.
        __m256i low, high;
        if constexpr (D == DType::i4) {
          low = _mm256_cvtepi8_epi16(int4_half_block(rows[s], k, false));
          high = _mm256_cvtepi8_epi16(int4_half_block(rows[s], k, true));
        } else {
          low = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[s] + k)));
          high = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[s] + k + 16)));
        }
        SHARDLM_UNROLL
        for (int r = 0; r < R; ++r) {
          const __m256i sums = _mm256_add_epi32(
              _mm256_madd_epi16(low, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values[r] + k))),
              _mm256_madd_epi16(high, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values[r] + k + 16))));
          acc[r][s] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_broadcast_ss(&combined[r][s][b]), acc[r][s]);
        }
      }
    }
  }
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) out[r * out_stride + o + s * part] = horizontal_sum(acc[r][s]);
}

template <DType D>
void gemv_typed(const float* x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
                int64_t stride) {
  // Rows of x: f32 [in] (for bf16 weights, permuted), or pack_int8_gemv_input's rows.
  const int64_t row_floats = block_quantized<D> ? int8_gemv_row_floats(w.in) : w.in;
  for_gemv_row_groups(rows, [&](int64_t r, auto group) {
    constexpr int R = decltype(group)::value;
    const float* xr = x + r * row_floats;
    float* outr = out + r * stride;
    for_gemv_stream_tiles<D, R>(o_begin, o_end, [&]<int Streams>(int64_t o, int64_t part) {
      if constexpr (block_quantized<D>) gemv_int8_tile<D, R, Streams>(xr, row_floats, w, o, part, outr, stride);
      else gemv_tile<D, R, Streams>(xr, w, o, part, outr, stride);
    });
  });
}

// Tile t of x, rows [6t, 6t + 6) (past the end: zero), as k-major [k][6] floats, one
// 256-k block at a time: block k0 of every tile lies together ([k block][tile][k][6]),
// so the gemm reads a run of tiles at one k block as one forward stream.
int64_t packed_tile_offset(int64_t tiles, int64_t in, int64_t t, int64_t k0) {
  return k0 * tiles * micro_rows + t * std::min(k_block, in - k0) * micro_rows;
}

// Tile t's columns [k0 + k, k0 + kc) one by one: the ragged tail of a block, or every
// column of a tile past the last row (rows beyond it zero).
void pack_columns(const float* const* row, int64_t tile_rows, int64_t k0, int64_t k, int64_t kc, float* tile) {
  for (; k < kc; ++k)
    SHARDLM_UNROLL
    for (int64_t i = 0; i < micro_rows; ++i) tile[k * micro_rows + i] = i < tile_rows ? row[i][k0 + k] : 0.0f;
}

// A whole tile eight columns at a time: six row loads transposed in registers (two zero
// rows make the 8x8), each column stored as eight floats whose last two are the next
// column's slot, stored over next; the block's last column is stored as four and two,
// so nothing lands past the tile (the next one may be another task's). At -O2 the
// element-wise loop stays scalar: ~2% of a pp512 prefill.
void pack_full_tile(const float* const* row, int64_t k0, int64_t kc, float* tile) {
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    __m256 columns[8];
    SHARDLM_UNROLL
    for (int i = 0; i < micro_rows; ++i) columns[i] = _mm256_loadu_ps(row[i] + k0 + k);
    columns[6] = columns[7] = _mm256_setzero_ps();
    transpose8(columns);  // columns[j]: rows 0..5 (then two zeros) of column k + j
    SHARDLM_UNROLL
    for (int j = 0; j < 7; ++j) _mm256_storeu_ps(tile + (k + j) * micro_rows, columns[j]);
    float* last = tile + (k + 7) * micro_rows;
    if (k + 8 < kc) {
      _mm256_storeu_ps(last, columns[7]);
    } else {
      _mm_storeu_ps(last, _mm256_castps256_ps128(columns[7]));
      _mm_storel_pi(reinterpret_cast<__m64*>(last + 4), _mm256_extractf128_ps(columns[7], 1));
    }
  }
  pack_columns(row, micro_rows, k0, k, kc, tile);
}

void pack_input(const float* x, int64_t rows, int64_t in, DType, int64_t tile_begin, int64_t tile_end,
                float* packed) {
  const int64_t tiles = (rows + micro_rows - 1) / micro_rows;
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const int64_t tile_rows = std::min(micro_rows, rows - t * micro_rows);
    const float* row[micro_rows];
    for (int64_t i = 0; i < micro_rows; ++i) row[i] = x + (t * micro_rows + std::min(i, tile_rows - 1)) * in;
    for (int64_t k0 = 0; k0 < in; k0 += k_block) {
      float* tile = packed + packed_tile_offset(tiles, in, t, k0);
      const int64_t kc = std::min(k_block, in - k0);
      if (tile_rows == micro_rows) pack_full_tile(row, k0, kc, tile);
      else pack_columns(row, tile_rows, k0, 0, kc, tile);
    }
  }
}

// BLIS's loop order: per k block, the weight's 128 columns are packed (128 KB, in L2);
// then, for a block of input tiles small enough to stay in L2 beside them (144 rows x
// 256 k, 144 KB), each 16-column panel (16 KB) stays in L1 while every tile of the
// block streams past it. Wider column blocks reuse each input block more (one read
// from L3 per eight panels).
constexpr int64_t tiles_per_block = 24;

template <DType D>
void gemm_typed(const float* packed_x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
                int64_t stride) {
  // On the stack (128 KB): pool workers take tasks in no fixed order, and a per-thread
  // heap buffer would be allocated whenever a worker first meets a gemm, warm or not.
  alignas(64) float packed[k_block * column_block];
  const int64_t in = w.in, tiles = (rows + micro_rows - 1) / micro_rows;
  for (int64_t n0 = o_begin; n0 < o_end; n0 += column_block) {
    const int64_t columns = std::min(column_block, o_end - n0);
    const int64_t panels = (columns + panel_width - 1) / panel_width;
    for (int64_t k0 = 0; k0 < in; k0 += k_block) {
      const int64_t kc = std::min(k_block, in - k0);
      for (int64_t p = 0; p < panels; ++p)
        pack_panel<D>(w, n0 + p * panel_width, std::min(panel_width, columns - p * panel_width), k0, kc,
                      packed + p * k_block * panel_width);
      for (int64_t t0 = 0; t0 < tiles; t0 += tiles_per_block)
        for (int64_t p = 0; p < panels; ++p)
          for (int64_t t = t0; t < std::min(tiles, t0 + tiles_per_block); ++t)
            micro_kernel_rows<InputLayout::packed_tile>(
                std::min(micro_rows, rows - t * micro_rows), packed_x + packed_tile_offset(tiles, in, t, k0), 0,
                packed + p * k_block * panel_width, panel_width, kc, out + t * micro_rows * stride + n0 + p * panel_width,
                stride, std::min(panel_width, columns - p * panel_width), k0 > 0);
    }
  }
}

void gemv(const float* x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
          int64_t stride) {
  with_dtype(w.dtype, [&](auto dtype) { gemv_typed<dtype.value>(x, rows, w, o_begin, o_end, out, stride); });
}

void gemm(const float* x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
          int64_t stride) {
  with_dtype(w.dtype, [&](auto dtype) { gemm_typed<dtype.value>(x, rows, w, o_begin, o_end, out, stride); });
}

int64_t gemv_input_row_floats(DType weight_dtype, int64_t in) {
  if (weight_dtype == DType::i8 || weight_dtype == DType::i4) return int8_gemv_row_floats(in);
  return weight_dtype == DType::bf16 ? in : 0;
}

void pack_gemv_input(const float* x, int64_t rows, int64_t in, DType weight_dtype, float* packed) {
  if (weight_dtype == DType::i8 || weight_dtype == DType::i4) pack_int8_gemv_input(x, rows, in, packed);
  else if (weight_dtype == DType::bf16) pack_bf16_gemv_input(x, rows, in, packed);
}

}  // namespace

namespace {

// Built only once the CPU check has passed: its code may use this file's instructions.
[[gnu::noinline]] const CpuKernels& table() {
  static const CpuKernels kernels{.isa = "avx2", .gemv = gemv, .gemm = gemm, .pack_input = pack_input,
                                  .input_tile_rows = micro_rows, .gemm_column_block = column_block,
                                  .pack_gemv_input = pack_gemv_input,
                                  .gemv_input_row_floats = gemv_input_row_floats,
                                  .decode_blocks = decode_ggml_blocks, .gemv_blocks = ggml_blocks_gemv,
                                  .rows = row_kernels,
                                  .flash_block = avx2_flash_block,
                                  .decode_attention = avx2_decode_attention};
  return kernels;
}

}  // namespace

const CpuKernels* avx2_cpu_kernels() { return cpu_has_avx2_fma_f16c() ? &table() : nullptr; }

}  // namespace shardlm::backends::cpu
