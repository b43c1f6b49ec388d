// The portable matmul table: every weight row widened to f32 once, then dotted with
// each input row on 8-lane vectors (GCC vector extensions: SSE2 on baseline x86-64).
// It serves CPUs without AVX2 and is the second table the consistency tests run.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/decode_attention.h"
#include "backends/cpu/ggml_block_kernels.h"
#include "backends/cpu/row_kernels.h"
#include "backends/cpu/kernel_table.h"
#include "core/quantize.h"
#include "backends/cpu/simd.h"
#include "core/dtype.h"
#include "core/error.h"

namespace shardlm::backends::cpu {
namespace {

// Rows are widened a chunk at a time into a stack buffer: no heap, whatever `in` is.
constexpr int64_t chunk = 1024;  // a multiple of the quantization block

// Elements [k0, k0 + count) of weight row `row` as f32.
void widen_chunk(const WeightView& w, int64_t row, int64_t k0, int64_t count, float* destination) {
  if (w.dtype == DType::i4) {
    const uint16_t* scales = w.block_scales + row * (w.in / Tensor::quant_block);
    const auto* values = static_cast<const uint8_t*>(w.data) + row * w.in / 2;
    for (int64_t k = 0; k < count; ++k)
      destination[k] = static_cast<float>(int4_value(values, k0 + k)) *
                       f16_to_f32(scales[(k0 + k) / Tensor::quant_block]);
    return;
  }
  const size_t element_bytes = dtype_size(w.dtype);
  const std::byte* source =
      static_cast<const std::byte*>(w.data) + (row * w.in + k0) * static_cast<int64_t>(element_bytes);
  if (w.dtype != DType::i8) {
    convert_to_f32(source, w.dtype, destination, static_cast<size_t>(count));
    return;
  }
  const auto* values = reinterpret_cast<const int8_t*>(source);
  const uint16_t* scales = w.block_scales + row * (w.in / Tensor::quant_block);
  for (int64_t k = 0; k < count; ++k)
    destination[k] = static_cast<float>(values[k]) * f16_to_f32(scales[(k0 + k) / Tensor::quant_block]);
}

void rows_times_weight(const float* x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
                       int64_t stride) {
  float widened[chunk];
  for (int64_t o = o_begin; o < o_end; ++o) {
    for (int64_t r = 0; r < rows; ++r) out[r * stride + o] = 0;
    for (int64_t k0 = 0; k0 < w.in; k0 += chunk) {
      const int64_t count = std::min(chunk, w.in - k0);
      const float* weight_part = widened;
      if (w.dtype == DType::f32) weight_part = static_cast<const float*>(w.data) + o * w.in + k0;
      else widen_chunk(w, o, k0, count, widened);
      for (int64_t r = 0; r < rows; ++r) out[r * stride + o] += dot(x + r * w.in + k0, weight_part, count);
    }
  }
}

}  // namespace

const CpuKernels& portable_cpu_kernels() {
  static const CpuKernels kernels{
      .isa = "portable", .gemv = rows_times_weight, .gemm = rows_times_weight, .decode_blocks = decode_ggml_blocks,
      .gemv_blocks = ggml_blocks_gemv, .rows = row_kernels, .decode_attention = decode_attention::kernel_for};
  return kernels;
}

WeightView WeightView::of(const Tensor& weight) {
  return {weight.raw(), weight.dtype(), weight.shape()[1],
          weight.quantized() ? weight.block_scales().data<uint16_t>() : nullptr};
}

std::span<const CpuKernels* const> available_cpu_kernels() {
  static const std::vector<const CpuKernels*> tables = [] {
    std::vector<const CpuKernels*> found{&portable_cpu_kernels()};
    for (const CpuKernels* table :
         {avx2_cpu_kernels(), avx512_cpu_kernels(), avx512_bf16_cpu_kernels(), amx_cpu_kernels()})
      if (table) found.push_back(table);
    return found;
  }();
  return tables;
}

bool gemm_rounds_input_to_bf16(const CpuKernels& kernels, DType weight_dtype, int64_t in) {
  return kernels.gemm_rounds_input_to_bf16 && kernels.gemm_rounds_input_to_bf16(weight_dtype, in);
}

bool attention_rounds_to_bf16(const CpuKernels& kernels, DType cache_dtype, int64_t head_dim) {
  return kernels.attention_rounds_to_bf16 && kernels.attention_rounds_to_bf16(cache_dtype, head_dim);
}

bool gemm_rounds_input_to_int8(const CpuKernels& kernels, DType weight_dtype, int64_t in) {
  return kernels.gemm_rounds_input_to_int8 && kernels.gemm_rounds_input_to_int8(weight_dtype, in);
}

bool gemv_rounds_input_to_int8(const CpuKernels& kernels, DType weight_dtype, int64_t in) {
  return kernels.gemv_rounds_input_to_int8 && kernels.gemv_rounds_input_to_int8(weight_dtype, in);
}

bool cpu_has_avx512() {
  // libgcc's checks include the OS's: XCR0 must have the 512-bit state enabled.
  static const bool supported = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                                avx2_cpu_kernels() != nullptr;
  return supported;
}

namespace {

const CpuKernels& chosen_cpu_kernels() {
  const std::span<const CpuKernels* const> tables = available_cpu_kernels();
  const char* wanted = std::getenv("SHARDLM_CPU_KERNELS");
  if (wanted == nullptr || *wanted == '\0') return *tables.back();
  std::string names;
  for (const CpuKernels* table : tables) {
    if (table->isa == wanted) return *table;
    names += (names.empty() ? "" : ", ") + std::string(table->isa);
  }
  fail("SHARDLM_CPU_KERNELS=", wanted, " names no matmul kernel table this CPU runs; it runs: ", names,
       " (unset the variable to use the best)");
}

}  // namespace

const CpuKernels& cpu_kernels() {
  static const CpuKernels& chosen = chosen_cpu_kernels();
  return chosen;
}

}  // namespace shardlm::backends::cpu
