// `shardlm bench`: prompt processing (pp) and token generation (tg) speed in the
// manner of llama-bench, with each figure's share of the machine's physical limit:
// decode against memory bandwidth (every weight byte is read once per token), prefill
// against the peak of the instructions its matmuls run (the matrix FLOPs of the prompt):
// f32 FMAs on the CPU's widest vectors, bf16 and int8 dot products (the avx512_bf16
// table) or AMX tiles (the amx table), each weighed by its matmuls' share of the FLOPs
// (prefill_limit.h).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include "api/impl.h"
#include "backends/cpu/machine_limits.h"
#include "backends/cpu/kernel_table.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/prefill_limit.h"

namespace shardlm::cli {
namespace {

struct BenchArguments {
  ModelArguments model;
  int64_t prompt_tokens = 512, generated_tokens = 128, tg_prompt_tokens = 64, repetitions = 3, batch = 1;
  std::optional<int64_t> prefill_chunk;
  std::optional<double> bandwidth_gbs, fma_peak_gflops;
  bool paired_probe = false;
  std::string output = "text";
};

struct Spread {
  double mean = 0, deviation = 0;
};

Spread spread_of(const std::vector<double>& values) {
  Spread s;
  if (values.empty()) return s;
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  double squares = 0;
  for (double v : values) squares += (v - s.mean) * (v - s.mean);
  s.deviation = values.size() > 1 ? std::sqrt(squares / static_cast<double>(values.size() - 1)) : 0;
  return s;
}

// What one token costs: the weight bytes decode reads, and the matrix FLOPs prefill does.
struct TokenCost {
  double read_bytes = 0, matmul_flops = 0;
};

TokenCost token_cost(const io::ModelConfig& config, size_t weight_bytes) {
  double parameters = 0, vectors = 0;
  for (const auto& [name, shape] : models::required_weights(config))
    (shape.rank() == 1 ? vectors : parameters) += static_cast<double>(shape.numel());
  const double bytes_per_parameter = static_cast<double>(weight_bytes) / (parameters + vectors);
  const double table = static_cast<double>(config.vocab_size * config.hidden_size);
  // Decode reads every matrix except the embedding table (one row of it), which a tied
  // model reads in full anyway as its lm_head.
  const double read = parameters + vectors - (config.tie_word_embeddings ? 0 : table);
  // Prefill multiplies every prompt token through every matrix but the embedding and the
  // lm_head (computed for the last token only).
  const double multiplied = parameters - table - (config.tie_word_embeddings ? 0 : table);
  return {read * bytes_per_parameter, 2 * multiplied};
}

// The KV cache bytes one row's decode step reads, on average over the tg test's steps: the
// step at position p reads the keys and values of positions [0, p] of every layer (only
// the last window of them where a layer slides), `ranks` sharing the KV heads. The
// roofline counts them beside the weights: a step cannot read less.
double kv_read_bytes_per_step(const io::ModelConfig& config, DType cache_dtype, int64_t prompt_tokens, int64_t steps,
                              int ranks) {
  if (steps <= 0) return 0;
  const double per_position = 2.0 * static_cast<double>(std::max<int64_t>(1, config.num_key_value_heads / ranks)) *
                              static_cast<double>(config.head_dim * static_cast<int64_t>(dtype_size(cache_dtype)));
  double positions = 0;
  for (int64_t step = 0; step < steps; ++step)
    for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
      const int64_t window = config.attention_window(layer), seen = prompt_tokens + step + 1;
      positions += static_cast<double>(window > 0 ? std::min(window, seen) : seen);
    }
  return per_position * positions / static_cast<double>(steps);
}

std::vector<int64_t> random_prompt(int64_t length, int64_t vocab, std::mt19937& random) {
  std::uniform_int_distribution<int64_t> token(0, vocab - 1);
  std::vector<int64_t> ids(static_cast<size_t>(length));
  for (int64_t& id : ids) id = token(random);
  return ids;
}

size_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;
}

// Decode scored step by step against the read probe: one probe pass (ReadProbe) after
// each step, cycling through its stream counts, so that every step lies between two
// passes taken within a step's time of it. Where the machine's bandwidth swings from
// second to second (a shared VM), this tells the runtime's loss from the machine's. Two
// figures: like for like, the steps' mean read rate over the passes' mean; and, as the
// per-repetition probe takes the best of its passes, the median step's rate over the
// best of the three consecutive passes around it (one at each stream count). A step
// starts with the caches and the pool's sleeping threads as the pass left them, a cost
// (tens of µs) counted against the runtime.
struct PairedDecode {
  double share_of_mean = 0, median_share_of_best = 0, mean_bandwidth_gbs = 0;
  int64_t steps = 0;
};

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

PairedDecode paired_decode(AutoModelForCausalLM& model, const BatchEncoding& prompts, const GenerationConfig& decode,
                           backends::cpu::ReadProbe& probe, double read_bytes) {
  constexpr size_t patterns = std::size(backends::cpu::ReadProbe::stream_counts);
  std::vector<double> step_seconds, pass_gbs;  // pass i ran right after step i (0: the prefill)
  auto step_start = std::chrono::steady_clock::now();
  model.generate(prompts, decode, [&](size_t row, int64_t, std::string_view) {
    if (row != 0) return;  // a batch's rows arrive together, one step
    const auto now = std::chrono::steady_clock::now();
    if (!pass_gbs.empty()) step_seconds.push_back(std::chrono::duration<double>(now - step_start).count());
    pass_gbs.push_back(probe.pass_gbs(backends::cpu::ReadProbe::stream_counts[pass_gbs.size() % patterns]));
    step_start = std::chrono::steady_clock::now();
  });
  if (step_seconds.empty() || *std::min_element(pass_gbs.begin(), pass_gbs.end()) <= 0) return {};
  std::vector<double> shares_of_best;
  const size_t window = std::min(patterns, pass_gbs.size());
  for (size_t step = 0; step < step_seconds.size(); ++step) {
    // Step `step` ran between passes step and step + 1; the window holds both.
    const size_t first = std::min(step, pass_gbs.size() - window);
    const double best = *std::max_element(pass_gbs.begin() + first, pass_gbs.begin() + first + window);
    shares_of_best.push_back(100 * read_bytes / step_seconds[step] / (best * 1e9));
  }
  const auto steps = static_cast<double>(step_seconds.size());
  const double step_rate = steps * read_bytes / std::accumulate(step_seconds.begin(), step_seconds.end(), 0.0) / 1e9;
  const double mean_pass = std::accumulate(pass_gbs.begin(), pass_gbs.end(), 0.0) / static_cast<double>(pass_gbs.size());
  return {100 * step_rate / mean_pass, median_of(shares_of_best), mean_pass, static_cast<int64_t>(steps)};
}

void run(const BenchArguments& args) {
  SHARDLM_CHECK(!args.paired_probe || args.generated_tokens > 0,
                "--paired-probe scores the tg test: give --gen-tokens above 0");
  LoadedModel loaded = load_model(args.model);
  AutoModelForCausalLM& model = loaded.model;
  const io::ModelConfig config = io::load_model_config(loaded.files);
  // Per rank: under tensor parallelism a host's cores are shared by its ranks.
  const int local_ranks = model.tp_size() > 1 ? parallel::world_process_group()->local_size() : 1;
  const int threads = api::default_threads(args.model.threads, local_ranks);
  const TokenCost cost = token_cost(config, model.weight_bytes());
  // What one decode step of the tg test reads: the weights once, each row's KV cache.
  const double kv_bytes = kv_read_bytes_per_step(config, model.kv_cache_dtype(), args.tg_prompt_tokens,
                                                 args.generated_tokens, model.tp_size());
  const double step_bytes = cost.read_bytes + static_cast<double>(args.batch) * kv_bytes;
  std::mt19937 random(1234);

  GenerationConfig generation;
  generation.do_sample = false;
  generation.eos_token_id = std::vector<int64_t>{};  // random weights: run the full length
  generation.max_cache_len = std::max(args.prompt_tokens, args.tg_prompt_tokens + args.generated_tokens) + 1;

  // The machine's limits: given, or measured on the CPU. Measured in a single process,
  // each timed repetition is probed right before and right after and scored against the
  // mean of the two, since a shared machine's bandwidth and clock drift by tens of
  // percent within minutes. Ranks on one host share its bandwidth: each gets its share
  // of a given figure, and all probe together once at the end. An accelerator's figures
  // must be given.
  const bool on_cpu = model.device() == "cpu";
  const bool probe_each = on_cpu && local_ranks == 1;
  const bool probed_per_repetition = probe_each && !(args.bandwidth_gbs && args.fma_peak_gflops);
  SHARDLM_CHECK(!args.paired_probe || probe_each,
                "--paired-probe measures the CPU's read bandwidth beside each decode step: it needs --device cpu "
                "and a single process (tp_size 1)");
  // One probe buffer for every repetition: a fresh 1 GiB each time spent seconds in the
  // kernel zeroing pages. Made at the first probe, after the peak RSS is taken.
  std::optional<backends::cpu::ReadProbe> read_probe;
  const auto probe_bandwidth = [&] {
    if (args.bandwidth_gbs) return *args.bandwidth_gbs / (on_cpu ? local_ranks : 1);
    if (!on_cpu) return 0.0;
    if (!read_probe) read_probe.emplace(threads);
    return read_probe->best_gbs();
  };
  // The prefill's limit: the peak of the instruction each of its matmuls runs, weighed by
  // its FLOPs (prefill_limit.h).
  const PrefillLimit limit =
      on_cpu ? prefill_limit(config, loaded.files, args.model, backends::cpu::cpu_kernels()) : PrefillLimit{};
  const std::string peak_instruction = limit.describe();
  const auto probe_peak = [&] {
    if (args.fma_peak_gflops) return *args.fma_peak_gflops;
    if (!on_cpu) return 0.0;
    return limit.peak_gflops([&](PeakInstruction instruction) { return measure_peak(instruction, threads); });
  };
  GenerationConfig decode = generation;
  decode.max_new_tokens = args.generated_tokens + 1;  // the first token ends the prefill
  decode.prefill_chunk_size = args.prefill_chunk.value_or(args.tg_prompt_tokens);
  const auto tg_prompts = [&] {
    BatchEncoding prompts;
    for (int64_t row = 0; row < args.batch; ++row)
      prompts.input_ids.push_back(random_prompt(args.tg_prompt_tokens, config.vocab_size, random));
    return prompts;
  };
  std::vector<double> pp, tg, tg_communication_ms, tg_collectives, peaks, bandwidths, pp_shares, tg_shares;
  size_t peak_rss = 0;
  for (int64_t repetition = -1; repetition < args.repetitions; ++repetition) {  // -1: warm-up (compiles)
    if (repetition == 0) peak_rss = peak_resident_bytes();  // before any probe's buffer
    if (args.prompt_tokens > 0) {
      if (repetition >= 0 && probe_each) peaks.push_back(probe_peak());
      GenerationConfig prefill = generation;
      prefill.max_new_tokens = 1;
      prefill.prefill_chunk_size = args.prefill_chunk.value_or(args.prompt_tokens);
      model.generate({.input_ids = {random_prompt(args.prompt_tokens, config.vocab_size, random)}, .attention_mask = {}},
                     prefill);
      if (repetition >= 0) pp.push_back(model.last_stats().prefill_tokens_per_s);
      if (repetition >= 0 && probe_each) peaks.back() = (peaks.back() + probe_peak()) / 2;
    }
    if (args.generated_tokens > 0) {
      if (repetition >= 0 && probe_each) bandwidths.push_back(probe_bandwidth());
      model.generate(tg_prompts(), decode);
      if (repetition >= 0) {
        const AutoModelForCausalLM::Stats stats = model.last_stats();
        tg.push_back(stats.decode_tokens_per_s);
        tg_communication_ms.push_back(1e3 * stats.decode_communication_s / static_cast<double>(stats.decode_tokens));
        // Per step: a step decodes a token of every row with one set of collectives.
        tg_collectives.push_back(static_cast<double>(stats.decode_collectives) * args.batch /
                                 static_cast<double>(stats.decode_tokens));
        if (probe_each) bandwidths.back() = (bandwidths.back() + probe_bandwidth()) / 2;
      }
    }
  }
  if (args.paired_probe && !read_probe) read_probe.emplace(threads);
  const PairedDecode paired =
      args.paired_probe ? paired_decode(model, tg_prompts(), decode, *read_probe, step_bytes) : PairedDecode{};
  if (!probe_each) {
    if (local_ranks > 1) parallel::world_process_group()->barrier();
    if (args.generated_tokens > 0) bandwidths.assign(tg.size(), probe_bandwidth());
    if (args.prompt_tokens > 0) peaks.assign(pp.size(), probe_peak());
  }
  // Shares of the limits: decoding a batch reads the weights once per step for all its rows.
  for (size_t i = 0; i < tg.size(); ++i)
    if (bandwidths[i] > 0) tg_shares.push_back(100 * tg[i] * step_bytes / (args.batch * bandwidths[i] * 1e9));
  for (size_t i = 0; i < pp.size(); ++i)
    if (peaks[i] > 0) pp_shares.push_back(100 * pp[i] * cost.matmul_flops / (peaks[i] * 1e9));
  const Spread pp_spread = spread_of(pp), tg_spread = spread_of(tg), communication = spread_of(tg_communication_ms);
  const Spread bandwidth = spread_of(bandwidths), peak = spread_of(peaks);
  const Spread tg_share = spread_of(tg_shares), pp_share = spread_of(pp_shares);
  const std::string dtype =
      args.model.quantize.empty()
          ? (args.model.dtype.empty() ? (args.model.mmap_weights ? "as stored, memory-mapped" : "as stored")
                                      : args.model.dtype)
          : args.model.quantize;
  nlohmann::json result = {
      {"model", args.model.model},
      {"device", model.device()},
      // Which kernel table ran (backends/cpu/kernel_table.h), on the CPU.
      {"cpu_kernels", on_cpu ? std::string(backends::cpu::cpu_kernels().isa) : ""},
      {"tg_batch", args.batch},
      {"weights", dtype},
      {"threads", threads},
      {"tp_size", model.tp_size()},
      {"weight_bytes", model.weight_bytes()},
      {"peak_rss_bytes", peak_rss},
      {"pp_tokens", args.prompt_tokens},
      {"pp_tok_s", pp_spread.mean},
      {"pp_tok_s_stddev", pp_spread.deviation},
      {"tg_prompt_tokens", args.tg_prompt_tokens},
      {"tg_tokens", args.generated_tokens},
      {"tg_tok_s", tg_spread.mean},
      {"tg_tok_s_stddev", tg_spread.deviation},
      {"tg_communication_ms_per_token", communication.mean},
      {"tg_collectives_per_step", spread_of(tg_collectives).mean},
      {"read_bytes_per_token", cost.read_bytes},
      {"kv_read_bytes_per_token", kv_bytes},
      {"matmul_flops_per_token", cost.matmul_flops},
      {"read_bandwidth_gbs", bandwidth.mean},
      {"read_bandwidth_gbs_stddev", bandwidth.deviation},
      {"fma_peak_gflops", peak.mean},
      {"fma_peak_gflops_stddev", peak.deviation},
      {"pp_peak_instruction", peak_instruction},
      {"limits_probed_per_repetition", probed_per_repetition},
      {"tg_percent_of_roofline", tg_share.mean},
      {"tg_percent_of_roofline_stddev", tg_share.deviation},
      {"pp_percent_of_fma_peak", pp_share.mean},
      {"pp_percent_of_fma_peak_stddev", pp_share.deviation},
      {"repetitions", args.repetitions},
  };
  if (args.paired_probe) {
    result["tg_paired_steps"] = paired.steps;
    result["tg_paired_percent_of_mean_read"] = paired.share_of_mean;
    result["tg_paired_median_percent_of_best_read"] = paired.median_share_of_best;
    result["tg_paired_read_gbs"] = paired.mean_bandwidth_gbs;
  }
  if (args.output == "json") {
    std::printf("%s\n", result.dump().c_str());
    return;
  }
  std::printf("model %s on %s%s, weights %s, %d threads, %.3f GB of weights, peak RSS %.3f GB%s\n",
              args.model.model.c_str(), model.device().c_str(),
              on_cpu ? str_cat(" (", backends::cpu::cpu_kernels().isa, " kernels)").c_str() : "",
              dtype.c_str(), threads, model.weight_bytes() / 1e9,
              peak_rss / 1e9,
              model.tp_size() > 1 ? str_cat(" (per rank of tp_size ", model.tp_size(), ")").c_str() : "");
  std::printf("%-8s %12s %10s %s\n", "test", "tok/s", "stddev", "share of the machine's limit (mean ± stddev)");
  if (args.prompt_tokens > 0)
    std::printf("pp%-6lld %12.2f %10.2f %.1f%% ± %.1f of %.1f GFLOP/s, %s (%.3f GFLOP/token)\n",
                static_cast<long long>(args.prompt_tokens), pp_spread.mean, pp_spread.deviation, pp_share.mean,
                pp_share.deviation, peak.mean,
                (peak_instruction.starts_with("mix") ? "the peak of a " + peak_instruction : peak_instruction + " peak")
                    .c_str(),
                cost.matmul_flops / 1e9);
  if (args.generated_tokens > 0)
    std::printf("tg%-6lld %12.2f %10.2f %.1f%% ± %.1f of %.1f GB/s read bandwidth (%.3f GB/token of weights, %.3f "
                "of KV cache)%s\n",
                static_cast<long long>(args.generated_tokens), tg_spread.mean, tg_spread.deviation, tg_share.mean,
                tg_share.deviation, bandwidth.mean, cost.read_bytes / 1e9, kv_bytes / 1e9,
                args.batch > 1 ? str_cat(", batch ", args.batch, ": tokens of all rows").c_str() : "");
  if (probed_per_repetition)
    std::printf("limits probed before and after each repetition; each share is of their mean\n");
  if (pp_share.mean > 100 || tg_share.mean > 100)
    std::printf("a share over 100%%: the machine's speed moved between the probes and the run (a shared VM's "
                "bandwidth and clock drift by tens of percent); rerun, or pair each decode step with a probe pass "
                "(--paired-probe)\n");
  if (args.paired_probe)
    std::printf("tg paired with probe passes (%lld steps of one more run, a pass after each): the steps read at "
                "%.1f%% of the passes' mean %.1f GB/s; the median step at %.1f%% of the best of the three passes "
                "around it\n",
                static_cast<long long>(paired.steps), paired.share_of_mean, paired.mean_bandwidth_gbs,
                paired.median_share_of_best);
  if (args.generated_tokens > 0 && model.tp_size() > 1)
    std::printf("tg communication: %.3f ms per token in all-reduce/all-gather (rank 0), %.0f collectives a step\n",
                communication.mean, result["tg_collectives_per_step"].get<double>());
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArguments>();
  CLI::App* command = app.add_subcommand(
      "bench",
      "Measure prompt processing (pp) and generation (tg) speed, and their share of the machine's limits (on the "
      "CPU measured before and after each repetition, unless given)");
  command->footer(
      "SHARDLM_PROFILE_OPS=1 also prints, at exit, each op kind's share of the time on the CPU, with its mean, median, "
      "90th percentile and longest call: a mean far above the median is most often the machine taking a core "
      "mid-op rather than a slow kernel.");
  add_model_options(*command, args->model);
  command->add_option("--prompt-tokens,-p", args->prompt_tokens, "pp test: prompt length (0 skips it)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--gen-tokens,-n", args->generated_tokens, "tg test: tokens to generate (0 skips it)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--tg-prompt", args->tg_prompt_tokens, "tg test: prompt tokens before generating")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--batch,-b", args->batch, "tg test: prompts decoded together (tok/s counts every row)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--repetitions,-r", args->repetitions, "Timed runs of each test, after one warm-up run")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--prefill-chunk", args->prefill_chunk,
                      "Prompt tokens per prefill step (default: the whole prompt in one step)")
      ->check(CLI::PositiveNumber);
  command->add_option("--bandwidth-gbs", args->bandwidth_gbs,
                      "Memory read bandwidth for the tg roofline (default on the CPU: measured before each "
                      "repetition, see "
                      "bench/roofline; on a GPU give its HBM figure); under CPU tensor parallelism each rank on the "
                      "host counts its share");
  command->add_option("--fma-peak-gflops", args->fma_peak_gflops,
                      "Matrix peak for the pp share (default on the CPU: measured before each repetition, for "
                      "the instruction the prefill runs: f32 FMAs, or on the avx512_bf16 kernels bf16 dot "
                      "products over bf16 weights and int8 dot products over int8 ones, or on the amx kernels "
                      "the tiles' TDPBF16PS over bf16, f16, int8 and int4 ones); a GPU's bf16 matrix peak must be given");
  command->add_flag("--paired-probe", args->paired_probe,
                    "tg test: after the repetitions, one more run with a read-bandwidth probe pass after every "
                    "decode step, each step scored against the passes around it (CPU, one process; ~1.8x the tg "
                    "test's time and 1 GiB more memory)");
  command->add_option("--output,-o", args->output, "text, or json (one object)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  command->callback([args] { run(*args); });
}

}  // namespace shardlm::cli
