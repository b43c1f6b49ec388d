#pragma once
// Added tokens (tokenizer.json "added_tokens"): found in the text before the model runs,
// leftmost first and longest at a position, like the library's Aho-Corasick matcher.

#include <cstdint>
#include <string>
#include <string_view>
#include <optional>
#include <unordered_map>
#include <vector>

#include "tokenizer/components.h"
#include "tokenizer/vocab.h"

namespace shardlm::tokenizer::detail {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A byte range of the text; `id` is the added token's id, or -1 for plain text.
struct Segment {
  uint32_t begin;
  uint32_t end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  // `patterns[i]` is found as token `tokens[i]`; among equal patterns the first wins.
  void build(const std::vector<std::string>& patterns, std::vector<const AddedToken*> tokens);
  bool empty() const { return tokens_.empty(); }
  // Splits `text` into plain and added-token segments, applying the tokens'
  // single_word, lstrip and rstrip rules. Empty plain segments are left out.
  void split(std::string_view text, std::vector<Segment>& segments) const;

 private:
  struct Found {
    size_t begin, end;
    const AddedToken* token;
  };
  bool longest_at(std::string_view text, size_t pos, Found& found) const;
  int32_t child(int32_t node, unsigned char byte) const;

  std::vector<const AddedToken*> tokens_;
  std::vector<int32_t> terminal_;  // per node: pattern index or -1
  std::vector<int32_t> root_children_ = std::vector<int32_t>(256, -1);
  std::unordered_map<uint64_t, int32_t> children_;  // (node << 8 | byte) -> node
  bool first_byte_[256] = {};
};

class AddedVocabulary {
 public:
  // `normalizer` (may be null) rewrites the patterns of tokens marked normalized.
  void load(const Json& added_tokens, const JsonPath& where, const Normalizer* normalizer);

  const AddedTokenMatcher& raw_matcher() const { return raw_; }
  const AddedTokenMatcher& normalized_matcher() const { return normalized_; }
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  std::optional<std::string_view> id_to_token(int32_t id) const;
  const int32_t* token_to_id(std::string_view content) const { return find_token(by_content_, content); }
  bool is_special_id(int32_t id) const;
  int32_t max_id() const { return max_id_; }

 private:
  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  TokenMap by_content_;
  std::vector<bool> special_ids_;
  int32_t max_id_ = -1;
  AddedTokenMatcher raw_, normalized_;
};

}  // namespace shardlm::tokenizer::detail
