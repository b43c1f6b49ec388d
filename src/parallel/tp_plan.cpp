#include "parallel/tp_plan.h"

#include <cctype>
#include <fstream>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace shardlm::parallel {
namespace {

const std::vector<std::pair<std::string, ShardStyle>>& style_table() {
  static const std::vector<std::pair<std::string, ShardStyle>> table = {
      {"colwise", ShardStyle::colwise},
      {"rowwise", ShardStyle::rowwise},
      {"colwise_gather_output", ShardStyle::colwise_gather_output},
      {"colwise_rep", ShardStyle::colwise_gather_output},
      {"rowwise_split_input", ShardStyle::rowwise_split_input},
      {"rowwise_rep", ShardStyle::rowwise_split_input},
      {"replicate", ShardStyle::replicate},
      {"replicated_with_grad_allreduce", ShardStyle::replicate},
      {"embedding_rowwise", ShardStyle::embedding_rowwise},
      {"packed_colwise", ShardStyle::packed_colwise},
      {"packed_rowwise", ShardStyle::packed_rowwise},
  };
  return table;
}

}  // namespace

std::vector<std::string> shard_style_names() {
  std::vector<std::string> names;
  for (const auto& [name, style] : style_table()) names.push_back(name);
  return names;
}

ShardStyle parse_shard_style(const std::string& text, const std::string& where) {
  for (const auto& [name, style] : style_table())
    if (name == text) return style;
  std::string valid;
  for (const std::string& name : shard_style_names()) valid += (valid.empty() ? "" : ", ") + name;
  fail(where, ": unknown tensor-parallel style '", text, "' (valid styles: ", valid, ")");
}

std::string shard_style_name(ShardStyle style) {
  for (const auto& [name, candidate] : style_table())
    if (candidate == style) return name;
  return "?";
}

std::string generic_name(const std::string& name) {
  std::string result;
  for (size_t i = 0; i < name.size();) {
    if (std::isdigit(static_cast<unsigned char>(name[i]))) {
      result += '*';
      while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
    } else {
      result += name[i++];
    }
  }
  return result;
}

TpPlan::TpPlan(const std::map<std::string, std::string>& rules, const std::string& source) {
  for (const auto& [key, style] : rules) rules_[key] = parse_shard_style(style, source + " key '" + key + "'");
}

TpPlan TpPlan::from_json_text(const std::string& text, const std::string& source) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    fail(source, ": not valid JSON (", error.what(), "): a tp_plan file is one object {\"module name\": \"style\"}");
  }
  if (!json.is_object())
    fail(source, ": a tp_plan must be a JSON object {\"model.layers.*.self_attn.q_proj\": \"colwise\", ...}");
  std::map<std::string, std::string> rules;
  for (const auto& [key, value] : json.items()) {
    if (!value.is_string()) fail(source, ": the style of '", key, "' must be a string");
    rules[key] = value.get<std::string>();
  }
  return TpPlan(rules, source);
}

TpPlan TpPlan::from_json_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail(path, ": cannot open the tp_plan file");
  std::ostringstream text;
  text << file.rdbuf();
  return from_json_text(text.str(), path);
}

TpPlan TpPlan::overridden_by(const TpPlan& overrides) const {
  TpPlan merged = *this;
  for (const auto& [key, style] : overrides.rules_) merged.rules_[key] = style;
  return merged;
}

std::optional<ShardStyle> TpPlan::style_for(const std::string& name) const {
  // transformers keys a base model's rules without its "model." prefix.
  const std::string base_prefix = "model.";
  const std::string base_name = name.starts_with(base_prefix) ? name.substr(base_prefix.size()) : std::string();
  for (const std::string& parameter : {name, base_name}) {
    if (parameter.empty()) continue;
    const size_t dot = parameter.rfind('.');
    const std::string module = dot == std::string::npos ? std::string() : parameter.substr(0, dot);
    for (const std::string& candidate : {parameter, module, generic_name(parameter), generic_name(module)}) {
      if (candidate.empty()) continue;
      auto found = rules_.find(candidate);
      if (found == rules_.end()) continue;
      matched_.insert(found->first);
      return found->second;
    }
  }
  return std::nullopt;
}

std::vector<std::string> TpPlan::unmatched_rules() const {
  std::vector<std::string> unmatched;
  for (const auto& [key, style] : rules_)
    if (!matched_.contains(key)) unmatched.push_back(key);
  return unmatched;
}

}  // namespace shardlm::parallel
