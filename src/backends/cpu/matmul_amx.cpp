// The AMX table: prefill over bf16, f16, int8 and int4 weights on the matrix tile units
// (Intel AMX-BF16, Sapphire Rapids and later): one TDPBF16PS multiplies a 16x32 bf16 tile
// by a 32x16 one into 16x16 f32 sums, 16 times the FLOPs a cycle of AVX-512 FMAs.
// Everything else (decode's gemv, f32 weights, a row length that is not a multiple of 32)
// runs the AVX512-BF16 table's kernels, which every AMX CPU runs: int4 decode on
// VPDPBUSD, attention on VDPBF16PS, the rest AVX-512's.
//
// As llama.cpp does for bf16 weights (and transformers for a bf16 model), the
// activations are rounded to bf16 (nearest even) once per op; the products and their
// sums stay f32. That is 2^-9 relative per activation: tests/backends states the
// tolerance. The weights stay exact: an f16 weight (11 significant bits) is the sum of
// two bf16 values, its bf16 rounding and what that left, each packed as its own tiles
// and multiplied in turn (twice the tile work of bf16, still 8x AVX-512's FLOPs). An
// int8 weight times its block's f16 scale (18 significant bits, exact in f32) is split
// the same way, to within 2^-17 of itself: far inside the int8 rounding's 2^-8; an int4
// one (at most 14 significant bits) exactly.
//
// Layouts: pack_input writes x [rows, in] as bf16 A tiles, [row block][k block][16 rows]
// [32] (zero rows up to its 48-row unit), so that each A tile is one contiguous 1 KB (a
// tile load of 16 rows an input row apart is slower: docs/PERFORMANCE.md). Each task
// packs its columns of the weight, 128 at a time, as B tiles in the pairs layout
// TDPBF16PS reads ([k / 2][16 columns][2]): sixteen weight rows' 32-element runs as bf16,
// transposed as 32-bit pairs. Then for every pair of 16-row blocks and pair of 16-column
// tiles, four C tiles sum over the whole row length and are stored once.
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <vector>

#include "backends/cpu/avx512_gemm.h"
#include "backends/cpu/kernel_table.h"

namespace shardlm::backends::cpu {
namespace {

constexpr int64_t tile_rows = 16, tile_k = 32;  // an A tile: 16 rows x 32 bf16 (64 bytes a row)
constexpr int64_t column_block = 128;           // weight columns packed per step: 8 B tiles
constexpr int64_t unit_rows = 48;               // pack_input's unit: 3 A row blocks, 4 AVX-512 tiles
static_assert(Tensor::quant_block == tile_k, "an int8 weight's k block must be one quantization block");

bool runs_on_tiles(DType weight_dtype, int64_t in) {
  return (weight_dtype == DType::bf16 || weight_dtype == DType::f16 || weight_dtype == DType::i8 ||
          weight_dtype == DType::i4) &&
         in % tile_k == 0;
}

const CpuKernels& fallback() { return *avx512_bf16_cpu_kernels(); }
bool fallback_rounds_input_to_int8(DType weight_dtype, int64_t in) {
  return !runs_on_tiles(weight_dtype, in) && fallback().gemm_rounds_input_to_int8(weight_dtype, in);
}

// Stores the 16 rows' 32-element runs rows[0..16) as a B tile at `tile`: transposed as
// 32-bit pairs, [k pair][column][2].
void store_b_tile(__m512i rows[16], uint16_t* tile) {
  avx512::transpose16(rows);  // rows[p]: pair p of the sixteen columns
  for (int p = 0; p < 16; ++p) _mm512_storeu_si512(tile + p * 32, rows[p]);
}

// Sixteen bf16 values as f32.
inline __m512 widen_bf16(__m256i bits) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16)); }

// 32 weights (first: elements 0..15, second: 16..31) as two bf16 terms: *high their bf16
// rounding, *low the rest, rounded to bf16 in turn.
void split_to_bf16(__m512 first, __m512 second, __m512i* high, __m512i* low) {
  *high = (__m512i)_mm512_cvtne2ps_pbh(second, first);
  const __m512 first_high = widen_bf16(_mm512_castsi512_si256(*high));
  const __m512 second_high = widen_bf16(_mm512_extracti64x4_epi64(*high, 1));
  *low = (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(second, second_high), _mm512_sub_ps(first, first_high));
}

// The 32 weights of a row's k block kb from `run` as two bf16 terms: f16, and int4 times
// the block's scale, exactly; int8 times its scale to within 2^-17.
template <DType D>
void split_run(const WeightView& w, int64_t row, int64_t kb, const void* run, __m512i* high, __m512i* low) {
  if constexpr (D == DType::f16) {
    const auto* halves = static_cast<const __m256i*>(run);
    split_to_bf16(_mm512_cvtph_ps(_mm256_loadu_si256(halves)), _mm512_cvtph_ps(_mm256_loadu_si256(halves + 1)), high,
                  low);
  } else if constexpr (D == DType::i4) {
    // Byte j of the block holds element j in its low nibble and j + 16 in its high one,
    // each as q + 8.
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(run)));
    const __m512i eight = _mm512_set1_epi32(8);
    const __m512 scale = _mm512_set1_ps(_cvtsh_ss(w.block_scales[row * (w.in / tile_k) + kb]));
    const __m512i first = _mm512_sub_epi32(_mm512_and_si512(bytes, _mm512_set1_epi32(0x0F)), eight);
    const __m512i second = _mm512_sub_epi32(_mm512_srli_epi32(bytes, 4), eight);
    split_to_bf16(_mm512_mul_ps(_mm512_cvtepi32_ps(first), scale), _mm512_mul_ps(_mm512_cvtepi32_ps(second), scale),
                  high, low);
  } else {
    const auto* quarters = static_cast<const __m128i*>(run);
    const __m512 scale = _mm512_set1_ps(_cvtsh_ss(w.block_scales[row * (w.in / tile_k) + kb]));
    split_to_bf16(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(quarters))), scale),
                  _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(quarters + 1))), scale), high,
                  low);
  }
}

// B tiles of weight columns [n0, n0 + columns), zero past `columns`, for each of the
// weight's bf16 terms: packed[term][tile][k block][k pair][column][2] (512 bf16 a tile,
// column_block x in a term).
template <DType D>
void pack_weight_tiles(const WeightView& w, int64_t n0, int64_t columns, uint16_t* packed) {
  const int64_t in = w.in, k_blocks = in / tile_k;
  const int64_t element_bits = D == DType::i4 ? 4 : D == DType::i8 ? 8 : 16;
  for (int64_t j = 0; j * 16 < columns; ++j)
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      __m512i high[16], low[16];
      for (int64_t i = 0; i < 16; ++i) {
        high[i] = low[i] = _mm512_setzero_si512();
        if (j * 16 + i >= columns) continue;
        const int64_t row = n0 + j * 16 + i;
        const void* run = static_cast<const std::byte*>(w.data) + (row * in + kb * tile_k) * element_bits / 8;
        if constexpr (D == DType::bf16) high[i] = _mm512_loadu_si512(run);
        else split_run<D>(w, row, kb, run, &high[i], &low[i]);
      }
      const int64_t offset = (j * k_blocks + kb) * 512;
      store_b_tile(high, packed + offset);
      if constexpr (D != DType::bf16) store_b_tile(low, packed + column_block * in + offset);
    }
}

void pack_input(const float* x, int64_t rows, int64_t in, DType weight_dtype, int64_t unit_begin, int64_t unit_end,
                float* packed) {
  if (!runs_on_tiles(weight_dtype, in)) {
    const int64_t per_unit = unit_rows / fallback().input_tile_rows;
    const int64_t fallback_tiles = input_tiles(fallback(), rows);
    fallback().pack_input(x, rows, in, weight_dtype, unit_begin * per_unit,
                          std::min(fallback_tiles, unit_end * per_unit), packed);
    return;
  }
  auto* bf16 = reinterpret_cast<uint16_t*>(packed);  // [units x 3 row blocks][in / 32][16][32]
  const int64_t k_blocks = in / tile_k;
  for (int64_t r = unit_begin * unit_rows; r < unit_end * unit_rows; ++r) {
    uint16_t* target = bf16 + (r / tile_rows) * k_blocks * 512 + (r % tile_rows) * tile_k;
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const float* source = x + r * in + kb * tile_k;
      const __m512i pair = r < rows
                               ? (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(source + 16), _mm512_loadu_ps(source))
                               : _mm512_setzero_si512();
      _mm512_storeu_si512(target + kb * 512, pair);
    }
  }
}

// A C tile, rows [row0, row0 + 16) x columns [column0, column0 + 16) of out, of which
// `valid_rows` x `valid_columns` exist: stored in place when whole, else through a
// buffer. store(address, stride in bytes) stores the tile (its number must be a literal).
template <typename Store>
void store_tile(float* out, int64_t stride, int64_t row0, int64_t column0, int64_t valid_rows, int64_t valid_columns,
                Store store) {
  float* corner = out + row0 * stride + column0;
  if (valid_rows >= 16 && valid_columns >= 16) {
    store(corner, stride * static_cast<int64_t>(sizeof(float)));
    return;
  }
  alignas(64) float tile[16 * 16];
  store(tile, 64);
  for (int64_t r = 0; r < std::min<int64_t>(16, valid_rows); ++r)
    std::memcpy(corner + r * stride, tile + r * 16, static_cast<size_t>(std::min<int64_t>(16, valid_columns)) * 4);
}

template <DType D>
void gemm_on_tiles(const float* packed_x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end,
                   float* out, int64_t stride) {
  constexpr int64_t terms = amx_weight_terms(D);
  const auto* x = reinterpret_cast<const uint16_t*>(packed_x);  // A tiles [row block][in / 32][16][32] bf16
  const int64_t in = w.in, k_blocks = in / tile_k, row_blocks = (rows + tile_rows - 1) / tile_rows;
  // This thread's B tiles, [terms][8 tiles][in / 32][512] bf16; grows to the longest rows, then stays.
  thread_local std::vector<uint16_t> weight_tiles;
  const auto tile_elements = static_cast<size_t>(terms * column_block * in);
  if (weight_tiles.size() < tile_elements) weight_tiles.resize(tile_elements);
  uint16_t* packed_weight = weight_tiles.data();
  configure_amx_tiles();
  for (int64_t n0 = o_begin; n0 < o_end; n0 += column_block) {
    const int64_t columns = std::min(column_block, o_end - n0), column_tiles = (columns + 15) / 16;
    pack_weight_tiles<D>(w, n0, columns, packed_weight);
    for (int64_t rb = 0; rb < row_blocks; rb += 2) {
      const bool two_row_blocks = rb + 1 < row_blocks;
      const uint16_t* x0 = x + rb * k_blocks * 512;
      const uint16_t* x1 = x0 + k_blocks * 512;
      for (int64_t j = 0; j < column_tiles; j += 2) {
        const bool two_column_tiles = j + 1 < column_tiles;
        const uint16_t* b0 = packed_weight + j * k_blocks * 512;
        const uint16_t* b1 = b0 + k_blocks * 512;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t kb = 0; kb < k_blocks; ++kb) {
          _tile_loadd(4, x0 + kb * 512, 64);
          if (two_row_blocks) _tile_loadd(5, x1 + kb * 512, 64);
          for (int64_t term = 0; term < terms; ++term) {
            const int64_t at = term * column_block * in + kb * 512;
            _tile_loadd(6, b0 + at, 64);
            _tile_dpbf16ps(0, 4, 6);
            if (two_row_blocks) _tile_dpbf16ps(2, 5, 6);
            if (two_column_tiles) {
              _tile_loadd(7, b1 + at, 64);
              _tile_dpbf16ps(1, 4, 7);
              if (two_row_blocks) _tile_dpbf16ps(3, 5, 7);
            }
          }
        }
        const int64_t row0 = rb * tile_rows, column0 = n0 + j * 16;
        const int64_t rows_left = rows - row0, columns_left = o_end - column0;
        store_tile(out, stride, row0, column0, rows_left, columns_left,
                   [](void* at, int64_t bytes) { _tile_stored(0, at, bytes); });
        if (two_column_tiles)
          store_tile(out, stride, row0, column0 + 16, rows_left, columns_left - 16,
                     [](void* at, int64_t bytes) { _tile_stored(1, at, bytes); });
        if (two_row_blocks)
          store_tile(out, stride, row0 + 16, column0, rows_left - 16, columns_left,
                     [](void* at, int64_t bytes) { _tile_stored(2, at, bytes); });
        if (two_row_blocks && two_column_tiles)
          store_tile(out, stride, row0 + 16, column0 + 16, rows_left - 16, columns_left - 16,
                     [](void* at, int64_t bytes) { _tile_stored(3, at, bytes); });
      }
    }
  }
  // Hands the tile state back: a thread holding it makes every context switch save 8 KB.
  _tile_release();
}

void gemm(const float* x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end, float* out,
          int64_t stride) {
  if (!runs_on_tiles(w.dtype, w.in)) fallback().gemm(x, rows, w, o_begin, o_end, out, stride);
  else if (w.dtype == DType::f16) gemm_on_tiles<DType::f16>(x, rows, w, o_begin, o_end, out, stride);
  else if (w.dtype == DType::i8) gemm_on_tiles<DType::i8>(x, rows, w, o_begin, o_end, out, stride);
  else if (w.dtype == DType::i4) gemm_on_tiles<DType::i4>(x, rows, w, o_begin, o_end, out, stride);
  else gemm_on_tiles<DType::bf16>(x, rows, w, o_begin, o_end, out, stride);
}

// AMX-TILE, AMX-BF16 and AVX512-BF16 from CPUID (clang's __builtin_cpu_supports knows
// none of them), then the kernel's leave: Linux gives a process the 8 KB tile state only
// once it asks (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA).
bool cpu_runs_amx_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!cpu_has_avx512() || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool tiles = (edx & (1u << 24)) != 0, bf16_tiles = (edx & (1u << 22)) != 0;
  if (!tiles || !bf16_tiles || !__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) || (eax & (1u << 5)) == 0) return false;
  constexpr long request_permission = 0x1023, tile_data = 18;
  return syscall(SYS_arch_prctl, request_permission, tile_data) == 0;
}

}  // namespace

namespace {

// Built only once the CPU check has passed: its code may use this file's instructions.
[[gnu::noinline]] const CpuKernels& table() {
  static const CpuKernels kernels{.isa = "amx", .gemv = fallback().gemv, .gemm = gemm, .pack_input = pack_input,
                                  .input_tile_rows = unit_rows, .gemm_column_block = column_block,
                                  .pack_gemv_input = fallback().pack_gemv_input,
                                  .gemv_input_row_floats = fallback().gemv_input_row_floats,
                                  .decode_blocks = fallback().decode_blocks,
                                  .gemv_blocks = fallback().gemv_blocks,
                                  .rows = fallback().rows,
                                  .gemm_rounds_input_to_bf16 = runs_on_tiles,
                                  .gemm_rounds_input_to_int8 = fallback_rounds_input_to_int8,
                                  .gemv_rounds_input_to_int8 = fallback().gemv_rounds_input_to_int8,
                                  .flash_block = fallback().flash_block,
                                  .decode_attention = fallback().decode_attention,
                                  .attention_rounds_to_bf16 = fallback().attention_rounds_to_bf16};
  return kernels;
}

}  // namespace

// Palette 1 (kernel_table.h says which tile holds what).
void configure_amx_tiles() {
  struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t bytes_per_row[16] = {};
    uint8_t rows[16] = {};
  } config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = tile_rows;
  }
  // Not _tile_loadconfig: GCC 12's tells the compiler it reads the config's first 8 bytes
  // only, and the stores of the tiles' shapes past them were dropped as dead (SIGILL at the
  // first tile instruction). The operand here is the whole struct.
  __asm__ volatile("ldtilecfg %0" : : "m"(config));
}

float run_amx_bf16_tile_chains(int64_t iterations) {
  configure_amx_tiles();
  // Every operand element 2^-7 (bf16 0x3C00): each instruction adds 32 products of 2^-14
  // to every sum, which stays far inside f32's range over any probe's length.
  alignas(64) uint16_t operand[tile_rows * tile_k];
  std::fill(std::begin(operand), std::end(operand), uint16_t{0x3C00});
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float sums[tile_rows * 16];
  _tile_stored(0, sums, 64);
  _tile_release();
  return sums[0];
}

const CpuKernels* amx_cpu_kernels() {
  static const bool runs = cpu_runs_amx_bf16();
  return runs ? &table() : nullptr;
}

}  // namespace shardlm::backends::cpu
