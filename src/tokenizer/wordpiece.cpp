// WordPiece: greedy longest-prefix matching within each pre-tokenized word.

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"

namespace shardlm::tokenizer::detail {

namespace {

class WordPieceModel final : public Model {
 public:
  WordPieceModel(const Json& json, ModelTables tables, const JsonPath& where) {
    unk_token_ = get_string_or(json, "unk_token", "[UNK]", where);
    prefix_ = get_string_or(json, "continuing_subword_prefix", "##", where);
    int64_t limit = get_int_or(json, "max_input_chars_per_word", 100, where);
    if (limit < 0) where.child("max_input_chars_per_word").fail("must not be negative");
    max_chars_ = static_cast<size_t>(limit);
    int32_t max_id = fill_vocab(std::move(tables.vocab), vocab_, where.child("vocab"));
    tokens_.assign(static_cast<size_t>(max_id + 1), std::string_view());
    vocab_.for_each([&](std::string_view token, int32_t id) { tokens_[id] = token; });
  }

  void tokenize(std::string_view word, std::vector<int32_t>& ids) const override {
    size_t chars = 0;
    for (size_t pos = 0; pos < word.size(); pos += utf8::sequence_length(static_cast<unsigned char>(word[pos]))) {
      ++chars;
    }
    if (chars > max_chars_) {
      ids.push_back(unk_id());
      return;
    }
    size_t mark = ids.size();
    std::string candidate;
    size_t start = 0;
    while (start < word.size()) {
      size_t end = word.size();
      int32_t found = -1;
      while (start < end) {
        candidate.clear();
        if (start > 0) candidate += prefix_;
        candidate.append(word.substr(start, end - start));
        if (const int32_t* id = find_token(vocab_, candidate)) {
          found = *id;
          break;
        }
        do {
          --end;
        } while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80);
      }
      if (found < 0) {
        ids.resize(mark);
        ids.push_back(unk_id());
        return;
      }
      ids.push_back(found);
      start = end;
    }
  }

  std::optional<int32_t> token_to_id(std::string_view token) const override {
    if (const int32_t* id = find_token(vocab_, token)) return *id;
    return std::nullopt;
  }
  std::optional<std::string_view> id_to_token(int32_t id) const override {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || tokens_[id].data() == nullptr) return std::nullopt;
    return tokens_[id];
  }
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }

 private:
  int32_t unk_id() const {
    const int32_t* id = find_token(vocab_, unk_token_);
    if (!id) fail("WordPiece unk_token \"", unk_token_, "\" is not in the vocabulary");
    return *id;
  }

  TokenMap vocab_;
  std::vector<std::string_view> tokens_;  // views of vocab_'s keys
  std::string unk_token_, prefix_;
  size_t max_chars_ = 100;
};

}  // namespace

std::unique_ptr<Model> make_wordpiece_model(const Json& json, const JsonPath& where, ModelTables* tables) {
  if (tables) return std::make_unique<WordPieceModel>(json, std::move(*tables), where);
  return std::make_unique<WordPieceModel>(json, tables_from_json(json, where, false), where);
}

}  // namespace shardlm::tokenizer::detail
