#include "cli/prefill_limit.h"

#include "backends/cpu/machine_limits.h"
#include "core/dtype.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/causal_lm.h"

namespace shardlm::cli {
namespace {

constexpr const char* instruction_names[] = {"f32 FMA", "bf16 dot product (VDPBF16PS)",
                                             "int8 dot product (VPDPBUSD)", "AMX bf16 tiles (TDPBF16PS)"};

bool is_float(DType dtype) { return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16; }

// The dtype a matrix runs in: a shardlm-quantized checkpoint's (its int4 is stored as byte
// pairs), else the stored one, which --quantize or --dtype replace for float tensors.
DType running_dtype(DType stored, const io::ModelConfig& config, const ModelArguments& args) {
  if (config.quant_method == io::int4_quant_method) return DType::i4;
  if (config.quant_method == io::int8_quant_method) return DType::i8;
  if (!is_float(stored)) return stored;
  if (args.quantize == "int4") return DType::i4;
  if (args.quantize == "int8") return DType::i8;
  return args.dtype.empty() ? stored : parse_dtype(args.dtype);
}

// The AMX table's tiles and the AVX512-BF16 table's dot products (which the AMX table
// runs where its tiles do not), where their gemms take them; everything else is scored
// against f32 FMAs.
PeakInstruction instruction_of(const backends::cpu::CpuKernels& table, DType dtype, int64_t in) {
  dtype = backends::cpu::kernel_dtype(dtype);
  if (table.isa == "amx" && backends::cpu::gemm_rounds_input_to_bf16(table, dtype, in))
    return PeakInstruction::amx_bf16_tiles;
  if (table.isa != "avx512_bf16" && table.isa != "amx") return PeakInstruction::f32_fma;
  if (backends::cpu::gemm_rounds_input_to_bf16(table, dtype, in)) return PeakInstruction::bf16_dot;
  if (backends::cpu::gemm_rounds_input_to_int8(table, dtype, in)) return PeakInstruction::int8_dot;
  return PeakInstruction::f32_fma;
}

}  // namespace

std::string PrefillLimit::describe() const {
  std::string mix;
  int kinds = 0;
  for (int i = 0; i < peak_instructions; ++i)
    if (flops[i] > 0) {
      mix += str_cat(kinds++ ? ", " : "", instruction_names[i]);
      if (flops[i] < total_flops())
        mix += str_cat(" for ", static_cast<int>(100 * flops[i] / total_flops() + 0.5), "% of the FLOPs");
    }
  return kinds > 1 ? "mix of " + mix : kinds == 1 ? mix : instruction_names[0];
}

double PrefillLimit::peak_gflops(const std::function<double(PeakInstruction)>& peak_of) const {
  double seconds = 0;  // per GFLOP of the whole
  for (int i = 0; i < peak_instructions; ++i) {
    if (flops[i] <= 0) continue;
    const double peak = peak_of(static_cast<PeakInstruction>(i));
    if (peak <= 0) return 0;
    seconds += work[i] / total_flops() / peak;
  }
  return seconds > 0 ? 1 / seconds : peak_of(PeakInstruction::f32_fma);
}

PrefillLimit prefill_limit(const io::ModelConfig& config, const io::ModelFiles& files, const ModelArguments& args,
                           const backends::cpu::CpuKernels& table) {
  const io::Checkpoint checkpoint = io::Checkpoint::open(files);
  PrefillLimit limit;
  for (const auto& [name, shape] : models::required_weights(config)) {
    if (shape.rank() != 2 || name == "model.embed_tokens.weight" || name == "lm_head.weight") continue;
    const DType stored = checkpoint.contains(name) ? checkpoint.info(name).dtype
                                                   : config.torch_dtype.value_or(DType::f32);
    const DType dtype = running_dtype(stored, config, args);
    const PeakInstruction instruction = instruction_of(table, dtype, shape[1]);
    const double flops = 2.0 * static_cast<double>(shape.numel());
    const double passes = instruction == PeakInstruction::amx_bf16_tiles
                              ? static_cast<double>(backends::cpu::amx_weight_terms(backends::cpu::kernel_dtype(dtype)))
                              : 1.0;
    limit.flops[static_cast<int>(instruction)] += flops;
    limit.work[static_cast<int>(instruction)] += passes * flops;
  }
  return limit;
}

double measure_peak(PeakInstruction instruction, int threads) {
  switch (instruction) {
    case PeakInstruction::bf16_dot: return backends::cpu::measure_bf16_dot_peak_gflops(threads);
    case PeakInstruction::int8_dot: return backends::cpu::measure_int8_dot_peak_gops(threads);
    case PeakInstruction::amx_bf16_tiles: return backends::cpu::measure_amx_bf16_peak_gflops(threads);
    case PeakInstruction::f32_fma: break;
  }
  return backends::cpu::measure_fma_peak_gflops(threads);
}

}  // namespace shardlm::cli
