#include "io/gguf_vocabulary.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace shardlm::io {
namespace {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum TokenType : int64_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

// The pre-tokenizer regexes llama.cpp applies for tokenizer.ggml.pre, as the tokenizer.json
// files of those models write them.
const char* pre_tokenizer_regex(const std::string& pre) {
  if (pre == "qwen2")
    return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (pre == "llama-bpe")
    return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  return nullptr;
}

// Texts llama.cpp (0.5.0, llama-vocab.cpp) takes for end-of-generation, fill-in-the-middle
// and similar control tokens whatever type the file gives them: it makes them CONTROL, so
// they are matched in text as special tokens (Qwen's vocabulary lists "</s>" as normal).
constexpr const char* control_looking_texts[] = {
    "</s>", "<EOT>", "<MID>", "<PAD>", "<PRE>", "<REPO>", "<SUF>", "<end_of_turn>", "<end_of_utterance>", "<eos>",
    "<fim-middle>", "<fim-pad>", "<fim-prefix>", "<fim-repo>", "<fim-suffix>", "<fim_middle>", "<fim_pad>",
    "<fim_prefix>", "<fim_suffix>", "<reponame>", "<turn|>", "<|calls|>", "<|call|>", "<|code_middle|>",
    "<|code_prefix|>", "<|code_suffix|>", "<|end_of_text|>", "<|endoftext|>", "<|end|>", "<|eom_id|>", "<|eot_id|>",
    "<|file_sep|>", "<|fim_middle|>", "<|fim_pad|>", "<|fim_prefix|>", "<|fim_repo|>", "<|fim_suffix|>", "<|flush|>",
    "<|im_end|>", "<|middle|>", "<|prefix|>", "<|repo_name|>", "<|return|>", "<|suffix|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "<｜fim▁begin｜>",
    "<｜fim▁end｜>", "<｜fim▁hole｜>", "[EOS]", "[EOT]", "[PAD]", "[e~[",
    "_<EOT>", "▁<MID>", "▁<PRE>", "▁<SUF>"};
// And texts it always makes USER_DEFINED (gpt-oss's).
constexpr const char* user_defined_texts[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

int64_t llama_cpp_token_type(const std::string& text, int64_t stored) {
  for (const char* candidate : user_defined_texts)
    if (text == candidate) return user_defined;
  for (const char* candidate : control_looking_texts)
    if (text == candidate) return control;
  return stored;
}

std::string pre_of(const GgufFile& file) {
  return file.contains("tokenizer.ggml.pre") ? file.get_string("tokenizer.ggml.pre") : "default";
}

using nlohmann::json;

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<int64_t> types{};  // as llama.cpp takes them (llama_cpp_token_type)
};

Vocabulary read_vocabulary(const GgufFile& file) {
  Vocabulary vocabulary{.tokens = file.get_strings("tokenizer.ggml.tokens")};
  vocabulary.types = file.contains("tokenizer.ggml.token_type") ? file.get_integers("tokenizer.ggml.token_type")
                                                               : std::vector<int64_t>(vocabulary.tokens.size(), normal);
  if (vocabulary.types.size() != vocabulary.tokens.size())
    fail(file.source_name(), ": tokenizer.ggml.token_type has ", vocabulary.types.size(), " entries for ",
         vocabulary.tokens.size(), " tokens");
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id)
    vocabulary.types[id] = llama_cpp_token_type(vocabulary.tokens[id], vocabulary.types[id]);
  return vocabulary;
}

// Control and user-defined tokens, matched whole in the text before anything else splits it.
json added_tokens(const Vocabulary& vocabulary) {
  json added = json::array();
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    const int64_t type = vocabulary.types[id];
    if (type == control || type == user_defined)
      added.push_back({{"id", id}, {"content", vocabulary.tokens[id]}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", type == control}});
  }
  return added;
}

// tokenizer_config.json (special tokens, add_bos_token, the chat template), and the
// post-processor that adds BOS.
std::pair<json, json> config_and_post_processor(const GgufFile& file, const Vocabulary& vocabulary) {
  const std::vector<std::string>& tokens = vocabulary.tokens;
  const bool add_bos = file.contains("tokenizer.ggml.add_bos_token") && file.get_bool("tokenizer.ggml.add_bos_token");
  json post_processor = nullptr;
  json config = {{"add_bos_token", add_bos}, {"add_eos_token", false}};
  const auto token_of = [&](const char* key) -> std::optional<std::string> {
    if (!file.contains(key)) return std::nullopt;
    const int64_t id = file.get_integer(key);
    if (id < 0 || id >= static_cast<int64_t>(tokens.size()))
      fail(file.source_name(), ": ", key, " is ", id, ", outside the ", tokens.size(), " tokens");
    return tokens[static_cast<size_t>(id)];
  };
  if (const auto bos = token_of("tokenizer.ggml.bos_token_id")) {
    config["bos_token"] = *bos;
    if (add_bos)
      post_processor = {{"type", "TemplateProcessing"},
                        {"single", {{{"SpecialToken", {{"id", *bos}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                        {"pair", {{{"SpecialToken", {{"id", *bos}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                  {{"SpecialToken", {{"id", *bos}, {"type_id", 1}}}},
                                  {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
                        {"special_tokens",
                         {{*bos, {{"id", *bos}, {"ids", {file.get_integer("tokenizer.ggml.bos_token_id")}},
                                  {"tokens", {*bos}}}}}}};
  }
  if (const auto eos = token_of("tokenizer.ggml.eos_token_id")) config["eos_token"] = *eos;
  if (const auto pad = token_of("tokenizer.ggml.padding_token_id")) config["pad_token"] = *pad;
  if (const auto unk = token_of("tokenizer.ggml.unknown_token_id")) config["unk_token"] = *unk;
  if (file.contains("tokenizer.chat_template")) config["chat_template"] = file.get_string("tokenizer.chat_template");
  return {config, post_processor};
}

json byte_level_bpe(const GgufFile& file, const Vocabulary& vocabulary) {
  const std::string pre = pre_of(file);
  json vocab = json::object();
  // As in llama.cpp, every token but unused ones stays in the vocabulary (merges may make a
  // control one).
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id)
    if (vocabulary.types[id] != unused) vocab[vocabulary.tokens[id]] = id;
  const json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  const json split = {
      {"type", "Split"}, {"pattern", {{"Regex", pre_tokenizer_regex(pre)}}}, {"behavior", "Isolated"}, {"invert", false}};
  json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""},
                {"fuse_unk", false},
                {"byte_fallback", false},
                // llama.cpp looks a whole pre-token up first for Llama 3, as its tokenizer.json says.
                {"ignore_merges", pre == "llama-bpe"}};
  model["vocab"] = std::move(vocab);
  model["merges"] = file.contains("tokenizer.ggml.merges") ? file.get_strings("tokenizer.ggml.merges")
                                                           : std::vector<std::string>{};
  return {{"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}}},
          {"decoder", byte_level},
          {"model", std::move(model)}};
}

// llama.cpp's SentencePiece rule as BPE merges: every split of every token into two tokens
// is a merge, ranked by the joined token's score, highest first (llama.cpp joins the
// adjacent pair of highest score, the leftmost among equal scores, as BPE does among equal
// ranks). Different tokens of one score rank here by id, where llama.cpp would take the
// leftmost: Gemma's normal tokens all have scores of their own.
std::vector<std::pair<std::string, std::string>> sentencepiece_merges(const GgufFile& file,
                                                                       const Vocabulary& vocabulary) {
  const std::vector<double> scores = file.get_numbers("tokenizer.ggml.scores");
  if (scores.size() != vocabulary.tokens.size())
    fail(file.source_name(), ": tokenizer.ggml.scores has ", scores.size(), " entries for ", vocabulary.tokens.size(),
         " tokens");
  std::unordered_map<std::string_view, size_t> ids;
  ids.reserve(vocabulary.tokens.size());
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id) ids.emplace(vocabulary.tokens[id], id);
  struct Merge {
    size_t merged, left_length;
  };
  std::vector<Merge> merges;
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    const std::string_view text = vocabulary.tokens[id];
    for (size_t split = 1; split < text.size(); ++split) {
      if ((static_cast<unsigned char>(text[split]) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
      if (ids.contains(text.substr(0, split)) && ids.contains(text.substr(split))) merges.push_back({id, split});
    }
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [&](const Merge& a, const Merge& b) { return scores[a.merged] > scores[b.merged]; });
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(merges.size());
  for (const Merge& merge : merges) {
    const std::string& text = vocabulary.tokens[merge.merged];
    pairs.emplace_back(text.substr(0, merge.left_length), text.substr(merge.left_length));
  }
  return pairs;
}

json sentencepiece_bpe(const GgufFile& file, const Vocabulary& vocabulary) {
  json vocab = json::object();
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id) vocab[vocabulary.tokens[id]] = id;
  const bool space_prefix =
      !file.contains("tokenizer.ggml.add_space_prefix") || file.get_bool("tokenizer.ggml.add_space_prefix");
  const json escape = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}};
  // llama.cpp prefixes a space to each stretch of text that starts the input or follows a
  // special token: the stretches the added tokens leave, which are normalized one by one.
  const json normalizer = space_prefix ? json{{"type", "Sequence"},
                                              {"normalizers", {{{"type", "Prepend"}, {"prepend", "▁"}}, escape}}}
                                       : escape;
  json decoders = {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                   {{"type", "ByteFallback"}},
                   {{"type", "Fuse"}}};
  if (space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  const std::optional<std::string> unk =
      file.contains("tokenizer.ggml.unknown_token_id")
          ? std::optional(vocabulary.tokens.at(static_cast<size_t>(file.get_integer("tokenizer.ggml.unknown_token_id"))))
          : std::nullopt;
  json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", unk ? json(*unk) : json(nullptr)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false}};
  model["vocab"] = std::move(vocab);
  model["merges"] = sentencepiece_merges(file, vocabulary);
  return {{"normalizer", normalizer},
          {"pre_tokenizer", nullptr},
          {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}},
          {"model", std::move(model)}};
}

}  // namespace

std::string gguf_vocabulary_unread_reason(const GgufFile& file) {
  if (!file.contains("tokenizer.ggml.model") || file.get_string("tokenizer.ggml.model") == "none")
    return "it has no vocabulary (tokenizer.ggml.model is absent or \"none\")";
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model == "llama") {
    if (!file.contains("tokenizer.ggml.scores"))
      return "its SentencePiece vocabulary has no scores (tokenizer.ggml.scores)";
    return "";
  }
  if (model != "gpt2")
    return str_cat("its vocabulary is of kind '", model, "' (tokenizer.ggml.model), which shardlm does not read yet "
                   "(it reads 'gpt2', byte-level BPE, and 'llama', SentencePiece)");
  if (!pre_tokenizer_regex(pre_of(file)))
    return str_cat("its pre-tokenizer '", pre_of(file), "' (tokenizer.ggml.pre) is not one shardlm knows yet "
                   "(it knows qwen2, llama-bpe)");
  return "";
}

std::map<std::string, std::string> gguf_tokenizer_files(const GgufFile& file) {
  if (!gguf_vocabulary_unread_reason(file).empty()) return {};
  const Vocabulary vocabulary = read_vocabulary(file);
  auto [config, post_processor] = config_and_post_processor(file, vocabulary);
  json tokenizer = file.get_string("tokenizer.ggml.model") == "llama" ? sentencepiece_bpe(file, vocabulary)
                                                                      : byte_level_bpe(file, vocabulary);
  tokenizer["version"] = "1.0";
  tokenizer["added_tokens"] = added_tokens(vocabulary);
  tokenizer["post_processor"] = std::move(post_processor);
  return {{"tokenizer.json", tokenizer.dump()}, {"tokenizer_config.json", config.dump()}};
}

}  // namespace shardlm::io
