#include "cli/model_options.h"

#include <cstdio>

#include "core/logging.h"

namespace shardlm::cli {

void add_model_options(CLI::App& command, ModelArguments& args) {
  command.add_option("--model,-m", args.model,
                     "Checkpoint directory (config.json, *.safetensors, tokenizer.json) or Hugging Face model id; "
                     "default: the built-in stories260K model");
  command.add_option("--revision", args.revision, "For a model id: branch, tag or commit hash")->capture_default_str();
  command.add_option("--dtype", args.dtype, "Convert weights on load: float32, bfloat16 or float16 "
                                            "(default: as stored)");
  command.add_option("--quantize", args.quantize,
                     "Quantize weights on load: int8 (one float16 scale per 32 weights, like Q8_0) or int4 "
                     "(4 bits a weight and a float16 scale per 32, Q4_0's size; CPU only)")
      ->check(CLI::IsMember({"int8", "int4"}));
  command.add_option("--kv-cache-dtype", args.kv_cache_dtype,
                     "KV cache element type: float32 or bfloat16 (default: bfloat16 for 16-bit, int8 or int4 weights, "
                     "else float32)");
  command.add_option("--device", args.device,
                     "cpu, cuda[:N], tpu[:N] (libtpu), pjrt[:N] (the PJRT plugin of --pjrt-plugin), or auto "
                     "(a TPU, else a GPU, else the CPU)")
      ->capture_default_str();
  command.add_option("--pjrt-plugin", args.pjrt_plugin,
                     "PJRT plugin library for --device pjrt/tpu (default: SHARDLM_PJRT_PLUGIN; for tpu "
                     "TPU_LIBRARY_PATH or Python's libtpu package); docs/PJRT.md");
  command.add_option("--compile-cache", args.compile_cache,
                     "Directory of compiled pjrt/tpu programs kept across runs (default: $SHARDLM_COMPILE_CACHE or "
                     "~/.cache/shardlm/pjrt; \"none\" to disable)");
  command.add_option("--threads,-t", args.threads, "CPU threads (default: one per hardware thread)")
      ->check(CLI::NonNegativeNumber);
  command.add_flag("--mmap-weights", args.mmap_weights,
                   "Keep weights used as stored memory-mapped (instant load) instead of copying them into huge-page "
                   "memory on the CPU (faster decode)");
  command.add_flag("--verbose,-v", args.verbose, "Log what is loaded, and each compile with its key and time");
  command.add_option("--tp-size", args.tp_size,
                     "Tensor parallelism: split the model over this many processes, one per device; start them "
                     "with `shardlm launch --nproc-per-node N -- shardlm ...` or `mpirun -np N shardlm ...`")
      ->check(CLI::PositiveNumber);
  command.add_option("--tp-plan", args.tp_plan_file,
                     "JSON file of tp_plan rules over the architecture's default plan, e.g. "
                     "{\"model.layers.*.self_attn.q_proj\": \"replicate\"} (docs/TENSOR_PARALLEL.md)");
  command.add_option("--collective-timeout", args.collective_timeout,
                     "Tensor parallelism: seconds a rank waits in one collective for the others before it ends "
                     "the job naming itself and its host (a lost host or network link); 0 waits forever")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

void add_sampling_options(CLI::App& command, SamplingArguments& args) {
  command.add_option("--max-new-tokens,-n", args.max_new_tokens,
                     "Tokens to generate (default: generation_config.json, else max_length 20 minus the prompt)");
  command.add_flag("--greedy", args.greedy, "Always pick the most likely token");
  command.add_flag("--sample", args.sample, "Sample from the distribution (implied by the options below)");
  command.add_option("--temperature", args.temperature, "Divide logits by this before sampling (> 0)");
  command.add_option("--top-k", args.top_k, "Sample among the k most likely tokens (0: all)");
  command.add_option("--top-p", args.top_p, "Sample among the most likely tokens whose mass reaches p (0, 1]");
  command.add_option("--min-p", args.min_p, "Drop tokens less likely than min-p times the most likely one");
  command.add_option("--repetition-penalty", args.repetition_penalty,
                     "Penalize tokens already in the sequence (> 1 discourages repeats)");
  command.add_option("--seed", args.seed, "Random seed: the same seed reproduces a sampled output");
  command.add_option("--stop", args.stop, "Stop once the generated text contains this string (repeatable)");
  command.add_option("--max-cache-len", args.max_cache_len,
                     "KV cache length (default: min(max_position_embeddings, 4096), more if a request needs it)");
  command.add_flag("--no-compile", args.no_compile,
                   "Run the graph eagerly, op by op (the reference path; no fusion, no cached executables)");
  command.add_option("--prefill-chunk", args.prefill_chunk,
                     "Prompt tokens per prefill step (default 32); every prompt length reuses one executable");
}

GenerationConfig to_generation_config(const SamplingArguments& args) {
  if (args.greedy && args.sample) fail("--greedy and --sample contradict each other");
  GenerationConfig config;
  config.max_new_tokens = args.max_new_tokens;
  config.temperature = args.temperature;
  config.top_k = args.top_k;
  config.top_p = args.top_p;
  config.min_p = args.min_p;
  config.repetition_penalty = args.repetition_penalty;
  config.seed = args.seed;
  config.max_cache_len = args.max_cache_len;
  config.stop_strings = args.stop;
  config.prefill_chunk_size = args.prefill_chunk;
  if (args.no_compile) config.disable_compile = true;
  const bool sampling_option = args.temperature || args.top_k || args.top_p || args.min_p;
  if (args.greedy) config.do_sample = false;
  else if (args.sample || sampling_option) config.do_sample = true;
  return config;
}

LoadedModel load_model(const ModelArguments& args, const FilesCheck& check) {
  if (args.verbose) log::set_level(log::Level::info);
  DistributedConfig distributed{.tp_size = args.tp_size, .collective_timeout_seconds = args.collective_timeout};
  std::optional<io::ModelFiles> resolved;
  std::optional<AutoTokenizer> tokenizer;
  std::string model_path;
  // Every rank resolves and reads the tokenizer itself; one rank's failure ends them all.
  api::on_every_rank(args.tp_size > 1 ? parallel::world_process_group().get() : nullptr, [&] {
    if (!args.tp_plan_file.empty()) {
      if (args.tp_size == 1) fail("--tp-plan needs --tp-size above 1");
      const parallel::TpPlan plan = parallel::TpPlan::from_json_file(args.tp_plan_file);
      for (const auto& [key, style] : plan.rules())
        distributed.tp_plan[key] = parallel::shard_style_name(style);
    }
    resolved = io::resolve_model(args.model, {.revision = args.revision});
    // The loaders get the resolved directory, so tokenizer and weights come from one snapshot.
    model_path = resolved->is_embedded() ? args.model : resolved->location();
    if (resolved->exists("tokenizer.json")) tokenizer = AutoTokenizer::from_pretrained(model_path);
    if (check) check(*resolved, tokenizer);
  });
  io::ModelFiles files = std::move(*resolved);
  PretrainedOptions options;
  options.distributed_config = distributed;
  options.device_map = args.device;
  options.pjrt_plugin = args.pjrt_plugin;
  options.compile_cache_dir = args.compile_cache;
  options.pjrt_topology = args.topology;
  if (!args.dtype.empty()) options.dtype = parse_dtype(args.dtype);
  options.threads = args.threads;
  options.quantize = args.quantize;
  options.memory_map_weights = args.mmap_weights;
  if (!args.kv_cache_dtype.empty()) options.kv_cache_dtype = parse_dtype(args.kv_cache_dtype);
  AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained(model_path, options);
  if (model.tp_rank() != 0 && !std::freopen("/dev/null", "w", stdout)) fail("cannot silence stdout of rank ", model.tp_rank());
  return {std::move(files), std::move(tokenizer), std::move(model)};
}

}  // namespace shardlm::cli
