// The AVX512-BF16 table (AMD Zen 4, Intel Cooper Lake and later): prefill over bf16
// weights with VDPBF16PS, which multiplies 16 pairs of bf16 values and adds each
// pair's two products to an f32 lane: twice the multiply-adds of an f32 FMA in one
// instruction; and decode steps of several sequences over bf16 weights the same way.
// Prefill over int8 and int4 weights and decode over int4 ones run on AVX512_VNNI
// (matmul_avx512_vnni.cpp). Everything else (decode's gemv of up to 4 rows over other
// weights, f32 and f16 weights, a row length that is not a multiple of 32) runs the AVX-512
// table's kernels.
//
// As the AMX table (and llama.cpp, and transformers running a bf16 model), the
// activations are rounded to bf16 (nearest even) once per op; the products and their
// sums stay f32: 2^-9 relative per activation, the bound tests/backends states.
//
// The AVX-512 table's blocking, on k pairs: a 12x32 micro-kernel (24 accumulators; per
// k pair, two 16-lane panel loads and twelve broadcast VDPBF16PS pairs). pack_input
// writes input tile t (rows [12t, 12t + 12), zero past the end) as [k block][tile][k
// pair][12] 32-bit bf16 pairs; each 32-column weight panel is [k pair][32 columns] pairs,
// sixteen weight rows' 64-byte runs transposed as 32-bit elements.
//
// Up to few_rows_max rows (a decode step of several sequences, a short prompt chunk) take
// another form: the weight is read as it lies and each of its rows' k pairs meets each
// input row's, x rounded to bf16 as [rows, in]; each (feature, row) sums in a vector of
// its own, reduced at the end. There the panel form repacked every weight element for
// only a few products each, which cost more than the products (docs/PERFORMANCE.md; the
// two forms meet near 96 rows).
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "backends/cpu/avx512_bf16_gemm.h"
#include "backends/cpu/avx512_vnni_gemm.h"
#include "backends/cpu/kernel_table.h"

namespace shardlm::backends::cpu {
namespace {

using avx512::micro_rows;
using avx512_bf16::panel_width, avx512_bf16::run, avx512_bf16::pack_panel, avx512_bf16::MultiplyAddPairs;
constexpr int64_t k_block = 512, column_block = 128;

bool runs_on_pairs(DType weight_dtype, int64_t in) { return weight_dtype == DType::bf16 && in % run == 0; }

// int8 weights: VPDPBUSD (avx512_vnni_gemm.h), where the CPU has it.
bool runs_on_quads(DType weight_dtype, int64_t in) {
  return avx512_vnni::cpu_runs_vnni() && avx512_vnni::runs_on_quads(weight_dtype, in);
}

constexpr int64_t few_rows_max = 64, prefetch_distance = 32;
bool few_rows(int64_t rows) { return rows <= few_rows_max; }

const CpuKernels& fallback() { return *avx512_cpu_kernels(); }

// Where tile t's pairs of k block k0 start: [k block][tile][k pair][12], in 32-bit pairs.
int64_t packed_tile_offset(int64_t tiles, int64_t in, int64_t t, int64_t k0) {
  return (k0 * tiles * micro_rows + t * std::min(k_block, in - k0) * micro_rows) / 2;
}

// few_rows' input: rows [12 tile_begin, 12 tile_end) of x [rows, in] rounded to bf16 in
// `rounded` [rows, in].
void round_rows(const float* x, int64_t rows, int64_t in, int64_t tile_begin, int64_t tile_end, uint16_t* rounded) {
  for (int64_t r = tile_begin * micro_rows; r < std::min(rows, tile_end * micro_rows); ++r)
    for (int64_t k = 0; k < in; k += run) {
      const float* source = x + r * in + k;
      _mm512_storeu_si512(rounded + r * in + k,
                          (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(source + 16), _mm512_loadu_ps(source)));
    }
}

void pack_input(const float* x, int64_t rows, int64_t in, DType weight_dtype, int64_t tile_begin, int64_t tile_end,
                float* packed) {
  if (runs_on_quads(weight_dtype, in)) return avx512_vnni::pack_input(x, rows, in, tile_begin, tile_end, packed);
  if (!runs_on_pairs(weight_dtype, in)) return fallback().pack_input(x, rows, in, weight_dtype, tile_begin, tile_end,
                                                                     packed);
  if (few_rows(rows)) return round_rows(x, rows, in, tile_begin, tile_end, reinterpret_cast<uint16_t*>(packed));
  auto* pairs = reinterpret_cast<uint32_t*>(packed);
  const int64_t tiles = (rows + micro_rows - 1) / micro_rows;
  for (int64_t t = tile_begin; t < tile_end; ++t)
    for (int64_t k0 = 0; k0 < in; k0 += k_block) {
      uint32_t* tile = pairs + packed_tile_offset(tiles, in, t, k0);
      const int64_t kc = std::min(k_block, in - k0);
      for (int64_t i = 0; i < micro_rows; ++i) {
        const int64_t r = t * micro_rows + i;
        if (r < rows) {
          avx512_bf16::pack_pairs_column(x + r * in + k0, kc, i, tile);
        } else {
          for (int64_t p = 0; p < kc / 2; ++p) tile[p * micro_rows + i] = 0;
        }
      }
    }
}

// The AVX-512 table's loop order (avx512::for_gemm_blocks), on pair panels: 128 KB per
// column block and k block, 32 KB a panel.
void gemm_on_pairs(const float* packed_x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end,
                   float* out, int64_t stride) {
  constexpr int64_t panel_pairs = k_block / 2 * panel_width;
  alignas(64) uint32_t packed[panel_pairs * (column_block / panel_width)];  // on the stack, as matmul_avx512.cpp's
  const auto* x = reinterpret_cast<const uint32_t*>(packed_x);
  const int64_t in = w.in, tiles = (rows + micro_rows - 1) / micro_rows;
  avx512::for_gemm_blocks(
      tiles, in, o_begin, o_end, k_block, column_block,
      [&](int64_t p, int64_t n, int64_t width, int64_t k0, int64_t kc) {
        pack_panel(w, n, width, k0, kc, packed + p * panel_pairs);
      },
      [&](int64_t t, int64_t p, int64_t n, int64_t width, int64_t k0, int64_t kc) {
        avx512::micro_kernel_rows(std::min(micro_rows, rows - t * micro_rows), x + packed_tile_offset(tiles, in, t, k0),
                                  packed + p * panel_pairs, kc / 2, out + t * micro_rows * stride + n, stride, width,
                                  k0 > 0, MultiplyAddPairs{});
      });
}

// Lane i of the result: the sum of v[i]'s sixteen lanes. Pairs of vectors, then pairs of
// those, are interleaved and added within 128-bit lanes, then the 128-bit lanes in two
// rounds: 30 shuffles and 15 adds for 16 sums.
inline __m512 sum_each(const __m512 v[16]) {
  __m512 halves[8], quarters[4];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: v[2i]'s two partials, v[2i + 1]'s, v[2i]'s, v[2i + 1]'s
    halves[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: one partial of each of v[4i .. 4i + 3]
    const __m512d a = _mm512_castps_pd(halves[2 * i]), b = _mm512_castps_pd(halves[2 * i + 1]);
    quarters[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 low = _mm512_add_ps(_mm512_shuffle_f32x4(quarters[0], quarters[1], 0x44),
                                   _mm512_shuffle_f32x4(quarters[0], quarters[1], 0xEE));
  const __m512 high = _mm512_add_ps(_mm512_shuffle_f32x4(quarters[2], quarters[3], 0x44),
                                    _mm512_shuffle_f32x4(quarters[2], quarters[3], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_f32x4(low, high, 0x88), _mm512_shuffle_f32x4(low, high, 0xDD));
}

// out[r, f] = x[r] . w[f] for F features and R rows (each <= 4): sums[4f + r], the
// vectors past F or R staying zero for sum_each. Meanwhile `ahead_rows` weight rows from
// `ahead` on, a later block's, are fetched into L2: with the hardware prefetcher alone the
// loads of a weight streamed from memory stalled.
template <int F, int R>
void few_rows_block(const uint16_t* x, const uint16_t* w, const uint16_t* ahead, int64_t ahead_rows, int64_t in,
                    float* out, int64_t stride) {
  __m512 sums[16];
  SHARDLM_UNROLL
  for (int i = 0; i < 16; ++i) sums[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < in; k += run) {
    __m512i weights[F];
    SHARDLM_UNROLL
    for (int f = 0; f < F; ++f) weights[f] = _mm512_loadu_si512(w + f * in + k);
    for (int64_t f = 0; f < ahead_rows; ++f) _mm_prefetch(reinterpret_cast<const char*>(ahead + f * in + k), _MM_HINT_T1);
    SHARDLM_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m512bh row = (__m512bh)_mm512_loadu_si512(x + r * in + k);
      SHARDLM_UNROLL
      for (int f = 0; f < F; ++f) sums[4 * f + r] = _mm512_dpbf16_ps(sums[4 * f + r], row, (__m512bh)weights[f]);
    }
  }
  alignas(64) float totals[16];
  _mm512_store_ps(totals, sum_each(sums));
  for (int r = 0; r < R; ++r)
    for (int f = 0; f < F; ++f) out[r * stride + f] = totals[4 * f + r];
}

using FewRowsBlock = void (*)(const uint16_t*, const uint16_t*, const uint16_t*, int64_t, int64_t, float*, int64_t);

template <int... I>
constexpr std::array<FewRowsBlock, 16> few_rows_blocks(std::integer_sequence<int, I...>) {
  return {few_rows_block<I / 4 + 1, I % 4 + 1>...};
}

// out [rows <= few_rows_max, o_begin..o_end) from x as round_rows left it: four features
// (one 4 x in run of the weight) at a time against every four rows.
void gemm_few_rows(const float* rounded_x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end,
                   float* out, int64_t stride) {
  static constexpr auto blocks = few_rows_blocks(std::make_integer_sequence<int, 16>{});
  const auto* x = reinterpret_cast<const uint16_t*>(rounded_x);  // [rows, in] bf16
  const auto* weight = static_cast<const uint16_t*>(w.data);
  const int64_t in = w.in, groups = (rows + 3) / 4;
  for (int64_t o = o_begin; o < o_end; o += 4) {
    const int64_t features = std::min<int64_t>(4, o_end - o);
    // The four weight rows `prefetch_distance` features on, a share per row group.
    const bool fetch = o + prefetch_distance + 4 <= o_end;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t first = 4 * g / groups, last = 4 * (g + 1) / groups;
      blocks[static_cast<size_t>((features - 1) * 4 + std::min<int64_t>(4, rows - 4 * g) - 1)](
          x + 4 * g * in, weight + o * in, fetch ? weight + (o + prefetch_distance + first) * in : nullptr,
          fetch ? last - first : 0, in, out + 4 * g * stride + o, stride);
    }
  }
}

void gemm(const float* x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
          int64_t stride) {
  if (runs_on_pairs(w.dtype, w.in) && few_rows(rows)) gemm_few_rows(x, rows, w, o_begin, o_end, out, stride);
  else if (runs_on_pairs(w.dtype, w.in)) gemm_on_pairs(x, rows, w, o_begin, o_end, out, stride);
  else if (runs_on_quads(w.dtype, w.in)) avx512_vnni::gemm(x, rows, w, o_begin, o_end, out, stride);
  else fallback().gemm(x, rows, w, o_begin, o_end, out, stride);
}

// int4 weights' gemv: VPDPBUSD (avx512_vnni_gemm.h), where the CPU has it.
bool gemv_on_quads(DType weight_dtype, int64_t in) {
  return weight_dtype == DType::i4 && avx512_vnni::cpu_runs_vnni() && in % Tensor::quant_block == 0;
}
void gemv(const float* x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
          int64_t stride) {
  if (gemv_on_quads(w.dtype, w.in)) avx512_vnni::int4_gemv(x, rows, w, o_begin, o_end, out, stride);
  else fallback().gemv(x, rows, w, o_begin, o_end, out, stride);
}
void pack_gemv_input(const float* x, int64_t rows, int64_t in, DType weight_dtype, float* packed) {
  if (gemv_on_quads(weight_dtype, in)) avx512_vnni::pack_int4_gemv_input(x, rows, in, packed);
  else fallback().pack_gemv_input(x, rows, in, weight_dtype, packed);
}
int64_t gemv_input_row_floats(DType weight_dtype, int64_t in) {
  if (gemv_on_quads(weight_dtype, in)) return avx512_vnni::int4_gemv_row_floats(in);
  return fallback().gemv_input_row_floats(weight_dtype, in);
}

// Attention over a bf16 cache on VDPBF16PS (attention_avx512_bf16.cpp), else the AVX-512 table's.
FlashBlockKernel flash_block(int64_t head_dim) {
  const FlashBlockKernel kernel = avx512_bf16_flash_block(head_dim);
  return kernel ? kernel : fallback().flash_block(head_dim);
}
DecodeAttentionKernel decode_attention(int64_t head_dim) {
  const DecodeAttentionKernel kernel = avx512_bf16_decode_attention(head_dim);
  return kernel ? kernel : fallback().decode_attention(head_dim);
}
bool attention_rounds_to_bf16(DType cache_dtype, int64_t head_dim) {
  return cache_dtype == DType::bf16 && avx512_bf16_flash_block(head_dim);
}

// AVX512_BF16 from CPUID leaf 7, subleaf 1 (clang's __builtin_cpu_supports does not know it).
bool cpu_runs_avx512_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return cpu_has_avx512() && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5)) != 0;
}

}  // namespace

namespace {

// Built only once the CPU check has passed: its code may use this file's instructions.
[[gnu::noinline]] const CpuKernels& table() {
  static const CpuKernels kernels{.isa = "avx512_bf16", .gemv = gemv, .gemm = gemm,
                                  .pack_input = pack_input, .input_tile_rows = micro_rows,
                                  .gemm_column_block = column_block,
                                  .pack_gemv_input = pack_gemv_input,
                                  .gemv_input_row_floats = gemv_input_row_floats,
                                  .decode_blocks = fallback().decode_blocks,
                                  .gemv_blocks = fallback().gemv_blocks,
                                  .rows = fallback().rows,
                                  .gemm_rounds_input_to_bf16 = runs_on_pairs,
                                  .gemm_rounds_input_to_int8 = runs_on_quads,
                                  .gemv_rounds_input_to_int8 = gemv_on_quads,
                                  .flash_block = flash_block,
                                  .decode_attention = decode_attention,
                                  .attention_rounds_to_bf16 = attention_rounds_to_bf16};
  return kernels;
}

}  // namespace

const CpuKernels* avx512_bf16_cpu_kernels() {
  static const bool runs = cpu_runs_avx512_bf16();
  return runs ? &table() : nullptr;
}

}  // namespace shardlm::backends::cpu
