// Flash attention for prefill on AVX512_BF16 over a bf16 KV cache: flash_attention.h's
// steps with both products, S = Q K^T and O += P V, on VDPBF16PS through the AVX-512
// micro-kernel (avx512_bf16_gemm.h), twice the multiply-adds of an f32 FMA an instruction
// and no widening of the cache. The queries (scaled) and each tile's softmax weights P are
// rounded to bf16 once, as a bf16 model's attention runs in transformers; the products and
// sums stay f32. Q and P are rows of bf16 pairs as they lie (the micro-kernel broadcasts
// from them); a K tile is packed as panels [d pair][32 keys], a V tile as panels [key
// pair][32 columns].
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/avx512_bf16_gemm.h"
#include "backends/cpu/flash_attention.h"
#include "backends/cpu/kernel_table.h"

namespace shardlm::backends::cpu {
namespace {

using avx512_bf16::pairs_of;
using flash_attention::key_tile;

struct FlashProducts {
  using Element = uint32_t;  // a bf16 pair
  static constexpr int64_t panel_width = avx512_bf16::panel_width, micro_rows = avx512::micro_rows;
  static constexpr int64_t steps(int64_t n) { return (n + 1) / 2; }
  static constexpr int64_t p_stride = key_tile / 2;

  // head_dim is a multiple of 32 (avx512_bf16_flash_block).
  static void load_query(const float* query, float scale, int64_t head_dim, uint32_t* row) {
    for (int64_t d = 0; d < head_dim; d += 32) _mm512_store_si512(row + d / 2, pairs_of(query, d, head_dim, scale));
  }

  template <DType Cache>
  static void pack_keys(const WeightView& keys, int64_t t0, int64_t width, int64_t head_dim, uint32_t* panel) {
    avx512_bf16::pack_panel(keys, t0, width, 0, head_dim, panel);
  }

  template <int64_t Lda>
  static void multiply(int64_t rows, const uint32_t* a, const uint32_t* b, int64_t /*ldb: panel_width*/,
                       int64_t steps, float* c, int64_t ldc, int64_t width, bool accumulate) {
    avx512::micro_kernel_rows<avx512::RowMajor<Lda>>(rows, a, b, steps, c, ldc, width, accumulate,
                                                     avx512_bf16::MultiplyAddPairs{});
  }

  // Each row's weights [count] as pairs, an odd count's last one (last, 0).
  static const uint32_t* weights(const float* s, int64_t rows, int64_t count, uint32_t* pairs) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t t = 0; t < count; t += 32)
        _mm512_store_si512(pairs + r * p_stride + t / 2, pairs_of(s + r * key_tile, t, count));
    return pairs;
  }

  // Rows [t0, t0 + count) of the bf16 `values` [*, head_dim] as head_dim / 32 panels
  // [pairs][32] of 32-bit pairs (V[t][d], V[t + 1][d]) for key pairs t = t0 + 2j, a key
  // past count zero.
  template <DType Cache>
  static flash_attention::ValuePanels<uint32_t> value_panels(const void* values, int64_t t0, int64_t count,
                                                             int64_t head_dim, uint32_t* panels) {
    static_assert(Cache == DType::bf16, "VDPBF16PS reads a bf16 cache");
    const int64_t pairs = steps(count);
    const auto* rows = static_cast<const uint16_t*>(values);
    for (int64_t j = 0; j < pairs; ++j) {
      const uint16_t* even = rows + (t0 + 2 * j) * head_dim;
      const uint16_t* odd = 2 * j + 1 < count ? even + head_dim : nullptr;
      for (int64_t d = 0; d < head_dim; d += 16) {
        const __m512i low = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(even + d)));
        const __m512i high =
            odd ? _mm512_slli_epi32(
                      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(odd + d))), 16)
                : _mm512_setzero_si512();
        _mm512_store_si512(panels + (d / panel_width * pairs + j) * panel_width + d % panel_width,
                           _mm512_or_si512(low, high));
      }
    }
    return {panels, pairs * panel_width, panel_width};
  }
};

// A bf16 cache on VDPBF16PS; an f32 one on the AVX-512 table's f32 kernel.
void flash_block_any(const float* const* queries, const int32_t* positions, int64_t rows, const void* keys,
                     const void* values, DType cache_dtype, int64_t head_dim, float scale, int64_t sliding_window,
                     float* const* outputs) {
  if (cache_dtype == DType::bf16)
    return flash_attention::flash_block<FlashProducts, DType::bf16>(queries, positions, rows, keys, values, head_dim,
                                                                    scale, sliding_window, outputs);
  avx512_cpu_kernels()->flash_block(head_dim)(queries, positions, rows, keys, values, cache_dtype, head_dim, scale,
                                              sliding_window, outputs);
}

}  // namespace

FlashBlockKernel avx512_bf16_flash_block(int64_t head_dim) {
  const bool fits = avx512_bf16_cpu_kernels() && head_dim % avx512_bf16::panel_width == 0 &&
                    head_dim <= flash_max_head_dim;
  return fits ? flash_block_any : nullptr;
}

DecodeAttentionKernel avx512_bf16_decode_attention(int64_t head_dim) {
  return avx512_bf16_cpu_kernels() ? decode_attention::kernel_for(head_dim) : nullptr;
}

}  // namespace shardlm::backends::cpu
