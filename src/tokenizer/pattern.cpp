#include "tokenizer/pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace shardlm::tokenizer::detail {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Match data and JIT stack are per thread, so one compiled pattern serves all threads.
// The default 32 KiB JIT stack overflows on long whitespace runs under `\s+(?!\S)`.
struct ThreadMatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  ThreadMatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~ThreadMatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState state;
  return state;
}

struct UnicodeAddition {
  uint32_t first, last;
  const char* category;
};

const UnicodeAddition kUnicodeAdditions[] = {
#include "tokenizer/unicode_additions.inc"
};

// Ranges to add to \p{name}: what Unicode 16.0 puts in that general category beyond
// Unicode 14.0. `name` is a category ("L", "Lu", "L&", ...); anything else gets none.
std::string added_ranges(std::string_view name) {
  std::string out;
  for (const UnicodeAddition& a : kUnicodeAdditions) {
    std::string_view category(a.category);
    bool hit = name.size() == 1   ? category[0] == name[0]
               : name == "L&"     ? category == "Lu" || category == "Ll" || category == "Lt"
                                  : category == name;
    if (!hit) continue;
    char buffer[40];
    if (a.first == a.last) {
      std::snprintf(buffer, sizeof(buffer), "\\x{%X}", a.first);
    } else {
      std::snprintf(buffer, sizeof(buffer), "\\x{%X}-\\x{%X}", a.first, a.last);
    }
    out += buffer;
  }
  return out;
}

}  // namespace

std::string widen_unicode_classes(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size());
  bool in_class = false;
  size_t i = 0;
  const size_t n = pattern.size();
  while (i < n) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < n) {
      char e = pattern[i + 1];
      if (e == 'Q') {  // \Q...\E is literal text
        size_t end = pattern.find("\\E", i + 2);
        size_t stop = end == std::string::npos ? n : end + 2;
        out.append(pattern, i, stop - i);
        i = stop;
        continue;
      }
      if (e == 'p' || e == 'P') {
        size_t j = i + 2;
        std::string name;
        if (j < n && pattern[j] == '{') {
          size_t close = pattern.find('}', j);
          if (close == std::string::npos) break;  // let PCRE2 report it
          name = pattern.substr(j + 1, close - j - 1);
          j = close + 1;
        } else if (j < n) {
          name = pattern.substr(j, 1);
          j += 1;
        }
        bool negated = e == 'P';
        if (!name.empty() && name[0] == '^') {
          negated = !negated;
          name.erase(0, 1);
        }
        std::string extra = added_ranges(name);
        std::string original = pattern.substr(i, j - i);
        if (extra.empty() || (in_class && negated)) {
          out += original;  // a negated property inside a class cannot take additions
        } else if (in_class) {
          out += original + extra;
        } else {
          out += str_cat(negated ? "[^" : "[", "\\p{", name, "}", extra, "]");
        }
        i = j;
        continue;
      }
      out.append(pattern, i, 2);
      i += 2;
      continue;
    }
    if (in_class) {
      if (c == '[' && i + 1 < n && pattern[i + 1] == ':') {  // [:alpha:]
        size_t end = pattern.find(":]", i + 2);
        size_t stop = end == std::string::npos ? n : end + 2;
        out.append(pattern, i, stop - i);
        i = stop;
        continue;
      }
      if (c == ']') in_class = false;
      out += c;
      ++i;
      continue;
    }
    out += c;
    ++i;
    if (c == '[') {
      in_class = true;
      if (i < n && pattern[i] == '^') out += pattern[i++];
      if (i < n && pattern[i] == ']') out += pattern[i++];  // a leading ] is literal
    }
  }
  if (i < n) out.append(pattern, i, n - i);
  return out;
}

Regex::Regex(const std::string& pattern, const JsonPath& where) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // Oniguruma, which the Rust library uses, has Unicode 16.0 tables; PCRE2 10.42 has 14.0.
  std::string widened = widen_unicode_classes(pattern);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(widened.data()), widened.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    // Report the error against the pattern as written where that one fails too.
    pcre2_code* plain = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                      PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    pcre2_code_free(plain);
    where.fail(str_cat("invalid regex /", pattern, "/: ", pcre2_message(error), " at offset ",
                       offset));
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view text, std::vector<Match>& matches) const {
  auto* code = static_cast<pcre2_code*>(code_);
  ThreadMatchState& state = thread_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t length = text.size();
  size_t search_from = 0;
  size_t last_match_end = SIZE_MAX;
  PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
  while (search_from <= length) {
    int rc = jit_ ? pcre2_jit_match(code, subject, length, search_from, PCRE2_NO_UTF_CHECK,
                                    state.data, state.context)
                  : pcre2_match(code, subject, length, search_from, PCRE2_NO_UTF_CHECK, state.data,
                                state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      fail("regex /", pattern_, "/ failed on a ", length, "-byte text: ", pcre2_message(rc));
    }
    size_t begin = ovector[0], end = ovector[1];
    if (begin == end && end == last_match_end) {
      if (search_from >= length) break;
      search_from += utf8::sequence_length(static_cast<unsigned char>(text[search_from]));
      continue;
    }
    matches.emplace_back(static_cast<uint32_t>(begin), static_cast<uint32_t>(end));
    search_from = end;
    last_match_end = end;
  }
}

Pattern Pattern::from_json(const Json& json, const JsonPath& where) {
  if (!json.is_object()) where.fail("expected {\"String\": ...} or {\"Regex\": ...}");
  Pattern p;
  if (json.contains("String")) {
    p.literal_ = get_string(json, "String", where);
  } else if (json.contains("Regex")) {
    p.regex_ = std::make_shared<Regex>(get_string(json, "Regex", where), where.child("Regex"));
  } else {
    where.fail("expected {\"String\": ...} or {\"Regex\": ...}");
  }
  return p;
}

Pattern Pattern::literal(std::string text) {
  Pattern p;
  p.literal_ = std::move(text);
  return p;
}

void Pattern::find_all(std::string_view text, std::vector<Match>& matches) const {
  if (regex_) {
    regex_->find_all(text, matches);
    return;
  }
  // An empty literal never splits anything in the library (it returns the whole text).
  if (literal_.empty()) return;
  size_t pos = 0;
  while ((pos = text.find(literal_, pos)) != std::string_view::npos) {
    matches.emplace_back(static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + literal_.size()));
    pos += literal_.size();
  }
}

std::string Pattern::replace_all(std::string_view text, std::string_view content) const {
  thread_local std::vector<Match> matches;
  matches.clear();
  find_all(text, matches);
  if (matches.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + matches.size() * content.size());
  size_t prev = 0;
  for (const Match& m : matches) {
    out.append(text.data() + prev, m.first - prev);
    out.append(content);
    prev = m.second;
  }
  out.append(text.data() + prev, text.size() - prev);
  return out;
}

}  // namespace shardlm::tokenizer::detail
