#pragma once
// Hash tables for the model's lookups: token text -> id with string_view lookups, and
// (left id, right id) -> merge, both built once at load.

#include <cstdint>
#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace shardlm::tokenizer::detail {

// A fast hash for short strings (tokens, words): 8 bytes at a time, multiply-mix.
// Never returns 0, which the word cache uses for empty slots.
inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xFF51AFD7ED558CCDull);
  const char* p = s.data();
  size_t n = s.size();
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = (h ^ v) * 0x94D049BB133111EBull;
    h ^= h >> 29;
  }
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h | 1;
}

// Moves the occupied slots (hash != 0) of an open-addressing table into `capacity`
// (a power of two) slots by linear probing; returns the new index mask.
template <typename Slot>
size_t rehash_slots(std::vector<Slot>& slots, size_t capacity) {
  std::vector<Slot> old = std::move(slots);
  slots.assign(capacity, Slot{});
  const size_t mask = capacity - 1;
  for (const Slot& slot : old) {
    if (slot.hash == 0) continue;
    size_t i = slot.hash & mask;
    while (slots[i].hash != 0) i = (i + 1) & mask;
    slots[i] = slot;
  }
  return mask;
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return static_cast<size_t>(hash_bytes(s)); }
};

// Words already run through the model -> their ids. Open addressing with the full hash
// kept per slot, keys and ids in two flat arrays; not thread-safe by itself.
class WordCache {
 public:
  // Appends the cached ids of `word` to `ids`; false when it is not cached.
  bool find(std::string_view word, uint64_t hash, std::vector<int32_t>& ids) const {
    if (slots_.empty()) return false;
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.hash == 0) return false;
      if (slot.hash == hash && slot.key_length == word.size() &&
          std::memcmp(keys_.data() + slot.key_offset, word.data(), word.size()) == 0) {
        ids.insert(ids.end(), ids_.begin() + slot.ids_offset, ids_.begin() + slot.ids_offset + slot.ids_length);
        return true;
      }
    }
  }

  // Adds `word` unless the cache holds `max_entries` words or `max_bytes` of data.
  void insert(std::string_view word, uint64_t hash, const std::vector<int32_t>& ids, size_t max_entries,
              size_t max_bytes) {
    if (size_ >= max_entries || keys_.size() + ids_.size() * sizeof(int32_t) >= max_bytes) return;
    if ((size_ + 1) * 2 > slots_.size()) grow();
    size_t i = hash & mask_;
    for (; slots_[i].hash != 0; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.hash == hash && slot.key_length == word.size() &&
          std::memcmp(keys_.data() + slot.key_offset, word.data(), word.size()) == 0) {
        return;  // another thread got here first
      }
    }
    slots_[i] = {hash, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(word.size()),
                 static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(ids.size())};
    keys_.append(word);
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    ++size_;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0, key_length = 0, ids_offset = 0, ids_length = 0;
  };
  void grow() { mask_ = rehash_slots(slots_, slots_.empty() ? 1024 : slots_.size() * 2); }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  std::string keys_;
  std::vector<int32_t> ids_;
};

// Token text -> id. Open addressing with the hash kept per slot and the keys in one
// arena: loading a 150k-token vocabulary and looking tokens up touch far fewer cache
// lines than a node-based map. Views from for_each() stay valid until the next insert.
class TokenMap {
 public:
  void reserve(size_t count) {
    if (count * 2 > slots_.size()) rehash(std::bit_ceil(std::max<size_t>(16, count * 2)));
  }
  // A key inserted again takes the new id (as JSON objects with repeated keys do).
  void insert_or_assign(std::string_view key, int32_t id) { insert(key, id, true); }
  // A key inserted again keeps its first id.
  void emplace(std::string_view key, int32_t id) { insert(key, id, false); }

  const int32_t* find(std::string_view key) const {
    if (slots_.empty()) return nullptr;
    uint64_t hash = hash_bytes(key);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.hash == 0) return nullptr;
      if (slot.hash == hash && slot.length == key.size() &&
          std::memcmp(arena_.data() + slot.offset, key.data(), key.size()) == 0) {
        return &slot.id;
      }
    }
  }
  size_t size() const { return size_; }
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& slot : slots_) {
      if (slot.hash != 0) f(std::string_view(arena_.data() + slot.offset, slot.length), slot.id);
    }
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;
    uint32_t length = 0;
    int32_t id = 0;
  };
  void insert(std::string_view key, int32_t id, bool replace) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
    uint64_t hash = hash_bytes(key);
    size_t i = hash & mask_;
    for (; slots_[i].hash != 0; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.hash == hash && slot.length == key.size() &&
          std::memcmp(arena_.data() + slot.offset, key.data(), key.size()) == 0) {
        if (replace) slot.id = id;
        return;
      }
    }
    slots_[i] = {hash, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), id};
    arena_.append(key);
    ++size_;
  }
  void rehash(size_t capacity) { mask_ = rehash_slots(slots_, capacity); }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  std::string arena_;
};

inline const int32_t* find_token(const TokenMap& map, std::string_view token) { return map.find(token); }

// Open addressing over 64-bit keys; the table is read-only after building.
class PairMap {
 public:
  struct Value {
    uint32_t rank;
    int32_t new_id;
  };

  void reserve(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;
    keys_.assign(capacity, kEmpty);
    values_.assign(capacity, Value{0, 0});
    mask_ = capacity - 1;
  }

  // A later insert of the same pair replaces the earlier one, as a Rust HashMap collect does.
  void insert(int32_t left, int32_t right, Value value) {
    uint64_t key = make_key(left, right);
    size_t slot = hash(key) & mask_;
    while (keys_[slot] != kEmpty && keys_[slot] != key) slot = (slot + 1) & mask_;
    keys_[slot] = key;
    values_[slot] = value;
  }

  const Value* find(int32_t left, int32_t right) const {
    uint64_t key = make_key(left, right);
    size_t slot = hash(key) & mask_;
    while (true) {
      uint64_t k = keys_[slot];
      if (k == key) return &values_[slot];
      if (k == kEmpty) return nullptr;
      slot = (slot + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t make_key(int32_t left, int32_t right) {
    return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  }
  static size_t hash(uint64_t key) { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20); }
  std::vector<uint64_t> keys_;
  std::vector<Value> values_;
  size_t mask_ = 0;
};

}  // namespace shardlm::tokenizer::detail
