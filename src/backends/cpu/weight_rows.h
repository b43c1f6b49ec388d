#pragma once
// What every CPU weight kernel knows of a weight's rows whatever its instruction set:
// element sizes and row addresses per dtype, the dispatch on a weight's dtype, and how a
// gemv splits its output rows into streams read side by side. No intrinsics: the portable
// (through decode_attention.h), AVX2, AVX-512 and AMX files each include this beside their
// own vector building blocks.
// Internal linkage, as native_vectors.h: those files are compiled for different
// instruction sets, and the linker must not give one of them another's copy.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/kernel_table.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/quantize.h"

// Register tiles live in small arrays indexed by compile-time loops; fully unrolled,
// they stay in registers (GCC's -O2 would keep some loops and spill the arrays).
#define SHARDLM_UNROLL _Pragma("GCC unroll 16")

namespace shardlm::backends::cpu {
namespace {

constexpr int64_t block = Tensor::quant_block;

// Calls body(std::integral_constant<DType, dtype>) for the weight's dtype.
template <typename Body>
void with_dtype(DType dtype, Body body) {
  switch (dtype) {
    case DType::f32: return body(std::integral_constant<DType, DType::f32>{});
    case DType::bf16: return body(std::integral_constant<DType, DType::bf16>{});
    case DType::f16: return body(std::integral_constant<DType, DType::f16>{});
    case DType::i4: return body(std::integral_constant<DType, DType::i4>{});
    case DType::i8: return body(std::integral_constant<DType, DType::i8>{});
    default: fail("the matmul kernels take f32, bf16, f16, int8 or int4 weights, not ", dtype_name(dtype));
  }
}

// Weights of block-quantized integers with f16 block scales: int8, or int4 two a byte.
template <DType D>
constexpr bool block_quantized = D == DType::i8 || D == DType::i4;

// Bytes per weight element of dtype D, known at compile time (dtype_size is not); int4,
// half a byte, is handled where it is read.
template <DType D>
constexpr int64_t element_bytes = D == DType::f32 ? 4 : D == DType::i8 || D == DType::i4 ? 1 : 2;

template <DType D>
inline const void* row_pointer(const WeightView& w, int64_t row) {
  if constexpr (D == DType::i4) return static_cast<const std::byte*>(w.data) + row * w.in / 2;
  return static_cast<const std::byte*>(w.data) + row * w.in * element_bytes<D>;
}

// Byte offset of element k (a whole block's start for int4) in a row of dtype D.
template <DType D>
constexpr int64_t byte_offset(int64_t k) {
  return D == DType::i4 ? k / 2 : k * element_bytes<D>;
}

template <DType D>
inline float load1(const void* row, int64_t k) {
  if constexpr (D == DType::f32) return static_cast<const float*>(row)[k];
  else if constexpr (D == DType::bf16) return bf16_to_f32(static_cast<const uint16_t*>(row)[k]);
  else if constexpr (D == DType::f16) return f16_to_f32(static_cast<const uint16_t*>(row)[k]);
  else if constexpr (D == DType::i4) return static_cast<float>(int4_value(static_cast<const uint8_t*>(row), k));
  else return static_cast<float>(static_cast<const int8_t*>(row)[k]);
}

// How far ahead of its reads the gemv prefetches each weight stream, one line per 64
// bytes read. A stream's loads alone keep only as many lines in flight as the
// out-of-order window holds iterations of the loop (~6 instructions per 32 bytes of
// bf16 weights, ~10 of int8), short of the read bandwidth on a core whose memory is
// ~100 ns away; hardware prefetch did not make up the rest here. 1 KB ahead, against
// none, at two threads on Zen 3 (bench/weight_stream, kernels' speed over bare reads of
// the same bytes): bf16 0.88 -> 1.04, f16 0.85 -> 0.98, f32 0.97 -> 1.05 (512 B and 2 KB
// gained less); int8, against the read probe, 0.86 -> 0.94.
constexpr int64_t gemv_prefetch_bytes = 1024;

// The int16 activations int8 weights meet in a gemv (pack_int8_gemv_input, one per
// instruction set), per row: `in` int16 values (in / 2 floats' room), then one f32 scale
// per quantization block.
inline int64_t int8_gemv_row_floats(int64_t in) { return in / 2 + in / block; }

// The streams an int8 (or int4) gemv tile reads: S weight rows `part` apart from row o
// with their f16 block scales, and R activation rows of `row_floats` floats in
// pack_int8_gemv_input's layout (`in` int16 values, then one f32 scale per block).
template <int R, int S, DType D = DType::i8>
struct Int8TileStreams {
  const uint8_t* rows[S];
  const uint16_t* weight_scales[S];
  const int16_t* values[R];
  const float* input_scales[R];

  Int8TileStreams(const float* packed_x, int64_t row_floats, const WeightView& w, int64_t o, int64_t part) {
    const int64_t blocks = w.in / block;
    SHARDLM_UNROLL
    for (int s = 0; s < S; ++s) {
      rows[s] = static_cast<const uint8_t*>(row_pointer<D>(w, o + s * part));
      weight_scales[s] = w.block_scales + (o + s * part) * blocks;
    }
    SHARDLM_UNROLL
    for (int r = 0; r < R; ++r) {
      values[r] = reinterpret_cast<const int16_t*>(packed_x + r * row_floats);
      input_scales[r] = packed_x + r * row_floats + w.in / 2;
    }
  }
};

// Calls body(first_row, std::integral_constant<int, R>) for each group of R <= gemv_max_rows
// input rows of a gemv, so that its kernels are compiled for each row count.
template <typename Body>
void for_gemv_row_groups(int64_t rows, Body body) {
  for (int64_t r = 0; r < rows; r += gemv_max_rows) switch (std::min(rows - r, gemv_max_rows)) {
      case 1: body(r, std::integral_constant<int, 1>{}); break;
      case 2: body(r, std::integral_constant<int, 2>{}); break;
      case 3: body(r, std::integral_constant<int, 3>{}); break;
      default: body(r, std::integral_constant<int, 4>{}); break;
    }
}

// Output rows [o_begin, o_end) of a gemv over R input rows as S parts read side by side,
// then the rows left over one at a time: tile.template operator()<Streams>(o, part)
// computes rows o + s * part for s < Streams. About six streams a core read fastest on
// Zen 3 (sixteen read ~15% less) for f32 and f16; the bf16 loop, with fewer instructions
// per byte, read ~3% faster at two threads with four than with six (two: ~10% slower);
// int8 rows come with a stream of scales each, so three parts; int4, half the bytes a
// block, four (no slower than three on Zen 4). Fewer parts at more input
// rows, as each needs R accumulators. The AVX-512 gemv reads the same way: on Sapphire
// Rapids two to six int8 streams could not be told apart.
template <DType D, int R, typename Tile>
void for_gemv_stream_tiles(int64_t o_begin, int64_t o_end, Tile tile) {
  constexpr int S = D == DType::i4     ? (R <= 2 ? 4 : 2)
                    : D == DType::i8   ? (R <= 2 ? 3 : 2)
                    : D == DType::bf16 ? (R <= 2 ? 4 : 3)
                                       : (R == 1 ? 6 : R == 2 ? 4 : 3);
  const int64_t part = (o_end - o_begin) / S;
  for (int64_t o = o_begin; o < o_begin + part; ++o) tile.template operator()<S>(o, part);
  for (int64_t o = o_begin + S * part; o < o_end; ++o) tile.template operator()<1>(o, 0);
}

}  // namespace
}  // namespace shardlm::backends::cpu
