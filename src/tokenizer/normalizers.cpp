#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/components.h"
#include "tokenizer/pattern.h"
#include "tokenizer/utf8.h"

namespace shardlm::tokenizer::detail {

namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

class UnicodeNormalizer final : public Normalizer {
 public:
  UnicodeNormalizer(bool compose, bool compatibility) : compose_(compose), compatibility_(compatibility) {
    options_ = utf8proc_option_t(UTF8PROC_STABLE | (compose ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) |
                                 (compatibility ? UTF8PROC_COMPAT : 0));
  }
  void normalize(std::string& text) const override {
    if (is_stable(text)) return;
    utf8proc_uint8_t* out = nullptr;
    utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                     static_cast<utf8proc_ssize_t>(text.size()), &out, options_);
    if (n < 0) fail("Unicode normalization failed: ", utf8proc_errmsg(n));
    text.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
  }

 private:
  // Most text is already normalized; checking that is much cheaper than normalizing.
  bool is_stable(std::string_view text) const {
    size_t pos = 0;
    while (pos < text.size()) {
      if (static_cast<unsigned char>(text[pos]) < 0x80) {
        ++pos;
        continue;
      }
      if (!normalization_stable(utf8::next(text, pos), compose_, compatibility_)) return false;
    }
    return true;
  }
  bool compose_, compatibility_;
  utf8proc_option_t options_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = pattern_.replace_all(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
      uint32_t c = utf8::next(text, pos);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
      } else if (c == 0x130) {
        // Rust's char::to_lowercase maps İ to two characters; utf8proc's simple map to one.
        out += "i\xCC\x87";
      } else {
        utf8::append(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
      }
    }
    text = std::move(out);
  }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!utf8::is_whitespace(utf8::next(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        uint32_t c = utf8::previous(text, end);
        if (!utf8::is_whitespace(c)) break;
        end -= c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
      size_t start = pos;
      uint32_t c = utf8::next(text, pos);
      if (c >= 0x300) {
        // The library drops every combining mark (Mn, Mc and Me), not only accents.
        auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
        if (category == UTF8PROC_CATEGORY_MN || category == UTF8PROC_CATEGORY_MC || category == UTF8PROC_CATEGORY_ME) {
          continue;
        }
      }
      out.append(text, start, pos - start);
    }
    text = std::move(out);
  }
};

}  // namespace

bool normalization_stable(uint32_t c, bool compose, bool compatibility) {
  if (c < 0x80) return true;
  // Below U+0300 there are no combining marks and no singleton decompositions, so
  // canonical composition leaves everything as it is.
  if (compose && !compatibility && c < 0x300) return true;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
  if (p->combining_class != 0) return false;  // may be reordered
  if (p->decomp_seqindex != UINT16_MAX && (compatibility || p->decomp_type == 0)) return false;
  // Hangul syllables and jamo (de)compose algorithmically, outside the tables.
  if (c >= 0x1100 && c <= 0x11FF) return false;
  if (!compose && c >= 0xAC00 && c <= 0xD7A3) return false;
  // A character in any composition pair might combine with a neighbour.
  if (compose && p->comb_index != UINT16_MAX) return false;
  return true;
}

std::unique_ptr<Normalizer> make_normalizer(const Json& json, const JsonPath& where) {
  if (json.is_null()) return nullptr;
  std::string type = type_of(json, where);
  if (type == "Sequence") {
    const Json& list = require(json, "normalizers", where);
    if (!list.is_array()) where.child("normalizers").fail("expected an array");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto step = make_normalizer(list[i], where.child("normalizers").index(i))) {
        steps.push_back(std::move(step));
      }
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(true, false);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(false, false);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(true, true);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(false, true);
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(get_string(json, "prepend", where));
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(
        Pattern::from_json(require(json, "pattern", where), where.child("pattern")),
        get_string(json, "content", where));
  }
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(get_bool_or(json, "strip_left", true, where),
                                             get_bool_or(json, "strip_right", true, where));
  }
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  where.fail(str_cat("unsupported normalizer type \"", type, "\""));
}

}  // namespace shardlm::tokenizer::detail
