#include <cstdio>
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
  std::string prompt;
  std::string input_ids;
  std::optional<int64_t> max_new_tokens;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  std::optional<uint64_t> seed;
  std::optional<int64_t> max_cache_len;
  bool greedy = false, sample = false, verbose = false;
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
  const bool sampling_option = args.temperature || args.top_k || args.top_p || args.min_p;
  if (args.greedy) config.do_sample = false;
  else if (args.sample || sampling_option) config.do_sample = true;
  return config;
}

void run_generate(const GenerateArguments& args) {
  if (args.verbose) log::set_level(log::Level::info);
  if (!args.prompt.empty() && !args.input_ids.empty()) fail("give either --prompt or --input-ids, not both");
  if (args.greedy && args.sample) fail("--greedy and --sample contradict each other");

  io::ModelFiles files = io::resolve_model(args.model);
  std::optional<AutoTokenizer> tokenizer;
  if (files.exists("tokenizer.json")) tokenizer = AutoTokenizer::from_pretrained(args.model);
  if (!tokenizer && args.input_ids.empty())
    fail(files.location(), " has no tokenizer.json, so --prompt cannot be encoded: pass --input-ids");
  if (!tokenizer && args.output == "text")
    fail(files.location(), " has no tokenizer.json, so ids cannot be shown as text: use --output ids or json");

  PretrainedOptions options;
  options.device_map = args.device;
  if (!args.dtype.empty()) options.dtype = parse_dtype(args.dtype);
  AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained(args.model, options);

  std::vector<int64_t> prompt = args.input_ids.empty() ? tokenizer->encode(args.prompt) : parse_ids(args.input_ids);
  GenerationConfig config = to_generation_config(args);
  const bool stream = args.output == "text";
  if (stream) {
    std::string prompt_text = tokenizer->decode(prompt, /*skip_special_tokens=*/true);
    std::fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
    std::fflush(stdout);
  }
  std::string generated_text;
  TokenStreamer streamer = [&](int64_t, std::string_view text) {
    generated_text += text;
    if (!stream) return;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  std::vector<int64_t> sequence =
      model.generate(BatchEncoding{{prompt}, {}}, config, streamer, tokenizer ? &*tokenizer : nullptr).front();
  std::vector<int64_t> generated(sequence.begin() + static_cast<std::ptrdiff_t>(prompt.size()), sequence.end());

  if (args.output == "text") {
    std::printf("\n");
  } else if (args.output == "ids") {
    std::string line;
    for (size_t i = 0; i < generated.size(); ++i) line += (i ? "," : "") + std::to_string(generated[i]);
    std::printf("%s\n", line.c_str());
  } else {
    nlohmann::json result = {{"model", files.location()}, {"prompt_ids", prompt}, {"generated_ids", generated}};
    if (tokenizer) result["text"] = generated_text;
    std::printf("%s\n", result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArguments>();
  CLI::App* command = app.add_subcommand(
      "generate",
      "Generate a continuation of a prompt with a static KV cache.\n"
      "Greedy unless the model's generation_config.json samples, or --sample / a sampling option is given.");
  command->add_option("--model,-m", args->model,
                      "Checkpoint directory (config.json, *.safetensors, tokenizer.json); default: the built-in "
                      "stories260K model");
  command->add_option("--prompt,-p", args->prompt, "Prompt text (special tokens such as BOS are added as the "
                                                   "tokenizer says)");
  command->add_option("--input-ids", args->input_ids, "Prompt as comma-separated token ids, e.g. 1,403,407");
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
  command->add_flag("--verbose,-v", args->verbose, "Log what is loaded and where");
  command->callback([args] { run_generate(*args); });
}

}  // namespace shardlm::cli
