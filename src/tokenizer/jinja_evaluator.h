#pragma once
// Walks a parsed template and renders it. One Evaluator renders once; a Template is
// immutable and can be rendered by many evaluators at a time.

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_value.h"

namespace shardlm::tokenizer::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{256} << 20;
  // Macro calls and expression nesting; deep enough for any real template, shallow
  // enough that a recursive macro fails with an error instead of the stack.
  int max_depth = 200;
  // Statements run and loop iterations, so that a runaway loop fails instead of hanging.
  uint64_t max_steps = 20'000'000;
};

class Evaluator {
 public:
  Evaluator(const Template& tmpl, RenderLimits limits, std::optional<std::tm> fixed_now);

  // Renders with `variables` visible as globals, after the built-in ones.
  std::string render(const std::vector<std::pair<std::string, Value>>& variables);

  // Used by filters, tests and built-in functions.
  Value call(const Value& callee, CallArgs& args);
  Value get_attribute(const Value& object, const std::string& name);
  Value get_item(const Value& object, const Value& key);
  const std::optional<std::tm>& fixed_now() const { return fixed_now_; }

 private:
  using Scope = std::unordered_map<std::string, Value>;
  struct Frame {
    std::vector<Scope> scopes;
  };
  enum class Flow { Normal, Break, Continue };

  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Stmt& stmt, std::string& out);
  void exec_for(const Stmt& stmt, std::string& out, Flow& flow);
  void exec_set(const Stmt& stmt, Value value);
  Value make_macro(const Stmt& stmt);
  Value run_macro(const Stmt& stmt, const Body& body, const std::vector<std::pair<std::string, ExprPtr>>& parameters,
                  std::vector<Scope> base_scopes, CallArgs& args);

  Value eval(const Expr& expr);
  Value eval_binary(const Expr& expr);
  Value eval_compare(const Expr& expr);
  Value eval_slice(const Value& object, const Expr& slice);
  Value eval_filter(const Expr& expr, const Value* input);
  CallArgs eval_arguments(const Expr& expr, size_t first_positional);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value value);
  void append(std::string& out, const std::string& text);
  void enter(int line, int column);

  const Template& template_;
  RenderLimits limits_;
  std::optional<std::tm> fixed_now_;
  Scope globals_;
  std::vector<Frame> frames_;
  int depth_ = 0;
  uint64_t steps_ = 0;
  int loop_depth_ = 0;
  int line_ = 0;
  int column_ = 0;
};

}  // namespace shardlm::tokenizer::jinja
