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
// Prints each round's GB/s and share of its two probes, then the medians, then each matrix
// kind's GB/s over all rounds (kernels and bare reads op by op), from all its calls' time
// and from its median call (the VM's stalls, which land on a few calls, left out). A kernel
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
#include <map>
#include <numeric>
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

// The matrices one decode token reads, in the order it reads them, each with its kind
// (q_proj, ..., lm_head): the name without its layer.
struct DecodeMatrices {
  std::vector<Tensor> tensors;
  std::vector<std::string> kinds;  // one per tensor
};

DecodeMatrices decode_matrices(const io::ModelConfig& config, const std::string& dtype, HostArena& arena) {
  std::map<std::string, Tensor> weights = models::random_weights(config, DType::bf16, 1);
  DecodeMatrices matrices;
  const auto take = [&](const std::string& name, const std::string& kind) {
    const auto found = weights.find(name);
    if (found == weights.end()) usage(("the architecture has no tensor " + name).c_str());
    Tensor matrix;
    if (dtype == "int8" || (dtype == "int4" && keeps_eight_bits_under_int4(name))) matrix = quantize_int8(found->second);
    else if (dtype == "int4") matrix = quantize_int4(found->second);
    else if (dtype == "bf16") matrix = found->second;
    else matrix = found->second.to_dtype(parse_dtype(dtype));
    matrices.tensors.push_back(in_arena(arena, matrix));
    matrices.kinds.push_back(kind);
  };
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    for (const std::string name : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                   "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      take(prefix + name + ".weight", name.substr(name.find('.') + 1));
  }
  if (weights.count("lm_head.weight")) take("lm_head.weight", "lm_head");
  else take("model.embed_tokens.weight", "lm_head (the tied embeddings)");
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
  Tensor input, output;  // [1, in], [1, out]
};

std::vector<KernelCall> kernel_calls(const std::vector<Tensor>& matrices) {
  std::vector<KernelCall> calls;
  for (const Tensor& w : matrices)
    calls.push_back({Tensor::zeros({1, w.shape()[1]}, DType::f32), Tensor::zeros({1, w.shape()[0]}, DType::f32)});
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
  const DecodeMatrices decode = decode_matrices(config, options.dtype, arena);
  const std::vector<Tensor>& matrices = decode.tensors;
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
  // Each call's seconds over all rounds by kind, for the kernels and the bare reads op by
  // op: where a token's loss sits (a short op's start and end weigh more on it than a long
  // one's).
  std::map<std::string, std::vector<double>> kind_seconds[2];
  const auto timed = [&](int which, size_t m, auto op) {
    const auto start = std::chrono::steady_clock::now();
    op();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    kind_seconds[which][decode.kinds[m]].push_back(seconds);
  };
  const auto pass = [&](int which) {
    if (which == bare_reads_by_op) {
      for (size_t m = 0; m < matrices.size(); ++m)
        timed(which, m, [&] {
          bare_read(pool, matrices[m].raw(), matrices[m].nbytes());
          if (matrices[m].quantized())
            bare_read(pool, matrices[m].block_scales().raw(), matrices[m].block_scales().nbytes());
        });
    } else if (which == one_bare_read) {
      bare_read(pool, single.raw(), bytes);
    } else {
      for (size_t m = 0; m < calls.size(); ++m)
        timed(which, m, [&] { backends::cpu::linear(pool, calls[m].input, matrices[m], Tensor(), calls[m].output); });
    }
  };
  // The three passes take turns token by token, so that a swing of the machine's
  // bandwidth (seconds long on a VM) lands on all three alike; the probe runs before
  // and after each round.
  std::vector<double> shares[passes], rates[passes], kernel_to_bare;
  for (int which = 0; which < passes; ++which) pass(which);  // warm: page tables, the kernels' scratch
  for (auto& seconds : kind_seconds) seconds.clear();
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
  std::map<std::string, size_t> kind_bytes;  // a call's
  for (size_t m = 0; m < matrices.size(); ++m) kind_bytes[decode.kinds[m]] = stored_bytes(matrices[m]);
  std::printf("each kind over all rounds: a call's bytes; GB/s of the kernels and of bare reads op by op, "
              "and their ratio, from all calls' time, then from the median call:\n");
  for (const auto& [kind, call_bytes] : kind_bytes) {
    const std::vector<double>& kernel_times = kind_seconds[kernels][kind];
    const std::vector<double>& bare_times = kind_seconds[bare_reads_by_op][kind];
    const double gb = static_cast<double>(call_bytes) / 1e9;
    const auto total = [](const std::vector<double>& seconds) {
      return std::accumulate(seconds.begin(), seconds.end(), 0.0);
    };
    const double kernel_rate = gb * static_cast<double>(kernel_times.size()) / total(kernel_times);
    const double bare_rate = gb * static_cast<double>(bare_times.size()) / total(bare_times);
    const double kernel_median = gb / median(kernel_times), bare_median = gb / median(bare_times);
    std::printf("  %-30s %8.2f MB  %6.1f  %6.1f  %.3f   %6.1f  %6.1f  %.3f\n", kind.c_str(), gb * 1e3,
                kernel_rate, bare_rate, kernel_rate / bare_rate, kernel_median, bare_median,
                kernel_median / bare_median);
  }
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
