// The int8 and int4 prefill and the int4 decode (at the end of this file) of the AVX512-BF16
// table (AMD Zen 4, Intel Cooper Lake and later, all of which have AVX512_VNNI). The prefill:
// int8 weights, or int4 ones unpacked to int8 as their panels are packed (an f16 scale s a
// 32-weight block), against the activations rounded to int8 per
// 32-element block (a scale d each: llama.cpp's Q8_0 activations), by VPDPBUSD, which adds
// four byte products to an int32 lane: four times an f32 FMA's multiply-adds an instruction.
// Each block's int32 sums are scaled into f32:
//   y[r, o] = sum over blocks b of s[o, b] d[r, b] sum over k in b of q[o, k] xq[r, k].
// Rounding the activations to 8 bits is what this costs: up to d / 2 per element (1/254
// of the block's largest), against the f32 FMAs' exact products; tests/backends holds the
// table to that bound.
//
// VPDPBUSD multiplies unsigned by signed bytes: the weights go in as q + 128 (q ^ 0x80,
// as u8) and each block's sums start at -128 sum over k of xq[r, k], kept with the input.
//
// Layouts. Input tile t (12 rows), k block k0 of kc: [kc / 4][12] dwords of four s8 (k
// quads), then [kc / 32][12] f32 scales d, then [kc / 32][12] int32 starts. Weight panel
// (32 columns, one k block): [kc / 4][32] dwords of four u8 (sixteen rows' 64-byte runs
// transposed as 32-bit elements), then [kc / 32][32] f32 scales s.
#include "backends/cpu/avx512_vnni_gemm.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "backends/cpu/avx512_gemm.h"
#include "core/dtype.h"

namespace shardlm::backends::cpu::avx512_vnni {
namespace {

using avx512::micro_rows;
constexpr int64_t block = Tensor::quant_block, quads_per_block = block / 4;
constexpr int64_t panel_width = 32, k_block = 512, column_block = 128;
constexpr int64_t kernel_rows = 6;  // rows a micro-kernel call takes: half a tile
using avx512::PrefetchInto;

// Dwords of one tile's k block: quads, scales, starts.
constexpr int64_t tile_block_dwords(int64_t kc) { return (kc / 4 + 2 * (kc / block)) * micro_rows; }
// Dwords of one panel's k block: quads, scales.
constexpr int64_t panel_dwords(int64_t kc) { return (kc / 4 + kc / block) * panel_width; }

// Where tile t's k block k0 starts: [k block][tile][...], in dwords.
int64_t packed_tile_offset(int64_t tiles, int64_t in, int64_t t, int64_t k0) {
  return tiles * tile_block_dwords(k0) + t * tile_block_dwords(std::min(k_block, in - k0));
}

// Row x[0, kc) rounded per 32-element block as column i of a tile's k block: quads, the
// blocks' scales d and their sums' starts (-128 times the sum of the block's xq).
void pack_row(const float* x, int64_t kc, int64_t i, uint32_t* tile) {
  auto* scales = reinterpret_cast<float*>(tile + kc / 4 * micro_rows);
  auto* starts = reinterpret_cast<int32_t*>(tile + (kc / 4 + kc / block) * micro_rows);
  alignas(64) int8_t rounded[block];
  for (int64_t b = 0; b < kc / block; ++b) {
    const __m512 low = _mm512_loadu_ps(x + b * block), high = _mm512_loadu_ps(x + b * block + 16);
    const float largest = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(low), _mm512_abs_ps(high)));
    const float d = largest / 127.0f, inverse = largest > 0 ? 127.0f / largest : 0.0f;
    const __m512i q_low = _mm512_cvtps_epi32(_mm512_mul_ps(low, _mm512_set1_ps(inverse)));
    const __m512i q_high = _mm512_cvtps_epi32(_mm512_mul_ps(high, _mm512_set1_ps(inverse)));
    _mm_store_si128(reinterpret_cast<__m128i*>(rounded), _mm512_cvtsepi32_epi8(q_low));
    _mm_store_si128(reinterpret_cast<__m128i*>(rounded + 16), _mm512_cvtsepi32_epi8(q_high));
    scales[b * micro_rows + i] = d;
    starts[b * micro_rows + i] = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(q_low, q_high));
    for (int64_t q = 0; q < quads_per_block; ++q) {
      uint32_t quad;
      std::memcpy(&quad, rounded + 4 * q, 4);
      tile[(b * quads_per_block + q) * micro_rows + i] = quad;
    }
  }
}

// 64 int4 weights of a row from element k (two whole blocks; one where `left` < 64) as u8
// q + 128: a block's 16 bytes hold its values 0 - 15 in the low nibbles and 16 - 31 in the
// high ones, each q + 8 (core/quantize.h), so the nibbles of both blocks are put in order.
inline __m512i int4_as_u8(const uint8_t* row, int64_t k, int64_t left) {
  const auto mask = static_cast<__mmask32>(left >= 64 ? ~0u : (1u << (left / 2)) - 1);
  const __m256i bytes = _mm256_maskz_loadu_epi8(mask, row + k / 2);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i low = _mm256_and_si256(bytes, nibble), high = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble);
  const __m512i halves = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);  // 128-bit lanes: l0 l1 h0 h1
  return _mm512_add_epi8(_mm512_shuffle_i64x2(halves, halves, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(120));
}

// Weight columns [n0, n0 + width) (width <= 32, zero past it), k [k0, k0 + kc), of int8 or
// int4 weights as the panel [kc / 4][32] dwords of u8 quads (q + 128), then its scales
// [kc / 32][32] f32.
void pack_panel(const WeightView& w, int64_t n0, int64_t width, int64_t k0, int64_t kc, uint32_t* panel) {
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  avx512::transpose_into_panel(
      width, kc / 4,
      [&](int64_t column, int64_t quad) {
        const int64_t left = kc - 4 * quad;  // values of the row in this k block from the quad on
        if (w.dtype == DType::i4)
          return int4_as_u8(static_cast<const uint8_t*>(row_pointer<DType::i4>(w, n0 + column)), k0 + 4 * quad, left);
        const auto bytes = static_cast<__mmask64>(left >= 64 ? ~0ull : (1ull << left) - 1);
        const auto* row = static_cast<const int8_t*>(row_pointer<DType::i8>(w, n0 + column));
        return _mm512_xor_si512(_mm512_maskz_loadu_epi8(bytes, row + k0 + 4 * quad), offset);
      },
      panel);
  auto* scales = reinterpret_cast<float*>(panel + kc / 4 * panel_width);
  for (int64_t b = 0; b < kc / block; ++b)
    for (int64_t column = 0; column < panel_width; ++column)
      scales[b * panel_width + column] =
          column < width ? f16_to_f32(w.block_scales[(n0 + column) * (w.in / block) + (k0 / block + b)]) : 0.0f;
}

// M <= 6 rows of a tile (from row `first`) against a 32-column panel over `blocks`
// 32-element blocks: per block, 8 quad steps of VPDPBUSD into int32 sums that start at the
// row's start, then those scaled by d (the row's) and s (the column's) into the f32 sums.
// Then c[i, 0..width) (+)= the f32 sums.
template <int M>
void micro_kernel(const uint32_t* tile, int64_t first, const uint32_t* panel, int64_t blocks, float* c, int64_t ldc,
                  int64_t width, bool accumulate) {
  const uint32_t* quads = tile + first;
  const auto* row_scales = reinterpret_cast<const float*>(tile + blocks * quads_per_block * micro_rows) + first;
  const auto* row_starts =
      reinterpret_cast<const int32_t*>(tile + blocks * (quads_per_block + 1) * micro_rows) + first;
  const auto* column_scales = reinterpret_cast<const float*>(panel + blocks * quads_per_block * panel_width);
  __m512 low[M], high[M];
  SHARDLM_UNROLL
  for (int i = 0; i < M; ++i) low[i] = high[i] = _mm512_setzero_ps();
  if (accumulate) avx512::prefetch_sums<M>(c, ldc);
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i dots_low[M], dots_high[M];
    SHARDLM_UNROLL
    for (int i = 0; i < M; ++i) dots_low[i] = dots_high[i] = _mm512_set1_epi32(row_starts[b * micro_rows + i]);
    SHARDLM_UNROLL
    for (int step = 0; step < quads_per_block; ++step) {
      const int64_t s = b * quads_per_block + step;
      const __m512i w0 = _mm512_load_si512(panel + s * panel_width);
      const __m512i w1 = _mm512_load_si512(panel + s * panel_width + 16);
      SHARDLM_UNROLL
      for (int i = 0; i < M; ++i) {
        const __m512i x = _mm512_set1_epi32(static_cast<int>(quads[s * micro_rows + i]));
        dots_low[i] = _mm512_dpbusd_epi32(dots_low[i], w0, x);
        dots_high[i] = _mm512_dpbusd_epi32(dots_high[i], w1, x);
      }
    }
    const __m512 s0 = _mm512_load_ps(column_scales + b * panel_width);
    const __m512 s1 = _mm512_load_ps(column_scales + b * panel_width + 16);
    SHARDLM_UNROLL
    for (int i = 0; i < M; ++i) {
      const __m512 d = _mm512_set1_ps(row_scales[b * micro_rows + i]);
      low[i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dots_low[i]), d), s0, low[i]);
      high[i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dots_high[i]), d), s1, high[i]);
    }
  }
  avx512::store_sums<M>(low, high, c, ldc, width, accumulate);
}

template <int... M>
void micro_kernel_rows(std::integer_sequence<int, M...>, int64_t rows, const uint32_t* tile, int64_t first,
                       const uint32_t* panel, int64_t blocks, float* c, int64_t ldc, int64_t width, bool accumulate) {
  ((rows == M + 1 ? micro_kernel<M + 1>(tile, first, panel, blocks, c, ldc, width, accumulate) : void()), ...);
}

// The int4 gemv, with the prefill's int8 activations: VPDPBUSD's 64 products an instruction
// need no widening of the weights, where the AVX-512 table's VPMADDWD over int16 activations
// widens them to 16 bits first; one thread's ceiling (kernel_bench, L2-resident weights)
// doubles, so two threads read int4 weights as fast as memory gives them
// (docs/PERFORMANCE.md). Four blocks make a step: their 64 weight bytes (byte i of block j holds
// its values i and i + 16 as q + 8, core/quantize.h) split into the low nibbles and the
// high ones, each 64 u8 against 64 int8 activations by one VPDPBUSD, whose int32 lane L then
// sums block L / 4's products. A packed input row: per group of four blocks, the
// activations of their values 0 - 15 (block by block), then of 16 - 31 (128 bytes); the rows
// padded with zeros to whole groups; then each block's scale d, then -8 times the sum of
// its int8 activations (the weights' offset), as f32:
//   y[r, o] = sum over blocks b of s[o, b] d[r, b] (sum over k in b of u[o, k] xq[r, k] - 8 sum xq[r, b]).
constexpr int64_t step_blocks = 4;
int64_t padded_values(int64_t in) { return (in / block + step_blocks - 1) / step_blocks * step_blocks * block; }

// Output rows o + s * part (s < S) against R input rows, as for_gemv_stream_tiles
// lays them out; each step reads one 64-byte line of each weight stream.
template <int R, int S, PrefetchInto Into>
void int4_tile(const float* packed_x, int64_t row_floats, const WeightView& w, int64_t o, int64_t part, float* out,
               int64_t stride) {
  const int64_t blocks = w.in / block, padded = padded_values(w.in);
  const uint8_t* rows[S];
  const uint16_t* weight_scales[S];
  SHARDLM_UNROLL
  for (int s = 0; s < S; ++s) {
    rows[s] = static_cast<const uint8_t*>(w.data) + (o + s * part) * (w.in / 2);
    weight_scales[s] = w.block_scales + (o + s * part) * blocks;
  }
  const int8_t* values[R];
  const float *scales[R], *offsets[R];
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r) {
    values[r] = reinterpret_cast<const int8_t*>(packed_x + r * row_floats);
    scales[r] = packed_x + r * row_floats + padded / 4;
    offsets[r] = scales[r] + padded / block;
  }
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  // Lane L takes block L / 4 of a step.
  const __m512i step_lanes =
      _mm512_srli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 2);
  __m512 acc[R][S];
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) acc[r][s] = _mm512_setzero_ps();
  for (int64_t b0 = 0; b0 < blocks; b0 += 16) {
    const int64_t group = std::min<int64_t>(16, blocks - b0);
    const __mmask16 mask = avx512::first_lanes(group);
    __m512 combined[R][S];  // lane b: s[o + s * part, b0 + b] d[r, b0 + b]
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) {
      const __m512 weight_scale = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, weight_scales[s] + b0));
      SHARDLM_UNROLL
      for (int r = 0; r < R; ++r) {
        combined[r][s] = _mm512_mul_ps(weight_scale, _mm512_maskz_loadu_ps(mask, scales[r] + b0));
        acc[r][s] = _mm512_fmadd_ps(combined[r][s], _mm512_maskz_loadu_ps(mask, offsets[r] + b0), acc[r][s]);
      }
    }
    // A step of four blocks, the last of a row's possibly fewer: only that one masks its
    // loads, as a mask worked out every step cost a sixth of the kernel's time.
    const auto step = [&]<bool Whole>(int64_t b, std::bool_constant<Whole>) {
      const int64_t first = b0 + b;
      const __mmask64 bytes_mask = Whole ? ~0ull : (1ull << (16 * (blocks - first))) - 1;
      const __m512i lanes = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(b)), step_lanes);
      SHARDLM_UNROLL
      for (int s = 0; s < S; ++s) {
        avx512::prefetch_ahead<Into>(rows[s], first * 16);
        const __m512i bytes = Whole ? _mm512_loadu_si512(rows[s] + first * 16)
                                    : _mm512_maskz_loadu_epi8(bytes_mask, rows[s] + first * 16);
        const __m512i low = _mm512_and_si512(bytes, low_nibbles);
        const __m512i high = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low_nibbles);
        SHARDLM_UNROLL
        for (int r = 0; r < R; ++r) {
          const int8_t* x = values[r] + first * block;
          __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), low, _mm512_loadu_si512(x));
          sums = _mm512_dpbusd_epi32(sums, high, _mm512_loadu_si512(x + 64));
          acc[r][s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_permutexvar_ps(lanes, combined[r][s]),
                                      acc[r][s]);
        }
      }
    };
    int64_t b = 0;
    for (; b + step_blocks <= group; b += step_blocks) step(b, std::true_type{});
    if (b < group) step(b, std::false_type{});
  }
  SHARDLM_UNROLL
  for (int r = 0; r < R; ++r)
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) out[r * stride + o + s * part] = _mm512_reduce_add_ps(acc[r][s]);
}

}  // namespace

int64_t int4_gemv_row_floats(int64_t in) { return padded_values(in) / 4 + 2 * (padded_values(in) / block); }

void pack_int4_gemv_input(const float* x, int64_t rows, int64_t in, float* packed) {
  const int64_t padded = padded_values(in), blocks = in / block;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = packed + r * int4_gemv_row_floats(in);
    auto* values = reinterpret_cast<int8_t*>(row);
    float* scales = row + padded / 4;
    float* offsets = scales + padded / block;
    for (int64_t b = 0; b < padded / block; ++b) {
      int8_t* low = values + (b / step_blocks) * step_blocks * block + (b % step_blocks) * 16;
      int8_t* high = low + step_blocks * 16;
      if (b >= blocks) {
        std::memset(low, 0, 16);
        std::memset(high, 0, 16);
        scales[b] = offsets[b] = 0;
        continue;
      }
      const float* values_of_block = x + r * in + b * block;
      const __m512 first = _mm512_loadu_ps(values_of_block), second = _mm512_loadu_ps(values_of_block + 16);
      const float largest = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(first), _mm512_abs_ps(second)));
      const float inverse = largest > 0 ? 127.0f / largest : 0.0f;
      const __m512i q_first = _mm512_cvtps_epi32(_mm512_mul_ps(first, _mm512_set1_ps(inverse)));
      const __m512i q_second = _mm512_cvtps_epi32(_mm512_mul_ps(second, _mm512_set1_ps(inverse)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(low), _mm512_cvtsepi32_epi8(q_first));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(high), _mm512_cvtsepi32_epi8(q_second));
      scales[b] = largest / 127.0f;
      offsets[b] = static_cast<float>(-8 * _mm512_reduce_add_epi32(_mm512_add_epi32(q_first, q_second)));
    }
  }
}

void int4_gemv(const float* packed_x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
               int64_t stride) {
  const int64_t row_floats = int4_gemv_row_floats(w.in);
  avx512::with_prefetch_target([&](auto into) {
    for_gemv_row_groups(rows, [&](int64_t r, auto group) {
      constexpr int R = decltype(group)::value;
      for_gemv_stream_tiles<DType::i4, R>(o_begin, o_end, [&]<int Streams>(int64_t o, int64_t part) {
        int4_tile<R, Streams, into.value>(packed_x + r * row_floats, row_floats, w, o, part, out + r * stride, stride);
      });
    });
  });
}

bool cpu_runs_vnni() {
  static const bool runs = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return cpu_has_avx512() && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 11)) != 0;
  }();
  return runs;
}

bool runs_on_quads(DType weight_dtype, int64_t in) {
  return (weight_dtype == DType::i8 || weight_dtype == DType::i4) && in % block == 0;
}

void pack_input(const float* x, int64_t rows, int64_t in, int64_t tile_begin, int64_t tile_end, float* packed) {
  auto* dwords = reinterpret_cast<uint32_t*>(packed);
  const int64_t tiles = (rows + micro_rows - 1) / micro_rows;
  for (int64_t t = tile_begin; t < tile_end; ++t)
    for (int64_t k0 = 0; k0 < in; k0 += k_block) {
      const int64_t kc = std::min(k_block, in - k0);
      uint32_t* tile = dwords + packed_tile_offset(tiles, in, t, k0);
      for (int64_t i = 0; i < micro_rows; ++i) {
        const int64_t r = t * micro_rows + i;
        if (r < rows) {
          pack_row(x + r * in + k0, kc, i, tile);
        } else {  // zero quads, scales and starts
          for (int64_t j = 0; j < tile_block_dwords(kc) / micro_rows; ++j) tile[j * micro_rows + i] = 0;
        }
      }
    }
}

void gemm(const float* packed_x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
          int64_t stride) {
  alignas(64) uint32_t packed[panel_dwords(k_block) * (column_block / panel_width)];  // on the stack, 72 KB
  const auto* x = reinterpret_cast<const uint32_t*>(packed_x);
  const int64_t in = w.in, tiles = (rows + micro_rows - 1) / micro_rows;
  avx512::for_gemm_blocks(
      tiles, in, o_begin, o_end, k_block, column_block,
      [&](int64_t p, int64_t n, int64_t width, int64_t k0, int64_t kc) {
        pack_panel(w, n, width, k0, kc, packed + p * panel_dwords(kc));
      },
      [&](int64_t t, int64_t p, int64_t n, int64_t width, int64_t k0, int64_t kc) {
        const uint32_t* tile = x + packed_tile_offset(tiles, in, t, k0);
        for (int64_t first = 0; first < std::min(micro_rows, rows - t * micro_rows); first += kernel_rows)
          micro_kernel_rows(std::make_integer_sequence<int, kernel_rows>{},
                            std::min(kernel_rows, rows - t * micro_rows - first), tile, first,
                            packed + p * panel_dwords(kc), kc / block, out + (t * micro_rows + first) * stride + n,
                            stride, width, k0 > 0);
      });
}

}  // namespace shardlm::backends::cpu::avx512_vnni
