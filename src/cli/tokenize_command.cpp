// `shardlm tokenize`: text to ids and back, one JSON value per line, like llama-tokenize.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "tokenizer/tokenize_stream.h"

namespace shardlm::cli {
namespace {

struct TokenizeArguments {
  std::string tokenizer{io::default_model_id};
  std::string revision = "main";
  tokenizer::TokenizeStreamOptions stream;
};

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArguments>();
  CLI::App* command = app.add_subcommand(
      "tokenize",
      "Encode standard input, one JSON string per line, to {\"ids\": [...]} lines;\n"
      "with --decode, {\"ids\": [...]} lines (or bare arrays) back to JSON strings.");
  command->add_option("--tokenizer,--model,-m", args->tokenizer,
                      "Directory with tokenizer.json (and tokenizer_config.json) or a model id; default: the "
                      "built-in stories260K tokenizer");
  command->add_option("--revision", args->revision, "For a model id: branch, tag or commit hash")->capture_default_str();
  command->add_flag("--plain", args->stream.plain, "Input lines are raw text, not JSON strings");
  command->add_flag("--add-special-tokens", args->stream.add_special_tokens,
                    "Add the special tokens the tokenizer's post-processor defines (e.g. BOS)");
  command->add_flag("--decode", args->stream.decode, "Decode ids to text instead");
  command->add_flag("--skip-special-tokens", args->stream.skip_special_tokens, "With --decode: drop special tokens");
  command->callback([args] {
    io::ModelFiles files = io::resolve_model(args->tokenizer, {.revision = args->revision});
    AutoTokenizer tokenizer =
        AutoTokenizer::from_pretrained(files.is_embedded() ? args->tokenizer : files.location());
    std::ios::sync_with_stdio(false);
    tokenizer::run_tokenize_stream(detail::Access::impl(tokenizer).pretrained, std::cin, std::cout, args->stream);
  });
}

}  // namespace shardlm::cli
