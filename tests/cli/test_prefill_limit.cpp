// The limit `shardlm bench` scores a CPU prefill against (cli/prefill_limit.h): each
// instruction's peak weighed by its matmuls' FLOPs, on a real mixed GGUF file.
#include "cli/prefill_limit.h"

#include <gtest/gtest.h>

#include "io/model_resolution.h"
#include "test_util.h"

namespace shardlm::cli {
namespace {

constexpr int fma = static_cast<int>(PeakInstruction::f32_fma), int8_dot = static_cast<int>(PeakInstruction::int8_dot),
              amx = static_cast<int>(PeakInstruction::amx_bf16_tiles);

TEST(PrefillLimit, EachInstructionWeighsByItsFlops) {
  PrefillLimit limit;
  limit.flops[fma] = limit.work[fma] = 3;
  limit.flops[int8_dot] = limit.work[int8_dot] = 1;
  EXPECT_EQ(limit.describe(),
            "mix of f32 FMA for 75% of the FLOPs, int8 dot product (VPDPBUSD) for 25% of the FLOPs");
  // 4 FLOPs take 3 / 100 + 1 / 400 s at peaks of 100 and 400.
  const auto peaks = [](PeakInstruction i) { return i == PeakInstruction::f32_fma ? 100.0 : 400.0; };
  EXPECT_DOUBLE_EQ(limit.peak_gflops(peaks), 4 / (3 / 100.0 + 1 / 400.0));
  // An f16 matrix on AMX tiles takes two passes: 2 FLOPs of it cost 4 FLOPs' time.
  PrefillLimit tiles;
  tiles.flops[amx] = 2;
  tiles.work[amx] = 4;
  EXPECT_EQ(tiles.describe(), "AMX bf16 tiles (TDPBF16PS)");
  EXPECT_DOUBLE_EQ(tiles.peak_gflops(peaks), 200.0);
  // An instruction with no peak on this machine leaves no limit, rather than a wrong one.
  EXPECT_EQ(limit.peak_gflops([](PeakInstruction i) { return i == PeakInstruction::int8_dot ? 0.0 : 100.0; }), 0);
  EXPECT_EQ(PrefillLimit{}.describe(), "f32 FMA");
}

// llama.cpp's Q8_0 file of the llama-tiny fixture keeps ffn_down (176 columns, not whole
// 32-value blocks) in F16: per layer q, k, v, o (64 x 64) and gate, up (176 x 64) run as
// int8, down as f16.
TEST(PrefillLimit, AGgufOfQ8_0AndF16MatricesCountsEachInstructionsFlops) {
  const io::ModelFiles files = io::resolve_model(testing::data_path("gguf/llama-tiny-q8_0.gguf"));
  const io::ModelConfig config = io::load_model_config(files);
  const double layers = static_cast<double>(config.num_hidden_layers);
  const double int8_flops = layers * 2 * (4 * 64 * 64 + 2 * 176 * 64), f16_flops = layers * 2 * 176 * 64;
  ASSERT_EQ(config.hidden_size, 64);
  for (const backends::cpu::CpuKernels* table : backends::cpu::available_cpu_kernels()) {
    SCOPED_TRACE(std::string(table->isa));
    const PrefillLimit limit = prefill_limit(config, files, ModelArguments{}, *table);
    EXPECT_DOUBLE_EQ(limit.total_flops(), int8_flops + f16_flops);
    const bool int8_dots =
        table->isa == "avx512_bf16" && backends::cpu::gemm_rounds_input_to_int8(*table, DType::i8, 64);
    const bool tiles = table->isa == "amx";  // the int8 matrices, in two bf16 passes
    EXPECT_DOUBLE_EQ(limit.flops[int8_dot], int8_dots ? int8_flops : 0);
    EXPECT_DOUBLE_EQ(limit.flops[amx], tiles ? int8_flops : 0);
    EXPECT_DOUBLE_EQ(limit.work[amx], tiles ? 2 * int8_flops : 0);
    EXPECT_DOUBLE_EQ(limit.flops[fma], int8_dots || tiles ? f16_flops : int8_flops + f16_flops);
    // --dtype leaves the stored Q8_0 blocks as they are; down, in bf16, has rows of 176
    // values, not whole 32-value runs, and stays on FMAs.
    ModelArguments to_bf16;
    to_bf16.dtype = "bfloat16";
    const PrefillLimit converted = prefill_limit(config, files, to_bf16, *table);
    for (int i = 0; i < peak_instructions; ++i) EXPECT_DOUBLE_EQ(converted.flops[i], limit.flops[i]) << i;
  }
  // On any CPU, a table that runs int8 weights on AMX tiles (the portable one's entries,
  // said to) scores them against the tiles, each int8 FLOP two FLOPs of tile work.
  backends::cpu::CpuKernels tiles = backends::cpu::portable_cpu_kernels();
  tiles.isa = "amx";
  tiles.gemm_rounds_input_to_bf16 = [](DType dtype, int64_t in) { return dtype == DType::i8 && in % 32 == 0; };
  const PrefillLimit on_tiles = prefill_limit(config, files, ModelArguments{}, tiles);
  EXPECT_DOUBLE_EQ(on_tiles.flops[amx], int8_flops);
  EXPECT_DOUBLE_EQ(on_tiles.work[amx], 2 * int8_flops);
  EXPECT_DOUBLE_EQ(on_tiles.work[fma], f16_flops);
  tiles.gemm_rounds_input_to_bf16 = nullptr;
  EXPECT_DOUBLE_EQ(prefill_limit(config, files, ModelArguments{}, tiles).flops[fma], int8_flops + f16_flops);
}

// The AMX probe runs only where the tiles do; there it must outrun the AVX-512 bf16 dot
// product it replaces (16 times the FLOPs a cycle on Sapphire Rapids).
TEST(PrefillLimit, TheAmxTilesHaveTheirOwnPeak) {
  const double tiles = measure_peak(PeakInstruction::amx_bf16_tiles, 1);
  if (backends::cpu::amx_cpu_kernels() == nullptr) {
    EXPECT_EQ(tiles, 0);
    GTEST_SKIP() << "no AMX here: the probe reports none";
  }
  EXPECT_GT(tiles, 2 * measure_peak(PeakInstruction::bf16_dot, 1));
}

}  // namespace
}  // namespace shardlm::cli
