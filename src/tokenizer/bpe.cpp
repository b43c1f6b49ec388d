// The BPE model, merging exactly as the Rust library's Word::merge_all does: always the
// pair with the lowest merge rank, the leftmost one among equals.

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <shared_mutex>

#include "core/error.h"
#include "core/limits.h"
#include "tokenizer/components.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"

namespace shardlm::tokenizer::detail {

namespace {

constexpr uint32_t kNoMerge = ~uint32_t{0};
// Characters below this get their id from a table instead of the hash map.
constexpr uint32_t kCharTableSize = 0x3000;
// Words up to this many symbols merge by rescanning a flat array; longer ones use a heap.
constexpr size_t kLinearMergeLimit = 96;
// The word cache stops growing at this many entries or bytes of words and ids.
constexpr size_t kCacheCapacity = 200000;
constexpr size_t kCacheMaxBytes = size_t{16} << 20;
constexpr size_t kCacheMaxWordBytes = 4096;

class BpeModel final : public Model {
 public:
  BpeModel(const Json& json, ModelTables tables, const JsonPath& where);

  void tokenize(std::string_view piece, std::vector<int32_t>& ids) const override;
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
  void initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const;
  void merge_linear(std::vector<int32_t>& symbols) const;
  void merge_heap(std::vector<int32_t>& symbols) const;

  TokenMap vocab_;
  std::vector<std::string_view> tokens_;  // by id: views of vocab_'s keys (null data: no token)
  PairMap merges_;
  std::vector<int32_t> char_ids_;  // by codepoint, -1 when not a token
  std::array<int32_t, 256> byte_ids_{};
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::optional<int32_t> unk_id_;
  std::string unk_token_;
  std::string prefix_;  // continuing_subword_prefix
  std::string suffix_;  // end_of_word_suffix

  mutable std::shared_mutex cache_mutex_;
  mutable WordCache cache_;
};

BpeModel::BpeModel(const Json& json, ModelTables tables, const JsonPath& where) {
  if (json.contains("dropout") && !json["dropout"].is_null()) {
    double dropout = json["dropout"].is_number() ? json["dropout"].get<double>() : -1;
    if (dropout != 0.0) where.child("dropout").fail("BPE dropout is random; it is not supported");
  }
  byte_fallback_ = get_bool_or(json, "byte_fallback", false, where);
  fuse_unk_ = get_bool_or(json, "fuse_unk", false, where);
  ignore_merges_ = get_bool_or(json, "ignore_merges", false, where);
  prefix_ = get_string_or(json, "continuing_subword_prefix", "", where);
  suffix_ = get_string_or(json, "end_of_word_suffix", "", where);
  unk_token_ = get_string_or(json, "unk_token", "", where);

  int32_t max_id = fill_vocab(std::move(tables.vocab), vocab_, where.child("vocab"));
  tokens_.assign(static_cast<size_t>(max_id + 1), std::string_view());
  vocab_.for_each([&](std::string_view token, int32_t id) { tokens_[id] = token; });

  if (!unk_token_.empty()) {
    // The library only looks the unk token up when it needs it; a missing one fails then.
    if (const int32_t* id = find_token(vocab_, unk_token_)) unk_id_ = *id;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    const int32_t* id = find_token(vocab_, name);
    byte_ids_[b] = id ? *id : -1;
  }
  char_ids_.assign(kCharTableSize, -1);
  std::string s;
  for (uint32_t c = 0; c < kCharTableSize; ++c) {
    s.clear();
    utf8::append(s, c);
    if (const int32_t* id = find_token(vocab_, s)) char_ids_[c] = *id;
  }

  JsonPath merges_path = where.child("merges");
  merges_.reserve(tables.merges.size());
  size_t next_bad = 0;
  std::string merged;
  for (size_t rank = 0; rank < tables.merges.size(); ++rank) {
    if (next_bad < tables.bad_merges.size() && tables.bad_merges[next_bad].first == rank) {
      merges_path.index(rank).fail(str_cat("merge \"", tables.bad_merges[next_bad].second,
                                           "\" is not two tokens separated by one space"));
    }
    const std::string& left = tables.merges[rank].first;
    const std::string& right = tables.merges[rank].second;
    const int32_t* left_id = find_token(vocab_, left);
    const int32_t* right_id = find_token(vocab_, right);
    if (!left_id || !right_id) {
      merges_path.index(rank).fail(str_cat("merge names token \"", left_id ? right : left,
                                           "\" which is not in the vocabulary"));
    }
    if (right.size() < prefix_.size()) {
      merges_path.index(rank).fail(str_cat("merge token \"", right, "\" is shorter than continuing_subword_prefix"));
    }
    merged.assign(left);
    merged.append(right, prefix_.size());
    const int32_t* merged_id = find_token(vocab_, merged);
    if (!merged_id) {
      merges_path.index(rank).fail(str_cat("merged token \"", merged, "\" is not in the vocabulary"));
    }
    merges_.insert(*left_id, *right_id, {static_cast<uint32_t>(rank), *merged_id});
  }
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const {
  const bool plain = prefix_.empty() && suffix_.empty();
  int32_t pending_unk = -1;  // an unk token not yet emitted (fuse_unk extends it)
  std::string decorated;
  size_t pos = 0;
  while (pos < word.size()) {
    size_t start = pos;
    uint32_t c = utf8::next(word, pos);
    int32_t id = -1;
    std::string_view text = word.substr(start, pos - start);
    if (plain && c < kCharTableSize) {
      id = char_ids_[c];
    } else {
      if (!plain) {
        decorated.clear();
        if (start > 0) decorated += prefix_;
        decorated += text;
        if (pos == word.size()) decorated += suffix_;
        text = decorated;
      }
      if (const int32_t* found = find_token(vocab_, text)) id = *found;
    }
    if (id >= 0) {
      if (pending_unk >= 0) {
        symbols.push_back(pending_unk);
        pending_unk = -1;
      }
      symbols.push_back(id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char b : text) all = all && byte_ids_[static_cast<unsigned char>(b)] >= 0;
      if (all) {
        // Like the library, byte tokens go out before a pending (fused) unk token.
        for (char b : text) symbols.push_back(byte_ids_[static_cast<unsigned char>(b)]);
        continue;
      }
    }
    if (!unk_token_.empty()) {
      if (!unk_id_) fail("BPE unk_token \"", unk_token_, "\" is not in the vocabulary");
      if (pending_unk >= 0 && !fuse_unk_) symbols.push_back(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) symbols.push_back(pending_unk);
}

void BpeModel::merge_linear(std::vector<int32_t>& symbols) const {
  thread_local std::vector<PairMap::Value> pairs;
  size_t n = symbols.size();
  pairs.resize(n);
  auto lookup = [&](size_t i) {
    const PairMap::Value* v = merges_.find(symbols[i], symbols[i + 1]);
    pairs[i] = v ? *v : PairMap::Value{kNoMerge, -1};
  };
  for (size_t i = 0; i + 1 < n; ++i) lookup(i);
  while (n > 1) {
    size_t best = 0;
    uint32_t best_rank = kNoMerge;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (pairs[i].rank < best_rank) {
        best_rank = pairs[i].rank;
        best = i;
      }
    }
    if (best_rank == kNoMerge) break;
    symbols[best] = pairs[best].new_id;
    symbols.erase(symbols.begin() + static_cast<ptrdiff_t>(best) + 1);
    pairs.erase(pairs.begin() + static_cast<ptrdiff_t>(best) + 1);
    --n;
    if (best > 0) lookup(best - 1);
    if (best + 1 < n) lookup(best);
  }
}

// The library's algorithm, kept for long words where rescanning would be quadratic.
void BpeModel::merge_heap(std::vector<int32_t>& symbols) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool removed;
  };
  struct Candidate {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
    bool operator<(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : pos > other.pos;
    }
  };
  std::vector<Symbol> s(symbols.size());
  for (size_t i = 0; i < s.size(); ++i) {
    s[i] = {symbols[i], static_cast<int32_t>(i) - 1,
            i + 1 < s.size() ? static_cast<int32_t>(i + 1) : -1, false};
  }
  std::priority_queue<Candidate> queue;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (const PairMap::Value* v = merges_.find(s[i].id, s[i + 1].id)) {
      queue.push({v->rank, static_cast<uint32_t>(i), v->new_id});
    }
  }
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol& left = s[top.pos];
    if (left.removed || left.next < 0) continue;
    Symbol& right = s[left.next];
    const PairMap::Value* current = merges_.find(left.id, right.id);
    if (!current || current->new_id != top.new_id) continue;
    left.id = top.new_id;
    right.removed = true;
    left.next = right.next;
    if (left.next >= 0) s[left.next].prev = static_cast<int32_t>(top.pos);
    if (left.prev >= 0) {
      if (const PairMap::Value* v = merges_.find(s[left.prev].id, left.id)) {
        queue.push({v->rank, static_cast<uint32_t>(left.prev), v->new_id});
      }
    }
    if (left.next >= 0) {
      if (const PairMap::Value* v = merges_.find(left.id, s[left.next].id)) {
        queue.push({v->rank, top.pos, v->new_id});
      }
    }
  }
  symbols.clear();
  for (const Symbol& symbol : s) {
    if (!symbol.removed) symbols.push_back(symbol.id);
  }
}

void BpeModel::tokenize(std::string_view piece, std::vector<int32_t>& ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (const int32_t* id = find_token(vocab_, piece)) {
      ids.push_back(*id);
      return;
    }
  }
  const bool cacheable = piece.size() <= kCacheMaxWordBytes;
  const uint64_t hash = cacheable ? hash_bytes(piece) : 0;
  if (cacheable) {
    std::shared_lock lock(cache_mutex_);
    if (cache_.find(piece, hash, ids)) return;
  }
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  initial_symbols(piece, symbols);
  if (symbols.size() <= kLinearMergeLimit) {
    merge_linear(symbols);
  } else {
    merge_heap(symbols);
  }
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::unique_lock lock(cache_mutex_);
    cache_.insert(piece, hash, symbols, kCacheCapacity, kCacheMaxBytes);
  }
}

}  // namespace

int32_t fill_vocab(std::vector<std::pair<std::string, int64_t>> entries, TokenMap& vocab, const JsonPath& where) {
  vocab.reserve(entries.size());
  int32_t max_id = -1;
  for (auto& [token, id] : entries) {
    if (id < 0) where.fail(str_cat("token \"", token, "\" has an invalid id ", id));
    if (id > limits::max_token_id)
      where.fail(str_cat("token \"", token, "\" has id ", id, ", above the limit of ", limits::max_token_id,
                         " (no real vocabulary is that large)"));
    max_id = std::max(max_id, static_cast<int32_t>(id));
    // A repeated key keeps its last value, as JSON parsers do.
    vocab.insert_or_assign(token, static_cast<int32_t>(id));
  }
  return max_id;
}

ModelTables tables_from_json(const Json& json, const JsonPath& where, bool with_merges) {
  ModelTables tables;
  const Json& vocab = require(json, "vocab", where);
  if (!vocab.is_object()) where.child("vocab").fail("expected an object of token -> id");
  tables.vocab.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) {
      where.child("vocab").fail(str_cat("token \"", it.key(), "\" has an invalid id"));
    }
    tables.vocab.emplace_back(it.key(), it.value().get<int64_t>());
  }
  if (!with_merges) return tables;
  const Json& merges = require(json, "merges", where);
  if (!merges.is_array()) where.child("merges").fail("expected an array");
  tables.merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Json& merge = merges[rank];
    if (merge.is_string()) {
      const std::string& line = merge.get_ref<const std::string&>();
      size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        tables.bad_merges.emplace_back(rank, line);
        tables.merges.emplace_back(line, "");
      } else {
        tables.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
      }
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      tables.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      where.child("merges").index(rank).fail("expected \"a b\" or [\"a\", \"b\"]");
    }
  }
  return tables;
}

std::unique_ptr<Model> make_bpe_model(const Json& json, const JsonPath& where, ModelTables* tables) {
  if (tables) return std::make_unique<BpeModel>(json, std::move(*tables), where);
  return std::make_unique<BpeModel>(json, tables_from_json(json, where, true), where);
}

}  // namespace shardlm::tokenizer::detail
