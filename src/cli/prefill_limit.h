#pragma once
// The limit `shardlm bench` scores a CPU prefill against: the peak of the instruction each
// of its matmuls runs, weighed by that matmul's share of the FLOPs. A model whose weights
// are all of one kind runs one instruction; a GGUF file mixes them (Q4_K_M: Q4_K and Q6_K
// on f32 FMAs, Q8_0 and Q5_0 on int8 dot products where the table has them), and a single
// instruction's peak would then put the share over 100% or under the truth.
#include <cstdint>
#include <functional>
#include <iterator>
#include <numeric>
#include <string>

#include "backends/cpu/kernel_table.h"
#include "cli/model_options.h"
#include "io/config.h"

namespace shardlm::cli {

enum class PeakInstruction { f32_fma, bf16_dot, int8_dot, amx_bf16_tiles };
constexpr int peak_instructions = 4;

struct PrefillLimit {
  // The prefill matmuls' FLOPs by the instruction that runs them; in order of
  // PeakInstruction, zero where none.
  double flops[peak_instructions] = {};
  // The FLOPs each instruction performs for them: `flops`, but twice those of the f16,
  // int8 and int4 matrices on AMX tiles, each split into two bf16 terms (amx_weight_terms).
  double work[peak_instructions] = {};

  double total_flops() const { return std::accumulate(std::begin(flops), std::end(flops), 0.0); }
  // "f32 FMA", or for a mix each instruction with its share of the FLOPs.
  std::string describe() const;
  // The effective peak: the FLOPs over the least time the instructions take for their
  // work at the peaks `peak_of` measures (GFLOP/s, or G ops/s); 0 where one of them has
  // no peak here.
  double peak_gflops(const std::function<double(PeakInstruction)>& peak_of) const;
};

// From the weights as `args` loads them: each matrix a prompt token multiplies (every one
// but the embedding and the LM head, as TokenCost counts them), of its dtype after
// --dtype / --quantize (stored quantized tensors are kept), on `table`.
PrefillLimit prefill_limit(const io::ModelConfig& config, const io::ModelFiles& files, const ModelArguments& args,
                           const backends::cpu::CpuKernels& table);

// The measured peak of `instruction` at `threads` threads (machine_limits.h).
double measure_peak(PeakInstruction instruction, int threads);

}  // namespace shardlm::cli
