// jinja2's built-in filters and tests, plus transformers' tojson, with jinja2's argument
// names and defaults.

#include <algorithm>
#include <cmath>
#include <cfenv>

#include <utf8proc.h>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_evaluator.h"

namespace shardlm::tokenizer::jinja {

namespace {

// jinja2 filters that chat templates have no use for; they exist in jinja2, so a template
// naming them parses, and fails only if it reaches one.
const char* const kUnsupportedFilters[] = {"truncate", "wordwrap", "striptags", "urlencode", "urlize", "pprint",
                                           "xmlattr", "filesizeformat", "groupby", "random", "slice", "forceescape"};

// make_attrgetter: "a.b.0" looks up a, then b, then index 0.
Value get_path(Evaluator& evaluator, const Value& item, const Value& attribute) {
  if (attribute.is_int()) return evaluator.get_item(item, attribute);
  const std::string path = to_str(attribute);
  Value current = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && part.size() < 18 && std::all_of(part.begin(), part.end(), ::isdigit);
    current = evaluator.get_item(current, numeric ? Value(static_cast<int64_t>(std::strtoll(part.c_str(), nullptr, 10))) : Value(part));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

// The key jinja2 sorts and compares by when case_sensitive=False.
Value fold_case(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(python_lower(v.as_string())) : v;
}

List as_items(const Value& v) {
  if (v.is_none()) fail("TypeError: 'NoneType' object is not iterable");
  return iterate(v);
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return std::isalnum(static_cast<int>(c)) || c == '_';
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return (category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO) ||
         (category >= UTF8PROC_CATEGORY_ND && category <= UTF8PROC_CATEGORY_NO) || category == UTF8PROC_CATEGORY_MN ||
         category == UTF8PROC_CATEGORY_MC;
}

std::vector<std::string> split_lines(Evaluator& evaluator, const std::string& s) {
  std::vector<std::string> lines;
  CallArgs none;
  // Held by name: the range of a range-for over a temporary's member dies before the loop.
  const Value split = get_method(Value(s), "splitlines").as_callable().function(evaluator, none);
  for (const auto& line : split.as_list()) {
    lines.push_back(line.as_string());
  }
  return lines;
}

Value do_round(const Value& value, const Value& precision_value, const std::string& method) {
  if (!value.is_number()) fail("TypeError: round() needs a number, not ", value.type_name());
  const int64_t precision = precision_value.as_int();
  if (method != "common" && method != "ceil" && method != "floor") {
    fail("round: method must be common, ceil or floor");
  }
  if (value.is_int() && method == "common") return Value(value.as_int());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  double x = value.as_double() * scale;
  if (method == "ceil") {
    x = std::ceil(x);
  } else if (method == "floor") {
    x = std::floor(x);
  } else {
    // Python rounds half to even.
    const int saved = std::fegetround();
    std::fesetround(FE_TONEAREST);
    x = std::nearbyint(x);
    std::fesetround(saved);
  }
  return Value(x / scale);
}

Value do_int(const Value& value, const Value& fallback) {
  // int(Undefined) raises UndefinedError, which the filter's except clause does not catch.
  if (value.is_undefined()) fail_undefined(value);
  if (value.is_int()) return Value(value.as_int());
  if (value.kind() == Value::Kind::Float) {
    if (!std::isfinite(value.as_double())) return fallback;
    return Value(static_cast<int64_t>(std::trunc(value.as_double())));
  }
  if (value.is_string()) {
    std::string s = python_strip(value.as_string(), Value::none(), true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    if (s.empty()) return fallback;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (*end == '\0' && errno == 0) return Value(static_cast<int64_t>(v));
    const double d = std::strtod(s.c_str(), &end);
    if (*end == '\0' && std::isfinite(d)) return Value(static_cast<int64_t>(std::trunc(d)));
  }
  return fallback;
}

Value do_float(const Value& value, const Value& fallback) {
  if (value.is_undefined()) fail_undefined(value);
  if (value.is_number()) return Value(value.as_double());
  if (value.is_string()) {
    const std::string s = python_strip(value.as_string(), Value::none(), true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value(d);
  }
  return fallback;
}

List sorted(Evaluator& evaluator, List items, bool reverse, bool case_sensitive, const Value& attribute) {
  auto key = [&](const Value& v) {
    return fold_case(attribute.is_undefined() || attribute.is_none() ? v : get_path(evaluator, v, attribute), case_sensitive);
  };
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& item : items) keyed.emplace_back(key(item), item);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less_than(b.first, a.first) : less_than(a.first, b.first);
  });
  List out;
  for (auto& [k, v] : keyed) out.push_back(v);
  return out;
}

Value select_filter(Evaluator& evaluator, const std::string& name, const Value& input, CallArgs& args) {
  const bool by_attribute = name == "selectattr" || name == "rejectattr";
  const bool keep_matches = name == "select" || name == "selectattr";
  size_t next = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) fail("TypeError: ", name, "() needs an attribute name");
    attribute = args.positional[next++];
  }
  std::string test;
  if (next < args.positional.size()) test = to_str(args.positional[next++]);
  if (!args.keyword.empty()) fail("TypeError: ", name, "() takes no keyword arguments");
  List out;
  // jinja2's select family and map start with `if value:`, so a falsy input yields nothing.
  if (!truthy(input)) return Value::generator({});
  for (const auto& item : as_items(input)) {
    const Value subject = by_attribute ? get_path(evaluator, item, attribute) : item;
    bool match = false;
    if (test.empty()) {
      match = truthy(subject);
    } else {
      CallArgs test_args;
      test_args.positional.assign(args.positional.begin() + next, args.positional.end());
      match = apply_test(evaluator, test, subject, test_args);
    }
    if (match == keep_matches) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value map_filter(Evaluator& evaluator, const Value& input, CallArgs& args) {
  List out;
  if (!truthy(input)) return Value::generator({});
  const auto attribute = std::find_if(args.keyword.begin(), args.keyword.end(), [](const auto& kw) { return kw.first == "attribute"; });
  if (attribute != args.keyword.end()) {
    Value fallback;
    for (const auto& [key, value] : args.keyword) {
      if (key == "default") {
        fallback = value;
      } else if (key != "attribute") {
        fail("TypeError: map() got an unexpected keyword argument '", key, "'");
      }
    }
    if (!args.positional.empty()) fail("TypeError: map(attribute=...) takes no positional arguments");
    for (const auto& item : as_items(input)) {
      Value v = get_path(evaluator, item, attribute->second);
      out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
    }
    return Value::generator(std::move(out));
  }
  if (args.positional.empty()) fail("TypeError: map() needs a filter name or attribute=");
  const std::string filter = to_str(args.positional[0]);
  CallArgs filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  filter_args.keyword = args.keyword;
  for (const auto& item : as_items(input)) {
    CallArgs copy = filter_args;
    out.push_back(apply_filter(evaluator, filter, item, copy));
  }
  return Value::generator(std::move(out));
}

Value tojson_filter(const Value& input, CallArgs& args) {
  // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  Arguments a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions options;
  options.ensure_ascii = truthy(a.get(0));
  const Value& indent = a.get(1);
  if (indent.is_string()) {
    options.indent_string = indent.as_string();
    options.indent = options.indent_string.empty() ? 0 : -1;
  } else if (indent.is_int()) {
    options.indent = static_cast<int>(std::max<int64_t>(0, indent.as_int()));
  } else if (!indent.is_none() && !indent.is_undefined()) {
    fail("TypeError: tojson indent must be an int, a str or None");
  }
  const bool pretty = options.indent >= 0 || !options.indent_string.empty();
  options.item_separator = pretty ? "," : ", ";
  options.key_separator = ": ";
  if (!a.get(2).is_none() && !a.get(2).is_undefined()) {
    const List separators = iterate(a.get(2));
    if (separators.size() != 2 || !separators[0].is_string() || !separators[1].is_string()) {
      fail("TypeError: tojson separators must be a pair of strings");
    }
    options.item_separator = separators[0].as_string();
    options.key_separator = separators[1].as_string();
  }
  options.sort_keys = truthy(a.get(3));
  return Value(dump_json(input, options));
}

Value indent_filter(Evaluator& evaluator, const Value& input, CallArgs& args) {
  Arguments a("indent", args, {"width", "first", "blank"});
  const Value width = a.get_or(0, Value(4));
  if (!width.is_string() && !width.is_int()) fail("TypeError: indent width must be an int or a str");
  if (!width.is_string()) check_size(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), "indentation");
  const std::string indentation =
      width.is_string() ? width.as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  // jinja2 appends a newline to the value itself (`s += "\n"`), which only a str allows.
  if (input.is_undefined()) fail_undefined(input);
  if (!input.is_string()) fail("TypeError: unsupported operand type(s) for +=: '", input.type_name(), "' and 'str'");
  const std::vector<std::string> lines = split_lines(evaluator, input.as_string() + "\n");
  std::string out;
  if (truthy(a.get(2))) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i > 0 ? "\n" + indentation : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) out += "\n" + (lines[i].empty() ? "" : indentation + lines[i]);
  }
  if (truthy(a.get(1))) out = indentation + out;
  return Value(std::move(out));
}

Value aggregate(Evaluator& evaluator, const std::string& name, const Value& input, CallArgs& args) {
  Arguments a(name, args, {"case_sensitive", "attribute"});
  const bool case_sensitive = truthy(a.get(0));
  const List items = as_items(input);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& v) {
    return fold_case(a.has(1) && !a.get(1).is_none() ? get_path(evaluator, v, a.get(1)) : v, case_sensitive);
  };
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const bool better = name == "min" ? less_than(key(items[i]), key(items[best])) : less_than(key(items[best]), key(items[i]));
    if (better) best = i;
  }
  return items[best];
}

}  // namespace

namespace {
Value apply_eager_filter(Evaluator& evaluator, const std::string& name, const Value& input, CallArgs& args);
}  // namespace

Value apply_filter(Evaluator& evaluator, const std::string& name, const Value& input, CallArgs& args) {
  static const char* const generator_filters[] = {"select", "reject", "selectattr", "rejectattr", "map",
                                                  "unique", "batch",  "items"};
  const bool lazy = std::any_of(std::begin(generator_filters), std::end(generator_filters),
                                [&](const char* f) { return name == f; });
  if (!lazy) return apply_eager_filter(evaluator, name, input, args);
  try {
    return apply_eager_filter(evaluator, name, input, args);
  } catch (const Error& e) {
    return Value::failed_generator(e.what());
  }
}

namespace {

Value apply_eager_filter(Evaluator& evaluator, const std::string& name, const Value& input, CallArgs& args) {
  if (name == "tojson") return tojson_filter(input, args);
  if (name == "trim") {
    Arguments a(name, args, {"chars"});
    return Value(python_strip(to_str(input), a.get(0), true, true));
  }
  if (name == "length" || name == "count") {
    Arguments a(name, args, {});
    return Value(length(input));
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title" || name == "string" ||
      name == "safe" || name == "escape" || name == "e" || name == "wordcount") {
    Arguments a(name, args, {});
    const std::string s = to_str(input);
    if (name == "upper") return Value(python_upper(s));
    if (name == "lower") return Value(python_lower(s));
    if (name == "string") return input.is_string() ? input : Value(s);
    if (name == "safe") return input;
    if (name == "escape" || name == "e") return Value(html_escape(s));
    if (name == "capitalize") return get_method(Value(s), "capitalize").as_callable().function(evaluator, args);
    if (name == "wordcount") {
      int64_t words = 0;
      bool in_word = false;
      for (char32_t c : decode_utf8(s)) {
        const bool w = is_word_char(c);
        if (w && !in_word) ++words;
        in_word = w;
      }
      return Value(words);
    }
    // title: jinja2 capitalizes after runs of whitespace, '-', and opening brackets.
    std::u32string out;
    bool word_start = true;
    for (char32_t c : decode_utf8(s)) {
      const bool separator = is_python_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      std::string one;
      append_utf8(one, c);
      out += decode_utf8(word_start ? python_upper(one) : python_lower(one));
      word_start = separator;
    }
    return Value(encode_utf8(out));
  }
  if (name == "replace") {
    Arguments a(name, args, {"old", "new", "count"});
    CallArgs method_args;
    method_args.positional = {a.get(0), a.get(1)};
    if (a.has(2) && !a.get(2).is_none()) method_args.positional.push_back(a.get(2));
    return get_method(Value(to_str(input)), "replace").as_callable().function(evaluator, method_args);
  }
  if (name == "join") {
    Arguments a(name, args, {"d", "attribute"});
    const std::string separator = a.has(0) ? to_str(a.get(0)) : "";
    std::string out;
    bool first = true;
    for (const auto& item : as_items(input)) {
      if (!first) out += separator;
      first = false;
      out += to_str(a.has(1) ? get_path(evaluator, item, a.get(1)) : item);
    }
    return Value(std::move(out));
  }
  if (name == "first" || name == "last") {
    Arguments a(name, args, {});
    const List items = as_items(input);
    if (name == "last" && input.is_sequence() && input.flavor() == Value::Flavor::Generator) {
      fail("TypeError: 'generator' object is not reversible");
    }
    if (items.empty()) return Value::undefined(str_cat("No ", name, " item, sequence was empty."));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "default" || name == "d") {
    Arguments a(name, args, {"default_value", "boolean"});
    const bool use_default = input.is_undefined() || (truthy(a.get(1)) && !truthy(input));
    return use_default ? a.get_or(0, Value("")) : input;
  }
  if (name == "list") {
    Arguments a(name, args, {});
    return Value::list(as_items(input));
  }
  if (name == "int") {
    Arguments a(name, args, {"default", "base"});
    if (a.has(1) && a.get(1).as_int() != 10) fail("int: only base 10 is supported in chat templates");
    return do_int(input, a.get_or(0, Value(0)));
  }
  if (name == "float") {
    Arguments a(name, args, {"default"});
    return do_float(input, a.get_or(0, Value(0.0)));
  }
  if (name == "abs") {
    Arguments a(name, args, {});
    if (!input.is_number()) fail("TypeError: bad operand type for abs(): '", input.type_name(), "'");
    if (input.kind() == Value::Kind::Float) return Value(std::fabs(input.as_double()));
    if (input.as_int() == INT64_MIN) fail("integer overflow: chat templates compute with 64-bit integers");
    return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
  }
  if (name == "round") {
    Arguments a(name, args, {"precision", "method"});
    return do_round(input, a.get_or(0, Value(0)), a.has(1) ? to_str(a.get(1)) : "common");
  }
  if (name == "items") {
    Arguments a(name, args, {});
    if (input.is_undefined()) return Value::generator({});
    if (!input.is_dict()) fail("TypeError: Can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, v] : input.as_dict().entries) out.push_back(Value::tuple({k, v}));
    return Value::generator(std::move(out));
  }
  if (name == "dictsort") {
    Arguments a(name, args, {"case_sensitive", "by", "reverse"});
    if (!input.is_dict()) fail("TypeError: dictsort needs a mapping, not ", input.type_name());
    const bool by_value = a.has(1) && to_str(a.get(1)) == "value";
    if (a.has(1) && !by_value && to_str(a.get(1)) != "key") fail("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
    List pairs;
    for (const auto& [k, v] : input.as_dict().entries) pairs.push_back(Value::tuple({k, v}));
    return Value::list(sorted(evaluator, std::move(pairs), truthy(a.get(2)), truthy(a.get(0)), Value(by_value ? 1 : 0)));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    return select_filter(evaluator, name, input, args);
  }
  if (name == "map") return map_filter(evaluator, input, args);
  if (name == "unique") {
    Arguments a(name, args, {"case_sensitive", "attribute"});
    List out;
    List seen;
    for (const auto& item : as_items(input)) {
      const Value key = fold_case(a.has(1) ? get_path(evaluator, item, a.get(1)) : item, truthy(a.get(0)));
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
      seen.push_back(key);
      out.push_back(item);
    }
    return Value::generator(std::move(out));
  }
  if (name == "indent") return indent_filter(evaluator, input, args);
  if (name == "batch") {
    Arguments a(name, args, {"linecount", "fill_with"});
    const int64_t size = a.get(0).as_int();
    if (size <= 0) fail("batch: linecount must be positive");
    List out;
    List current;
    for (const auto& item : as_items(input)) {
      current.push_back(item);
      if (static_cast<int64_t>(current.size()) == size) out.push_back(Value::list(std::exchange(current, {})));
    }
    if (!current.empty()) {
      if (a.has(1) && !a.get(1).is_none()) {
        while (static_cast<int64_t>(current.size()) < size) current.push_back(a.get(1));
      }
      out.push_back(Value::list(std::move(current)));
    }
    return Value::generator(std::move(out));
  }
  if (name == "sum") {
    Arguments a(name, args, {"attribute", "start"});
    Value total = a.get_or(1, Value(0));
    for (const auto& item : as_items(input)) {
      const Value v = a.has(0) && !a.get(0).is_none() ? get_path(evaluator, item, a.get(0)) : item;
      if (!v.is_number() || !total.is_number()) fail("TypeError: sum() can only add numbers");
      int64_t sum = 0;
      if (total.is_int() && v.is_int() && __builtin_add_overflow(total.as_int(), v.as_int(), &sum)) {
        fail("integer overflow: chat templates compute with 64-bit integers");
      }
      total = total.is_int() && v.is_int() ? Value(sum) : Value(total.as_double() + v.as_double());
    }
    return total;
  }
  if (name == "min" || name == "max") return aggregate(evaluator, name, input, args);
  if (name == "sort") {
    Arguments a(name, args, {"reverse", "case_sensitive", "attribute"});
    return Value::list(sorted(evaluator, as_items(input), truthy(a.get(0)), truthy(a.get(1)), a.get(2)));
  }
  if (name == "reverse") {
    Arguments a(name, args, {});
    if (input.is_string()) {
      std::u32string chars = decode_utf8(input.as_string());
      std::reverse(chars.begin(), chars.end());
      return Value(encode_utf8(chars));
    }
    // reversed() of a list is an iterator; a generator has no reversed() and becomes a list.
    const bool was_generator = input.is_sequence() && input.flavor() == Value::Flavor::Generator;
    List items = as_items(input);
    std::reverse(items.begin(), items.end());
    return was_generator ? Value::list(std::move(items)) : Value::generator(std::move(items));
  }
  if (name == "center") {
    Arguments a(name, args, {"width"});
    CallArgs method_args;
    method_args.positional = {a.get_or(0, Value(80))};
    return get_method(Value(to_str(input)), "center").as_callable().function(evaluator, method_args);
  }
  if (name == "attr") {
    Arguments a(name, args, {"name"});
    // attr() looks up the Python attribute only, never the item: {'k': 1}|attr('k') is undefined.
    const std::string attribute = to_str(a.get(0));
    if (input.is_undefined()) fail_undefined(input);
    if (input.is_object()) return evaluator.get_attribute(input, attribute);
    Value method = get_method(input, attribute);
    if (!method.is_undefined()) return method;
    return Value::undefined(str_cat("'", input.type_name(), " object' has no attribute '", attribute, "'"));
  }
  if (name == "format") {
    if (!args.keyword.empty()) fail("format: keyword arguments are not supported in chat templates");
    return Value(percent_format(to_str(input), Value::tuple(args.positional)));
  }
  if (std::any_of(std::begin(kUnsupportedFilters), std::end(kUnsupportedFilters), [&](const char* f) { return name == f; })) {
    fail("the jinja2 filter '", name, "' is not supported in chat templates");
  }
  fail("TemplateAssertionError: no filter named '", name, "'");
}

}  // namespace

bool is_known_filter(const std::string& name) {
  static const char* const known[] = {
      "tojson", "trim", "length", "count", "upper", "lower", "capitalize", "title", "string", "safe", "escape", "e",
      "wordcount", "replace", "join", "first", "last", "default", "d", "list", "int", "float", "abs", "round", "items",
      "dictsort", "select", "reject", "selectattr", "rejectattr", "map", "unique", "indent", "batch", "sum", "min",
      "max", "sort", "reverse", "center", "attr", "format"};
  return std::any_of(std::begin(known), std::end(known), [&](const char* f) { return name == f; }) ||
         std::any_of(std::begin(kUnsupportedFilters), std::end(kUnsupportedFilters), [&](const char* f) { return name == f; });
}

bool is_known_test(const std::string& name) {
  static const char* const known[] = {
      "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number", "string", "mapping",
      "iterable", "sequence", "callable", "sameas", "escaped", "lower", "upper", "even", "odd", "divisibleby", "eq",
      "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in",
      "filter", "test"};
  return std::any_of(std::begin(known), std::end(known), [&](const char* t) { return name == t; });
}

bool apply_test(Evaluator& evaluator, const std::string& name, const Value& input, CallArgs& args) {
  auto no_arguments = [&] { Arguments a(name, args, {}); };
  auto one_argument = [&]() -> const Value& {
    if (args.positional.size() + args.keyword.size() != 1) fail("TypeError: the test '", name, "' takes one argument");
    return args.positional.empty() ? args.keyword[0].second : args.positional[0];
  };
  using K = Value::Kind;
  if (name == "defined") return no_arguments(), !input.is_undefined();
  if (name == "undefined") return no_arguments(), input.is_undefined();
  if (name == "none") return no_arguments(), input.is_none();
  if (name == "boolean") return no_arguments(), input.is_bool();
  if (name == "true") return no_arguments(), input.is_bool() && input.as_bool();
  if (name == "false") return no_arguments(), input.is_bool() && !input.as_bool();
  if (name == "integer") return no_arguments(), input.kind() == K::Int;
  if (name == "float") return no_arguments(), input.kind() == K::Float;
  if (name == "number") return no_arguments(), input.is_number();
  if (name == "string") return no_arguments(), input.is_string();
  if (name == "mapping") return no_arguments(), input.is_dict();
  // Undefined iterates as empty and has a length, so jinja2 calls it iterable and a sequence.
  if (name == "iterable") {
    no_arguments();
    return input.is_undefined() || input.is_string() || input.is_sequence() || input.is_dict();
  }
  if (name == "sequence") {
    // len() and __getitem__: generators and dict views lack one of them.
    no_arguments();
    return input.is_undefined() || input.is_string() || input.is_dict() ||
           (input.is_sequence() && (input.flavor() == Value::Flavor::Plain || input.flavor() == Value::Flavor::Range));
  }
  // Undefined defines __call__ (to raise), so Python's callable() says yes.
  if (name == "callable") return no_arguments(), input.is_callable() || input.is_undefined();
  if (name == "escaped") return no_arguments(), false;
  if (name == "lower" || name == "upper") {
    no_arguments();
    CallArgs none;
    return truthy(get_method(Value(to_str(input)), name == "lower" ? "islower" : "isupper").as_callable().function(evaluator, none));
  }
  if (name == "even" || name == "odd" || name == "divisibleby") {
    const Value divisor_value = name == "divisibleby" ? one_argument() : Value(2);
    if (name != "divisibleby") no_arguments();
    if (!input.is_number() || !divisor_value.is_number()) {
      fail("TypeError: the test '", name, "' needs a number, not ", input.type_name());
    }
    if (input.kind() == Value::Kind::Float || divisor_value.kind() == Value::Kind::Float) {
      // Python's float %: the remainder takes the divisor's sign.
      const double d = divisor_value.as_double();
      if (d == 0.0) fail("ZeroDivisionError: float modulo");
      double r = std::fmod(input.as_double(), d);
      if (r != 0.0 && ((r < 0) != (d < 0))) r += d;
      return name == "odd" ? r == 1.0 : r == 0.0;
    }
    const int64_t divisor = divisor_value.as_int();
    if (divisor == 0) fail("ZeroDivisionError: integer division or modulo by zero");
    if (divisor == -1 || divisor == 1) return name != "odd";
    const int64_t remainder = ((input.as_int() % divisor) + divisor) % divisor;
    return name == "odd" ? remainder == 1 : remainder == 0;
  }
  if (name == "sameas") {
    const Value& other = one_argument();
    if (input.kind() != other.kind()) return false;
    return input.is_none() || input.is_undefined() || ((input.is_bool() || input.kind() == K::Int) && equals(input, other)) ||
           (input.is_object() && &input.as_object() == &other.as_object());
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(input, one_argument());
  if (name == "ne" || name == "!=") return !equals(input, one_argument());
  if (name == "lt" || name == "lessthan" || name == "<") return less_than(input, one_argument());
  if (name == "le" || name == "<=") return less_than(input, one_argument()) || equals(input, one_argument());
  if (name == "gt" || name == "greaterthan" || name == ">") return less_than(one_argument(), input);
  if (name == "ge" || name == ">=") return less_than(one_argument(), input) || equals(input, one_argument());
  if (name == "in") {
    const Value& container = one_argument();
    if (container.is_string()) return input.is_string() && container.as_string().find(input.as_string()) != std::string::npos;
    if (container.is_dict()) return container.as_dict().find(input) != nullptr;
    const List items = iterate(container);
    return std::any_of(items.begin(), items.end(), [&](const Value& v) { return equals(v, input); });
  }
  if (name == "filter") return no_arguments(), is_known_filter(to_str(input));
  if (name == "test") return no_arguments(), is_known_test(to_str(input));
  fail("TemplateAssertionError: no test named '", name, "'");
}

}  // namespace shardlm::tokenizer::jinja
