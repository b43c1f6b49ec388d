#pragma once
// Which of a repository's files make a loadable causal-LM checkpoint: what
// from_pretrained fetches, and what a cached snapshot must hold to be used offline.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace shardlm::io::hub {

inline constexpr std::string_view config_file = "config.json";
inline constexpr std::string_view single_weights_file = "model.safetensors";
inline constexpr std::string_view weights_index_file = "model.safetensors.index.json";

// Fetched when the repository has them: the generation defaults and every tokenizer file.
const std::vector<std::string>& optional_checkpoint_files();

// The shard file names of a safetensors index, each once, in first-seen order.
// `where` names the index in messages.
std::vector<std::string> shards_named_by_index(const std::string& index_json, const std::string& where);

// What `directory` lacks to be loaded: config.json, and model.safetensors or the index
// with every shard it names. Empty when complete.
std::vector<std::string> missing_checkpoint_files(const std::filesystem::path& directory);

// fnmatch(3) without FNM_PATHNAME, as huggingface_hub's allow_patterns match: '*'
// crosses '/'. A pattern ending in '/' matches everything below that folder.
bool matches_glob(std::string pattern, const std::string& filename);

}  // namespace shardlm::io::hub
