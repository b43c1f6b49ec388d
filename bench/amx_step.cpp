// The AMX gemm's inner step on one thread, operands in L1 and L2 as the gemm meets them:
// four TDPBF16PS into four C tiles from two A and two B tiles, with the step's four tile
// loads, the A tiles 16 rows an input row apart (bf16 rows) or one contiguous 1 KB each
// (the layout pack_input writes), beside the AMX probe (the products alone,
// machine_limits.h). It tells what bounds matmul_amx.cpp: the tile products, or the loads
// that feed them.
//   build/bench/amx_step [in (1024)]
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/cpu/kernel_table.h"
#include "backends/cpu/machine_limits.h"

namespace {

using shardlm::backends::cpu::amx_cpu_kernels, shardlm::backends::cpu::configure_amx_tiles,
    shardlm::backends::cpu::measure_amx_bf16_peak_gflops;

constexpr int64_t rows = 512, column_tiles = 8, repeats = 20;  // A: 512 rows; B: 128 columns
enum class Loads { strided_a, contiguous_a };

// TFLOP/s of the steps over A [rows, in] and B [column_tiles][in / 32][512], in bf16.
// The tile instructions are asked for here alone, so main runs on any x86-64.
__attribute__((target("avx512f,amx-tile,amx-bf16"))) double steps(Loads loads, int64_t in, const uint16_t* a,
                                                                   const uint16_t* b) {
  const int64_t k_blocks = in / 32, a_stride = loads == Loads::strided_a ? in * 2 : 64;
  configure_amx_tiles();
  int64_t products = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t repeat = 0; repeat < repeats; ++repeat)
    for (int64_t rb = 0; rb < rows / 16; rb += 2)
      for (int64_t j = 0; j < column_tiles; j += 2) {
        // The two row blocks' A tiles: 16 rows of `in` apart, or [k block][16][32] each.
        const uint16_t* a0 = loads == Loads::strided_a ? a + rb * 16 * in : a + rb * k_blocks * 512;
        const uint16_t* a1 = loads == Loads::strided_a ? a0 + 16 * in : a0 + k_blocks * 512;
        const int64_t a_step = loads == Loads::strided_a ? 32 : 512;
        const uint16_t* b0 = b + j * k_blocks * 512;
        const uint16_t* b1 = b0 + k_blocks * 512;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t kb = 0; kb < k_blocks; ++kb) {
          _tile_loadd(4, a0 + kb * a_step, a_stride);
          _tile_loadd(5, a1 + kb * a_step, a_stride);
          _tile_loadd(6, b0 + kb * 512, 64);
          _tile_loadd(7, b1 + kb * 512, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
          products += 4;
        }
        alignas(64) static float sums[256];
        _tile_stored(0, sums, 64);
      }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  _tile_release();
  return static_cast<double>(products) * 16 * 16 * 32 * 2 / seconds / 1e12;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t in = argc > 1 ? std::atoll(argv[1]) : 1024;
  if (in <= 0 || in % 32 != 0) {
    std::fprintf(stderr, "usage: amx_step [in (1024)]: in must be a positive multiple of 32, not '%s'\n", argv[1]);
    return 2;
  }
  if (!amx_cpu_kernels()) {  // also asks Linux for the tile state
    std::fprintf(stderr, "this CPU (or its OS) runs no AMX-BF16 tiles\n");
    return 1;
  }
  // Every element bf16 2^-7, as the probe's: the sums stay far inside f32's range.
  const std::vector<uint16_t> a(static_cast<size_t>(rows * in), 0x3C00);
  const std::vector<uint16_t> b(static_cast<size_t>(column_tiles * 16 * in), 0x3C00);
  std::printf("AMX inner step, one thread, in = %lld (A %lld KB, B %lld KB), TFLOP/s:\n", static_cast<long long>(in),
              static_cast<long long>(rows * in * 2 / 1024), static_cast<long long>(column_tiles * 16 * in * 2 / 1024));
  for (int round = 0; round < 3; ++round) {
    const double alone = measure_amx_bf16_peak_gflops(1) / 1000;
    const double strided = steps(Loads::strided_a, in, a.data(), b.data());
    const double contiguous = steps(Loads::contiguous_a, in, a.data(), b.data());
    std::printf("  products alone (the AMX probe) %.2f   with loads, A in bf16 rows %.2f   with loads, A as contiguous tiles %.2f\n",
                alone, strided, contiguous);
  }
  return 0;
}
