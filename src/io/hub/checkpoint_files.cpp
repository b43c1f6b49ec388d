#include "io/hub/checkpoint_files.h"

#include <fnmatch.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"

namespace shardlm::io::hub {
namespace fs = std::filesystem;

const std::vector<std::string>& optional_checkpoint_files() {
  static const std::vector<std::string> files = {
      "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
      "added_tokens.json",      "tokenizer.model", "vocab.json",           "merges.txt",
      "chat_template.jinja",    "chat_template.json"};
  return files;
}

std::vector<std::string> shards_named_by_index(const std::string& index_json, const std::string& where) {
  std::vector<std::string> shards;
  std::set<std::string> seen;
  try {
    const nlohmann::json index = nlohmann::json::parse(index_json);
    for (const auto& [tensor, shard] : index.at("weight_map").items()) {
      const std::string name = shard.get<std::string>();
      if (seen.insert(name).second) shards.push_back(name);
    }
  } catch (const nlohmann::json::exception& error) {
    fail(where, " is not a safetensors index with a weight_map of tensor -> shard file: ", error.what());
  }
  if (shards.empty()) fail(where, " names no shard files in its weight_map");
  return shards;
}

std::vector<std::string> missing_checkpoint_files(const fs::path& directory) {
  std::error_code error;
  auto present = [&](std::string_view name) { return fs::is_regular_file(directory / name, error); };
  std::vector<std::string> missing;
  if (!present(config_file)) missing.emplace_back(config_file);
  if (present(single_weights_file)) return missing;
  if (!present(weights_index_file)) {
    missing.push_back(str_cat(single_weights_file, " (or ", weights_index_file, ")"));
    return missing;
  }
  std::ifstream index(directory / weights_index_file);
  std::stringstream text;
  text << index.rdbuf();
  for (const std::string& shard :
       shards_named_by_index(text.str(), (directory / weights_index_file).string()))
    if (!present(shard)) missing.push_back(shard);
  return missing;
}

bool matches_glob(std::string pattern, const std::string& filename) {
  if (pattern.ends_with("/")) pattern += "*";
  return ::fnmatch(pattern.c_str(), filename.c_str(), 0) == 0;
}

}  // namespace shardlm::io::hub
