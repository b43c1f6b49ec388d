#pragma once
// Shared helpers for the golden tests: where the tokenizer files are, the corpus, and
// the expected outputs written by tests/data/tokenizers/make_goldens.py.

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace shardlm::tokenizer::testing {

inline const std::vector<std::string>& golden_tokenizer_names() {
  static const std::vector<std::string> names = {"stories260K", "qwen3",  "llama3",
                                                 "llama3_1",    "gemma3", "deepseek_v3"};
  return names;
}

// The six real tokenizers plus small ones trained by make_synthetic.py to cover the
// components the real ones do not use; these have only "library" expectations.
inline const std::vector<std::string>& library_golden_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = golden_tokenizer_names();
    for (const char* name : {"synthetic_wordpiece_bert", "synthetic_metaspace_bpe", "synthetic_bytelevel_regex",
                             "synthetic_digits_punct_suffix", "synthetic_whitespace_split"}) {
      all.push_back(name);
    }
    return all;
  }();
  return names;
}

// The directory with tokenizer.json and tokenizer_config.json: unpacked into the build
// tree for the compressed ones, the source tree otherwise.
inline std::string tokenizer_dir(const std::string& name) {
  std::string extracted = std::string(SHARDLM_TOKENIZER_EXTRACTED_DIR) + "/" + name;
  if (std::filesystem::exists(extracted + "/tokenizer.json")) return extracted;
  return std::string(SHARDLM_TEST_DATA_DIR) + "/tokenizers/" + name;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline const std::vector<std::string>& corpus() {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> out;
    std::istringstream in(read_file(std::string(SHARDLM_TEST_DATA_DIR) + "/tokenizers/corpus.jsonl"));
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) out.push_back(nlohmann::json::parse(line).get<std::string>());
    }
    return out;
  }();
  return lines;
}

inline const nlohmann::json& goldens(const std::string& name) {
  static std::map<std::string, nlohmann::json> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    it = cache.emplace(name, nlohmann::json::parse(read_file(std::string(SHARDLM_TEST_DATA_DIR) +
                                                             "/tokenizers/" + name + "/goldens.json")))
             .first;
  }
  return it->second;
}

// Loaded once per test binary: the large files take a while to parse.
inline const Tokenizer& library_tokenizer(const std::string& name) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, Tokenizer::from_file(tokenizer_dir(name) + "/tokenizer.json")).first;
  return it->second;
}

inline std::string show(const std::string& text) {
  std::string out = nlohmann::json(text).dump();
  return out.size() > 160 ? out.substr(0, 160) + "..." : out;
}

inline std::string show(const std::vector<int32_t>& ids) {
  std::string out = nlohmann::json(ids).dump();
  return out.size() > 200 ? out.substr(0, 200) + "..." : out;
}

}  // namespace shardlm::tokenizer::testing
