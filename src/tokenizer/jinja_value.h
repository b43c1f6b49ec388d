#pragma once
// The value model of the chat-template interpreter. Templates are written against
// Python objects (jinja2 runs them on dicts, lists and str), so values follow Python's
// rules for truth, equality, ordering, str() and repr(): the rendered bytes depend on it.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardlm::tokenizer::jinja {

class Value;
using List = std::vector<Value>;

// Keyword and positional arguments of one call, as the template wrote them.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Evaluator;
using NativeFunction = std::function<Value(Evaluator&, CallArgs&)>;

struct Callable {
  std::string name;  // used in error messages
  NativeFunction function;
};

// Insertion-ordered like a Python dict: tojson and iteration must keep the caller's order.
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  const Value* find(const Value& key) const;
  const Value* find_string(std::string_view key) const;
  void set(Value key, Value value);
};

// namespace() objects and the loop variable: attribute bags, the first one assignable.
struct Object {
  std::string type_name;
  std::vector<std::pair<std::string, Value>> attributes;
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Tuple, Dict, Object, Callable };

  Value() : kind_(Kind::Undefined) {}
  static Value undefined(std::string hint) {
    Value v;
    v.string_ = std::make_shared<const std::string>(std::move(hint));
    return v;
  }
  static Value none() { return Value(Kind::None); }
  Value(bool b) : kind_(Kind::Bool) { scalar_.boolean = b; }
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v) : kind_(Kind::Int) { scalar_.integer = v; }
  Value(double v) : kind_(Kind::Float) { scalar_.floating = v; }
  Value(std::string s) : kind_(Kind::String), string_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  // Lists that Python would hold as something else. They iterate like lists, but print,
  // serialize, measure and test the way Python's objects do (a generator is always truthy
  // and has no len(); dict.items() prints as dict_items([...]); tojson rejects them all).
  enum class Flavor : uint8_t { Plain, Generator, DictKeys, DictValues, DictItems, Range };
  static Value list(List items) { return sequence(Kind::List, std::move(items)); }
  static Value generator(List items) { return flavored(std::move(items), Flavor::Generator, {}); }
  // jinja2's filters yield lazily, so an error inside one surfaces only when something
  // consumes the generator; until then it is an ordinary (truthy) generator.
  static Value failed_generator(std::string error) {
    return flavored({}, Flavor::Generator, error.empty() ? std::string("generator failed") : std::move(error));
  }
  const std::string* generator_error() const {
    return flavor_ == Flavor::Generator && string_ ? string_.get() : nullptr;
  }
  static Value dict_view(List items, Flavor flavor) { return flavored(std::move(items), flavor, {}); }
  static Value range(List items, std::string python_repr) {
    return flavored(std::move(items), Flavor::Range, std::move(python_repr));
  }
  static Value tuple(List items) { return sequence(Kind::Tuple, std::move(items)); }
  static Value dict(Dict d) {
    Value v(Kind::Dict);
    v.dict_ = std::make_shared<const Dict>(std::move(d));
    return v;
  }
  static Value object(std::shared_ptr<Object> o) {
    Value v(Kind::Object);
    v.object_ = std::move(o);
    return v;
  }
  static Value callable(std::string name, NativeFunction f) {
    Value v(Kind::Callable);
    v.callable_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(f)});
    return v;
  }
  static Value from_json(const nlohmann::ordered_json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  // Python's bool is an int; templates rely on that only through arithmetic and ==.
  bool is_int() const { return kind_ == Kind::Int || kind_ == Kind::Bool; }
  bool is_number() const { return is_int() || kind_ == Kind::Float; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_sequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
  Flavor flavor() const { return flavor_; }
  bool is_plain_sequence() const { return is_sequence() && flavor_ == Flavor::Plain; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_object() const { return kind_ == Kind::Object; }
  bool is_callable() const { return kind_ == Kind::Callable; }

  bool as_bool() const { return scalar_.boolean; }
  // Numbers only; anything else is the TypeError Python would raise.
  int64_t as_int() const {
    if (kind_ == Kind::Int) return scalar_.integer;
    if (kind_ == Kind::Bool) return scalar_.boolean ? 1 : 0;
    fail_not_a_number();
  }
  double as_double() const { return kind_ == Kind::Float ? scalar_.floating : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *string_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Object& as_object() const { return *object_; }
  const Callable& as_callable() const { return *callable_; }
  // What the template did to produce an undefined value, for the error when it is misused.
  const std::string& range_repr() const { return *string_; }
  std::string undefined_hint() const { return string_ ? *string_ : std::string("value is undefined"); }

  // Python's type name, for error messages that read like jinja2's.
  std::string type_name() const;

 private:
  explicit Value(Kind kind) : kind_(kind) {}
  [[noreturn]] void fail_not_a_number() const;
  static Value sequence(Kind kind, List items) {
    Value v(kind);
    v.list_ = std::make_shared<const List>(std::move(items));
    return v;
  }
  static Value flavored(List items, Flavor flavor, std::string python_repr) {
    Value v = sequence(Kind::List, std::move(items));
    v.flavor_ = flavor;
    if (!python_repr.empty()) v.string_ = std::make_shared<const std::string>(std::move(python_repr));
    return v;
  }

  Kind kind_;
  Flavor flavor_ = Flavor::Plain;
  union {
    bool boolean;
    int64_t integer;
    double floating;
  } scalar_{};
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<Object> object_;
  std::shared_ptr<const Callable> callable_;
};

// Strings and lists a template builds are capped, so that `s + s` in a loop fails
// with an error instead of exhausting memory.
constexpr size_t kMaxValueSize = size_t{1} << 28;
void check_size(size_t size, const char* what);

// Throws the UndefinedError jinja2 raises when an undefined value is used as a real one.
[[noreturn]] void fail_undefined(const Value& value);

bool truthy(const Value& value);
bool equals(const Value& a, const Value& b);
// Python's <: numbers, strings (code point order), sequences; anything else is an error.
bool less_than(const Value& a, const Value& b);
// str(value): what {{ value }} prints.
std::string to_str(const Value& value);
// repr(value): how a value prints inside a list or dict.
std::string repr(const Value& value);
std::string repr_float(double value);

struct JsonDumpOptions {
  int indent = -1;  // < 0: no newlines, as json.dumps(indent=None)
  std::string indent_string;  // used instead of spaces when set (indent given as a string)
  std::string item_separator;
  std::string key_separator;
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// json.dumps with Python's float repr, key order and separators.
std::string dump_json(const Value& value, const JsonDumpOptions& options);

// Items of anything a for loop can iterate: sequences, dict keys, string characters.
List iterate(const Value& value);
// len(value) for strings (in code points), sequences and dicts.
int64_t length(const Value& value);

// UTF-8 helpers: Python strings index code points.
std::u32string decode_utf8(std::string_view text);
std::string encode_utf8(std::u32string_view code_points);
void append_utf8(std::string& out, char32_t code_point);
bool is_python_space(char32_t c);
bool is_ascii(std::string_view text);

}  // namespace shardlm::tokenizer::jinja
