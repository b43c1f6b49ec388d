#pragma once
// Fast loading of the two large tables of a tokenizer.json: model.vocab and
// model.merges hold nearly all of its bytes, and a generic JSON DOM spends most of the
// load time on them. They are scanned here directly into vectors; the rest of the file
// (small) goes through nlohmann::json as usual.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardlm::tokenizer::detail {

struct ModelTables {
  std::vector<std::pair<std::string, int64_t>> vocab;  // in file order
  std::vector<std::pair<std::string, std::string>> merges;
  // A merge string without exactly one space, kept to report it: (index, text).
  std::vector<std::pair<size_t, std::string>> bad_merges;
};

// On success returns true, fills `tables` and sets `skeleton` to `text` with the values
// of model.vocab and model.merges replaced by {} and []. Returns false when the file is
// not shaped as expected (or not valid JSON); the caller then parses it in full, which
// also produces the right error message.
bool extract_model_tables(std::string_view text, std::string& skeleton, ModelTables& tables);

}  // namespace shardlm::tokenizer::detail
