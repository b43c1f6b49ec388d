#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/impl.h"
#include "cli/commands.h"
#include "cli/model_options.h"

namespace shardlm::cli {
namespace {

struct GenerateArguments {
  ModelArguments model;
  SamplingArguments sampling;
  std::vector<std::string> prompts;
  std::string prompts_file;
  std::vector<std::string> input_ids;
  bool stats = false;
  std::string output = "text";
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
  if (model.device().starts_with("pjrt"))
    std::fprintf(stderr, "pjrt programs: %lld compiled, %lld loaded from the compile cache\n",
                 static_cast<long long>(stats.programs_compiled), static_cast<long long>(stats.programs_loaded));
}

void run_generate(const GenerateArguments& args) {
  const int prompt_sources = !args.prompts.empty() + !args.prompts_file.empty() + !args.input_ids.empty();
  if (prompt_sources > 1) fail("give prompts one way: --prompt, --prompts-file or --input-ids");
  const GenerationConfig config = to_generation_config(args.sampling);
  const auto check = [&](const io::ModelFiles& files, const std::optional<AutoTokenizer>& tokenizer) {
    if (!tokenizer && args.input_ids.empty())
      fail(files.location(),
           !files.gguf() ? " has no tokenizer.json"
                         : " is a GGUF file without a vocabulary shardlm reads (tokenizer.ggml.*)",
           ", so a text prompt cannot be encoded: pass --input-ids");
    if (!tokenizer && args.output == "text")
      fail(files.location(), " has no tokenizer.json, so ids cannot be shown as text: use --output ids or json");
  };
  LoadedModel loaded = load_model(args.model, check);
  const std::optional<AutoTokenizer>& tokenizer = loaded.tokenizer;
  AutoModelForCausalLM& model = loaded.model;

  BatchEncoding inputs;
  if (!args.input_ids.empty()) {
    for (const std::string& ids : args.input_ids) inputs.input_ids.push_back(parse_ids(ids));
  } else {
    std::vector<std::string> texts = !args.prompts_file.empty() ? read_prompt_lines(args.prompts_file)
                                     : !args.prompts.empty()    ? args.prompts
                                                                : std::vector<std::string>{""};
    inputs = (*tokenizer)(texts);
  }

  const size_t rows = inputs.input_ids.size();
  const bool stream = args.output == "text" && rows == 1;
  std::vector<std::string> generated_text(rows);
  bool prompt_shown = false;
  TokenStreamer streamer = [&](size_t row, int64_t, std::string_view text) {
    generated_text[row] += text;
    if (!stream) return;
    // The prompt is echoed with the first token, once generate() has validated the
    // request: an error never leaves half an output behind.
    if (!prompt_shown) {
      std::string prompt_text = tokenizer->decode(inputs.input_ids[0], /*skip_special_tokens=*/true);
      std::fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
      prompt_shown = true;
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  std::vector<std::vector<int64_t>> sequences =
      model.generate(inputs, config, streamer, tokenizer ? &*tokenizer : nullptr);

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
  add_model_options(*command, args->model);
  command->add_option("--prompt,-p", args->prompts,
                      "Prompt text (special tokens such as BOS are added as the tokenizer says); repeat for a batch");
  command->add_option("--prompts-file", args->prompts_file, "A batch of prompts, one per line");
  command->add_option("--input-ids", args->input_ids,
                      "Prompt as comma-separated token ids, e.g. 1,403,407; repeat for a batch");
  add_sampling_options(*command, args->sampling);
  command->add_option("--output,-o", args->output,
                      "text: stream the prompt and continuation; ids: only the generated ids, comma-separated; "
                      "json: one object with prompt_ids, generated_ids and text (one line per prompt)")
      ->check(CLI::IsMember({"text", "ids", "json"}))
      ->capture_default_str();
  command->add_flag("--stats", args->stats,
                    "Print compiles, time to first token, prefill and decode tok/s and memory to stderr");
  command->callback([args] { run_generate(*args); });
}

}  // namespace shardlm::cli
