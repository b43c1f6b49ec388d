// How transformers 5.23 turns tokenizer.json + tokenizer_config.json into a tokenizer.
// Several tokenizer classes rebuild parts of the pipeline in their __init__ instead of
// keeping what tokenizer.json says; those rebuilds are replayed here as edits of the
// parsed JSON before the pipeline is built, so both paths share one implementation.

#include "tokenizer/pretrained_tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/tokenizer_impl.h"

namespace shardlm::tokenizer {

namespace {

using Json = nlohmann::json;

const char* const kMetaspace = "\xE2\x96\x81";
// Qwen2Tokenizer's PRETOKENIZE_REGEX.
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string read_text(const std::string& path, const char* what) { return detail::read_file(path, what); }

// The value of a config key as transformers sees it: absent -> the class default,
// null -> no token, a string or an AddedToken dict -> its text.
std::optional<std::string> named_token(const Json& config, const char* key,
                                       std::optional<std::string> class_default) {
  auto it = config.find(key);
  if (it == config.end()) return class_default;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::nullopt;
}

bool config_bool(const Json& config, const char* key, bool fallback) {
  auto it = config.find(key);
  return it != config.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// Keeps vocab and merges, replaces the options the class passes to BPE(...).
void rebuild_bpe(Json& model, const std::string& source, Json options) {
  if (!model.is_object() || model.value("type", "BPE") != "BPE") {
    fail(source, ": this tokenizer class needs a BPE model");
  }
  Json rebuilt = {{"type", "BPE"},          {"dropout", nullptr},
                  {"unk_token", nullptr},   {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
                  {"byte_fallback", false}, {"ignore_merges", false}};
  for (auto& [key, value] : options.items()) rebuilt[key] = value;
  rebuilt["vocab"] = std::move(model["vocab"]);
  rebuilt["merges"] = std::move(model["merges"]);
  model = std::move(rebuilt);
}

struct ClassDefaults {
  std::optional<std::string> unk, bos, eos, pad, mask;
  Side padding_side = Side::Right;
};

ClassDefaults apply_class(const std::string& class_name, Json& tokenizer, const Json& config,
                          const std::string& source) {
  ClassDefaults defaults;
  if (class_name == "LlamaTokenizer") {
    defaults.unk = "<unk>";
    defaults.bos = "<s>";
    defaults.eos = "</s>";
    defaults.padding_side = Side::Left;
    bool add_prefix_space = config_bool(config, "add_prefix_space", true);
    bool legacy = config_bool(config, "legacy", false);
    std::string scheme = add_prefix_space ? (legacy ? "always" : "first") : "never";
    tokenizer["normalizer"] = nullptr;
    tokenizer["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kMetaspace},
                                  {"prepend_scheme", scheme}, {"split", false}};
    Json decoders = Json::array({{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
                                 {{"type", "ByteFallback"}},
                                 {{"type", "Fuse"}}});
    if (add_prefix_space) {
      decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    }
    tokenizer["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
    rebuild_bpe(tokenizer["model"], source, {{"fuse_unk", true}, {"byte_fallback", true}});
  } else if (class_name == "GemmaTokenizer") {
    defaults.unk = "<unk>";
    defaults.bos = "<bos>";
    defaults.eos = "<eos>";
    defaults.pad = "<pad>";
    defaults.mask = "<mask>";
    defaults.padding_side = Side::Left;
    std::string unk = named_token(config, "unk_token", "<unk>").value_or("<unk>");
    tokenizer["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}};
    tokenizer["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}},
                                  {"behavior", "MergedWithPrevious"}, {"invert", false}};
    tokenizer["decoder"] = {
        {"type", "Sequence"},
        {"decoders", Json::array({{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}},
                                  {{"type", "Fuse"}}})}};
    rebuild_bpe(tokenizer["model"], source, {{"fuse_unk", true}, {"byte_fallback", true}, {"unk_token", unk}});
  } else if (class_name == "Qwen2Tokenizer") {
    defaults.unk = "<|endoftext|>";
    defaults.eos = "<|endoftext|>";
    defaults.pad = "<|endoftext|>";
    tokenizer["normalizer"] = {{"type", "NFC"}};
    tokenizer["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         Json::array({{{"type", "Split"}, {"pattern", {{"Regex", kQwen2Pattern}}}, {"behavior", "Isolated"},
                       {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", config_bool(config, "add_prefix_space", false)},
                       {"trim_offsets", true}, {"use_regex", false}}})}};
    tokenizer["decoder"] = {{"type", "ByteLevel"}};
    rebuild_bpe(tokenizer["model"], source, {{"continuing_subword_prefix", ""}, {"end_of_word_suffix", ""}});
  }
  return defaults;
}

// transformers registers the named special tokens (bos, eos, ...) as special added
// tokens: existing added tokens become special, missing ones are added.
void register_special_tokens(Json& tokenizer, const detail::ModelTables* tables,
                             const std::vector<std::string>& names) {
  Json& added = tokenizer["added_tokens"];
  if (!added.is_array()) added = Json::array();
  const Json& vocab = tokenizer["model"].contains("vocab") ? tokenizer["model"]["vocab"] : Json::object();
  auto model_id = [&](const std::string& name) -> std::optional<int64_t> {
    if (tables) {
      for (const auto& [token, id] : tables->vocab) {
        if (token == name) return id;
      }
      return std::nullopt;
    }
    if (vocab.is_object() && vocab.contains(name) && vocab[name].is_number_integer()) return vocab[name].get<int64_t>();
    return std::nullopt;
  };
  int64_t next_id = tables ? static_cast<int64_t>(tables->vocab.size())
                           : vocab.is_object() ? static_cast<int64_t>(vocab.size()) : 0;
  for (const Json& entry : added) next_id = std::max<int64_t>(next_id, entry.value("id", int64_t{0}) + 1);
  for (const std::string& name : names) {
    bool found = false;
    for (Json& entry : added) {
      if (entry.value("content", "") == name) {
        entry["special"] = true;
        found = true;
      }
    }
    if (found) continue;
    std::optional<int64_t> known = model_id(name);
    int64_t id = known ? *known : next_id++;
    added.push_back({{"id", id}, {"content", name}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
}

Side parse_side(const std::optional<std::string>& side, Side fallback) {
  if (!side) return fallback;
  return *side == "left" ? Side::Left : Side::Right;
}

}  // namespace

PretrainedTokenizer PretrainedTokenizer::from_directory(const std::string& directory) {
  std::filesystem::path dir(directory);
  if (!std::filesystem::exists(dir / "tokenizer.json")) {
    fail("no tokenizer.json in ", directory,
         " (shardlm reads the tokenizers-library format; a tokenizer.model alone is not supported)");
  }
  std::filesystem::path config = dir / "tokenizer_config.json";
  return from_files((dir / "tokenizer.json").string(),
                    std::filesystem::exists(config) ? config.string() : std::string());
}

PretrainedTokenizer PretrainedTokenizer::from_files(const std::string& tokenizer_json_path,
                                                    const std::string& config_path) {
  std::string tokenizer_text = read_text(tokenizer_json_path, "tokenizer file");
  std::string config_text = config_path.empty() ? std::string() : read_text(config_path, "tokenizer config");
  return from_texts(tokenizer_text, tokenizer_json_path, config_text, config_path);
}

PretrainedTokenizer PretrainedTokenizer::from_texts(std::string_view tokenizer_text,
                                                    const std::string& tokenizer_json_path,
                                                    std::string_view config_text,
                                                    const std::string& config_path) {
  Json config_json = Json::object();
  TokenizerConfig config;
  if (!config_text.empty()) {
    config = parse_tokenizer_config(config_text, config_path);
    config_json = Json::parse(config_text);
  }

  Json tokenizer_json;
  std::string skeleton;
  detail::ModelTables tables;
  bool scanned = detail::extract_model_tables(tokenizer_text, skeleton, tables);
  try {
    tokenizer_json = Json::parse(scanned ? std::string_view(skeleton) : std::string_view(tokenizer_text));
  } catch (const Json::parse_error& e) {
    fail(tokenizer_json_path, ": invalid JSON: ", e.what());
  }
  if (!tokenizer_json.is_object() || !tokenizer_json.contains("model")) {
    fail(tokenizer_json_path, ": top level: missing key \"model\"");
  }

  std::string class_name = config.tokenizer_class;
  if (class_name.ends_with("Fast")) class_name.resize(class_name.size() - 4);
  // AutoTokenizer loads byte-level files that claim LlamaTokenizer with the generic backend.
  if (class_name.empty() || class_name == "PreTrainedTokenizer" ||
      (class_name == "LlamaTokenizer" && tokenizer_text.find("\"ByteLevel\"") != std::string_view::npos)) {
    class_name = "TokenizersBackend";
  }
  ClassDefaults defaults = apply_class(class_name, tokenizer_json, config_json, tokenizer_json_path);

  config.bos_token = named_token(config_json, "bos_token", defaults.bos);
  config.eos_token = named_token(config_json, "eos_token", defaults.eos);
  config.unk_token = named_token(config_json, "unk_token", defaults.unk);
  config.pad_token = named_token(config_json, "pad_token", defaults.pad);
  std::vector<std::string> special_names;
  for (const auto& token : {config.bos_token, config.eos_token, config.unk_token, config.pad_token,
                            named_token(config_json, "mask_token", defaults.mask),
                            named_token(config_json, "cls_token", std::nullopt),
                            named_token(config_json, "sep_token", std::nullopt)}) {
    if (token) special_names.push_back(*token);
  }
  for (const std::string& token : config.additional_special_tokens) special_names.push_back(token);
  if (auto it = config_json.find("extra_special_tokens"); it != config_json.end()) {
    for (const Json& value : *it) {
      if (value.is_string()) special_names.push_back(value.get<std::string>());
    }
  }
  register_special_tokens(tokenizer_json, scanned ? &tables : nullptr, special_names);

  PretrainedTokenizer out(detail::TokenizerImpl::wrap(
      detail::TokenizerImpl::load(tokenizer_json, tokenizer_json_path, scanned ? &tables : nullptr)));
  // transformers skips clean_up_tokenization for BPE models: it would remove real spaces.
  bool is_bpe = tokenizer_json["model"].value("type", "BPE") == "BPE";
  out.tokenizer_.set_clean_up_tokenization_spaces(config.clean_up_tokenization_spaces.value_or(false) && !is_bpe);
  out.class_name_ = class_name;
  out.padding_side_ = parse_side(config.padding_side, defaults.padding_side);
  out.truncation_side_ = parse_side(config.truncation_side, Side::Right);
  out.model_max_length_ = config.model_max_length.value_or(INT64_MAX);
  out.config_ = std::move(config);
  return out;
}

std::optional<int32_t> PretrainedTokenizer::token_id(const std::optional<std::string>& token) const {
  if (!token) return std::nullopt;
  return tokenizer_.token_to_id(*token);
}

BatchEncoding PretrainedTokenizer::encode(std::span<const std::string> texts, const EncodeOptions& options) const {
  const detail::TokenizerImpl& impl = tokenizer_.impl();
  int64_t limit = options.max_length.value_or(model_max_length_);
  if (options.padding == Padding::MaxLength && limit == INT64_MAX) {
    fail("padding to max_length needs max_length: ", tokenizer_.source_name(), " sets no model_max_length");
  }
  std::optional<int32_t> pad_id = pad_token_id();
  if (options.padding != Padding::None && !pad_id) {
    fail("asked to pad, but ", tokenizer_.source_name(), " has no pad_token (set one in tokenizer_config.json)");
  }
  BatchEncoding out;
  out.input_ids.resize(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t>& ids = out.input_ids[i];
    impl.encode(texts[i], false, ids);
    if (options.truncation) {
      int64_t added = options.add_special_tokens ? tokenizer_.num_special_tokens_to_add() : 0;
      size_t budget = static_cast<size_t>(std::max<int64_t>(0, limit - added));
      if (ids.size() > budget) {
        if (options.truncation_side.value_or(truncation_side_) == Side::Left) {
          ids.erase(ids.begin(), ids.end() - static_cast<ptrdiff_t>(budget));
        } else {
          ids.resize(budget);
        }
      }
    }
    if (options.add_special_tokens && impl.post_processor) impl.post_processor->process(ids);
  }
  size_t target = 0;
  if (options.padding == Padding::Longest) {
    for (const auto& ids : out.input_ids) target = std::max(target, ids.size());
  } else if (options.padding == Padding::MaxLength) {
    target = static_cast<size_t>(limit);
  }
  Side side = options.padding_side.value_or(padding_side_);
  out.attention_mask.resize(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t>& ids = out.input_ids[i];
    std::vector<int32_t>& mask = out.attention_mask[i];
    mask.assign(ids.size(), 1);
    if (ids.size() >= target) continue;
    size_t missing = target - ids.size();
    if (side == Side::Left) {
      ids.insert(ids.begin(), missing, *pad_id);
      mask.insert(mask.begin(), missing, 0);
    } else {
      ids.insert(ids.end(), missing, *pad_id);
      mask.insert(mask.end(), missing, 0);
    }
  }
  return out;
}

BatchEncoding PretrainedTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::string copy(text);
  return encode(std::span<const std::string>(&copy, 1), options);
}

std::string PretrainedTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return tokenizer_.decode(ids, skip_special_tokens);
}

}  // namespace shardlm::tokenizer
