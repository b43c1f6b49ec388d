// `shardlm perplexity`: a text file's perplexity under a model, computed as llama.cpp's
// llama-perplexity computes it (generation/perplexity.h), so that the two read alike.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "generation/perplexity.h"

namespace shardlm::cli {
namespace {

struct PerplexityArguments {
  ModelArguments model;
  std::string file;
  generation::PerplexityOptions options;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read ", path, ": no such file, or not readable");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void run(PerplexityArguments& args) {
  const std::string text = read_text(args.file);
  const auto check = [](const io::ModelFiles& files, const std::optional<AutoTokenizer>& tokenizer) {
    if (!tokenizer)
      fail(files.location(), " has no tokenizer this build reads: perplexity needs one to split the text");
  };
  LoadedModel loaded = load_model(args.model, check);
  const std::vector<int64_t> tokens = loaded.tokenizer->encode(text, /*add_special_tokens=*/true);
  // BOS, where the tokenizer adds one, starts every chunk (llama-perplexity's rule).
  const std::optional<int64_t> bos = detail::Access::impl(loaded.model).config.bos_token_id;
  const std::vector<int64_t> specials = loaded.tokenizer->encode("", /*add_special_tokens=*/true);
  if (bos && std::find(specials.begin(), specials.end(), *bos) != specials.end()) args.options.bos_id = bos;
  const int64_t chunks = static_cast<int64_t>(tokens.size()) / args.options.context;
  if (loaded.prints_output())
    std::fprintf(stderr, "%s: %zu tokens, %lld chunks of %lld\n", args.file.c_str(), tokens.size(),
                 static_cast<long long>(args.options.max_chunks > 0 ? std::min(chunks, args.options.max_chunks) : chunks),
                 static_cast<long long>(args.options.context));
  generation::Generator& generator = *detail::Access::impl(loaded.model).generator;
  const generation::Perplexity result =
      generation::perplexity(generator, tokens, args.options, [&](int64_t chunk, double running) {
        if (loaded.prints_output()) std::fprintf(stderr, "[%lld]%.4f,", static_cast<long long>(chunk), running);
      });
  if (!loaded.prints_output()) return;
  std::fprintf(stderr, "\n");
  std::printf("Final estimate: PPL = %.4f +/- %.5f (%lld chunks of %lld, %lld tokens scored)\n", result.perplexity,
              result.error, static_cast<long long>(result.chunks), static_cast<long long>(args.options.context),
              static_cast<long long>(result.scored_tokens));
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto args = std::make_shared<PerplexityArguments>();
  CLI::App* command = app.add_subcommand(
      "perplexity",
      "Perplexity of a text file, as llama.cpp's llama-perplexity computes it: the tokens in chunks of --ctx,\n"
      "each from an empty cache and starting with BOS where the tokenizer adds one, the second half of each\n"
      "chunk scored. Prints each chunk's running value, then the estimate with its standard error.");
  add_model_options(*command, args->model);
  command->add_option("--file,-f", args->file, "The text (UTF-8)")->required();
  command->add_option("--ctx,-c", args->options.context, "Tokens a chunk")->capture_default_str()->check(
      CLI::Range(int64_t{4}, int64_t{1} << 20));
  command->add_option("--chunks", args->options.max_chunks, "Score at most this many chunks (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->callback([args] { run(*args); });
}

}  // namespace shardlm::cli
