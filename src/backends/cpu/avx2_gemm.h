#pragma once
// AVX2/FMA/F16C building blocks shared by the kernels compiled with those
// instructions (matmul_avx2.cpp, attention_avx2.cpp). Include only from such files.

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/kernel_table.h"
#include "backends/cpu/vector_math.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/quantize.h"

// Register tiles live in small arrays indexed by compile-time loops; fully unrolled,
// they stay in registers (GCC's -O2 would keep some loops and spill the arrays).
#define SHARDLM_UNROLL _Pragma("GCC unroll 16")

namespace shardlm::backends::cpu {

// Whether this CPU runs what these kernels use. F16C is read from CPUID directly:
// clang's __builtin_cpu_supports does not know it. Asked once: under a hypervisor
// CPUID traps to it (~20 us here), and attention asks on every op.
inline bool cpu_has_avx2_fma_f16c() {
  static const bool supported = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return supported;
}

}  // namespace shardlm::backends::cpu

namespace shardlm::backends::cpu::avx2 {

constexpr int64_t block = Tensor::quant_block;

// Calls body(std::integral_constant<DType, dtype>) for the weight's dtype.
template <typename Body>
void with_dtype(DType dtype, Body body) {
  switch (dtype) {
    case DType::f32: return body(std::integral_constant<DType, DType::f32>{});
    case DType::bf16: return body(std::integral_constant<DType, DType::bf16>{});
    case DType::f16: return body(std::integral_constant<DType, DType::f16>{});
    case DType::i4: return body(std::integral_constant<DType, DType::i4>{});
    case DType::i8: return body(std::integral_constant<DType, DType::i8>{});
    default: fail("the matmul kernels take f32, bf16, f16, int8 or int4 weights, not ", dtype_name(dtype));
  }
}

// Weights of block-quantized integers with f16 block scales: int8, or int4 two a byte.
template <DType D>
constexpr bool block_quantized = D == DType::i8 || D == DType::i4;

// Bytes per weight element of dtype D, known at compile time (dtype_size is not); int4,
// half a byte, is handled where it is read.
template <DType D>
constexpr int64_t element_bytes = D == DType::f32 ? 4 : D == DType::i8 || D == DType::i4 ? 1 : 2;

template <DType D>
inline const void* row_pointer(const WeightView& w, int64_t row) {
  if constexpr (D == DType::i4) return static_cast<const std::byte*>(w.data) + row * w.in / 2;
  return static_cast<const std::byte*>(w.data) + row * w.in * element_bytes<D>;
}

// Byte offset of element k (a whole block's start for int4) in a row of dtype D.
template <DType D>
constexpr int64_t byte_offset(int64_t k) {
  return D == DType::i4 ? k / 2 : k * element_bytes<D>;
}

// Sixteen int4 values of a block (elements 0..15 or 16..31: `high`), as int8 in [-8, 7].
inline __m128i int4_half_block(const void* row, int64_t block_start, bool high) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(row) + block_start / 2));
  const __m128i nibbles = high ? _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0F))
                               : _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
  return _mm_sub_epi8(nibbles, _mm_set1_epi8(8));
}

// Eight consecutive weights of a row from element k, as f32 (int8: unscaled).
template <DType D>
inline __m256 load8(const void* row, int64_t k) {
  if constexpr (D == DType::f32) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + k);
  } else if constexpr (D == DType::bf16) {
    __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
  } else if constexpr (D == DType::f16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + k)));
  } else if constexpr (D == DType::i4) {  // k a multiple of 8: eight values from one half of a block
    const __m128i half = int4_half_block(row, k / block * block, k % block >= 16);
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(k % 16 ? _mm_srli_si128(half, 8) : half));
  } else {
    __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const int8_t*>(row) + k));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
  }
}

template <DType D>
inline float load1(const void* row, int64_t k) {
  if constexpr (D == DType::f32) return static_cast<const float*>(row)[k];
  else if constexpr (D == DType::bf16) return bf16_to_f32(static_cast<const uint16_t*>(row)[k]);
  else if constexpr (D == DType::f16) return f16_to_f32(static_cast<const uint16_t*>(row)[k]);
  else if constexpr (D == DType::i4) return static_cast<float>(int4_value(static_cast<const uint8_t*>(row), k));
  else return static_cast<float>(static_cast<const int8_t*>(row)[k]);
}

inline float horizontal_sum(__m256 v) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return _mm_cvtss_f32(sum);
}

// e^x for eight lanes (vector_math.h).
inline __m256 exp8(__m256 x) { return exp_lanes(x); }

inline float horizontal_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// How far ahead of its reads the gemv prefetches each weight stream, one line per 64
// bytes read. A stream's loads alone keep only as many lines in flight as the
// out-of-order window holds iterations of the loop (~6 instructions per 32 bytes of
// bf16 weights, ~10 of int8), short of the read bandwidth on a core whose memory is
// ~100 ns away; hardware prefetch did not make up the rest here. 1 KB ahead, against
// none, at two threads on Zen 3 (bench/weight_stream, kernels' speed over bare reads of
// the same bytes): bf16 0.88 -> 1.04, f16 0.85 -> 0.98, f32 0.97 -> 1.05 (512 B and 2 KB
// gained less); int8, against the read probe, 0.86 -> 0.94.
// The hint is T1 (into L2, not L1): Zen 4 honours it, and there T0's lines, held in
// L1 until used, left bf16 and f16 at 0.74 - 0.87 of a bare read (bf16 at T1: 0.97;
// bf16 decode 19.0 - 21.6 -> 23.7 - 24.2 tok/s, f16 19.7 - 22.3 -> 21.4 - 27.7, int8
// 37.9 - 41.3 -> 40.0 - 43.4, alternating builds). On Zen 3 the matmuls alone read ~3.5%
// slower with T1 (weight_stream, 0.93 of a bare read against T0's 0.97), yet bf16
// decode tokens ran ~6% faster (19.0 against 17.8 tok/s, seven alternating pairs).
constexpr int64_t gemv_prefetch_bytes = 1024;

inline void prefetch_ahead(const void* row, int64_t byte_offset) {
  _mm_prefetch(static_cast<const char*>(row) + byte_offset + gemv_prefetch_bytes, _MM_HINT_T1);
}

// The streams an int8 (or int4) gemv tile reads: S weight rows `part` apart from row o
// with their f16 block scales, and R activation rows of `row_floats` floats in
// pack_int8_gemv_input's layout (`in` int16 values, then one f32 scale per block).
template <int R, int S, DType D = DType::i8>
struct Int8TileStreams {
  const uint8_t* rows[S];
  const uint16_t* weight_scales[S];
  const int16_t* values[R];
  const float* input_scales[R];

  Int8TileStreams(const float* packed_x, int64_t row_floats, const WeightView& w, int64_t o, int64_t part) {
    const int64_t blocks = w.in / block;
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) {
      rows[s] = static_cast<const uint8_t*>(row_pointer<D>(w, o + s * part));
      weight_scales[s] = w.block_scales + (o + s * part) * blocks;
    }
    SHARDLM_UNROLL
    for (int r = 0; r < R; ++r) {
      values[r] = reinterpret_cast<const int16_t*>(packed_x + r * row_floats);
      input_scales[r] = packed_x + r * row_floats + w.in / 2;
    }
  }
};

// Calls body(first_row, std::integral_constant<int, R>) for each group of R <= gemv_max_rows
// input rows of a gemv, so that its kernels are compiled for each row count.
template <typename Body>
void for_gemv_row_groups(int64_t rows, Body body) {
  for (int64_t r = 0; r < rows; r += gemv_max_rows) switch (std::min(rows - r, gemv_max_rows)) {
      case 1: body(r, std::integral_constant<int, 1>{}); break;
      case 2: body(r, std::integral_constant<int, 2>{}); break;
      case 3: body(r, std::integral_constant<int, 3>{}); break;
      default: body(r, std::integral_constant<int, 4>{}); break;
    }
}

// Output rows [o_begin, o_end) of a gemv over R input rows as S parts read side by side,
// then the rows left over one at a time: tile.template operator()<Streams>(o, part)
// computes rows o + s * part for s < Streams. About six streams a core read fastest on
// Zen 3 (sixteen read ~15% less) for f32 and f16; the bf16 loop, with fewer instructions
// per byte, read ~3% faster at two threads with four than with six (two: ~10% slower);
// int8 rows come with a stream of scales each, so three parts; int4, half the bytes a
// block, four (no slower than three on Zen 4). Fewer parts at more input
// rows, as each needs R accumulators. The AVX-512 gemv reads the same way: on Sapphire
// Rapids two to six int8 streams could not be told apart.
template <DType D, int R, typename Tile>
void for_gemv_stream_tiles(int64_t o_begin, int64_t o_end, Tile tile) {
  constexpr int S = D == DType::i4     ? (R <= 2 ? 4 : 2)
                    : D == DType::i8   ? (R <= 2 ? 3 : 2)
                    : D == DType::bf16 ? (R <= 2 ? 4 : 3)
                                       : (R == 1 ? 6 : R == 2 ? 4 : 3);
  const int64_t part = (o_end - o_begin) / S;
  for (int64_t o = o_begin; o < o_begin + part; ++o) tile.template operator()<S>(o, part);
  for (int64_t o = o_begin + S * part; o < o_end; ++o) tile.template operator()<1>(o, 0);
}

constexpr int64_t micro_rows = 6, panel_width = 16, k_block = 256, column_block = 128;

// Elements [k0, k0 + count) of weight row `row`, as f32 with int8 scales applied.
template <DType D>
inline void widen_row(const WeightView& w, int64_t row, int64_t k0, int64_t count, float* destination) {
  const void* source = row_pointer<D>(w, row);
  int64_t k = 0;
  if constexpr (block_quantized<D>) {
    const uint16_t* scales = w.block_scales + row * (w.in / block);
    for (; k < count; k += 8) {  // k0 and count are multiples of the block size
      const __m256 scale = _mm256_set1_ps(_cvtsh_ss(scales[(k0 + k) / block]));
      _mm256_storeu_ps(destination + k, _mm256_mul_ps(load8<D>(source, k0 + k), scale));
    }
    return;
  }
  for (; k + 8 <= count; k += 8) _mm256_storeu_ps(destination + k, load8<D>(source, k0 + k));
  for (; k < count; ++k) destination[k] = load1<D>(source, k0 + k);
}

// Transposes the 8x8 block held in rows[0..8).
inline void transpose8(__m256 rows[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(rows[0], rows[1]), t1 = _mm256_unpackhi_ps(rows[0], rows[1]);
  const __m256 t2 = _mm256_unpacklo_ps(rows[2], rows[3]), t3 = _mm256_unpackhi_ps(rows[2], rows[3]);
  const __m256 t4 = _mm256_unpacklo_ps(rows[4], rows[5]), t5 = _mm256_unpackhi_ps(rows[4], rows[5]);
  const __m256 t6 = _mm256_unpacklo_ps(rows[6], rows[7]), t7 = _mm256_unpackhi_ps(rows[6], rows[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)), s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)), s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  rows[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  rows[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  rows[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  rows[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  rows[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  rows[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  rows[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  rows[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// packed[k][j] = weight[n0 + j, k0 + k] for j < width, zero for width <= j < Width (a
// multiple of 8: 16 for this file's micro-kernel, 32 for the AVX-512 one): 8x8 blocks
// widened in registers and transposed, the k tail element by element.
template <DType D, int64_t Width = panel_width>
inline void pack_panel(const WeightView& w, int64_t n0, int64_t width, int64_t k0, int64_t kc, float* packed) {
  const int64_t vector_k = kc / 8 * 8;
  for (int64_t j0 = 0; j0 < Width; j0 += 8) {
    const void* rows[8];
    const uint16_t* scales[8];
    for (int64_t j = 0; j < 8; ++j) {
      rows[j] = j0 + j < width ? row_pointer<D>(w, n0 + j0 + j) : nullptr;
      if constexpr (block_quantized<D>) scales[j] = rows[j] ? w.block_scales + (n0 + j0 + j) * (w.in / block) : nullptr;
    }
    for (int64_t k = 0; k < vector_k; k += 8) {
      __m256 block8[8];
      SHARDLM_UNROLL
      for (int j = 0; j < 8; ++j) {
        block8[j] = rows[j] ? load8<D>(rows[j], k0 + k) : _mm256_setzero_ps();
        if constexpr (block_quantized<D>)
          if (rows[j]) block8[j] = _mm256_mul_ps(block8[j], _mm256_set1_ps(_cvtsh_ss(scales[j][(k0 + k) / block])));
      }
      transpose8(block8);
      SHARDLM_UNROLL
      for (int i = 0; i < 8; ++i) _mm256_store_ps(packed + (k + i) * Width + j0, block8[i]);
    }
    for (int64_t k = vector_k; k < kc; ++k)  // int8 and int4 rows are whole blocks: no tail there
      for (int64_t j = 0; j < 8; ++j) packed[k * Width + j0 + j] = rows[j] ? load1<D>(rows[j], k0 + k) : 0.0f;
  }
}

// Where the micro-kernel reads a[i, k]: rows of a at stride lda (a row-major matrix
// read in place), or a tile that the gemm's pack_input laid out k-major, [k][micro_rows].
enum class InputLayout { rows, packed_tile };

// c[i, 0..width) (+)= a[i, 0..kc) . panel[0..kc, 0..16) for M rows of a; panel rows
// (16 floats each) at stride ldb: 16 for a packed panel, a row length to read a
// row-major [k][n] matrix in place.
template <int M, InputLayout layout>
void micro_kernel(const float* a, int64_t lda, const float* panel, int64_t ldb, int64_t kc, float* c, int64_t ldc,
                  int64_t width, bool accumulate) {
  __m256 low[M], high[M];
  SHARDLM_UNROLL
  for (int i = 0; i < M; ++i) low[i] = high[i] = _mm256_setzero_ps();
  // The tile of c this call adds to was last touched a whole k block ago and has left
  // L2 since: fetched now, it arrives while the FMAs run (the gemms of a pp512 layer,
  // in-process A/B: 2 - 4% faster at one thread, within the noise at two).
  if (accumulate)
    SHARDLM_UNROLL
    for (int i = 0; i < M; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
  // Unrolled: a step's four bookkeeping instructions would otherwise take dispatch
  // slots from the twelve FMAs (this 6x16 kernel alone: ~90% of one core's FMA peak
  // unrolled, ~80% not, on Zen 3).
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(panel + k * ldb);
    const __m256 b1 = _mm256_loadu_ps(panel + k * ldb + 8);
    SHARDLM_UNROLL
    for (int i = 0; i < M; ++i) {
      const __m256 value =
          _mm256_broadcast_ss(layout == InputLayout::rows ? a + i * lda + k : a + k * micro_rows + i);
      low[i] = _mm256_fmadd_ps(value, b0, low[i]);
      high[i] = _mm256_fmadd_ps(value, b1, high[i]);
    }
  }
  SHARDLM_UNROLL
  for (int i = 0; i < M; ++i) {
    float* row = c + i * ldc;
    if (width == panel_width) {
      if (accumulate) {
        low[i] = _mm256_add_ps(low[i], _mm256_loadu_ps(row));
        high[i] = _mm256_add_ps(high[i], _mm256_loadu_ps(row + 8));
      }
      _mm256_storeu_ps(row, low[i]);
      _mm256_storeu_ps(row + 8, high[i]);
    } else {
      alignas(32) float tile[panel_width];
      _mm256_store_ps(tile, low[i]);
      _mm256_store_ps(tile + 8, high[i]);
      for (int64_t j = 0; j < width; ++j) row[j] = accumulate ? row[j] + tile[j] : tile[j];
    }
  }
}

template <InputLayout layout = InputLayout::rows>
inline void micro_kernel_rows(int64_t rows, const float* a, int64_t lda, const float* panel, int64_t ldb, int64_t kc,
                              float* c, int64_t ldc, int64_t width, bool accumulate) {
  switch (rows) {
    case 1: micro_kernel<1, layout>(a, lda, panel, ldb, kc, c, ldc, width, accumulate); break;
    case 2: micro_kernel<2, layout>(a, lda, panel, ldb, kc, c, ldc, width, accumulate); break;
    case 3: micro_kernel<3, layout>(a, lda, panel, ldb, kc, c, ldc, width, accumulate); break;
    case 4: micro_kernel<4, layout>(a, lda, panel, ldb, kc, c, ldc, width, accumulate); break;
    case 5: micro_kernel<5, layout>(a, lda, panel, ldb, kc, c, ldc, width, accumulate); break;
    default: micro_kernel<6, layout>(a, lda, panel, ldb, kc, c, ldc, width, accumulate); break;
  }
}

}  // namespace shardlm::backends::cpu::avx2
