#pragma once
// The patterns tokenizer.json uses in Split, Replace and decoders: {"String": "..."}
// (a literal) or {"Regex": "..."} (Oniguruma syntax in the Rust library; PCRE2 with
// UTF, UCP and JIT here, which agrees on the constructs real tokenizers use).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/components.h"

namespace shardlm::tokenizer::detail {

using Match = std::pair<uint32_t, uint32_t>;  // [begin, end) byte offsets

class Regex {
 public:
  // Throws shardlm::Error with PCRE2's message and the offending offset.
  Regex(const std::string& pattern, const JsonPath& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the matches the onig crate's find_iter reports: left to right, no overlaps,
  // an empty match right after the previous match skipped.
  void find_all(std::string_view text, std::vector<Match>& matches) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
  std::string pattern_;
};

// Adds to every \p{category} of `pattern` the code points Unicode 16.0 assigned to that
// category after Unicode 14.0 (unicode_additions.inc), so PCRE2 agrees with Oniguruma.
std::string widen_unicode_classes(const std::string& pattern);

class Pattern {
 public:
  static Pattern from_json(const Json& json, const JsonPath& where);
  static Pattern literal(std::string text);

  void find_all(std::string_view text, std::vector<Match>& matches) const;
  // Replaces every match with `content`.
  std::string replace_all(std::string_view text, std::string_view content) const;
  bool is_literal() const { return regex_ == nullptr; }
  const std::string& literal_text() const { return literal_; }

 private:
  std::string literal_;
  std::shared_ptr<Regex> regex_;
};

}  // namespace shardlm::tokenizer::detail
