#include "tokenizer/tokenizer_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/components.h"

namespace shardlm::tokenizer {

namespace {

using Json = nlohmann::json;

[[noreturn]] void bad(const std::string& source, std::string_view key, std::string_view what) {
  fail(source, ": key \"", key, "\": ", what);
}

// Special tokens appear as "text", {"content": "text", ...} (AddedToken dicts) or null.
std::optional<std::string> token_string(const Json& config, std::string_view key,
                                        const std::string& source) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  bad(source, key, "expected a string, an object with \"content\", or null");
}

std::optional<bool> optional_bool(const Json& config, std::string_view key, const std::string& source) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) bad(source, key, "expected true or false");
  return it->get<bool>();
}

std::optional<std::string> optional_string(const Json& config, std::string_view key,
                                           const std::string& source) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) bad(source, key, "expected a string");
  return it->get<std::string>();
}

}  // namespace

TokenizerConfig parse_tokenizer_config(std::string_view json_text, const std::string& source) {
  Json config;
  try {
    config = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    fail(source, ": invalid JSON: ", e.what());
  }
  if (!config.is_object()) fail(source, ": expected a JSON object");

  TokenizerConfig out;
  out.bos_token = token_string(config, "bos_token", source);
  out.eos_token = token_string(config, "eos_token", source);
  out.pad_token = token_string(config, "pad_token", source);
  out.unk_token = token_string(config, "unk_token", source);
  out.add_bos_token = optional_bool(config, "add_bos_token", source);
  out.add_eos_token = optional_bool(config, "add_eos_token", source);
  out.clean_up_tokenization_spaces = optional_bool(config, "clean_up_tokenization_spaces", source);
  out.padding_side = optional_string(config, "padding_side", source);
  out.truncation_side = optional_string(config, "truncation_side", source);
  for (const auto& side : {out.padding_side, out.truncation_side}) {
    if (side && *side != "left" && *side != "right") {
      fail(source, ": padding_side/truncation_side must be \"left\" or \"right\", not \"", *side, "\"");
    }
  }
  out.tokenizer_class = optional_string(config, "tokenizer_class", source).value_or("");

  if (auto it = config.find("model_max_length"); it != config.end() && !it->is_null()) {
    if (it->is_number_integer()) {
      out.model_max_length = it->get<int64_t>();
    } else if (it->is_number()) {
      double value = it->get<double>();
      out.model_max_length = value >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(value);
    } else {
      bad(source, "model_max_length", "expected a number");
    }
    if (*out.model_max_length <= 0) bad(source, "model_max_length", "must be positive");
  }

  if (auto it = config.find("chat_template"); it != config.end() && !it->is_null()) {
    if (it->is_string()) {
      out.chat_template = it->get<std::string>();
    } else if (it->is_array()) {
      for (const Json& entry : *it) {
        if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
            !entry["name"].is_string() || !entry["template"].is_string()) {
          bad(source, "chat_template", "expected a string or a list of {\"name\", \"template\"}");
        }
        out.chat_templates.push_back({entry["name"].get<std::string>(), entry["template"].get<std::string>()});
        if (out.chat_templates.back().name == "default") out.chat_template = out.chat_templates.back().source;
      }
    } else {
      bad(source, "chat_template", "expected a string or a list of {\"name\", \"template\"}");
    }
  }

  if (auto it = config.find("additional_special_tokens"); it != config.end() && !it->is_null()) {
    if (!it->is_array()) bad(source, "additional_special_tokens", "expected a list");
    for (const Json& entry : *it) {
      if (entry.is_string()) {
        out.additional_special_tokens.push_back(entry.get<std::string>());
      } else if (entry.is_object() && entry.contains("content") && entry["content"].is_string()) {
        out.additional_special_tokens.push_back(entry["content"].get<std::string>());
      } else {
        bad(source, "additional_special_tokens", "expected strings or {\"content\": ...} objects");
      }
    }
  }
  return out;
}

TokenizerConfig load_tokenizer_config(const std::string& path) {
  return parse_tokenizer_config(detail::read_file(path, "tokenizer config"), path);
}

}  // namespace shardlm::tokenizer
