#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include <utf8proc.h>

#include "core/error.h"

namespace shardlm::tokenizer::jinja {

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find_string(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

const Value* Object::find(std::string_view name) const {
  for (const auto& [k, v] : attributes) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Object::set(const std::string& name, Value value) {
  for (auto& [k, v] : attributes) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  attributes.emplace_back(name, std::move(value));
}

Value Value::from_json(const nlohmann::ordered_json& json) {
  using nlohmann::ordered_json;
  switch (json.type()) {
    case ordered_json::value_t::null:
      return none();
    case ordered_json::value_t::boolean:
      return Value(json.get<bool>());
    case ordered_json::value_t::number_integer:
      return Value(json.get<int64_t>());
    case ordered_json::value_t::number_unsigned: {
      const auto u = json.get<uint64_t>();
      SHARDLM_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                    "chat template input: integer ", u, " does not fit in 64 bits");
      return Value(static_cast<int64_t>(u));
    }
    case ordered_json::value_t::number_float:
      return Value(json.get<double>());
    case ordered_json::value_t::string:
      return Value(json.get<std::string>());
    case ordered_json::value_t::array: {
      List items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json(item));
      return list(std::move(items));
    }
    case ordered_json::value_t::object: {
      Dict d;
      d.entries.reserve(json.size());
      for (const auto& [key, item] : json.items()) d.entries.emplace_back(Value(key), from_json(item));
      return dict(std::move(d));
    }
    default:
      fail("chat template input: binary or discarded JSON values are not supported");
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List:
      switch (flavor_) {
        case Flavor::Plain: return "list";
        case Flavor::Generator: return "generator";
        case Flavor::DictKeys: return "dict_keys";
        case Flavor::DictValues: return "dict_values";
        case Flavor::DictItems: return "dict_items";
        case Flavor::Range: return "range";
      }
      return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::Object: return object_->type_name;
    case Kind::Callable: return "function";
  }
  return "?";
}

void Value::fail_not_a_number() const {
  if (is_undefined()) fail_undefined(*this);
  fail("TypeError: an integer is required, not '", type_name(), "'");
}

void check_size(size_t size, const char* what) {
  if (size > kMaxValueSize) fail("chat template builds a ", what, " larger than ", kMaxValueSize, " bytes or items");
}

void fail_undefined(const Value& value) { fail("UndefinedError: ", value.undefined_hint()); }

bool truthy(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return value.as_bool();
    case Value::Kind::Int: return value.as_int() != 0;
    case Value::Kind::Float: return value.as_double() != 0.0;
    case Value::Kind::String: return !value.as_string().empty();
    case Value::Kind::List:
    case Value::Kind::Tuple:
      return value.flavor() == Value::Flavor::Generator || !value.as_list().empty();
    case Value::Kind::Dict: return !value.as_dict().entries.empty();
    case Value::Kind::Object:
    case Value::Kind::Callable: return true;
  }
  return false;
}

bool equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == K::Float || b.kind() == K::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  if (a.is_sequence() && (a.flavor() != b.flavor() || a.flavor() == Value::Flavor::Generator)) {
    return a.flavor() == b.flavor() && &a.as_list() == &b.as_list();
  }
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.as_string() == b.as_string();
    case K::List:
    case K::Tuple: {
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case K::Dict: {
      const auto& x = a.as_dict().entries;
      if (x.size() != b.as_dict().entries.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.as_dict().find(k);
        if (other == nullptr || !equals(v, *other)) return false;
      }
      return true;
    }
    case K::Object: return &a.as_object() == &b.as_object();
    case K::Callable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::Float || b.kind() == Value::Kind::Float) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  // UTF-8 byte order is code point order, which is how Python orders str.
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_plain_sequence() && b.is_plain_sequence() && a.kind() == b.kind()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail("TypeError: '<' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

std::string repr_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  // Python prints the shortest digit string that reads back as the same double.
  char buffer[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*e", precision - 1, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  std::string text(buffer);
  const bool negative = text[0] == '-';
  if (negative) text.erase(0, 1);
  const size_t e_pos = text.find('e');
  const int exponent = std::atoi(text.c_str() + e_pos + 1);
  std::string digits;
  for (size_t i = 0; i < e_pos; ++i) {
    if (text[i] != '.') digits += text[i];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  const int point = exponent + 1;  // digits before the decimal point
  if (point > 16 || point < -3) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_text[16];
    std::snprintf(exp_text, sizeof(exp_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_text;
  }
  if (point <= 0) return out + "0." + std::string(-point, '0') + digits;
  if (static_cast<size_t>(point) >= digits.size()) {
    return out + digits + std::string(point - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, point) + "." + digits.substr(point);
}

namespace {

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  if (c < 0x20 || c == 0x7f) return false;
  if (c < 0x7f) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decode_utf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!is_printable(c)) {
      char buffer[16];
      if (c <= 0xff) {
        std::snprintf(buffer, sizeof(buffer), "\\x%02x", static_cast<unsigned>(c));
      } else if (c <= 0xffff) {
        std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buffer, sizeof(buffer), "\\U%08x", static_cast<unsigned>(c));
      }
      out += buffer;
    } else {
      append_utf8(out, c);
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string to_str(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::String: return value.as_string();
    default: return repr(value);
  }
}

std::string repr(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return value.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(value.as_int());
    case Value::Kind::Float: return repr_float(value.as_double());
    case Value::Kind::String: return repr_string(value.as_string());
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      switch (value.flavor()) {
        case Value::Flavor::Plain: break;
        case Value::Flavor::Range: return value.range_repr();
        case Value::Flavor::Generator:
          fail("printing a ", value.type_name(), " is not supported: jinja2 would print its memory address (add |list)");
        default: return value.type_name() + "(" + repr(Value::list(value.as_list())) + ")";
      }
      const bool is_list = value.kind() == Value::Kind::List;
      std::string out = is_list ? "[" : "(";
      const auto& items = value.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        out += repr(items[i]);
      }
      if (!is_list && items.size() == 1) out += ",";
      return out + (is_list ? "]" : ")");
    }
    case Value::Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : value.as_dict().entries) {
        if (!first) out += ", ";
        first = false;
        out += repr(k) + ": " + repr(v);
      }
      return out + "}";
    }
    case Value::Kind::Object: {
      const Object& object = value.as_object();
      if (object.type_name == "LoopContext") {
        const Value* index = object.find("index");
        const Value* count = object.find("length");
        return str_cat("<LoopContext ", index ? to_str(*index) : "?", "/", count ? to_str(*count) : "?", ">");
      }
      if (object.type_name != "Namespace") fail("printing a ", object.type_name, " object is not supported");
      std::string out = "<Namespace {";
      for (size_t i = 0; i < object.attributes.size(); ++i) {
        if (i > 0) out += ", ";
        out += repr_string(object.attributes[i].first) + ": " + repr(object.attributes[i].second);
      }
      return out + "}>";
    }
    case Value::Kind::Callable:
      fail("printing the function '", value.as_callable().name, "' is not supported (did you forget to call it?)");
  }
  return "";
}

namespace {

void dump_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : decode_utf8(s)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    char buffer[16];
    if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
      if (c > 0xffff) {
        const char32_t v = c - 0x10000;
        std::snprintf(buffer, sizeof(buffer), "\\u%04x\\u%04x", static_cast<unsigned>(0xd800 | (v >> 10)),
                      static_cast<unsigned>(0xdc00 | (v & 0x3ff)));
      } else {
        std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(c));
      }
      out += buffer;
    } else {
      append_utf8(out, c);
    }
  }
  out += '"';
}

std::string json_float(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v < 0 ? "-Infinity" : "Infinity";
  return repr_float(v);
}

std::string json_key(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::String: return key.as_string();
    case Value::Kind::Bool: return key.as_bool() ? "true" : "false";
    case Value::Kind::None: return "null";
    case Value::Kind::Int: return std::to_string(key.as_int());
    case Value::Kind::Float: return json_float(key.as_double());
    default: fail("TypeError: keys must be str, int, float, bool or None, not ", key.type_name());
  }
}

void dump_json_to(std::string& out, const Value& value, const JsonDumpOptions& options, int level) {
  const bool pretty = options.indent >= 0 || !options.indent_string.empty();
  auto newline = [&](int depth) {
    out += '\n';
    for (int i = 0; i < depth; ++i) {
      out += options.indent_string.empty() ? std::string(options.indent, ' ') : options.indent_string;
    }
  };
  switch (value.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += value.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(value.as_int()); return;
    case Value::Kind::Float: out += json_float(value.as_double()); return;
    case Value::Kind::String: dump_json_string(out, value.as_string(), options.ensure_ascii); return;
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      if (value.flavor() != Value::Flavor::Plain) {
        fail("TypeError: Object of type ", value.type_name(), " is not JSON serializable");
      }
      const auto& items = value.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += options.item_separator;
        if (pretty) newline(level + 1);
        dump_json_to(out, items[i], options, level + 1);
      }
      if (pretty) newline(level);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, v] : value.as_dict().entries) entries.emplace_back(json_key(k), &v);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (options.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += options.item_separator;
        if (pretty) newline(level + 1);
        dump_json_string(out, entries[i].first, options.ensure_ascii);
        out += options.key_separator;
        dump_json_to(out, *entries[i].second, options, level + 1);
      }
      if (pretty) newline(level);
      out += '}';
      return;
    }
    default:
      fail("TypeError: Object of type ", value.type_name(), " is not JSON serializable");
  }
}

}  // namespace

std::string dump_json(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  dump_json_to(out, value, options, 0);
  return out;
}

List iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List:
    case Value::Kind::Tuple:
      if (const std::string* error = value.generator_error()) throw Error(*error);
      return value.as_list();
    case Value::Kind::Dict: {
      List keys;
      for (const auto& entry : value.as_dict().entries) keys.push_back(entry.first);
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      for (char32_t c : decode_utf8(value.as_string())) {
        std::string one;
        append_utf8(one, c);
        chars.emplace_back(std::move(one));
      }
      return chars;
    }
    default: fail("TypeError: '", value.type_name(), "' object is not iterable");
  }
}

int64_t length(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: {
      const auto& s = value.as_string();
      // Continuation bytes do not start a code point.
      return static_cast<int64_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xc0) != 0x80; }));
    }
    case Value::Kind::List:
    case Value::Kind::Tuple:
      if (value.flavor() == Value::Flavor::Generator) fail("TypeError: object of type 'generator' has no len()");
      return static_cast<int64_t>(value.as_list().size());
    case Value::Kind::Dict: return static_cast<int64_t>(value.as_dict().entries.size());
    default: fail("TypeError: object of type '", value.type_name(), "' has no len()");
  }
}

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    int extra = lead < 0x80 ? 0 : lead >= 0xf0 ? 3 : lead >= 0xe0 ? 2 : lead >= 0xc0 ? 1 : -1;
    SHARDLM_CHECK(extra >= 0, "chat template: invalid UTF-8 at byte ", i);
    char32_t c = extra == 0 ? lead : lead & (0x3f >> extra);
    for (int k = 1; k <= extra; ++k) {
      SHARDLM_CHECK(i + k < text.size() && (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80,
                    "chat template: invalid UTF-8 at byte ", i);
      c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3f);
    }
    out.push_back(c);
    i += extra + 1;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

std::string encode_utf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t c : code_points) append_utf8(out, c);
  return out;
}

bool is_python_space(char32_t c) {
  // str.isspace(): what str.strip() and str.split() treat as whitespace.
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace shardlm::tokenizer::jinja
