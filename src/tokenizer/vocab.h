#pragma once
// Hash tables for the model's lookups: token text -> id with string_view lookups, and
// (left id, right id) -> merge, both built once at load.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace shardlm::tokenizer::detail {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

inline const int32_t* find_token(const TokenMap& map, std::string_view token) {
  auto it = map.find(token);
  return it == map.end() ? nullptr : &it->second;
}

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
