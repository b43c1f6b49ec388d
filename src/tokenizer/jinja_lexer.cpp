#include "tokenizer/jinja_lexer.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "tokenizer/jinja_value.h"

namespace shardlm::tokenizer::jinja {

std::string location(const std::string& source_name, int line, int column) {
  return str_cat(source_name, ":", line, ":", column, ": ");
}

namespace {

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& source_name) : name_(source_name) {
    // jinja2 reads \r\n and \r as \n and drops one trailing newline (keep_trailing_newline=False).
    source_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        source_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        source_ += source[i];
      }
    }
    if (!source_.empty() && source_.back() == '\n') source_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < source_.size(); ++i) {
      if (source_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < source_.size()) {
      const size_t tag = find_tag(pos);
      if (tag == std::string::npos) {
        emit(TokenType::Data, source_.substr(pos), pos);
        break;
      }
      const char kind = source_[tag + 1];
      const char sign = tag + 2 < source_.size() && (source_[tag + 2] == '-' || source_[tag + 2] == '+')
                            ? source_[tag + 2]
                            : '\0';
      size_t raw_body = 0;
      const bool raw = kind == '%' && match_raw_begin(tag, raw_body);
      emit_text_before_tag(pos, tag, sign, kind != '{', line_starting);
      if (raw) {
        pos = lex_raw(tag, raw_body);
      } else if (kind == '#') {
        pos = lex_comment(tag, tag + 2 + (sign ? 1 : 0));
      } else {
        pos = lex_tag(tag, kind, tag + 2 + (sign ? 1 : 0));
      }
      line_starting = pos > 0 && source_[pos - 1] == '\n';
    }
    emit(TokenType::End, "", source_.size());
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail_at(size_t pos, const std::string& message) const {
    const auto [line, column] = line_column(pos);
    fail(location(name_, line, column), "template syntax error: ", message);
  }

  std::pair<int, int> line_column(size_t pos) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) - 1;
    return {static_cast<int>(it - line_starts_.begin()) + 1, static_cast<int>(pos - *it) + 1};
  }

  void emit(TokenType type, std::string text, size_t pos) {
    const auto [line, column] = line_column(pos);
    tokens_.push_back(Token{type, std::move(text), line, column});
  }

  size_t find_tag(size_t pos) const {
    for (size_t i = source_.find('{', pos); i != std::string::npos; i = source_.find('{', i + 1)) {
      if (i + 1 < source_.size() && (source_[i + 1] == '{' || source_[i + 1] == '%' || source_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  // Position after the whitespace (Python's \s) starting at pos.
  size_t skip_space(size_t pos) const {
    while (pos < source_.size()) {
      const size_t next = space_at(pos);
      if (next == pos) break;
      pos = next;
    }
    return pos;
  }

  // If a whitespace character starts at pos, the position after it; otherwise pos.
  size_t space_at(size_t pos) const {
    const auto c = static_cast<unsigned char>(source_[pos]);
    if (c < 0x80) return is_python_space(c) ? pos + 1 : pos;
    size_t end = pos + 1;
    while (end < source_.size() && (static_cast<unsigned char>(source_[end]) & 0xc0) == 0x80) ++end;
    const std::u32string decoded = decode_utf8(std::string_view(source_).substr(pos, end - pos));
    return decoded.size() == 1 && is_python_space(decoded[0]) ? end : pos;
  }

  static std::string rstrip_space(const std::string& text) {
    std::u32string chars = decode_utf8(text);
    while (!chars.empty() && is_python_space(chars.back())) chars.pop_back();
    return encode_utf8(chars);
  }

  // Text before a tag, after `{%-` stripping or lstrip_blocks.
  void emit_text_before_tag(size_t pos, size_t tag, char sign, bool block_or_comment, bool line_starting) {
    std::string text = source_.substr(pos, tag - pos);
    if (sign == '-') {
      text = rstrip_space(text);
    } else if (sign != '+' && block_or_comment) {
      const size_t line_start = text.rfind('\n') + 1;  // npos + 1 == 0
      if (line_start > 0 || line_starting) {
        const std::string tail = text.substr(line_start);
        const std::u32string chars = decode_utf8(tail);
        if (!chars.empty() && std::all_of(chars.begin(), chars.end(), is_python_space)) text.resize(line_start);
      }
    }
    if (!text.empty()) emit(TokenType::Data, std::move(text), pos);
  }

  // The end of a block tag at pos ("+%}", "-%}" then whitespace, "%}" then one newline), or npos.
  size_t match_block_end(size_t pos) const {
    if (source_.compare(pos, 3, "+%}") == 0) return pos + 3;
    if (source_.compare(pos, 3, "-%}") == 0) return skip_space(pos + 3);
    if (source_.compare(pos, 2, "%}") == 0) {
      return pos + 2 < source_.size() && source_[pos + 2] == '\n' ? pos + 3 : pos + 2;
    }
    return std::string::npos;
  }

  size_t match_variable_end(size_t pos) const {
    if (source_.compare(pos, 3, "-}}") == 0) return skip_space(pos + 3);
    if (source_.compare(pos, 2, "}}") == 0) return pos + 2;
    return std::string::npos;
  }

  // `{%[-+]? raw [-]?%}`: sets body to where the raw text starts.
  bool match_raw_begin(size_t tag, size_t& body) const {
    size_t p = tag + 2;
    if (p < source_.size() && (source_[p] == '-' || source_[p] == '+')) ++p;
    p = skip_space(p);
    if (source_.compare(p, 3, "raw") != 0) return false;
    p = skip_space(p + 3);
    if (source_.compare(p, 3, "-%}") == 0) {
      body = skip_space(p + 3);
      return true;
    }
    if (source_.compare(p, 2, "%}") == 0) {
      body = p + 2;
      return true;
    }
    return false;
  }

  size_t lex_raw(size_t tag, size_t body) {
    for (size_t end_tag = source_.find("{%", body); end_tag != std::string::npos;
         end_tag = source_.find("{%", end_tag + 1)) {
      size_t p = end_tag + 2;
      const char sign = p < source_.size() && (source_[p] == '-' || source_[p] == '+') ? source_[p] : '\0';
      if (sign) ++p;
      p = skip_space(p);
      if (source_.compare(p, 6, "endraw") != 0) continue;
      const size_t after = match_block_end(skip_space(p + 6));
      if (after == std::string::npos) continue;
      // The raw text is stripped like text before any block tag.
      emit_text_before_tag(body, end_tag, sign, true, body > 0 && source_[body - 1] == '\n');
      return after;
    }
    fail_at(tag, "missing end of raw directive");
  }

  size_t lex_comment(size_t tag, size_t start) {
    const size_t close = source_.find("#}", start);
    if (close == std::string::npos) fail_at(tag, "missing end of comment tag");
    if (close > start && source_[close - 1] == '-') return skip_space(close + 2);
    if (close > start && source_[close - 1] == '+') return close + 2;
    return close + 2 < source_.size() && source_[close + 2] == '\n' ? close + 3 : close + 2;
  }

  size_t lex_tag(size_t tag, char kind, size_t pos) {
    const bool block = kind == '%';
    emit(block ? TokenType::BlockBegin : TokenType::VariableBegin, "", tag);
    std::vector<char> balance;
    while (true) {
      if (pos >= source_.size()) {
        fail_at(tag, str_cat("unexpected end of template, the ", block ? "block" : "variable",
                             " tag opened here is never closed"));
      }
      if (balance.empty()) {
        const size_t end = block ? match_block_end(pos) : match_variable_end(pos);
        if (end != std::string::npos) {
          emit(block ? TokenType::BlockEnd : TokenType::VariableEnd, "", pos);
          return end;
        }
      }
      const size_t after_space = skip_space(pos);
      if (after_space != pos) {
        pos = after_space;
        continue;
      }
      const char c = source_[pos];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        pos = lex_number(pos);
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t end = pos;
        while (end < source_.size() && (std::isalnum(static_cast<unsigned char>(source_[end])) || source_[end] == '_')) {
          ++end;
        }
        emit(TokenType::Name, source_.substr(pos, end - pos), pos);
        pos = end;
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos);
      } else {
        pos = lex_operator(pos, balance);
      }
    }
  }

  size_t lex_number(size_t pos) {
    auto digits = [&](size_t p) {
      while (p < source_.size() && (std::isdigit(static_cast<unsigned char>(source_[p])) ||
                                    (source_[p] == '_' && p + 1 < source_.size() &&
                                     std::isdigit(static_cast<unsigned char>(source_[p + 1]))))) {
        ++p;
      }
      return p;
    };
    size_t end = digits(pos);
    bool is_float = false;
    // `x.0.1` reads as two attribute lookups, as in jinja2 (no float right after a dot).
    const bool after_dot = pos > 0 && source_[pos - 1] == '.';
    if (!after_dot && end + 1 < source_.size() && source_[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(source_[end + 1]))) {
      end = digits(end + 1);
      is_float = true;
    }
    if (!after_dot && end < source_.size() && (source_[end] == 'e' || source_[end] == 'E')) {
      size_t p = end + 1;
      if (p < source_.size() && (source_[p] == '+' || source_[p] == '-')) ++p;
      if (p < source_.size() && std::isdigit(static_cast<unsigned char>(source_[p]))) {
        end = digits(p);
        is_float = true;
      }
    }
    std::string text = source_.substr(pos, end - pos);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    emit(is_float ? TokenType::Float : TokenType::Integer, std::move(text), pos);
    return end;
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Python's unicode-escape decoding, which jinja2 applies to string literals.
  size_t lex_string(size_t pos) {
    const char quote = source_[pos];
    std::string value;
    size_t p = pos + 1;
    while (true) {
      if (p >= source_.size()) fail_at(pos, "unterminated string literal");
      const char c = source_[p];
      if (c == quote) break;
      if (c != '\\' || p + 1 >= source_.size()) {
        value += c;
        ++p;
        continue;
      }
      const char e = source_[p + 1];
      p += 2;
      switch (e) {
        case '\n': break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'n': value += '\n'; break;
        case 'r': value += '\r'; break;
        case 't': value += '\t'; break;
        case 'v': value += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const int count = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t code = 0;
          for (int k = 0; k < count; ++k) {
            const int h = p + k < source_.size() ? hex_value(source_[p + k]) : -1;
            if (h < 0) fail_at(pos, str_cat("truncated \\", e, " escape in string literal"));
            code = code * 16 + h;
          }
          if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
            fail_at(pos, "string literal escape is not a valid Unicode scalar value");
          }
          append_utf8(value, code);
          p += count;
          break;
        }
        case 'N': fail_at(pos, "\\N{...} escapes in string literals are not supported");
        default:
          if (e >= '0' && e <= '7') {
            char32_t code = e - '0';
            for (int k = 0; k < 2 && p < source_.size() && source_[p] >= '0' && source_[p] <= '7'; ++k, ++p) {
              code = code * 8 + (source_[p] - '0');
            }
            append_utf8(value, code);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    emit(TokenType::String, std::move(value), pos);
    return p + 1;
  }

  size_t lex_operator(size_t pos, std::vector<char>& balance) {
    static const char* const two_char[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : two_char) {
      if (source_.compare(pos, 2, op) == 0) {
        emit(TokenType::Operator, op, pos);
        return pos + 2;
      }
    }
    const char c = source_[pos];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      fail_at(pos, str_cat("unexpected character '", c, "'"));
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail_at(pos, str_cat("unexpected '", c, "'"));
      if (balance.back() != c) fail_at(pos, str_cat("unexpected '", c, "', expected '", balance.back(), "'"));
      balance.pop_back();
    }
    emit(TokenType::Operator, std::string(1, c), pos);
    return pos + 1;
  }

  std::string source_;
  std::string name_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const std::string& source_name) {
  return Lexer(source, source_name).run();
}

}  // namespace shardlm::tokenizer::jinja
