#pragma once
// The int8 prefill on AVX512_VNNI (matmul_avx512_vnni.cpp), which the AVX512-BF16 table
// runs for int8 and int4 weights: its entries, with CpuKernels' meanings.
#include <cstdint>

#include "backends/cpu/kernel_table.h"

namespace shardlm::backends::cpu::avx512_vnni {

// Whether this CPU runs AVX512_VNNI (and AVX-512 F, BW, VL, DQ).
bool cpu_runs_vnni();
// int8 or int4 weights whose rows are whole 32-element blocks: these kernels run them.
bool runs_on_quads(DType weight_dtype, int64_t in);
// x [rows, in]'s tiles [tile_begin, tile_end) rounded to int8 per block, into `packed`.
void pack_input(const float* x, int64_t rows, int64_t in, int64_t tile_begin, int64_t tile_end, float* packed);
void gemm(const float* packed_x, int64_t rows, const WeightView& weight, int64_t o_begin, int64_t o_end, float* out,
          int64_t out_stride);

// The int4 gemv (rows <= gemv_max_rows) on VPDPBUSD, its activations rounded to int8 per
// block: the floats a row of pack_int4_gemv_input's copy takes, the packing, the product.
int64_t int4_gemv_row_floats(int64_t in);
void pack_int4_gemv_input(const float* x, int64_t rows, int64_t in, float* packed);
void int4_gemv(const float* packed_x, int64_t rows, const WeightView& weight, int64_t o_begin, int64_t o_end,
               float* out, int64_t out_stride);

}  // namespace shardlm::backends::cpu::avx512_vnni
