// Does decode read its weights as fast as this machine's memory lets a program read
// them? One decode token's matmuls (every layer's q, k, v, o, gate, up and down
// projections in order, then the lm_head; random weights of a config.json's shapes)
// run on the CPU kernels, taking turns token by token with a bare read of the same
// tensors in the same order, op by op, and with one read of a single buffer as large as
// all of them; the read-bandwidth probe `shardlm bench` divides by runs before and
// after each round of tokens. Llama-style tensor names (Llama, Qwen2, Qwen3).
//   cmake --build build --target weight_stream
//   build/bench/weight_stream --config bench/qwen3-0.6b-config.json [--dtype int8|int4|bf16|f16|f32]
//                             [--threads 2] [--rounds 8] [--tokens 8]
// Prints each round's GB/s and share of its two probes, then the medians. A kernel
// whose share matches the bare reads' is bound by memory as a read is; on a VM whose
// bandwidth swings within seconds, the shares of all three drift together.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "arena_copy.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/machine_limits.h"
#include "core/quantize.h"
#include "io/config.h"
#include "models/random_weights.h"

namespace shardlm {
namespace {

struct Options {
  std::string config_path, dtype = "int8";
  int threads = 2, rounds = 8, tokens = 8;
};

constexpr const char* usage_line =
    "usage: weight_stream --config CONFIG.json [--dtype int8|int4|bf16|f16|f32] [--threads N (2)] [--rounds N (8)] "
    "[--tokens N a round (8)]\n";

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr, "weight_stream: %s\n%s", problem, usage_line);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf("Times one decode token's matmuls against bare reads of the same bytes (bench/weight_stream.cpp).\n%s",
                  usage_line);
      std::exit(0);
    }
    if (i + 1 >= argc) usage(("missing value after " + flag).c_str());
    const std::string value = argv[++i];
    if (flag == "--config") options.config_path = value;
    else if (flag == "--dtype") options.dtype = value;
    else if (flag == "--threads") options.threads = std::atoi(value.c_str());
    else if (flag == "--rounds") options.rounds = std::atoi(value.c_str());
    else if (flag == "--tokens") options.tokens = std::atoi(value.c_str());
    else usage(("unknown option " + flag).c_str());
  }
  if (options.config_path.empty()) usage("--config is required");
  if (options.dtype != "int8" && options.dtype != "int4" && options.dtype != "bf16" && options.dtype != "f16" &&
      options.dtype != "f32")
    usage("--dtype must be int8, int4, bf16, f16 or f32");
  if (options.threads <= 0 || options.rounds <= 0 || options.tokens <= 0) usage("counts must be positive");
  return options;
}

// The matrices one decode token reads, in the order it reads them.
std::vector<Tensor> decode_matrices(const io::ModelConfig& config, const std::string& dtype, HostArena& arena) {
  std::map<std::string, Tensor> weights = models::random_weights(config, DType::bf16, 1);
  std::vector<Tensor> matrices;
  const auto take = [&](const std::string& name) {
    const auto found = weights.find(name);
    if (found == weights.end()) usage(("the architecture has no tensor " + name).c_str());
    Tensor matrix;
    if (dtype == "int8" || (dtype == "int4" && keeps_eight_bits_under_int4(name))) matrix = quantize_int8(found->second);
    else if (dtype == "int4") matrix = quantize_int4(found->second);
    else if (dtype == "bf16") matrix = found->second;
    else matrix = found->second.to_dtype(parse_dtype(dtype));
    matrices.push_back(in_arena(arena, matrix));
  };
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    for (const char* name : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                             "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      take(prefix + name + ".weight");
  }
  take(weights.count("lm_head.weight") ? "lm_head.weight" : "model.embed_tokens.weight");
  return matrices;
}

size_t stored_bytes(const Tensor& t) { return t.nbytes() + (t.quantized() ? t.block_scales().nbytes() : 0); }

std::atomic<uint64_t> read_sink{0};

// Touches every 64-byte line of [base, base + bytes) once, split over the pool's
// threads, each share as six forward streams (the probe's best pattern here): no
// arithmetic to speak of, so memory alone sets its speed.
void bare_read(ThreadPool& pool, const void* base, size_t bytes) {
  constexpr size_t streams = 6, line = 64;
  const int64_t threads = pool.threads();
  pool.run(threads, [&](int64_t t) {
    const size_t share = bytes / static_cast<size_t>(threads) / (streams * line) * (streams * line);
    const auto* start = static_cast<const std::byte*>(base) + static_cast<size_t>(t) * share;
    const size_t per_stream = share / streams;
    uint64_t sum = 0;
    for (size_t i = 0; i < per_stream; i += line)
      for (size_t s = 0; s < streams; ++s) sum += *reinterpret_cast<const uint64_t*>(start + s * per_stream + i);
    read_sink.fetch_add(sum, std::memory_order_relaxed);
  });
}

// Each matrix meets a zero input row (the kernels' speed does not depend on values).
struct KernelCall {
  const Tensor* weight;
  Tensor input, output;  // [1, in], [1, out]
};

std::vector<KernelCall> kernel_calls(const std::vector<Tensor>& matrices) {
  std::vector<KernelCall> calls;
  for (const Tensor& w : matrices)
    calls.push_back({&w, Tensor::zeros({1, w.shape()[1]}, DType::f32), Tensor::zeros({1, w.shape()[0]}, DType::f32)});
  return calls;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int run(const Options& options) {
  std::ifstream file(options.config_path);
  if (!file) usage(("cannot read " + options.config_path).c_str());
  std::stringstream text;
  text << file.rdbuf();
  const io::ModelConfig config = io::parse_model_config(text.str(), options.config_path);
  HostArena arena;
  const std::vector<Tensor> matrices = decode_matrices(config, options.dtype, arena);
  size_t bytes = 0;
  for (const Tensor& m : matrices) bytes += stored_bytes(m);
  // Written, not just allocated: untouched pages would all read the kernel's zero page.
  Tensor single = Tensor::zeros({static_cast<int64_t>(bytes / sizeof(float))}, DType::f32);
  std::fill_n(single.mutable_data<float>(), single.numel(), 1.0f);
  const std::vector<KernelCall> calls = kernel_calls(matrices);
  ThreadPool pool(options.threads);
  std::printf("%s weights, %zu matrices, %.3f GB a token, %d threads\n", options.dtype.c_str(), matrices.size(),
              bytes / 1e9, options.threads);

  enum Pass { kernels, bare_reads_by_op, one_bare_read, passes };
  const char* names[passes] = {"kernels", "bare reads op by op", "one bare read"};
  const auto pass = [&](int which) {
    if (which == bare_reads_by_op) {
      for (const Tensor& m : matrices) {
        bare_read(pool, m.raw(), m.nbytes());
        if (m.quantized()) bare_read(pool, m.block_scales().raw(), m.block_scales().nbytes());
      }
    } else if (which == one_bare_read) {
      bare_read(pool, single.raw(), bytes);
    } else {
      for (const KernelCall& call : calls) backends::cpu::linear(pool, call.input, *call.weight, Tensor(), call.output);
    }
  };
  // The three passes take turns token by token, so that a swing of the machine's
  // bandwidth (seconds long on a VM) lands on all three alike; the probe runs before
  // and after each round.
  std::vector<double> shares[passes], rates[passes], kernel_to_bare;
  for (int which = 0; which < passes; ++which) pass(which);  // warm: page tables, the kernels' scratch
  for (int round = 0; round < options.rounds; ++round) {
    double seconds[passes] = {};
    const double before = backends::cpu::measure_read_bandwidth_gbs(options.threads);
    for (int token = 0; token < options.tokens; ++token)
      for (int which = 0; which < passes; ++which) {
        const auto start = std::chrono::steady_clock::now();
        pass(which);
        seconds[which] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
    const double after = backends::cpu::measure_read_bandwidth_gbs(options.threads);
    std::printf("round %d, probe %.1f / %.1f GB/s:", round, before, after);
    for (int which = 0; which < passes; ++which) {
      const double rate = options.tokens * bytes / seconds[which] / 1e9;
      rates[which].push_back(rate);
      shares[which].push_back(200 * rate / (before + after));
      std::printf("  %s %.1f GB/s (%.1f%%)", names[which], rate, shares[which].back());
    }
    kernel_to_bare.push_back(seconds[bare_reads_by_op] / seconds[kernels]);
    std::printf("\n");
  }
  std::printf("medians over %d rounds:\n", options.rounds);
  for (int which = 0; which < passes; ++which)
    std::printf("  %-20s %6.1f GB/s  %5.1f%% of the probe\n", names[which], median(rates[which]),
                median(shares[which]));
  std::printf("  kernels' speed / bare reads' op by op: %.3f\n", median(kernel_to_bare));
  return 0;
}

}  // namespace
}  // namespace shardlm

int main(int argc, char** argv) {
  try {
    return shardlm::run(shardlm::parse(argc, argv));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "weight_stream: %s\n", error.what());
    return 1;
  }
}
