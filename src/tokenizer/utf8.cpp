#include "tokenizer/utf8.h"

#include <utf8proc.h>

namespace shardlm::tokenizer::utf8 {

uint32_t previous(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t pos = start;
  return next(s, pos);
}

void append(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

namespace {

// How many bytes of a well-formed sequence start at `i`: 0 if the lead byte is invalid,
// otherwise the number of bytes that belong to the longest valid prefix; `complete`
// tells whether that prefix is a whole character. Follows the Unicode "maximal subpart"
// rule that Rust and Python both use for replacement.
size_t valid_prefix(const unsigned char* p, size_t n, bool& complete) {
  complete = false;
  unsigned char b = p[0];
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b < 0x80) {
    complete = true;
    return 1;
  } else if (b >= 0xC2 && b <= 0xDF) {
    need = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  size_t got = 1;
  while (got < need && got < n) {
    unsigned char c = p[got];
    if (got == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) break;
    ++got;
  }
  complete = got == need;
  return got;
}

}  // namespace

size_t find_invalid(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    bool complete;
    size_t len = valid_prefix(p + i, n - i, complete);
    if (!complete) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string lossy(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  std::string out;
  out.reserve(n);
  while (i < n) {
    if (p[i] < 0x80) {
      out.push_back(static_cast<char>(p[i++]));
      continue;
    }
    bool complete;
    size_t len = valid_prefix(p + i, n - i, complete);
    if (complete) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += len == 0 ? 1 : len;
    }
  }
  return out;
}

size_t incomplete_suffix_length(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    size_t i = n - back;
    if ((p[i] & 0xC0) == 0x80) continue;  // continuation byte: keep looking for a lead
    bool complete;
    size_t len = valid_prefix(p + i, back, complete);
    return (!complete && len == back) ? back : 0;
  }
  return 0;
}

bool is_whitespace(uint32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_numeric(uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_punctuation(uint32_t c) {
  if (c < 0x80) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

}  // namespace shardlm::tokenizer::utf8
