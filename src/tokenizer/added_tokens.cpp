#include "tokenizer/added_tokens.h"

#include <utf8proc.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/limits.h"
#include "tokenizer/utf8.h"

namespace shardlm::tokenizer::detail {

namespace {

// The library tests single_word boundaries with the Rust regex crate's \w: Alphabetic,
// marks, decimal digits, connector punctuation and the joiners ZWNJ/ZWJ.
bool is_word_char(uint32_t c) {
  if (c < 0x80) return c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  if (c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

size_t trim_end_length(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    uint32_t c = utf8::previous(s, end);
    if (!utf8::is_whitespace(c)) break;
    end -= c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return end;
}

size_t trim_start_offset(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t next = pos;
    if (!utf8::is_whitespace(utf8::next(s, next))) break;
    pos = next;
  }
  return pos;
}

}  // namespace

void AddedTokenMatcher::build(const std::vector<std::string>& patterns,
                              std::vector<const AddedToken*> tokens) {
  tokens_ = std::move(tokens);
  terminal_.assign(1, -1);
  for (size_t p = 0; p < patterns.size(); ++p) {
    const std::string& pattern = patterns[p];
    if (pattern.empty()) continue;
    int32_t node = 0;
    for (unsigned char byte : pattern) {
      int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(terminal_.size());
        terminal_.push_back(-1);
        if (node == 0) {
          root_children_[byte] = next;
        } else {
          children_.emplace((uint64_t(node) << 8) | byte, next);
        }
      }
      node = next;
    }
    if (terminal_[node] < 0) terminal_[node] = static_cast<int32_t>(p);
    first_byte_[static_cast<unsigned char>(pattern[0])] = true;
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  if (node == 0) return root_children_[byte];
  auto it = children_.find((uint64_t(node) << 8) | byte);
  return it == children_.end() ? -1 : it->second;
}

bool AddedTokenMatcher::longest_at(std::string_view text, size_t pos, Found& found) const {
  int32_t node = 0;
  int32_t best = -1;
  size_t best_end = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (terminal_[node] >= 0) {
      best = terminal_[node];
      best_end = i + 1;
    }
  }
  if (best < 0) return false;
  found = {pos, best_end, tokens_[best]};
  return true;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& segments) const {
  size_t start_offset = 0;
  if (!tokens_.empty()) {
    size_t pos = 0;
    Found found{};
    while (pos < text.size()) {
      if (!first_byte_[static_cast<unsigned char>(text[pos])] || !longest_at(text, pos, found)) {
        ++pos;
        continue;
      }
      // The matcher moves on from the raw match end whatever lstrip/rstrip do below.
      pos = found.end;
      size_t start = found.begin, stop = found.end;
      const AddedToken& token = *found.token;
      if (token.single_word) {
        bool start_space = start == 0 || !is_word_char(utf8::previous(text, start));
        size_t after = stop;
        bool stop_space = stop == text.size() || !is_word_char(utf8::next(text, after));
        if (!start_space || !stop_space) continue;
      }
      if (token.lstrip) start = std::max(trim_end_length(text.substr(0, start)), start_offset);
      if (token.rstrip) stop += trim_start_offset(text.substr(stop));
      if (start < start_offset) start = start_offset;  // an rstrip ran over this match
      if (start_offset < start) {
        segments.push_back({static_cast<uint32_t>(start_offset), static_cast<uint32_t>(start), -1});
      }
      segments.push_back({static_cast<uint32_t>(start), static_cast<uint32_t>(stop), token.id});
      start_offset = stop;
      pos = std::max(pos, stop);
    }
  }
  if (start_offset < text.size()) {
    segments.push_back({static_cast<uint32_t>(start_offset), static_cast<uint32_t>(text.size()), -1});
  }
}

void AddedVocabulary::load(const Json& added_tokens, const JsonPath& where,
                           const Normalizer* normalizer) {
  if (added_tokens.is_null()) return;
  if (!added_tokens.is_array()) where.fail("expected an array");
  tokens_.reserve(added_tokens.size());
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const Json& entry = added_tokens[i];
    JsonPath at = where.index(i);
    AddedToken token;
    int64_t id = get_int_or(entry, "id", -1, at);
    if (id < 0) at.child("id").fail("expected a non-negative id");
    if (id > limits::max_token_id)
      at.child("id").fail(str_cat("id ", id, " is above the limit of ", limits::max_token_id,
                                  " (no real vocabulary is that large)"));
    token.id = static_cast<int32_t>(id);
    token.content = get_string(entry, "content", at);
    token.single_word = get_bool_or(entry, "single_word", false, at);
    token.lstrip = get_bool_or(entry, "lstrip", false, at);
    token.rstrip = get_bool_or(entry, "rstrip", false, at);
    token.normalized = get_bool_or(entry, "normalized", true, at);
    token.special = get_bool_or(entry, "special", false, at);
    if (token.content.empty()) continue;  // the library ignores empty added tokens
    tokens_.push_back(std::move(token));
  }
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& token = tokens_[i];
    by_id_[token.id] = i;
    by_content_.emplace(token.content, token.id);
    max_id_ = std::max(max_id_, token.id);
  }
  special_ids_.assign(static_cast<size_t>(max_id_ + 1), false);
  for (const AddedToken& token : tokens_) {
    if (token.special) special_ids_[token.id] = true;
  }

  // Special tokens come first, as in the library, which matters only for duplicates.
  std::vector<const AddedToken*> ordered;
  for (const AddedToken& token : tokens_) {
    if (token.special) ordered.push_back(&token);
  }
  for (const AddedToken& token : tokens_) {
    if (!token.special) ordered.push_back(&token);
  }
  std::vector<std::string> raw_patterns, normalized_patterns;
  std::vector<const AddedToken*> raw_tokens, normalized_tokens;
  for (const AddedToken* token : ordered) {
    if (token->normalized) {
      std::string pattern = token->content;
      if (normalizer) normalizer->normalize(pattern);
      normalized_patterns.push_back(std::move(pattern));
      normalized_tokens.push_back(token);
    } else {
      raw_patterns.push_back(token->content);
      raw_tokens.push_back(token);
    }
  }
  raw_.build(raw_patterns, std::move(raw_tokens));
  normalized_.build(normalized_patterns, std::move(normalized_tokens));
}

std::optional<std::string_view> AddedVocabulary::id_to_token(int32_t id) const {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return std::string_view(tokens_[it->second].content);
}

bool AddedVocabulary::is_special_id(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < special_ids_.size() && special_ids_[id];
}

}  // namespace shardlm::tokenizer::detail
