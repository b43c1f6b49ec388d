// Methods of Python's str, dict and list, the global functions transformers defines, and
// the Python string operations they share with the filters.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include <utf8proc.h>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_evaluator.h"

namespace shardlm::tokenizer::jinja {

Arguments::Arguments(const std::string& function, const CallArgs& args, std::initializer_list<const char*> names,
                     bool extra_positional)
    : bound_(names.size(), nullptr) {
  const std::vector<const char*> parameter_names(names);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < parameter_names.size()) {
      bound_[i] = &args.positional[i];
    } else if (extra_positional) {
      rest_.push_back(args.positional[i]);
    } else {
      fail("TypeError: ", function, "() takes at most ", parameter_names.size(), " argument(s) (",
           args.positional.size(), " given)");
    }
  }
  for (const auto& [key, value] : args.keyword) {
    const auto it = std::find_if(parameter_names.begin(), parameter_names.end(),
                                 [&key = key](const char* n) { return key == n; });
    if (it == parameter_names.end()) fail("TypeError: ", function, "() got an unexpected keyword argument '", key, "'");
    const size_t index = it - parameter_names.begin();
    if (bound_[index] != nullptr) fail("TypeError: ", function, "() got multiple values for argument '", key, "'");
    bound_[index] = &value;
  }
}

const Value& Arguments::get(size_t index) const { return bound_[index] ? *bound_[index] : undefined_; }

namespace {

const std::string& require_string(const Value& v, const char* what) {
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string()) fail("TypeError: ", what, " must be str, not ", v.type_name());
  return v.as_string();
}

std::u32string map_case(const std::u32string& chars, bool upper) {
  std::u32string out;
  out.reserve(chars.size());
  for (char32_t c : chars) {
    // Python uses full case mapping; the one common multi-character case is ß.
    if (upper && c == U'\u00df') {
      out += U"SS";
      continue;
    }
    const auto mapped = upper ? utf8proc_toupper(static_cast<utf8proc_int32_t>(c))
                              : utf8proc_tolower(static_cast<utf8proc_int32_t>(c));
    out.push_back(static_cast<char32_t>(mapped));
  }
  return out;
}

char32_t to_title(char32_t c) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))); }

bool is_cased(char32_t c) {
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return category == UTF8PROC_CATEGORY_LU || category == UTF8PROC_CATEGORY_LL || category == UTF8PROC_CATEGORY_LT;
}

std::string python_title(const std::string& text) {
  std::u32string out;
  bool previous_cased = false;
  for (char32_t c : decode_utf8(text)) {
    out.push_back(previous_cased ? map_case(std::u32string(1, c), false)[0] : to_title(c));
    previous_cased = is_cased(c);
  }
  return encode_utf8(out);
}

std::string python_capitalize(const std::string& text) {
  std::u32string chars = decode_utf8(text);
  if (chars.empty()) return "";
  std::u32string out(1, to_title(chars[0]));
  out += map_case(chars.substr(1), false);
  return encode_utf8(out);
}

List python_split(const std::string& text, const Value& separator, int64_t max_split, bool from_right) {
  List parts;
  if (separator.is_none() || separator.is_undefined()) {
    // Whitespace runs separate; leading and trailing whitespace yields no empty parts.
    const std::u32string chars = decode_utf8(text);
    std::vector<std::pair<size_t, size_t>> spans;
    size_t i = 0;
    while (i < chars.size()) {
      while (i < chars.size() && is_python_space(chars[i])) ++i;
      if (i == chars.size()) break;
      size_t j = i;
      while (j < chars.size() && !is_python_space(chars[j])) ++j;
      spans.emplace_back(i, j);
      i = j;
    }
    if (max_split >= 0 && static_cast<int64_t>(spans.size()) > max_split + 1) {
      if (from_right) {
        const size_t keep_from = spans.size() - max_split;
        size_t start = 0;
        while (start < chars.size() && is_python_space(chars[start])) ++start;
        parts.emplace_back(encode_utf8(std::u32string_view(chars).substr(start, spans[keep_from - 1].second - start)));
        for (size_t k = keep_from; k < spans.size(); ++k) {
          parts.emplace_back(encode_utf8(std::u32string_view(chars).substr(spans[k].first, spans[k].second - spans[k].first)));
        }
        return parts;
      }
      for (int64_t k = 0; k < max_split; ++k) {
        parts.emplace_back(encode_utf8(std::u32string_view(chars).substr(spans[k].first, spans[k].second - spans[k].first)));
      }
      size_t rest = spans[max_split].first;
      size_t end = chars.size();
      while (end > rest && is_python_space(chars[end - 1])) --end;
      parts.emplace_back(encode_utf8(std::u32string_view(chars).substr(rest, end - rest)));
      return parts;
    }
    for (const auto& [a, b] : spans) parts.emplace_back(encode_utf8(std::u32string_view(chars).substr(a, b - a)));
    return parts;
  }
  const std::string& sep = require_string(separator, "separator");
  if (sep.empty()) fail("ValueError: empty separator");
  std::vector<std::string> pieces;
  if (!from_right) {
    size_t start = 0;
    while (true) {
      const size_t found = text.find(sep, start);
      if (found == std::string::npos || (max_split >= 0 && static_cast<int64_t>(pieces.size()) >= max_split)) {
        pieces.push_back(text.substr(start));
        break;
      }
      pieces.push_back(text.substr(start, found - start));
      start = found + sep.size();
    }
  } else {
    size_t end = text.size();
    while (true) {
      const size_t found = end >= sep.size() ? text.rfind(sep, end - sep.size()) : std::string::npos;
      if (found == std::string::npos || (max_split >= 0 && static_cast<int64_t>(pieces.size()) >= max_split)) {
        pieces.push_back(text.substr(0, end));
        break;
      }
      pieces.push_back(text.substr(found + sep.size(), end - found - sep.size()));
      end = found;
    }
    std::reverse(pieces.begin(), pieces.end());
  }
  for (auto& p : pieces) parts.emplace_back(std::move(p));
  return parts;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

std::string python_replace(const std::string& text, const std::string& old, const std::string& replacement,
                           int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement between characters and at both ends.
    const std::u32string chars = decode_utf8(text);
    int64_t done = 0;
    for (size_t i = 0; i <= chars.size(); ++i) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      if (i < chars.size()) append_utf8(out, chars[i]);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t found = text.find(old, start);
    if (found == std::string::npos) break;
    out.append(text, start, found - start);
    out += replacement;
    start = found + old.size();
    ++done;
  }
  out.append(text, start);
  return out;
}

// Code point index of a byte offset, which str.find reports.
int64_t code_point_index(const std::string& text, size_t byte_offset) {
  return length(Value(text.substr(0, byte_offset)));
}

// str[start:end] for the optional start/end arguments of startswith, find and count.
std::string sub_range(const std::string& text, const Value& start, const Value& end) {
  if ((start.is_undefined() || start.is_none()) && (end.is_undefined() || end.is_none())) return text;
  const std::u32string chars = decode_utf8(text);
  const auto size = static_cast<int64_t>(chars.size());
  auto clamp = [&](const Value& v, int64_t missing) {
    if (v.is_undefined() || v.is_none()) return missing;
    int64_t i = v.as_int();
    if (i < 0) i = std::max<int64_t>(0, i + size);
    return std::min(i, size);
  };
  const int64_t a = clamp(start, 0);
  const int64_t b = clamp(end, size);
  return a < b ? encode_utf8(std::u32string_view(chars).substr(a, b - a)) : std::string();
}

std::string python_format(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t next_auto = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if ((c == '{' || c == '}') && i + 1 < format.size() && format[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}') fail("ValueError: single '}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string::npos) fail("ValueError: single '{' encountered in format string");
    const std::string field = format.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      fail("str.format: the replacement field '{", field, "}' uses a conversion or format spec, which is not supported");
    }
    if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
      const size_t index = field.empty() ? next_auto++ : field.size() < 10 ? std::strtoul(field.c_str(), nullptr, 10) : SIZE_MAX;
      if (index >= args.positional.size()) fail("IndexError: Replacement index ", index, " out of range");
      out += to_str(args.positional[index]);
    } else {
      const auto it = std::find_if(args.keyword.begin(), args.keyword.end(), [&](const auto& kw) { return kw.first == field; });
      if (it == args.keyword.end()) fail("KeyError: '", field, "'");
      out += to_str(it->second);
    }
    i = close;
  }
  return out;
}

Value string_method(const Value& receiver, const std::string& name, CallArgs& call_args) {
  const std::string& s = receiver.as_string();
  const std::string function = "str." + name;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Arguments a(function, call_args, {"chars"});
    return Value(python_strip(s, a.get(0), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Arguments a(function, call_args, {"sep", "maxsplit"});
    return Value::list(python_split(s, a.get(0), a.get_or(1, Value(-1)).as_int(), name == "rsplit"));
  }
  if (name == "splitlines") {
    Arguments a(function, call_args, {"keepends"});
    const bool keep = truthy(a.get(0));
    List lines;
    const std::u32string chars = decode_utf8(s);
    size_t start = 0;
    for (size_t i = 0; i < chars.size(); ++i) {
      if (!is_line_break(chars[i])) continue;
      size_t end = i + 1;
      if (chars[i] == '\r' && end < chars.size() && chars[end] == '\n') end++;
      lines.emplace_back(encode_utf8(std::u32string_view(chars).substr(start, (keep ? end : i) - start)));
      start = end;
      i = end - 1;
    }
    if (start < chars.size()) lines.emplace_back(encode_utf8(std::u32string_view(chars).substr(start)));
    return Value::list(std::move(lines));
  }
  if (name == "startswith" || name == "endswith") {
    Arguments a(function, call_args, {"prefix", "start", "end"});
    const std::string text = sub_range(s, a.get(1), a.get(2));
    List options = a.get(0).kind() == Value::Kind::Tuple ? a.get(0).as_list() : List{a.get(0)};
    for (const auto& option : options) {
      const std::string& p = require_string(option, function.c_str());
      const bool match = text.size() >= p.size() &&
                         (name == "startswith" ? text.compare(0, p.size(), p) == 0
                                               : text.compare(text.size() - p.size(), p.size(), p) == 0);
      if (match) return Value(true);
    }
    return Value(false);
  }
  if (name == "replace") {
    Arguments a(function, call_args, {"old", "new", "count"});
    return Value(python_replace(s, require_string(a.get(0), "old"), require_string(a.get(1), "new"),
                                a.get_or(2, Value(-1)).as_int()));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    Arguments a(function, call_args, {});
    if (name == "upper") return Value(python_upper(s));
    if (name == "lower") return Value(python_lower(s));
    if (name == "title") return Value(python_title(s));
    return Value(python_capitalize(s));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    Arguments a(function, call_args, {"sub", "start", "end"});
    const std::string& sub = require_string(a.get(0), "substring");
    if (a.has(1) || a.has(2)) fail(function, " with start/end arguments is not supported");
    if (name == "count") {
      if (sub.empty()) return Value(length(receiver) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    const size_t found = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (found == std::string::npos) {
      if (name == "index" || name == "rindex") fail("ValueError: substring not found");
      return Value(-1);
    }
    return Value(code_point_index(s, found));
  }
  if (name == "join") {
    Arguments a(function, call_args, {"iterable"});
    std::string out;
    bool first = true;
    for (const auto& item : iterate(a.get(0))) {
      if (!first) out += s;
      first = false;
      out += require_string(item, "sequence item");
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(python_format(s, call_args));
  if (name == "removeprefix" || name == "removesuffix") {
    Arguments a(function, call_args, {"affix"});
    const std::string& affix = require_string(a.get(0), "affix");
    if (name == "removeprefix") return Value(s.rfind(affix, 0) == 0 ? s.substr(affix.size()) : s);
    const bool ends = s.size() >= affix.size() && s.compare(s.size() - affix.size(), affix.size(), affix) == 0;
    return Value(ends ? s.substr(0, s.size() - affix.size()) : s);
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "isupper" ||
      name == "islower") {
    Arguments a(function, call_args, {});
    const std::u32string chars = decode_utf8(s);
    if (chars.empty()) return Value(false);
    if (name == "isupper" || name == "islower") {
      bool any_cased = false;
      for (char32_t c : chars) {
        const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
        if (category == UTF8PROC_CATEGORY_LT) return Value(false);
        if (category == (name == "isupper" ? UTF8PROC_CATEGORY_LL : UTF8PROC_CATEGORY_LU)) return Value(false);
        any_cased = any_cased || is_cased(c);
      }
      return Value(any_cased);
    }
    for (char32_t c : chars) {
      const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      const bool letter = category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO;
      const bool digit = category == UTF8PROC_CATEGORY_ND;
      const bool ok = name == "isdigit"   ? digit
                      : name == "isalpha" ? letter
                      : name == "isalnum" ? letter || digit
                                          : is_python_space(c);
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    Arguments a(function, call_args, {"width", "fillchar"});
    if (!a.get(0).is_int()) fail("TypeError: ", function, "() width must be an integer");
    const int64_t width = a.get(0).as_int();
    check_size(static_cast<size_t>(std::max<int64_t>(0, width)), "padded string");
    const std::string fill = a.has(1) ? require_string(a.get(1), "fillchar") : " ";
    const int64_t size = length(receiver);
    if (width <= size) return receiver;
    const int64_t total = width - size;
    // CPython's center puts the odd extra character on the left when the width is odd.
    int64_t left = name == "ljust" ? 0 : name == "rjust" ? total : total / 2 + (total & width & 1);
    std::string out;
    for (int64_t i = 0; i < left; ++i) out += fill;
    out += s;
    for (int64_t i = 0; i < total - left; ++i) out += fill;
    return Value(std::move(out));
  }
  fail("the str method '", name, "' is not supported in chat templates");
}

const char* const kStringMethods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith",
                                      "endswith", "replace", "upper", "lower", "title", "capitalize", "find", "rfind",
                                      "index", "rindex", "count", "join", "format", "removeprefix", "removesuffix",
                                      "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "center",
                                      "ljust", "rjust", "casefold", "swapcase", "zfill", "partition", "rpartition",
                                      "encode", "expandtabs", "istitle", "isnumeric", "isdecimal"};
const char* const kMutatingMethods[] = {"append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear",
                                        "update", "setdefault", "popitem"};

bool in_list(const std::string& name, const char* const* begin, const char* const* end) {
  return std::any_of(begin, end, [&](const char* m) { return name == m; });
}

}  // namespace

std::string python_strip(const std::string& text, const Value& chars, bool left, bool right) {
  const std::u32string code_points = decode_utf8(text);
  std::u32string strip_set;
  const bool whitespace = chars.is_none() || chars.is_undefined();
  if (!whitespace) strip_set = decode_utf8(require_string(chars, "strip arg"));
  auto strip = [&](char32_t c) {
    return whitespace ? is_python_space(c) : strip_set.find(c) != std::u32string::npos;
  };
  size_t begin = 0;
  size_t end = code_points.size();
  while (left && begin < end && strip(code_points[begin])) ++begin;
  while (right && end > begin && strip(code_points[end - 1])) --end;
  return encode_utf8(std::u32string_view(code_points).substr(begin, end - begin));
}

std::string python_lower(const std::string& text) { return encode_utf8(map_case(decode_utf8(text), false)); }
std::string python_upper(const std::string& text) { return encode_utf8(map_case(decode_utf8(text), true)); }

Value get_method(const Value& receiver, const std::string& name) {
  if (in_list(name, std::begin(kMutatingMethods), std::end(kMutatingMethods)) &&
      (receiver.is_sequence() || receiver.is_dict())) {
    return Value::callable(name, [name](Evaluator&, CallArgs&) -> Value {
      fail("SecurityError: chat templates may not modify lists or dicts (", name,
           "() is blocked by jinja2's immutable sandbox)");
    });
  }
  if (receiver.is_string() && in_list(name, std::begin(kStringMethods), std::end(kStringMethods))) {
    return Value::callable("str." + name, [receiver, name](Evaluator&, CallArgs& args) {
      return string_method(receiver, name, args);
    });
  }
  if (receiver.is_dict() && (name == "items" || name == "keys" || name == "values" || name == "get" || name == "copy")) {
    return Value::callable("dict." + name, [receiver, name](Evaluator&, CallArgs& args) -> Value {
      const Dict& d = receiver.as_dict();
      if (name == "get") {
        Arguments a("dict.get", args, {"key", "default"});
        const Value* found = d.find(a.get(0));
        return found ? *found : a.get_or(1, Value::none());
      }
      Arguments a("dict." + name, args, {});
      if (name == "copy") return receiver;
      List out;
      for (const auto& [k, v] : d.entries) {
        out.push_back(name == "items" ? Value::tuple({k, v}) : name == "keys" ? k : v);
      }
      return Value::dict_view(std::move(out), name == "items"  ? Value::Flavor::DictItems
                                              : name == "keys" ? Value::Flavor::DictKeys
                                                               : Value::Flavor::DictValues);
    });
  }
  const bool has_list_methods = receiver.is_sequence() && (receiver.flavor() == Value::Flavor::Plain ||
                                                           receiver.flavor() == Value::Flavor::Range);
  if (has_list_methods && (name == "index" || name == "count")) {
    return Value::callable("list." + name, [receiver, name](Evaluator&, CallArgs& args) -> Value {
      Arguments a("list." + name, args, {"value"});
      const List& items = receiver.as_list();
      if (name == "count") {
        return Value(static_cast<int64_t>(
            std::count_if(items.begin(), items.end(), [&](const Value& v) { return equals(v, a.get(0)); })));
      }
      for (size_t i = 0; i < items.size(); ++i) {
        if (equals(items[i], a.get(0))) return Value(static_cast<int64_t>(i));
      }
      fail("ValueError: ", repr(a.get(0)), " is not in list");
    });
  }
  return Value();
}

std::string percent_format(const std::string& format, const Value& arguments) {
  const List values = arguments.kind() == Value::Kind::Tuple ? arguments.as_list() : List{arguments};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    size_t j = i + 1;
    while (j < format.size() && std::string_view("-+ 0#").find(format[j]) != std::string_view::npos) ++j;
    while (j < format.size() && std::isdigit(static_cast<unsigned char>(format[j]))) ++j;
    if (j < format.size() && format[j] == '.') {
      ++j;
      while (j < format.size() && std::isdigit(static_cast<unsigned char>(format[j]))) ++j;
    }
    if (j >= format.size()) fail("ValueError: incomplete format");
    const char conversion = format[j];
    const std::string spec = format.substr(i, j - i);
    if (conversion == '%') {
      out += '%';
      i = j;
      continue;
    }
    if (next >= values.size()) fail("TypeError: not enough arguments for format string");
    const Value& v = values[next++];
    char buffer[512];
    switch (conversion) {
      case 's':
      case 'r': {
        if (spec.size() != 1) fail("flags or a width in '", spec, conversion, "' are not supported in chat templates");
        out += conversion == 's' ? to_str(v) : repr(v);
        break;
      }
      case 'd':
      case 'i':
        if (!v.is_number()) fail("TypeError: %", conversion, " format: a real number is required, not ", v.type_name());
        std::snprintf(buffer, sizeof(buffer), (spec + "lld").c_str(),
                      static_cast<long long>(v.kind() == Value::Kind::Float ? static_cast<int64_t>(v.as_double()) : v.as_int()));
        out += buffer;
        break;
      case 'f':
        if (!v.is_number()) fail("TypeError: must be real number, not ", v.type_name());
        std::snprintf(buffer, sizeof(buffer), (spec + "f").c_str(), v.as_double());
        out += buffer;
        break;
      default: fail("the % format conversion '%", conversion, "' is not supported in chat templates");
    }
    i = j;
  }
  // Python treats a list or dict argument as a mapping and never complains that it went unused.
  const bool mapping_like = arguments.kind() == Value::Kind::List || arguments.is_dict();
  if (next < values.size() && !mapping_like) fail("TypeError: not all arguments converted during string formatting");
  return out;
}

std::vector<std::pair<std::string, Value>> builtin_globals() {
  std::vector<std::pair<std::string, Value>> globals;
  globals.emplace_back("range", Value::callable("range", [](Evaluator&, CallArgs& args) {
    Arguments a("range", args, {"start", "stop", "step"});
    int64_t start = 0;
    int64_t stop = 0;
    int64_t step = a.has(2) ? a.get(2).as_int() : 1;
    for (size_t i = 0; i < 3; ++i) {
      if (a.has(i) && !a.get(i).is_int()) fail("TypeError: range() arguments must be integers");
    }
    if (a.has(1)) {
      start = a.get(0).as_int();
      stop = a.get(1).as_int();
    } else {
      stop = a.get_or(0, Value(0)).as_int();
    }
    if (step == 0) fail("ValueError: range() arg 3 must not be zero");
    List items;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      // jinja2's sandbox caps ranges at 100000 items.
      if (items.size() >= 100000) fail("OverflowError: range too big, maximum size for range is 100000");
      items.emplace_back(i);
    }
    std::string text = str_cat("range(", start, ", ", stop);
    if (step != 1) text += str_cat(", ", step);
    return Value::range(std::move(items), text + ")");
  }));
  globals.emplace_back("dict", Value::callable("dict", [](Evaluator&, CallArgs& args) {
    Dict d;
    if (args.positional.size() > 1) fail("TypeError: dict expected at most 1 argument");
    if (!args.positional.empty()) {
      const Value& source = args.positional[0];
      if (source.is_dict()) {
        d = source.as_dict();
      } else {
        for (const auto& pair : iterate(source)) {
          const List kv = iterate(pair);
          if (kv.size() != 2) fail("ValueError: dictionary update sequence element has length ", kv.size(), "; 2 is required");
          d.set(kv[0], kv[1]);
        }
      }
    }
    for (const auto& [key, value] : args.keyword) d.set(Value(key), value);
    return Value::dict(std::move(d));
  }));
  globals.emplace_back("namespace", Value::callable("namespace", [](Evaluator&, CallArgs& args) {
    auto ns = std::make_shared<Object>();
    ns->type_name = "Namespace";
    if (args.positional.size() > 1) fail("TypeError: namespace() takes at most one positional argument");
    if (!args.positional.empty()) {
      if (!args.positional[0].is_dict()) fail("TypeError: namespace() takes a dict as its positional argument");
      for (const auto& [k, v] : args.positional[0].as_dict().entries) ns->set(to_str(k), v);
    }
    for (const auto& [key, value] : args.keyword) ns->set(key, value);
    for (const auto& [key, value] : ns->attributes) {
      if (key.rfind('_', 0) == 0) {
        fail("SecurityError: chat templates cannot store underscore-prefixed attributes on a namespace, but got '",
             key, "'");
      }
    }
    return Value::object(std::move(ns));
  }));
  globals.emplace_back("raise_exception", Value::callable("raise_exception", [](Evaluator&, CallArgs& args) -> Value {
    Arguments a("raise_exception", args, {"message"});
    fail("the chat template raised an error: ", to_str(a.get(0)));
  }));
  globals.emplace_back("strftime_now", Value::callable("strftime_now", [](Evaluator& evaluator, CallArgs& args) {
    Arguments a("strftime_now", args, {"format"});
    std::string format = require_string(a.get(0), "strftime_now format");
    std::tm now{};
    long microseconds = 0;
    if (evaluator.fixed_now()) {
      now = *evaluator.fixed_now();
      // Fills in the weekday and day of the year (%A, %j) from the date, as Python's timetuple does.
      std::tm normalized = now;
      timegm(&normalized);
      now.tm_wday = normalized.tm_wday;
      now.tm_yday = normalized.tm_yday;
    } else {
      const auto clock = std::chrono::system_clock::now();
      const std::time_t t = std::chrono::system_clock::to_time_t(clock);
      localtime_r(&t, &now);
      microseconds = static_cast<long>(
          std::chrono::duration_cast<std::chrono::microseconds>(clock.time_since_epoch()).count() % 1000000);
    }
    // Python's datetime handles %f itself; the C library does the rest, as on Linux.
    for (size_t p = format.find("%f"); p != std::string::npos; p = format.find("%f", p + 6)) {
      if (p > 0 && format[p - 1] == '%') continue;
      char micro[8];
      std::snprintf(micro, sizeof(micro), "%06ld", microseconds);
      format.replace(p, 2, micro);
    }
    std::string out(format.size() * 4 + 64, '\0');
    const size_t written = std::strftime(out.data(), out.size(), format.c_str(), &now);
    if (written == 0 && !format.empty()) fail("strftime_now: the format '", format, "' produced no output");
    out.resize(written);
    return Value(std::move(out));
  }));
  for (const char* name : {"cycler", "joiner", "lipsum"}) {
    globals.emplace_back(name, Value::callable(name, [name](Evaluator&, CallArgs&) -> Value {
      fail("the jinja2 global '", name, "' is not supported in chat templates");
    }));
  }
  return globals;
}

}  // namespace shardlm::tokenizer::jinja
