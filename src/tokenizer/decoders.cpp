#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/components.h"
#include "tokenizer/pattern.h"
#include "tokenizer/utf8.h"

namespace shardlm::tokenizer::detail {

namespace {

const char* const kReplacementCharacter = "\xEF\xBF\xBD";

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

// All tokens become one string: the bytes behind the byte-level characters, decoded
// once so a character split across tokens comes back whole.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      size_t start = bytes.size();
      size_t pos = 0;
      bool all_mapped = true;
      while (pos < token.size()) {
        int b = byte_of_char(utf8::next(token, pos));
        if (b < 0) {
          all_mapped = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      if (!all_mapped) {
        bytes.resize(start);
        bytes += token;
      }
    }
    tokens.assign(1, utf8::lossy(bytes));
  }
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (utf8::find_invalid(pending) == std::string::npos) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.emplace_back(kReplacementCharacter);
      }
      pending.clear();
    };
    for (std::string& token : tokens) {
      int byte = parse_byte_token(token);
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  // "<0xAB>" -> 0xAB; -1 otherwise. Accepts what Rust's u8::from_str_radix(.., 16)
  // accepts for two characters: hex digits of either case, or '+' and one digit.
  static int parse_byte_token(const std::string& token) {
    if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
    auto digit = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int low = digit(token[4]);
    if (low < 0) return -1;
    if (token[3] == '+') return low;
    int high = digit(token[3]);
    return high < 0 ? -1 : high * 16 + low;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (const std::string& token : tokens) joined += token;
    tokens.assign(1, std::move(joined));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(uint32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      std::vector<std::pair<size_t, uint32_t>> chars;  // (byte offset, codepoint)
      size_t pos = 0;
      while (pos < token.size()) {
        size_t at = pos;
        chars.emplace_back(at, utf8::next(token, pos));
      }
      size_t start_cut = 0;
      for (size_t i = 0; i < start_ && i < chars.size(); ++i) {
        if (chars[i].second != content_) break;
        start_cut = i + 1;
      }
      size_t stop_cut = chars.size();
      for (size_t i = 0; i < stop_ && i < chars.size(); ++i) {
        size_t index = chars.size() - i - 1;
        if (chars[index].second != content_) break;
        stop_cut = index;
      }
      if (stop_cut <= start_cut) {
        token.clear();
        continue;
      }
      size_t begin = start_cut < chars.size() ? chars[start_cut].first : token.size();
      size_t end = stop_cut < chars.size() ? chars[stop_cut].first : token.size();
      token = token.substr(begin, end - begin);
    }
  }

 private:
  uint32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) token = pattern_.replace_all(token, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    Pattern literal = Pattern::literal(replacement_);
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string text = literal.replace_all(tokens[i], " ");
      if (i == 0 && strip_first_ && !text.empty() && text[0] == ' ') text.erase(0, 1);
      tokens[i] = std::move(text);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      if (i != 0) {
        if (token.starts_with(prefix_)) {
          token.erase(0, prefix_.size());
        } else {
          token.insert(0, " ");
        }
      }
      if (cleanup_) token = cleanup(token);
    }
  }

 private:
  // The WordPiece decoder's own cleanup (the library's `cleanup` helper).
  static std::string cleanup(const std::string& s) {
    static const std::pair<const char*, const char*> kRules[] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"},
        {" 've", "'ve"}, {" 're", "'re"}};
    std::string out = s;
    for (const auto& [from, to] : kRules) out = Pattern::literal(from).replace_all(out, to);
    return out;
  }
  std::string prefix_;
  bool cleanup_;
};

class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    Pattern literal = Pattern::literal(suffix_);
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = literal.replace_all(tokens[i], i + 1 == tokens.size() ? "" : " ");
    }
  }

 private:
  std::string suffix_;
};

uint32_t single_codepoint(const Json& json, std::string_view key, const JsonPath& where) {
  std::string s = get_string(json, key, where);
  size_t pos = 0;
  uint32_t c = s.empty() ? 0 : utf8::next(s, pos);
  if (s.empty() || pos != s.size()) where.child(key).fail("expected exactly one character");
  return c;
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& json, const JsonPath& where) {
  if (json.is_null()) return nullptr;
  std::string type = type_of(json, where);
  if (type == "Sequence") {
    const Json& list = require(json, "decoders", where);
    if (!list.is_array()) where.child("decoders").fail("expected an array");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto step = make_decoder(list[i], where.child("decoders").index(i))) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    int64_t start = get_int_or(json, "start", 0, where), stop = get_int_or(json, "stop", 0, where);
    if (start < 0 || stop < 0) where.fail("Strip start and stop must not be negative");
    return std::make_unique<StripDecoder>(single_codepoint(json, "content", where),
                                          static_cast<size_t>(start), static_cast<size_t>(stop));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(
        Pattern::from_json(require(json, "pattern", where), where.child("pattern")),
        get_string(json, "content", where));
  }
  if (type == "Metaspace") {
    std::string scheme = get_string_or(json, "prepend_scheme", "", where);
    bool strip_first;
    if (scheme.empty()) {
      strip_first = get_bool_or(json, "add_prefix_space", true, where);
    } else if (scheme == "always" || scheme == "first" || scheme == "never") {
      strip_first = scheme != "never";
    } else {
      where.child("prepend_scheme").fail(str_cat("unsupported prepend_scheme \"", scheme, "\""));
    }
    return std::make_unique<MetaspaceDecoder>(get_string_or(json, "replacement", "\xE2\x96\x81", where),
                                              strip_first);
  }
  if (type == "WordPiece") {
    return std::make_unique<WordPieceDecoder>(get_string_or(json, "prefix", "##", where),
                                              get_bool_or(json, "cleanup", true, where));
  }
  if (type == "BPEDecoder") return std::make_unique<BpeSuffixDecoder>(get_string_or(json, "suffix", "</w>", where));
  where.fail(str_cat("unsupported decoder type \"", type, "\""));
}

}  // namespace shardlm::tokenizer::detail
