#pragma once
// Pieces the AVX-512 gemm kernels share (matmul_avx512.cpp, matmul_avx512_bf16.cpp,
// matmul_amx.cpp). Only files compiled with AVX-512 (F, BW, VL, DQ) include this.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "backends/cpu/weight_rows.h"

namespace shardlm::backends::cpu::avx512 {

// Where the gemvs' prefetches land (gemv_prefetch_bytes ahead of their reads): L2 on
// AMD, as avx2_gemm.h's prefetch_ahead note says Zen 4 wants; L1 on Intel, where on Sapphire Rapids
// (bench/weight_stream, kernels over bare reads of the same bytes, three alternating
// pairs of builds) T0 read bf16 at 0.95 - 0.99 against T1's 0.84 - 0.89, int8 at 0.87 -
// 0.88 against 0.73 - 0.87.
enum class PrefetchInto { l1, l2 };

template <PrefetchInto Into>
inline void prefetch_ahead(const void* row, int64_t byte_offset) {
  const char* line = static_cast<const char*>(row) + byte_offset + gemv_prefetch_bytes;
  if constexpr (Into == PrefetchInto::l1) _mm_prefetch(line, _MM_HINT_T0);
  else _mm_prefetch(line, _MM_HINT_T1);
}

// gemv(PrefetchInto) with the prefetch target of this CPU's vendor.
template <typename Gemv>
void with_prefetch_target(Gemv gemv) {
  static const bool intel = __builtin_cpu_is("intel");
  if (intel) gemv(std::integral_constant<PrefetchInto, PrefetchInto::l1>{});
  else gemv(std::integral_constant<PrefetchInto, PrefetchInto::l2>{});
}

// Mask of the first `count` (<= 16) lanes.
inline __mmask16 first_lanes(int64_t count) { return static_cast<__mmask16>((1u << count) - 1u); }

// Transposes the 16x16 matrix of 32-bit elements held in rows[0..16).
inline void transpose16(__m512i rows[16]) {
  __m512i pairs[16], quads[16];
  for (int i = 0; i < 16; i += 2) {
    pairs[i] = _mm512_unpacklo_epi32(rows[i], rows[i + 1]);
    pairs[i + 1] = _mm512_unpackhi_epi32(rows[i], rows[i + 1]);
  }
  // quads[4g + j], per 128-bit lane L: column 4L + j of rows 4g .. 4g + 3.
  for (int g = 0; g < 16; g += 4) {
    quads[g] = _mm512_unpacklo_epi64(pairs[g], pairs[g + 2]);
    quads[g + 1] = _mm512_unpackhi_epi64(pairs[g], pairs[g + 2]);
    quads[g + 2] = _mm512_unpacklo_epi64(pairs[g + 1], pairs[g + 3]);
    quads[g + 3] = _mm512_unpackhi_epi64(pairs[g + 1], pairs[g + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i low01 = _mm512_shuffle_i32x4(quads[j], quads[4 + j], 0x44);
    const __m512i high01 = _mm512_shuffle_i32x4(quads[j], quads[4 + j], 0xEE);
    const __m512i low23 = _mm512_shuffle_i32x4(quads[8 + j], quads[12 + j], 0x44);
    const __m512i high23 = _mm512_shuffle_i32x4(quads[8 + j], quads[12 + j], 0xEE);
    rows[j] = _mm512_shuffle_i32x4(low01, low23, 0x88);
    rows[4 + j] = _mm512_shuffle_i32x4(low01, low23, 0xDD);
    rows[8 + j] = _mm512_shuffle_i32x4(high01, high23, 0x88);
    rows[12 + j] = _mm512_shuffle_i32x4(high01, high23, 0xDD);
  }
}

// A 32-column panel [steps][32] of 32-bit elements (a bf16 pair, four int8) from 32
// matrix rows whose runs lie along k: load(column, s0) gives column `column`'s 64 bytes from
// its element s0 on; columns past `width` are zero. Sixteen columns' runs at a time are
// transposed in registers, so each step's 16 elements are one store.
template <typename Load>
inline void transpose_into_panel(int64_t width, int64_t steps, Load load, uint32_t* panel) {
  constexpr int64_t panel_width = 32;
  for (int64_t group = 0; group < panel_width / 16; ++group)
    for (int64_t s0 = 0; s0 < steps; s0 += 16) {
      __m512i runs[16];
      for (int64_t i = 0; i < 16; ++i) {
        const int64_t column = group * 16 + i;
        runs[i] = column < width ? load(column, s0) : _mm512_setzero_si512();
      }
      transpose16(runs);  // runs[p]: element s0 + p of the sixteen columns
      for (int64_t p = 0; p < std::min<int64_t>(16, steps - s0); ++p)
        _mm512_store_si512(panel + (s0 + p) * panel_width + group * 16, runs[p]);
    }
}

// The micro-kernel's rows: a packed input tile holds 12 rows, [step][12] 32-bit elements.
constexpr int64_t micro_rows = 12;

// Where the micro-kernel finds row i's element of step s: a[s * step + i * row]. A packed
// tile ([step][12]), or rows as they lie, `Stride` elements apart ([row][step]): the
// broadcasts read any address alike, so rows need no transposing.
struct PackedTile {
  static constexpr int64_t step = micro_rows, row = 1;
};
template <int64_t Stride>
struct RowMajor {
  static constexpr int64_t step = 1, row = Stride;
};

// A micro-kernel's M x 32 sums (matmul_avx2.cpp's): per column block of [o_begin,
// o_end) and k block of [0, in), the block's 32-column panels are packed, pack(p, n,
// width, k0, kc) for panel p of columns [n, n + width); then, for a block of 12 input
// tiles that stays in L2 beside them, each panel (in L1) meets every tile of the block:
// kernel(t, p, n, width, k0, kc).
template <typename Pack, typename Kernel>
inline void for_gemm_blocks(int64_t tiles, int64_t in, int64_t o_begin, int64_t o_end, int64_t k_block,
                            int64_t column_block, Pack pack, Kernel kernel) {
  constexpr int64_t panel_width = 32, tiles_per_block = 12;
  for (int64_t n0 = o_begin; n0 < o_end; n0 += column_block) {
    const int64_t columns = std::min(column_block, o_end - n0);
    const int64_t panels = (columns + panel_width - 1) / panel_width;
    const auto width = [&](int64_t p) { return std::min(panel_width, columns - p * panel_width); };
    for (int64_t k0 = 0; k0 < in; k0 += k_block) {
      const int64_t kc = std::min(k_block, in - k0);
      for (int64_t p = 0; p < panels; ++p) pack(p, n0 + p * panel_width, width(p), k0, kc);
      for (int64_t t0 = 0; t0 < tiles; t0 += tiles_per_block)
        for (int64_t p = 0; p < panels; ++p)
          for (int64_t t = t0; t < std::min(tiles, t0 + tiles_per_block); ++t)
            kernel(t, p, n0 + p * panel_width, width(p), k0, kc);
    }
  }
}

// A micro-kernel's M x 32 sums (low: columns 0..15, high: 16..31) into c [M, ldc], the
// first `width` columns; added to what c holds when `accumulate` (a later k block).
template <int M>
inline void store_sums(__m512 low[M], __m512 high[M], float* c, int64_t ldc, int64_t width, bool accumulate) {
  const __mmask16 low_mask = first_lanes(std::min<int64_t>(16, width));
  const __mmask16 high_mask = first_lanes(std::max<int64_t>(0, width - 16));
  SHARDLM_UNROLL
  for (int i = 0; i < M; ++i) {
    float* row = c + i * ldc;
    if (accumulate) {
      low[i] = _mm512_add_ps(low[i], _mm512_maskz_loadu_ps(low_mask, row));
      high[i] = _mm512_add_ps(high[i], _mm512_maskz_loadu_ps(high_mask, row + 16));
    }
    _mm512_mask_storeu_ps(row, low_mask, low[i]);
    _mm512_mask_storeu_ps(row + 16, high_mask, high[i]);
  }
}

// The tile of c a micro-kernel adds to was last touched a k block ago: fetched while
// the sums are computed (matmul_avx2.cpp's micro-kernel).
template <int M>
inline void prefetch_sums(const float* c, int64_t ldc) {
  SHARDLM_UNROLL
  for (int i = 0; i < M; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
}

// The 12x32 micro-kernel of the AVX-512 gemms, for M <= 12 rows of a packed input tile
// (or of rows as Layout lays them out) and a 32-column panel: at each of `steps` steps s,
// row i's element a[s * 12 + i] (an f32, or a pair of bf16) meets the panel's two 16-lane
// vectors at panel + s * 32, and multiply_add(sums, element, vector) returns the sums with
// their products added (24 accumulators). Then c[i, 0..width) (+)= the sums.
template <int M, typename Layout, typename Element, typename MultiplyAdd>
inline void micro_kernel(const Element* a, const Element* panel, int64_t steps, float* c, int64_t ldc, int64_t width,
                         bool accumulate, MultiplyAdd multiply_add) {
  static_assert(sizeof(Element) == 4, "a 32-bit element a lane");
  __m512 low[M], high[M];
  SHARDLM_UNROLL
  for (int i = 0; i < M; ++i) low[i] = high[i] = _mm512_setzero_ps();
  if (accumulate) prefetch_sums<M>(c, ldc);
#pragma GCC unroll 4
  for (int64_t s = 0; s < steps; ++s) {
    const __m512i b0 = _mm512_load_si512(panel + s * 32);
    const __m512i b1 = _mm512_load_si512(panel + s * 32 + 16);
    SHARDLM_UNROLL
    for (int i = 0; i < M; ++i) {
      const Element value = a[s * Layout::step + i * Layout::row];
      low[i] = multiply_add(low[i], value, b0);
      high[i] = multiply_add(high[i], value, b1);
    }
  }
  store_sums<M>(low, high, c, ldc, width, accumulate);
}

template <typename Layout, typename Element, typename MultiplyAdd, int... M>
inline void micro_kernel_rows(std::integer_sequence<int, M...>, int64_t rows, const Element* a, const Element* panel,
                              int64_t steps, float* c, int64_t ldc, int64_t width, bool accumulate,
                              MultiplyAdd multiply_add) {
  ((rows == M + 1 ? micro_kernel<M + 1, Layout>(a, panel, steps, c, ldc, width, accumulate, multiply_add) : void()),
   ...);
}

// The micro-kernel for `rows` (1..12) rows of a tile.
template <typename Layout = PackedTile, typename Element, typename MultiplyAdd>
inline void micro_kernel_rows(int64_t rows, const Element* a, const Element* panel, int64_t steps, float* c,
                              int64_t ldc, int64_t width, bool accumulate, MultiplyAdd multiply_add) {
  micro_kernel_rows<Layout>(std::make_integer_sequence<int, micro_rows>{}, rows, a, panel, steps, c, ldc, width,
                            accumulate, multiply_add);
}

}  // namespace shardlm::backends::cpu::avx512
