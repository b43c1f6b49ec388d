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
#include <vector>

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
  // Decode-sized inputs, rows <= gemv_max_rows: x f32 [rows, in]; for int8 weights, x as
  // pack_int8_gemv_input left it where the table has one.
  void (*gemv)(const float* x, int64_t rows, const WeightView& weight, int64_t o_begin, int64_t o_end, float* out,
               int64_t out_stride);
  // Any number of rows: packs weight panels to f32 and runs a register-blocked
  // micro-kernel. x is the input as pack_input left it, or [rows, in] as it is where
  // the table has no pack_input.
  void (*gemm)(const float* x, int64_t rows, const WeightView& weight, int64_t o_begin, int64_t o_end, float* out,
               int64_t out_stride);
  // Rearranges x [rows, in] for gemm, tiles [tile_begin, tile_end) of input_tile_rows
  // rows each, into `packed` (packed_input_floats of them); null where gemm reads x as
  // it is. Done once per op, so that every column task reads the same packed copy.
  void (*pack_input)(const float* x, int64_t rows, int64_t in, int64_t tile_begin, int64_t tile_end,
                     float* packed) = nullptr;
  int64_t input_tile_rows = 1;
  // The output columns gemm packs a weight block for: the unit a column task should be.
  int64_t gemm_column_block = 64;
  // Rearranges x [rows, in] for gemv over int8 weights, into `packed`
  // (int8_gemv_input_floats of them); null where gemv reads x as it is.
  void (*pack_int8_gemv_input)(const float* x, int64_t rows, int64_t in, float* packed) = nullptr;
  // inout[i] *= silu(gate[i]) = gate[i] / (1 + e^-gate[i]): the gated MLP's epilogue.
  void (*silu_multiply)(const float* gate, float* inout, int64_t count) = nullptr;
};
inline int64_t input_tiles(const MatmulKernels& kernels, int64_t rows) {
  return (rows + kernels.input_tile_rows - 1) / kernels.input_tile_rows;
}
inline int64_t packed_input_floats(const MatmulKernels& kernels, int64_t rows, int64_t in) {
  return input_tiles(kernels, rows) * kernels.input_tile_rows * in;
}
// pack_int8_gemv_input's layout, per row: `in` int16 values (in / 2 floats' room), then
// one f32 scale per quantization block.
inline int64_t int8_gemv_row_floats(int64_t in) { return in / 2 + in / Tensor::quant_block; }
inline int64_t int8_gemv_input_floats(int64_t rows, int64_t in) { return rows * int8_gemv_row_floats(in); }
// gemv's input for x [rows, in] on one thread (tests, benchmarks).
inline const float* gemv_input(const MatmulKernels& kernels, DType weight_dtype, const float* x, int64_t rows,
                               int64_t in, std::vector<float>& buffer) {
  if (weight_dtype != DType::i8 || !kernels.pack_int8_gemv_input) return x;
  buffer.resize(static_cast<size_t>(int8_gemv_input_floats(rows, in)));
  kernels.pack_int8_gemv_input(x, rows, in, buffer.data());
  return buffer.data();
}
// gemm's input for x [rows, in] on one thread (tests, benchmarks): packed into `buffer`
// where the table packs, else x.
inline const float* gemm_input(const MatmulKernels& kernels, const float* x, int64_t rows, int64_t in,
                               std::vector<float>& buffer) {
  if (!kernels.pack_input) return x;
  buffer.resize(static_cast<size_t>(packed_input_floats(kernels, rows, in)));
  kernels.pack_input(x, rows, in, 0, input_tiles(kernels, rows), buffer.data());
  return buffer.data();
}
constexpr int64_t gemv_max_rows = 4;

// The portable table, and the AVX2+FMA+F16C one when this build and CPU have it.
const MatmulKernels& portable_matmul_kernels();
const MatmulKernels* avx2_matmul_kernels();
// Every table this CPU can run, best last.
std::span<const MatmulKernels* const> available_matmul_kernels();
const MatmulKernels& matmul_kernels();

}  // namespace shardlm::backends::cpu
