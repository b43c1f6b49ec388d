#pragma once
// What transformers' AutoTokenizer.from_pretrained(dir) gives: tokenizer.json adjusted
// the way the tokenizer class named in tokenizer_config.json adjusts it, the named
// special tokens, padding, truncation and attention masks. Output matches
// transformers 5.23 (see tests/data/tokenizers/README.md for what differs from the
// plain `tokenizers` library and why).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace shardlm::tokenizer {

enum class Side { Left, Right };

enum class Padding {
  None,       // every sequence keeps its own length
  Longest,    // pad to the longest sequence of the batch
  MaxLength,  // pad to max_length (or model_max_length)
};

struct EncodeOptions {
  bool add_special_tokens = true;
  Padding padding = Padding::None;
  bool truncation = false;
  // Limit for truncation and Padding::MaxLength, special tokens included;
  // model_max_length when unset.
  std::optional<int64_t> max_length = std::nullopt;
  std::optional<Side> padding_side = std::nullopt;  // tokenizer_config.json's (or the class default) when unset
  std::optional<Side> truncation_side = std::nullopt;  // right when unset and the config says nothing
};

struct BatchEncoding {
  std::vector<std::vector<int32_t>> input_ids;
  std::vector<std::vector<int32_t>> attention_mask;  // 1 for a token, 0 for padding
};

class PretrainedTokenizer {
 public:
  // A directory with tokenizer.json and, optionally, tokenizer_config.json.
  static PretrainedTokenizer from_directory(const std::string& directory);
  // `config_path` may be empty: then transformers' defaults apply.
  static PretrainedTokenizer from_files(const std::string& tokenizer_json_path,
                                        const std::string& config_path);
  // The same from file contents (e.g. read through the hub cache); `config_json` may be
  // empty for a directory without tokenizer_config.json. The names appear in errors.
  static PretrainedTokenizer from_texts(std::string_view tokenizer_json, const std::string& tokenizer_name,
                                        std::string_view config_json, const std::string& config_name);

  BatchEncoding encode(std::span<const std::string> texts, const EncodeOptions& options = {}) const;
  BatchEncoding encode(std::string_view text, const EncodeOptions& options = {}) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The adjusted pipeline (what AutoTokenizer's backend_tokenizer holds).
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const TokenizerConfig& config() const { return config_; }
  // The tokenizer class transformers uses for this directory ("LlamaTokenizer",
  // "TokenizersBackend", ...).
  const std::string& tokenizer_class() const { return class_name_; }

  std::optional<int32_t> bos_token_id() const { return token_id(config_.bos_token); }
  std::optional<int32_t> eos_token_id() const { return token_id(config_.eos_token); }
  std::optional<int32_t> pad_token_id() const { return token_id(config_.pad_token); }
  std::optional<int32_t> unk_token_id() const { return token_id(config_.unk_token); }
  Side padding_side() const { return padding_side_; }
  int64_t model_max_length() const { return model_max_length_; }

 private:
  std::optional<int32_t> token_id(const std::optional<std::string>& token) const;

  Tokenizer tokenizer_;
  TokenizerConfig config_;
  std::string class_name_;
  Side padding_side_ = Side::Right;
  Side truncation_side_ = Side::Right;
  int64_t model_max_length_ = INT64_MAX;
  PretrainedTokenizer(Tokenizer tokenizer) : tokenizer_(std::move(tokenizer)) {}
};

}  // namespace shardlm::tokenizer
