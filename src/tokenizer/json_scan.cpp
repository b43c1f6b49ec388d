#include "tokenizer/json_scan.h"

#include <cctype>
#include <cstring>

#include "tokenizer/utf8.h"

namespace shardlm::tokenizer::detail {

namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view text) : s_(text) {}

  size_t pos() const { return pos_; }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }

  // Parses a JSON string at the cursor into `out`.
  bool string(std::string& out) {
    skip_space();
    if (pos_ >= s_.size() || s_[pos_] != '"') return false;
    ++pos_;
    out.clear();
    while (true) {
      size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] != '"' && s_[pos_] != '\\' && static_cast<unsigned char>(s_[pos_]) >= 0x20) ++pos_;
      out.append(s_.data() + start, pos_ - start);
      if (pos_ >= s_.size() || static_cast<unsigned char>(s_[pos_]) < 0x20) return false;
      if (s_[pos_] == '"') {
        ++pos_;
        return true;
      }
      if (++pos_ >= s_.size()) return false;
      char e = s_[pos_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          uint32_t c;
          if (!hex4(c)) return false;
          if (c >= 0xD800 && c <= 0xDBFF) {
            uint32_t low;
            if (pos_ + 1 >= s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') return false;
            pos_ += 2;
            if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
            c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
          } else if (c >= 0xDC00 && c <= 0xDFFF) {
            return false;
          }
          utf8::append(out, c);
          break;
        }
        default:
          return false;
      }
    }
  }

  bool integer(int64_t& value) {
    skip_space();
    bool negative = consume('-');
    size_t start = pos_;
    value = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9' && pos_ - start < 18) {
      value = value * 10 + (s_[pos_++] - '0');
    }
    if (pos_ == start) return false;
    // A fraction, exponent or more digits is not a plain id: let the full parser decide.
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E' || (s_[pos_] >= '0' && s_[pos_] <= '9'))) {
      return false;
    }
    if (negative) value = -value;
    return true;
  }

  // Skips any JSON value.
  bool skip_value(int depth = 0) {
    if (depth > 512) return false;
    skip_space();
    if (pos_ >= s_.size()) return false;
    char c = s_[pos_];
    if (c == '"') {
      ++pos_;
      while (true) {
        const void* hit = std::memchr(s_.data() + pos_, '"', s_.size() - pos_);
        if (!hit) return false;
        size_t quote = static_cast<const char*>(hit) - s_.data();
        size_t backslashes = 0;
        while (quote - backslashes > pos_ && s_[quote - backslashes - 1] == '\\') ++backslashes;
        pos_ = quote + 1;
        if (backslashes % 2 == 0) return true;
      }
    }
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++pos_;
      if (consume(close)) return true;
      while (true) {
        if (c == '{') {
          if (!peek('"') || !skip_value(depth + 1) || !consume(':')) return false;
        }
        if (!skip_value(depth + 1)) return false;
        if (consume(',')) continue;
        return consume(close);
      }
    }
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '-' ||
                                s_[pos_] == '+' || s_[pos_] == '.')) {
      ++pos_;
    }
    return pos_ > start;
  }

 private:
  bool hex4(uint32_t& c) {
    if (pos_ + 4 > s_.size()) return false;
    c = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[pos_++];
      c <<= 4;
      if (h >= '0' && h <= '9') c |= h - '0';
      else if (h >= 'a' && h <= 'f') c |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') c |= h - 'A' + 10;
      else return false;
    }
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

bool scan_vocab(Scanner& in, ModelTables& tables) {
  if (!in.consume('{')) return false;
  if (in.consume('}')) return true;
  std::string key;
  while (true) {
    int64_t id;
    if (!in.string(key) || !in.consume(':') || !in.integer(id)) return false;
    tables.vocab.emplace_back(key, id);
    if (in.consume(',')) continue;
    return in.consume('}');
  }
}

bool scan_merges(Scanner& in, ModelTables& tables) {
  if (!in.consume('[')) return false;
  if (in.consume(']')) return true;
  std::string a, b;
  while (true) {
    if (in.peek('[')) {
      in.consume('[');
      if (!in.string(a) || !in.consume(',') || !in.string(b) || !in.consume(']')) return false;
      tables.merges.emplace_back(a, b);
    } else {
      if (!in.string(a)) return false;
      size_t space = a.find(' ');
      if (space == std::string::npos || a.find(' ', space + 1) != std::string::npos) {
        tables.bad_merges.emplace_back(tables.merges.size(), a);
        tables.merges.emplace_back(a, "");
      } else {
        tables.merges.emplace_back(a.substr(0, space), a.substr(space + 1));
      }
    }
    if (in.consume(',')) continue;
    return in.consume(']');
  }
}

}  // namespace

bool extract_model_tables(std::string_view text, std::string& skeleton, ModelTables& tables) {
  Scanner in(text);
  std::string key;
  size_t vocab_begin = 0, vocab_end = 0, merges_begin = 0, merges_end = 0;
  bool found_model = false;
  if (!in.consume('{')) return false;
  if (in.consume('}')) return false;
  while (true) {
    if (!in.string(key) || !in.consume(':')) return false;
    if (key == "model" && in.peek('{')) {
      found_model = true;
      in.consume('{');
      if (!in.consume('}')) {
        while (true) {
          if (!in.string(key) || !in.consume(':')) return false;
          in.skip_space();
          size_t begin = in.pos();
          if (key == "vocab" && in.peek('{')) {
            if (!scan_vocab(in, tables)) return false;
            vocab_begin = begin;
            vocab_end = in.pos();
          } else if (key == "merges" && in.peek('[')) {
            if (!scan_merges(in, tables)) return false;
            merges_begin = begin;
            merges_end = in.pos();
          } else if (!in.skip_value()) {
            return false;
          }
          if (in.consume(',')) continue;
          if (!in.consume('}')) return false;
          break;
        }
      }
    } else if (!in.skip_value()) {
      return false;
    }
    if (in.consume(',')) continue;
    if (!in.consume('}')) return false;
    break;
  }
  in.skip_space();
  if (in.pos() != text.size() || !found_model || vocab_end == 0) return false;

  skeleton.clear();
  skeleton.reserve(text.size() - (vocab_end - vocab_begin) - (merges_end - merges_begin) + 8);
  struct Cut {
    size_t begin, end;
    const char* with;
  };
  Cut cuts[2] = {{vocab_begin, vocab_end, "{}"}, {merges_begin, merges_end, "[]"}};
  if (merges_end != 0 && merges_begin < vocab_begin) std::swap(cuts[0], cuts[1]);
  size_t prev = 0;
  for (const Cut& cut : cuts) {
    if (cut.end == 0) continue;
    skeleton.append(text.data() + prev, cut.begin - prev);
    skeleton += cut.with;
    prev = cut.end;
  }
  skeleton.append(text.data() + prev, text.size() - prev);
  return true;
}

}  // namespace shardlm::tokenizer::detail
