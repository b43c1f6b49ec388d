#pragma once
// tokenizer_config.json: what transformers layers on top of tokenizer.json.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardlm::tokenizer {

struct NamedChatTemplate {
  std::string name;
  std::string source;
};

struct TokenizerConfig {
  // Special-token strings; absent or null in the file -> nullopt.
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  std::optional<std::string> unk_token;
  // Absent -> nullopt: the tokenizer class's default applies.
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  // Huge values ("no limit", 1e30 in some files) are clamped to INT64_MAX.
  std::optional<int64_t> model_max_length;
  std::optional<std::string> padding_side;     // "left" or "right"
  std::optional<std::string> truncation_side;  // "left" or "right"
  std::optional<bool> clean_up_tokenization_spaces;
  // The default template ("chat_template" as a string, or the entry named "default").
  std::optional<std::string> chat_template;
  // Every template, when the file gives a list of {name, template}.
  std::vector<NamedChatTemplate> chat_templates;
  std::string tokenizer_class;
  // additional_special_tokens: strings or {"content": ...} objects.
  std::vector<std::string> additional_special_tokens;
};

// Throws shardlm::Error naming the file and key for malformed content.
TokenizerConfig load_tokenizer_config(const std::string& path);
TokenizerConfig parse_tokenizer_config(std::string_view json_text, const std::string& source_name);

}  // namespace shardlm::tokenizer
