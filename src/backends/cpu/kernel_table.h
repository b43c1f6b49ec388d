#pragma once
// The CPU backend's kernel table, one per instruction set: the inner loops of every
// linear layer, the row and elementwise kernels, and the attention kernels that
// instruction set runs. The CPU backend picks the best table this processor runs
// (cpu_kernels()); the portable table is always built, and tests/backends runs each
// table against the scalar reference (tests/models the goldens with each forced). The
// matmul entries compute raw products out[r, o] = x[r] . weight[o] (bias and epilogues
// are the caller's) for the output columns [o_begin, o_end), so the caller can split
// columns across threads.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "backends/cpu/attention_kernels.h"
#include "core/tensor.h"

namespace shardlm::backends::cpu {

// A weight [out_features, in] in HF layout, of dtype f32, bf16, f16, i8 or i4 with f16
// block scales [out_features, in / Tensor::quant_block], or q4_k or q6_k (blocks only).
struct WeightView {
  const void* data;
  DType dtype;
  int64_t in;
  const uint16_t* block_scales = nullptr;

  static WeightView of(const Tensor& weight);
};

// Rows and elements (row_kernels.h, at each table's vector width). Counts are elements;
// outputs may be inputs.
struct RowKernels {
  // out = x / sqrt(mean(x^2) + eps) * weight, x and out [dim], weight f32 [dim].
  void (*rms_norm_row)(const float* x, int64_t dim, const float* weight, float eps, float* out) = nullptr;
  // Rope on one head [2 half]: pair (i, i + half) turned by angle i, cos and sin [half].
  void (*rotate_half_pairs)(float* head, const float* cos, const float* sin, int64_t half) = nullptr;
  // inout[i] *= silu(gate[i]) = gate[i] / (1 + e^-gate[i]): the gated MLP's epilogue;
  // gelu_tanh_multiply the same with transformers' gelu_pytorch_tanh (GeGLU).
  void (*silu_multiply)(const float* gate, float* inout, int64_t count) = nullptr;
  void (*gelu_tanh_multiply)(const float* gate, float* inout, int64_t count) = nullptr;
  void (*add)(const float* a, const float* b, float* out, int64_t count) = nullptr;
  void (*scale)(const float* x, float factor, float* out, int64_t count) = nullptr;
  // out = cap tanh(x / cap).
  void (*softcap)(const float* x, float cap, float* out, int64_t count) = nullptr;
};

// One table of kernels for every op family the CPU backend runs: matmuls, rows and
// elements, attention.
struct CpuKernels {
  std::string_view isa;
  // Decode-sized inputs, rows <= gemv_max_rows: x f32 [rows, in], or as pack_gemv_input
  // left it where gemv_input_row_floats is not 0 for the weight's dtype.
  void (*gemv)(const float* x, int64_t rows, const WeightView& weight, int64_t o_begin, int64_t o_end, float* out,
               int64_t out_stride);
  // Any number of rows: packs weight panels and runs a register-blocked micro-kernel
  // (or matrix tiles). x is the input as pack_input left it for the weight's dtype, or
  // [rows, in] as it is where the table has no pack_input.
  void (*gemm)(const float* x, int64_t rows, const WeightView& weight, int64_t o_begin, int64_t o_end, float* out,
               int64_t out_stride);
  // Rearranges x [rows, in] for gemm over weights of `weight_dtype`, tiles [tile_begin,
  // tile_end) of input_tile_rows rows each, into `packed` (packed_input_floats of them);
  // null where gemm reads x as it is. Done once per op, so that every column task reads
  // the same packed copy.
  void (*pack_input)(const float* x, int64_t rows, int64_t in, DType weight_dtype, int64_t tile_begin,
                     int64_t tile_end, float* packed) = nullptr;
  int64_t input_tile_rows = 1;
  // The output columns gemm packs a weight block for: the unit a column task should be.
  int64_t gemm_column_block = 64;
  // Rearranges x [rows, in] for gemv over weights of `weight_dtype`, into `packed`
  // (rows x gemv_input_row_floats of them), where that count is not 0; null where gemv
  // reads x as it is for every dtype.
  void (*pack_gemv_input)(const float* x, int64_t rows, int64_t in, DType weight_dtype, float* packed) = nullptr;
  int64_t (*gemv_input_row_floats)(DType weight_dtype, int64_t in) = nullptr;
  // Row values [0, in) of a q4_k or q6_k weight, from its row's blocks, into out (f32),
  // and gemv over such a weight (x [rows, in] as it is): ggml_block_kernels.h at this
  // table's vector width.
  void (*decode_blocks)(DType dtype, const std::byte* blocks, int64_t in, float* out) = nullptr;
  void (*gemv_blocks)(const float* x, int64_t rows, const WeightView& weight, int64_t o_begin, int64_t o_end,
                      float* out, int64_t out_stride) = nullptr;
  RowKernels rows;
  // Where gemm rounds the activations to bf16 (gemm_rounds_input_to_bf16); null: never.
  bool (*gemm_rounds_input_to_bf16)(DType weight_dtype, int64_t in) = nullptr;
  // Where gemm rounds the activations to int8 per 32-element block (gemm_rounds_input_to_int8);
  // null: never.
  bool (*gemm_rounds_input_to_int8)(DType weight_dtype, int64_t in) = nullptr;
  // Where gemv does (gemv_rounds_input_to_int8); null: never.
  bool (*gemv_rounds_input_to_int8)(DType weight_dtype, int64_t in) = nullptr;
  // The attention kernels of this instruction set for a head_dim (attention_kernels.h),
  // or null (here, or returned) where attention.cpp's own loops run: a forced table
  // (SHARDLM_CPU_KERNELS) then decides attention as it does the matmuls.
  FlashBlockKernel (*flash_block)(int64_t head_dim) = nullptr;
  DecodeAttentionKernel (*decode_attention)(int64_t head_dim) = nullptr;
  // Where flash_block and decode_attention round the queries (and flash_block the softmax
  // weights) to bf16 (a cache of cache_dtype, head_dim); null: never.
  bool (*attention_rounds_to_bf16)(DType cache_dtype, int64_t head_dim) = nullptr;
};
inline int64_t input_tiles(const CpuKernels& kernels, int64_t rows) {
  return (rows + kernels.input_tile_rows - 1) / kernels.input_tile_rows;
}
inline int64_t packed_input_floats(const CpuKernels& kernels, int64_t rows, int64_t in) {
  return input_tiles(kernels, rows) * kernels.input_tile_rows * in;
}
// Floats of pack_gemv_input's copy of x [rows, in] for weights of `weight_dtype`; 0 where
// gemv reads x as it is.
inline int64_t gemv_input_floats(const CpuKernels& kernels, DType weight_dtype, int64_t rows, int64_t in) {
  if (!kernels.pack_gemv_input) return 0;
  return rows * kernels.gemv_input_row_floats(weight_dtype, in);
}
// gemv's input for x [rows, in] on one thread (tests, benchmarks).
inline const float* gemv_input(const CpuKernels& kernels, DType weight_dtype, const float* x, int64_t rows,
                               int64_t in, std::vector<float>& buffer) {
  const int64_t floats = gemv_input_floats(kernels, weight_dtype, rows, in);
  if (floats == 0) return x;
  buffer.resize(static_cast<size_t>(floats));
  kernels.pack_gemv_input(x, rows, in, weight_dtype, buffer.data());
  return buffer.data();
}
// gemm's input for x [rows, in] on one thread (tests, benchmarks): packed into `buffer`
// where the table packs, else x.
inline const float* gemm_input(const CpuKernels& kernels, DType weight_dtype, const float* x, int64_t rows,
                               int64_t in, std::vector<float>& buffer) {
  if (!kernels.pack_input) return x;
  buffer.resize(static_cast<size_t>(packed_input_floats(kernels, rows, in)));
  kernels.pack_input(x, rows, in, weight_dtype, 0, input_tiles(kernels, rows), buffer.data());
  return buffer.data();
}
constexpr int64_t gemv_max_rows = 4;

// The dtype whose kernels and input packing run a weight of `dtype`: f32 for q4_k and q6_k
// (ggml_block_products), else `dtype` itself.
inline DType kernel_dtype(DType dtype) { return is_ggml_blocks(dtype) ? DType::f32 : dtype; }
// out[r, o] = x[r] . weight[o] for o in [o_begin, o_end) of a q4_k or q6_k weight, x as
// gemv_input or gemm_input leave it for f32 weights: kernels.gemv_blocks for rows <=
// gemv_max_rows; else a column block of its rows at a time decoded by kernels.decode_blocks
// into this thread's f32 panel, then kernels' gemm over the panel. The blocks are read
// once, as stored.
void ggml_block_products(const CpuKernels& kernels, const float* x, int64_t rows, const WeightView& weight,
                         int64_t o_begin, int64_t o_end, float* out, int64_t out_stride);

// The portable table, the AVX2+FMA+F16C one, the AVX-512 (F, BW, VL, DQ) one, the
// AVX512-BF16 one (prefill of bf16 weights by VDPBF16PS, the rest AVX-512's) and the AMX
// one (prefill of bf16, f16, int8 and int4 weights on the tile units, the rest the
// AVX512-BF16 one's), the last four where this CPU and the OS run them, else null.
const CpuKernels& portable_cpu_kernels();
const CpuKernels* avx2_cpu_kernels();
const CpuKernels* avx512_cpu_kernels();
const CpuKernels* avx512_bf16_cpu_kernels();
const CpuKernels* amx_cpu_kernels();
bool cpu_has_avx512();
namespace {
// The bf16 terms the AMX table splits a weight of `weight_dtype` into, each a whole pass
// of tile products: bf16 1; f16, int8 and int4 2 (the bf16 rounding, then the rest).
// Internal linkage: the AMX file's copy is compiled for other instructions than its
// callers'.
constexpr int64_t amx_weight_terms(DType weight_dtype) { return weight_dtype == DType::bf16 ? 1 : 2; }
}  // namespace
// Loads the AMX tables' tile configuration on the calling thread: eight tiles of 16 rows x
// 64 bytes (C in tmm0-3, A in tmm4-5, B in tmm6-7). Only where amx_cpu_kernels() is not null.
void configure_amx_tiles();
// The AMX probe's body (machine_limits.h): `iterations` rounds of the gemm's inner step,
// four TDPBF16PS into four C tiles from two A and two B tiles, on the calling thread;
// returns one of the sums. Only where amx_cpu_kernels() is not null.
float run_amx_bf16_tile_chains(int64_t iterations);
// Whether `kernels`' gemm rounds the activations to bf16 for weights of `weight_dtype`
// and row length `in` (the AMX table's tile units do, for bf16, f16, int8 and int4
// weights whose rows are whole 32-element tiles; the AVX512-BF16 table's dot products for
// bf16 weights):
// 2^-9 relative per activation, as a bf16 model runs in transformers or llama.cpp. Every
// other kernel keeps them f32.
bool gemm_rounds_input_to_bf16(const CpuKernels& kernels, DType weight_dtype, int64_t in);
// Whether `kernels`' attention rounds the queries (flash_block also the softmax weights) to
// bf16 over a cache of `cache_dtype` (the AVX512-BF16 table's, over a bf16 cache whose
// head_dim is a multiple of 32 up to 256): 2^-9 relative each, as a bf16 model's attention in
// transformers.
bool attention_rounds_to_bf16(const CpuKernels& kernels, DType cache_dtype, int64_t head_dim);
// Whether `kernels`' gemm rounds the activations to int8, a scale per 32-element block (the
// AVX512-BF16 table's over int8 weights, on VPDPBUSD): up to 1/254 of each block's largest
// magnitude per element, as llama.cpp's Q8_0 activations.
bool gemm_rounds_input_to_int8(const CpuKernels& kernels, DType weight_dtype, int64_t in);
// Whether `kernels`' gemv rounds the activations to int8, a scale per 32-element block (the
// AVX512-BF16 table's over int4 weights, on VPDPBUSD), as its gemm above and llama.cpp's
// Q4_0 decode do. Every other gemv keeps them to int16 per block (2^-16 of its largest).
bool gemv_rounds_input_to_int8(const CpuKernels& kernels, DType weight_dtype, int64_t in);
// Every table this CPU can run, best last.
std::span<const CpuKernels* const> available_cpu_kernels();
// The table the CPU backend runs: the best available, or the one whose isa the
// environment variable SHARDLM_CPU_KERNELS names (portable, avx2, avx512, avx512_bf16, amx), for A/B runs
// on one machine; naming one this CPU lacks is an error.
const CpuKernels& cpu_kernels();

}  // namespace shardlm::backends::cpu
