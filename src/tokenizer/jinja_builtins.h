#pragma once
// Filters, tests, methods of Python's str/dict/list, and global functions: the parts of
// jinja2 and Python that chat templates call by name.

#include <initializer_list>
#include <string>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace shardlm::tokenizer::jinja {

class Evaluator;

// Binds a call's arguments to parameter names the way Python does, and rejects
// arguments the function does not take.
class Arguments {
 public:
  Arguments(const std::string& function, const CallArgs& args, std::initializer_list<const char*> names,
            bool extra_positional = false);
  bool has(size_t index) const { return bound_[index] != nullptr; }
  const Value& get(size_t index) const;  // the argument, or undefined when not given
  Value get_or(size_t index, Value fallback) const { return has(index) ? *bound_[index] : fallback; }
  // Positional arguments beyond the named ones (only with extra_positional).
  const std::vector<Value>& rest() const { return rest_; }

 private:
  std::vector<const Value*> bound_;
  std::vector<Value> rest_;
  Value undefined_;
};

Value apply_filter(Evaluator& evaluator, const std::string& name, const Value& input, CallArgs& args);
bool apply_test(Evaluator& evaluator, const std::string& name, const Value& input, CallArgs& args);
bool is_known_test(const std::string& name);
bool is_known_filter(const std::string& name);

// A bound method of a str, dict or list (or undefined when the type has no such method).
Value get_method(const Value& receiver, const std::string& name);

// range, dict, namespace, raise_exception, strftime_now: the globals transformers defines.
std::vector<std::pair<std::string, Value>> builtin_globals();

// Python's `%` on a str: printf-style formatting.
std::string percent_format(const std::string& format, const Value& arguments);

// Python str operations the filters and methods share.
std::string python_strip(const std::string& text, const Value& chars, bool left, bool right);
std::string python_lower(const std::string& text);
std::string python_upper(const std::string& text);

}  // namespace shardlm::tokenizer::jinja
