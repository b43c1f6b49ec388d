#pragma once
// UTF-8 and Unicode-property helpers with the exact semantics the Rust `tokenizers`
// library gets from Rust's `char` and `String` (is_whitespace, from_utf8_lossy, ...).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace shardlm::tokenizer::utf8 {

// Length of the sequence a valid lead byte starts (1 for ASCII); 1 for a stray byte.
inline size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// Decodes the character at `pos` of valid UTF-8 and advances `pos` past it.
inline uint32_t next(std::string_view s, size_t& pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
  uint32_t c = p[0];
  if (c < 0x80) {
    pos += 1;
    return c;
  }
  if (c < 0xE0) {
    pos += 2;
    return ((c & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (c < 0xF0) {
    pos += 3;
    return ((c & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  pos += 4;
  return ((c & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

// Decodes the character that ends at `end` (exclusive) of valid UTF-8.
uint32_t previous(std::string_view s, size_t end);

void append(std::string& out, uint32_t codepoint);

// Byte offset of the first invalid sequence, or npos when `s` is valid UTF-8.
size_t find_invalid(std::string_view s);

// Rust's String::from_utf8_lossy: each maximal invalid subpart becomes one U+FFFD.
std::string lossy(std::string_view bytes);
// Length of a trailing sequence that is a valid but incomplete character (0..3).
size_t incomplete_suffix_length(std::string_view bytes);

// Rust char::is_whitespace (the Unicode White_Space property).
bool is_whitespace(uint32_t c);
// Rust char::is_numeric: general category Nd, Nl or No.
bool is_numeric(uint32_t c);
// tokenizers' is_punc: ASCII punctuation or a Unicode P* category.
bool is_punctuation(uint32_t c);

}  // namespace shardlm::tokenizer::utf8
