#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/components.h"
#include "tokenizer/pattern.h"
#include "tokenizer/utf8.h"

namespace shardlm::tokenizer::detail {

namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const Json& json, const JsonPath& where, Behavior fallback) {
  std::string name = get_string_or(json, "behavior", "", where);
  if (name.empty()) return fallback;
  if (name == "Removed") return Behavior::Removed;
  if (name == "Isolated") return Behavior::Isolated;
  if (name == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::MergedWithNext;
  if (name == "Contiguous") return Behavior::Contiguous;
  where.child("behavior").fail(str_cat("unsupported split behavior \"", name, "\""));
}

struct Span {
  uint32_t begin, end;
  bool is_match;
};

// NormalizedString::split: turns the matches of one piece (offsets relative to the
// piece) into the pieces `behavior` keeps, appended to `out` with absolute offsets.
void split_piece(const PieceRef& piece, const std::vector<Match>& matches, bool invert,
                 Behavior behavior, std::vector<PieceRef>& out) {
  thread_local std::vector<Span> spans;
  spans.clear();
  uint32_t length = piece.end - piece.begin;
  uint32_t prev = 0;
  for (const Match& m : matches) {
    if (prev != m.first) spans.push_back({prev, m.first, invert});
    spans.push_back({m.first, m.second, !invert});
    prev = m.second;
  }
  if (prev != length) spans.push_back({prev, length, invert});

  thread_local std::vector<Span> kept;
  kept.clear();
  switch (behavior) {
    case Behavior::Isolated:
      kept = spans;
      break;
    case Behavior::Removed:
      for (const Span& s : spans) {
        if (!s.is_match) kept.push_back(s);
      }
      break;
    case Behavior::Contiguous: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
    }
    case Behavior::MergedWithPrevious: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool previous_match = false;
      for (size_t i = spans.size(); i-- > 0;) {
        const Span& s = spans[i];
        if (s.is_match && !previous_match && !kept.empty()) {
          kept.back().begin = s.begin;
        } else {
          kept.push_back(s);
        }
        previous_match = s.is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
  }
  for (const Span& s : kept) {
    if (s.begin == s.end) continue;  // the library drops empty splits
    out.push_back({piece.begin + s.begin, piece.begin + s.end, piece.at_origin && s.begin == 0});
  }
}

// Splits every piece by `find(piece_text, matches)`; keeps `data`.
template <typename Find>
void split_all(Pieces& pieces, bool invert, Behavior behavior, Find&& find) {
  thread_local std::vector<PieceRef> out;
  thread_local std::vector<Match> matches;
  out.clear();
  for (const PieceRef& piece : pieces.refs) {
    matches.clear();
    find(pieces.view(piece), matches);
    split_piece(piece, matches, invert, behavior, out);
  }
  pieces.refs.swap(out);
}

// Matches each character for which `predicate` holds, one match per character.
template <typename Predicate>
void match_chars(std::string_view text, std::vector<Match>& matches, Predicate&& predicate) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    if (predicate(utf8::next(text, pos))) {
      matches.emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(pos));
    }
  }
}

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void pre_tokenize(Pieces& pieces) const override {
    for (const auto& step : steps_) step->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(Pieces& pieces) const override {
    split_all(pieces, invert_, behavior_, [&](std::string_view text, std::vector<Match>& m) {
      pattern_.find_all(text, m);
    });
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex, const JsonPath& where)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = std::make_unique<Pattern>(Pattern::from_json(Json{{"Regex", kGpt2Pattern}}, where));
    const auto& map = byte_to_char();
    for (int b = 0; b < 256; ++b) {
      std::string s;
      utf8::append(s, map[b]);
      encoded_length_[b] = static_cast<uint8_t>(s.size());
      std::memcpy(encoded_[b], s.data(), s.size());
    }
  }

  void pre_tokenize(Pieces& pieces) const override {
    thread_local Pieces out;
    out.data.clear();
    out.refs.clear();
    thread_local std::string prefixed;
    thread_local std::vector<Match> matches;
    thread_local std::vector<PieceRef> split;
    for (const PieceRef& piece : pieces.refs) {
      std::string_view text = pieces.view(piece);
      if (add_prefix_space_ && text.front() != ' ') {
        prefixed.assign(1, ' ');
        prefixed.append(text);
        text = prefixed;
      }
      split.clear();
      PieceRef whole{0, static_cast<uint32_t>(text.size()), piece.at_origin};
      if (regex_) {
        matches.clear();
        regex_->find_all(text, matches);
        split_piece(whole, matches, false, Behavior::Isolated, split);
      } else {
        split.push_back(whole);
      }
      for (const PieceRef& part : split) {
        size_t begin = out.data.size();
        // Every byte maps to a character of one or two bytes.
        out.data.resize(begin + 2 * size_t{part.end - part.begin});
        char* write = out.data.data() + begin;
        for (uint32_t i = part.begin; i < part.end; ++i) {
          unsigned char b = static_cast<unsigned char>(text[i]);
          write[0] = encoded_[b][0];
          write[1] = encoded_[b][1];
          write += encoded_length_[b];
        }
        out.data.resize(static_cast<size_t>(write - out.data.data()));
        out.refs.push_back({static_cast<uint32_t>(begin), static_cast<uint32_t>(out.data.size()), part.at_origin});
      }
    }
    std::swap(pieces.data, out.data);
    std::swap(pieces.refs, out.refs);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Pattern> regex_;
  char encoded_[256][2] = {};
  uint8_t encoded_length_[256] = {};
};

enum class PrependScheme { Always, First, Never };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}

  void pre_tokenize(Pieces& pieces) const override {
    thread_local Pieces out;
    out.data.clear();
    out.refs.clear();
    for (const PieceRef& piece : pieces.refs) {
      std::string_view text = pieces.view(piece);
      uint32_t begin = static_cast<uint32_t>(out.data.size());
      bool starts_with_replacement = text.front() == ' ' || text.starts_with(replacement_);
      if (!starts_with_replacement &&
          (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && piece.at_origin))) {
        out.data += replacement_;
      }
      for (char c : text) {
        if (c == ' ') {
          out.data += replacement_;
        } else {
          out.data.push_back(c);
        }
      }
      PieceRef whole{begin, static_cast<uint32_t>(out.data.size()), piece.at_origin};
      if (!split_) {
        out.refs.push_back(whole);
        continue;
      }
      thread_local std::vector<Match> matches;
      matches.clear();
      std::string_view rewritten(out.data.data() + begin, whole.end - begin);
      size_t pos = 0;
      while ((pos = rewritten.find(replacement_, pos)) != std::string_view::npos) {
        matches.emplace_back(static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + replacement_.size()));
        pos += replacement_.size();
      }
      split_piece(whole, matches, false, Behavior::MergedWithNext, out.refs);
    }
    std::swap(pieces.data, out.data);
    std::swap(pieces.refs, out.refs);
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class DigitsPreTokenizer final : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}
  void pre_tokenize(Pieces& pieces) const override {
    split_all(pieces, false, individual_ ? Behavior::Isolated : Behavior::Contiguous,
              [](std::string_view text, std::vector<Match>& m) { match_chars(text, m, utf8::is_numeric); });
  }

 private:
  bool individual_;
};

class PunctuationPreTokenizer final : public PreTokenizer {
 public:
  explicit PunctuationPreTokenizer(Behavior behavior) : behavior_(behavior) {}
  void pre_tokenize(Pieces& pieces) const override {
    split_all(pieces, false, behavior_, [](std::string_view text, std::vector<Match>& m) {
      match_chars(text, m, utf8::is_punctuation);
    });
  }

 private:
  Behavior behavior_;
};

class WhitespaceSplitPreTokenizer final : public PreTokenizer {
 public:
  void pre_tokenize(Pieces& pieces) const override {
    split_all(pieces, false, Behavior::Removed, [](std::string_view text, std::vector<Match>& m) {
      match_chars(text, m, utf8::is_whitespace);
    });
  }
};

// BertPreTokenizer: whitespace removed, then each punctuation character isolated.
class BertPreTokenizer final : public PreTokenizer {
 public:
  void pre_tokenize(Pieces& pieces) const override {
    whitespace_.pre_tokenize(pieces);
    split_all(pieces, false, Behavior::Isolated, [](std::string_view text, std::vector<Match>& m) {
      match_chars(text, m, utf8::is_punctuation);
    });
  }

 private:
  WhitespaceSplitPreTokenizer whitespace_;
};

PrependScheme parse_prepend_scheme(const Json& json, const JsonPath& where) {
  auto it = json.find("prepend_scheme");
  if (it == json.end() || it->is_null()) {
    // Files written before prepend_scheme existed carry add_prefix_space instead.
    return get_bool_or(json, "add_prefix_space", true, where) ? PrependScheme::Always
                                                               : PrependScheme::Never;
  }
  std::string scheme = get_string(json, "prepend_scheme", where);
  if (scheme == "always") return PrependScheme::Always;
  if (scheme == "first") return PrependScheme::First;
  if (scheme == "never") return PrependScheme::Never;
  where.child("prepend_scheme").fail(str_cat("unsupported prepend_scheme \"", scheme, "\""));
}

std::string single_char(const Json& json, std::string_view key, const std::string& fallback,
                        const JsonPath& where) {
  std::string s = get_string_or(json, key, fallback, where);
  size_t pos = 0;
  if (s.empty() || (utf8::next(s, pos), pos != s.size())) {
    where.child(key).fail("expected exactly one character");
  }
  return s;
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& json, const JsonPath& where) {
  if (json.is_null()) return nullptr;
  std::string type = type_of(json, where);
  if (type == "Sequence") {
    const Json& list = require(json, "pretokenizers", where);
    if (!list.is_array()) where.child("pretokenizers").fail("expected an array");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto step = make_pre_tokenizer(list[i], where.child("pretokenizers").index(i))) {
        steps.push_back(std::move(step));
      }
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(
        Pattern::from_json(require(json, "pattern", where), where.child("pattern")),
        parse_behavior(json, where, Behavior::Isolated), get_bool_or(json, "invert", false, where));
  }
  if (type == "ByteLevel") {
    // trim_offsets only changes offsets, which the ids do not depend on.
    return std::make_unique<ByteLevelPreTokenizer>(get_bool_or(json, "add_prefix_space", true, where),
                                                   get_bool_or(json, "use_regex", true, where), where);
  }
  if (type == "Metaspace") {
    return std::make_unique<MetaspacePreTokenizer>(single_char(json, "replacement", "\xE2\x96\x81", where),
                                                   parse_prepend_scheme(json, where),
                                                   get_bool_or(json, "split", true, where));
  }
  if (type == "Digits") {
    return std::make_unique<DigitsPreTokenizer>(get_bool_or(json, "individual_digits", false, where));
  }
  if (type == "Punctuation") {
    return std::make_unique<PunctuationPreTokenizer>(parse_behavior(json, where, Behavior::Isolated));
  }
  if (type == "Whitespace") {
    // The library's \w+|[^\w\s]+ in Oniguruma terms, with \w spelled out because PCRE2's
    // \w leaves out combining marks.
    return std::make_unique<SplitPreTokenizer>(
        Pattern::from_json(Json{{"Regex", R"([\p{L}\p{M}\p{N}\p{Pc}]+|[^\p{L}\p{M}\p{N}\p{Pc}\s]+)"}}, where),
        Behavior::Removed, true);
  }
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplitPreTokenizer>();
  if (type == "BertPreTokenizer") return std::make_unique<BertPreTokenizer>();
  where.fail(str_cat("unsupported pre_tokenizer type \"", type, "\""));
}

const std::array<uint32_t, 256>& byte_to_char() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? static_cast<uint32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

int byte_of_char(uint32_t c) {
  static const std::vector<int> table = [] {
    std::vector<int> t(512, -1);
    const auto& forward = byte_to_char();
    for (int b = 0; b < 256; ++b) t[forward[b]] = b;
    return t;
  }();
  return c < table.size() ? table[c] : -1;
}

}  // namespace shardlm::tokenizer::detail
