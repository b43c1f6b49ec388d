// Attention on AVX2: the flash kernel (flash_attention.h) and the decode kernel
// (decode_attention.h) on 8 lanes, with the matmul micro-kernel of avx2_gemm.h. V rows
// of an f32 cache are read in place: they already are the [k][n] panels the
// micro-kernel wants, at a row stride; a bf16 tile is widened first.
#include "backends/cpu/attention_kernels.h"

#include "backends/cpu/avx2_gemm.h"
#include "backends/cpu/decode_attention.h"
#include "backends/cpu/flash_attention.h"

namespace shardlm::backends::cpu {

namespace {

struct FlashProducts : flash_attention::F32Products {
  static constexpr int64_t panel_width = avx2::panel_width, micro_rows = avx2::micro_rows;

  template <DType Cache>
  static void pack_keys(const WeightView& keys, int64_t t0, int64_t width, int64_t head_dim, float* panel) {
    avx2::pack_panel<Cache>(keys, t0, width, 0, head_dim, panel);
  }

  template <int64_t Lda>
  static void multiply(int64_t rows, const float* a, const float* b, int64_t ldb, int64_t steps, float* c,
                       int64_t ldc, int64_t width, bool accumulate) {
    avx2::micro_kernel_rows(rows, a, Lda, b, ldb, steps, c, ldc, width, accumulate);
  }

  template <DType Cache>
  static flash_attention::ValuePanels<float> value_panels(const void* values, int64_t t0, int64_t count,
                                                          int64_t head_dim, float* buffer) {
    if constexpr (Cache == DType::f32) {
      return {static_cast<const float*>(values) + t0 * head_dim, panel_width, head_dim};
    } else {
      const WeightView rows{values, Cache, head_dim};
      for (int64_t t = 0; t < count; ++t) avx2::widen_row<Cache>(rows, t0 + t, 0, head_dim, buffer + t * head_dim);
      return {buffer, panel_width, head_dim};
    }
  }
};

}  // namespace

DecodeAttentionKernel avx2_decode_attention(int64_t head_dim) {
  return cpu_has_avx2_fma_f16c() ? decode_attention::kernel_for(head_dim) : nullptr;
}

FlashBlockKernel avx2_flash_block(int64_t head_dim) {
  return cpu_has_avx2_fma_f16c() ? flash_attention::kernel_for<FlashProducts>(head_dim) : nullptr;
}

}  // namespace shardlm::backends::cpu
