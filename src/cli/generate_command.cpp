#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/impl.h"
#include "cli/commands.h"
#include "core/logging.h"

namespace shardlm::cli {
namespace {

struct GenerateArguments {
  std::string model{io::default_model_id};
  std::string revision = "main";
  std::vector<std::string> prompts;
  std::string prompts_file;
  std::vector<std::string> input_ids;
  std::optional<int64_t> max_new_tokens;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  std::optional<uint64_t> seed;
  std::optional<int64_t> max_cache_len;
  std::optional<int64_t> prefill_chunk;
  bool greedy = false, sample = false, verbose = false, no_compile = false, stats = false;
  std::vector<std::string> stop;
  std::string dtype, device = "cpu", output = "text";
};

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t used = 0;
    int64_t value = -1;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || value < 0)
      fail("--input-ids: '", item, "' is not a non-negative integer (expected e.g. 1,2,3)");
    ids.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

GenerationConfig to_generation_config(const GenerateArguments& args) {
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

std::vector<std::string> read_prompt_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read --prompts-file ", path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  if (lines.empty()) fail("--prompts-file ", path, " holds no prompts (one per line)");
  return lines;
}

void print_stats(const AutoModelForCausalLM& model) {
  AutoModelForCausalLM::Stats stats = model.last_stats();
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  std::fprintf(stderr,
               "compiles: %lld (total %lld)\ntime to first token: %.3f s\nprefill: %.1f tok/s\ndecode: %.1f tok/s\n"
               "activation arena: %zu bytes\nKV cache: %zu bytes\npeak memory (RSS): %ld KiB\n",
               static_cast<long long>(stats.compiles), static_cast<long long>(model.compiles()),
               stats.time_to_first_token_s, stats.prefill_tokens_per_s, stats.decode_tokens_per_s, stats.arena_bytes,
               stats.kv_cache_bytes, usage.ru_maxrss);
}

void run_generate(const GenerateArguments& args) {
  if (args.verbose) log::set_level(log::Level::info);
  const int prompt_sources = !args.prompts.empty() + !args.prompts_file.empty() + !args.input_ids.empty();
  if (prompt_sources > 1) fail("give prompts one way: --prompt, --prompts-file or --input-ids");
  if (args.greedy && args.sample) fail("--greedy and --sample contradict each other");

  io::ModelFiles files = io::resolve_model(args.model, {.revision = args.revision});
  // Resolved once: the loaders below get the snapshot directory, so a model id costs
  // one round of hub requests and both load the same commit.
  const std::string model_path = files.is_embedded() ? args.model : files.location();
  std::optional<AutoTokenizer> tokenizer;
  if (files.exists("tokenizer.json")) tokenizer = AutoTokenizer::from_pretrained(model_path);
  if (!tokenizer && args.input_ids.empty())
    fail(files.location(), " has no tokenizer.json, so a text prompt cannot be encoded: pass --input-ids");
  if (!tokenizer && args.output == "text")
    fail(files.location(), " has no tokenizer.json, so ids cannot be shown as text: use --output ids or json");

  BatchEncoding inputs;
  if (!args.input_ids.empty()) {
    for (const std::string& ids : args.input_ids) inputs.input_ids.push_back(parse_ids(ids));
  } else {
    std::vector<std::string> texts = !args.prompts_file.empty() ? read_prompt_lines(args.prompts_file)
                                     : !args.prompts.empty()    ? args.prompts
                                                                : std::vector<std::string>{""};
    inputs = (*tokenizer)(texts);
  }

  PretrainedOptions options;
  options.device_map = args.device;
  if (!args.dtype.empty()) options.dtype = parse_dtype(args.dtype);
  AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained(model_path, options);

  const size_t rows = inputs.input_ids.size();
  const bool stream = args.output == "text" && rows == 1;
  std::vector<std::string> generated_text(rows);
  if (stream) {
    std::string prompt_text = tokenizer->decode(inputs.input_ids[0], /*skip_special_tokens=*/true);
    std::fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
    std::fflush(stdout);
  }
  TokenStreamer streamer = [&](size_t row, int64_t, std::string_view text) {
    generated_text[row] += text;
    if (!stream) return;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  std::vector<std::vector<int64_t>> sequences =
      model.generate(inputs, to_generation_config(args), streamer, tokenizer ? &*tokenizer : nullptr);

  for (size_t row = 0; row < rows; ++row) {
    const std::vector<int64_t>& prompt = inputs.input_ids[row];
    std::vector<int64_t> generated(sequences[row].begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                   sequences[row].end());
    if (args.output == "text") {
      if (!stream) {
        std::string prompt_text = tokenizer->decode(prompt, /*skip_special_tokens=*/true);
        std::printf("%s%s\n", prompt_text.c_str(), generated_text[row].c_str());
        if (row + 1 < rows) std::printf("\n");
      } else {
        std::printf("\n");
      }
    } else if (args.output == "ids") {
      std::string line;
      for (size_t i = 0; i < generated.size(); ++i) line += (i ? "," : "") + std::to_string(generated[i]);
      std::printf("%s\n", line.c_str());
    } else {
      nlohmann::json result = {{"prompt_ids", prompt}, {"generated_ids", generated}};
      if (tokenizer) result["text"] = generated_text[row];
      std::printf("%s\n", result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    }
  }
  if (args.stats) print_stats(model);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArguments>();
  CLI::App* command = app.add_subcommand(
      "generate",
      "Generate a continuation of a prompt with a static KV cache.\n"
      "Greedy unless the model's generation_config.json samples, or --sample / a sampling option is given.");
  command->add_option("--model,-m", args->model,
                      "Checkpoint directory (config.json, *.safetensors, tokenizer.json), or a Hugging Face model "
                      "id (org/name) found in or downloaded to its cache; default: the built-in stories260K model");
  command->add_option("--revision", args->revision, "For a model id: branch, tag or commit hash")
      ->capture_default_str();
  command->add_option("--prompt,-p", args->prompts,
                      "Prompt text (special tokens such as BOS are added as the tokenizer says); repeat for a batch");
  command->add_option("--prompts-file", args->prompts_file, "A batch of prompts, one per line");
  command->add_option("--input-ids", args->input_ids,
                      "Prompt as comma-separated token ids, e.g. 1,403,407; repeat for a batch");
  command->add_option("--max-new-tokens,-n", args->max_new_tokens,
                      "Tokens to generate (default: generation_config.json, else max_length 20 minus the prompt)");
  command->add_flag("--greedy", args->greedy, "Always pick the most likely token");
  command->add_flag("--sample", args->sample, "Sample from the distribution (implied by the options below)");
  command->add_option("--temperature", args->temperature, "Divide logits by this before sampling (> 0)");
  command->add_option("--top-k", args->top_k, "Sample among the k most likely tokens (0: all)");
  command->add_option("--top-p", args->top_p, "Sample among the most likely tokens whose mass reaches p (0, 1]");
  command->add_option("--min-p", args->min_p, "Drop tokens less likely than min-p times the most likely one");
  command->add_option("--repetition-penalty", args->repetition_penalty,
                      "Penalize tokens already in the sequence (> 1 discourages repeats)");
  command->add_option("--seed", args->seed, "Random seed: the same seed reproduces a sampled output");
  command->add_option("--stop", args->stop, "Stop once the generated text contains this string (repeatable)");
  command->add_option("--max-cache-len", args->max_cache_len, "KV cache length (default: prompt + max-new-tokens)");
  command->add_option("--dtype", args->dtype, "Convert weights on load: float32, bfloat16 or float16 "
                                              "(default: as stored)");
  command->add_option("--device", args->device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  command->add_option("--output,-o", args->output,
                      "text: stream the prompt and continuation; ids: only the generated ids, comma-separated; "
                      "json: one object with prompt_ids, generated_ids and text")
      ->check(CLI::IsMember({"text", "ids", "json"}))
      ->capture_default_str();
  command->add_flag("--no-compile", args->no_compile,
                    "Run the graph eagerly, op by op (the reference path; no fusion, no cached executables)");
  command->add_option("--prefill-chunk", args->prefill_chunk,
                      "Prompt tokens per prefill step (default 128); every prompt length reuses one executable");
  command->add_flag("--stats", args->stats,
                    "Print compiles, time to first token, prefill and decode tok/s and memory to stderr");
  command->add_flag("--verbose,-v", args->verbose, "Log what is loaded, and each compile with its key and time");
  command->callback([args] { run_generate(*args); });
}

}  // namespace shardlm::cli
