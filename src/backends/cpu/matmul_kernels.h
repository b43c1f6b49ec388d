#pragma once
// The inner loops of every linear layer, one table per instruction set. The CPU
// backend picks the best table this processor runs (matmul_kernels()); the portable
// table is always built, and tests/backends runs each table against the scalar
// reference. Both entries compute raw products out[r, o] = x[r] . weight[o] (bias and
// epilogues are the caller's) for the output columns [o_begin, o_end), so the caller
// can split columns across threads.

#include <cstdint>
#include <span>
#include <string_view>

#include "core/tensor.h"

namespace shardlm::backends::cpu {

// A weight [out_features, in] in HF layout, of dtype f32, bf16, f16, or i8 with f16 block
// scales [out_features, in / Tensor::quant_block].
struct WeightView {
  const void* data;
  DType dtype;
  int64_t in;
  const uint16_t* block_scales = nullptr;

  static WeightView of(const Tensor& weight);
};

struct MatmulKernels {
  std::string_view isa;
  // Decode-sized inputs: x f32 [rows, in] with rows <= gemv_max_rows, rows of x at stride `in`.
  void (*gemv)(const float* x, int64_t rows, const WeightView& weight, int64_t o_begin, int64_t o_end, float* out,
               int64_t out_stride);
  // Any number of rows: packs weight panels to f32 in per-thread scratch and runs a
  // register-blocked micro-kernel.
  void (*gemm)(const float* x, int64_t rows, const WeightView& weight, int64_t o_begin, int64_t o_end, float* out,
               int64_t out_stride);
};
constexpr int64_t gemv_max_rows = 4;

// The portable table, and the AVX2+FMA+F16C one when this build and CPU have it.
const MatmulKernels& portable_matmul_kernels();
const MatmulKernels* avx2_matmul_kernels();
// Every table this CPU can run, best last.
std::span<const MatmulKernels* const> available_matmul_kernels();
const MatmulKernels& matmul_kernels();

}  // namespace shardlm::backends::cpu
