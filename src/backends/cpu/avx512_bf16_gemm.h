#pragma once
// Pieces of the VDPBF16PS products shared by matmul_avx512_bf16.cpp and
// attention_avx512_bf16.cpp: the AVX-512 micro-kernel (avx512_gemm.h) run over k pairs,
// rows packed as tiles of bf16 pairs [k pair][12] on one side and panels [k pair][32] on
// the other. Only files compiled with AVX512_BF16 include this.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backends/cpu/avx512_gemm.h"
#include "backends/cpu/kernel_table.h"

namespace shardlm::backends::cpu::avx512_bf16 {

constexpr int64_t panel_width = 32, run = 32;  // a panel's columns; bf16 elements a 64-byte run

// One step per k pair: the row's bf16 pair broadcast against the panel's [k pair][32] pairs
// (a type, so that the micro-kernel inlines it).
struct MultiplyAddPairs {
  __m512 operator()(__m512 sums, uint32_t pair, __m512i weights) const {
    return _mm512_dpbf16_ps(sums, (__m512bh)_mm512_set1_epi32(static_cast<int>(pair)), (__m512bh)weights);
  }
};

// Values [k, k + 32) of row [length] times scale, rounded to bf16 (nearest even) as 16
// pairs in order, zero past length; reads nothing past row[length).
inline __m512i pairs_of(const float* row, int64_t k, int64_t length, float scale = 1.0f) {
  const __m512 low = _mm512_maskz_loadu_ps(avx512::first_lanes(std::clamp<int64_t>(length - k, 0, 16)), row + k);
  const __m512 high =
      _mm512_maskz_loadu_ps(avx512::first_lanes(std::clamp<int64_t>(length - k - 16, 0, 16)), row + k + 16);
  const __m512 factor = _mm512_set1_ps(scale);
  return (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(high, factor), _mm512_mul_ps(low, factor));
}

// row[0, length) rounded to bf16 (nearest even) as column i of a tile of pairs
// [(length + 1) / 2][12]; an odd length's last pair is (last, 0). Reads nothing past
// row[length).
inline void pack_pairs_column(const float* row, int64_t length, int64_t i, uint32_t* tile) {
  alignas(64) uint32_t pairs[run / 2];
  for (int64_t k = 0; k < length; k += run) {
    _mm512_store_si512(pairs, pairs_of(row, k, length));
    for (int64_t p = 0; p < (std::min(run, length - k) + 1) / 2; ++p)
      tile[(k / 2 + p) * avx512::micro_rows + i] = pairs[p];
  }
}

// Rows [n0, n0 + width) (width <= 32, zero past it) of a bf16 matrix [*, w.in], elements
// [k0, k0 + kc) (kc a multiple of 32), as the panel [kc / 2][32] of 32-bit bf16 pairs.
inline void pack_panel(const WeightView& w, int64_t n0, int64_t width, int64_t k0, int64_t kc, uint32_t* panel) {
  const auto* weight = static_cast<const uint16_t*>(w.data) + n0 * w.in + k0;
  avx512::transpose_into_panel(
      width, kc / 2, [&](int64_t column, int64_t pair) { return _mm512_loadu_si512(weight + column * w.in + 2 * pair); },
      panel);
}

}  // namespace shardlm::backends::cpu::avx512_bf16
