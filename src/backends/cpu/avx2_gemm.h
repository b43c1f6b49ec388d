#pragma once
// AVX2/FMA/F16C building blocks shared by the kernels compiled with those
// instructions (matmul_avx2.cpp, attention_avx2.cpp). Include only from such files.

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/transpose8.h"
#include "backends/cpu/weight_rows.h"

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

inline float horizontal_sum(__m256 v) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return _mm_cvtss_f32(sum);
}

inline float horizontal_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// The gemv's prefetch, gemv_prefetch_bytes ahead (weight_rows.h).
// The hint is T1 (into L2, not L1): Zen 4 honours it, and there T0's lines, held in
// L1 until used, left bf16 and f16 at 0.74 - 0.87 of a bare read (bf16 at T1: 0.97;
// bf16 decode 19.0 - 21.6 -> 23.7 - 24.2 tok/s, f16 19.7 - 22.3 -> 21.4 - 27.7, int8
// 37.9 - 41.3 -> 40.0 - 43.4, alternating builds). On Zen 3 the matmuls alone read ~3.5%
// slower with T1 (weight_stream, 0.93 of a bare read against T0's 0.97), yet bf16
// decode tokens ran ~6% faster (19.0 against 17.8 tok/s, seven alternating pairs).
inline void prefetch_ahead(const void* row, int64_t byte_offset) {
  _mm_prefetch(static_cast<const char*>(row) + byte_offset + gemv_prefetch_bytes, _MM_HINT_T1);
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

// packed[k][j] = weight[n0 + j, k0 + k] for j < width, zero for width <= j < 16: 8x8
// blocks widened in registers and transposed, the k tail element by element.
template <DType D>
inline void pack_panel(const WeightView& w, int64_t n0, int64_t width, int64_t k0, int64_t kc, float* packed) {
  const int64_t vector_k = kc / 8 * 8;
  for (int64_t j0 = 0; j0 < panel_width; j0 += 8) {
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
      for (int i = 0; i < 8; ++i) _mm256_store_ps(packed + (k + i) * panel_width + j0, block8[i]);
    }
    for (int64_t k = vector_k; k < kc; ++k)  // int8 and int4 rows are whole blocks: no tail there
      for (int64_t j = 0; j < 8; ++j) packed[k * panel_width + j0 + j] = rows[j] ? load1<D>(rows[j], k0 + k) : 0.0f;
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
