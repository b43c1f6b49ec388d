#include "tokenizer/jinja_evaluator.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_lexer.h"

namespace shardlm::tokenizer::jinja {

namespace {

enum class IntOp { Add, Subtract, Multiply };

int64_t checked(IntOp op, int64_t a, int64_t b) {
  int64_t result = 0;
  const bool overflow = op == IntOp::Add        ? __builtin_add_overflow(a, b, &result)
                        : op == IntOp::Subtract ? __builtin_sub_overflow(a, b, &result)
                                                : __builtin_mul_overflow(a, b, &result);
  if (overflow) fail("integer overflow: chat templates compute with 64-bit integers");
  return result;
}

Value python_floordiv(const Value& a, const Value& b) {
  if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float) {
    const int64_t x = a.as_int();
    const int64_t y = b.as_int();
    if (y == 0) fail("ZeroDivisionError: integer division or modulo by zero");
    if (y == -1) return Value(checked(IntOp::Subtract, 0, x));
    int64_t q = x / y;
    if (x % y != 0 && ((x < 0) != (y < 0))) --q;
    return Value(q);
  }
  if (b.as_double() == 0.0) fail("ZeroDivisionError: float floor division by zero");
  return Value(std::floor(a.as_double() / b.as_double()));
}

Value python_mod(const Value& a, const Value& b) {
  if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float) {
    const int64_t x = a.as_int();
    const int64_t y = b.as_int();
    if (y == 0) fail("ZeroDivisionError: integer division or modulo by zero");
    if (y == -1) return Value(0);
    int64_t r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value(r);
  }
  const double y = b.as_double();
  if (y == 0.0) fail("ZeroDivisionError: float modulo");
  double r = std::fmod(a.as_double(), y);
  if (r != 0.0 && ((r < 0) != (y < 0))) r += y;
  return Value(r);
}

Value python_pow(const Value& a, const Value& b) {
  if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float && b.as_int() >= 0) {
    // Squaring keeps this to 64 steps whatever the exponent; overflow is still an error.
    int64_t result = 1;
    int64_t base = a.as_int();
    for (int64_t e = b.as_int(); e > 0; e >>= 1) {
      if (e & 1) result = checked(IntOp::Multiply, result, base);
      if (e > 1) base = checked(IntOp::Multiply, base, base);
    }
    return Value(result);
  }
  return Value(std::pow(a.as_double(), b.as_double()));
}

Value repeat(const Value& sequence, int64_t times) {
  if (times <= 0) return sequence.is_string() ? Value("") : sequence.kind() == Value::Kind::List ? Value::list({}) : Value::tuple({});
  const size_t unit = sequence.is_string() ? sequence.as_string().size() : sequence.as_list().size();
  if (unit > 0) check_size(static_cast<size_t>(times) > kMaxValueSize / unit ? kMaxValueSize + 1 : unit * times, "repeated value");
  if (sequence.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += sequence.as_string();
    return Value(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), sequence.as_list().begin(), sequence.as_list().end());
  return sequence.kind() == Value::Kind::List ? Value::list(std::move(out)) : Value::tuple(std::move(out));
}

[[noreturn]] void fail_operands(const std::string& op, const Value& a, const Value& b) {
  fail("TypeError: unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string()) {
        if (item.is_undefined()) fail_undefined(item);
        fail("TypeError: 'in <string>' requires string as left operand, not ", item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::List:
    case Value::Kind::Tuple:
      if (const std::string* error = container.generator_error()) throw Error(*error);
      return std::any_of(container.as_list().begin(), container.as_list().end(),
                         [&](const Value& v) { return equals(v, item); });
    case Value::Kind::Dict: return container.as_dict().find(item) != nullptr;
    default: fail("TypeError: argument of type '", container.type_name(), "' is not iterable");
  }
}

}  // namespace

Evaluator::Evaluator(const Template& tmpl, RenderLimits limits, std::optional<std::tm> fixed_now)
    : template_(tmpl), limits_(limits), fixed_now_(fixed_now) {}

std::string Evaluator::render(const std::vector<std::pair<std::string, Value>>& variables) {
  for (auto& [name, value] : builtin_globals()) globals_[name] = std::move(value);
  for (const auto& [name, value] : variables) globals_[name] = value;
  frames_.assign(1, Frame{{Scope{}}});
  std::string out;
  try {
    if (exec_body(template_.body, out) != Flow::Normal) fail("'break' or 'continue' outside of a for loop");
  } catch (const Error& e) {
    fail(location(template_.source_name, line_, column_), e.what());
  }
  return out;
}

void Evaluator::enter(int line, int column) {
  line_ = line;
  column_ = column;
}

void Evaluator::append(std::string& out, const std::string& text) {
  out += text;
  if (out.size() > limits_.max_output_bytes) {
    fail("the rendered chat template exceeds ", limits_.max_output_bytes, " bytes");
  }
}

Value Evaluator::lookup(const std::string& name) const {
  const auto& scopes = frames_.back().scopes;
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    if (auto found = it->find(name); found != it->end()) return found->second;
  }
  // Macros see the template's top-level variables, not their caller's locals.
  if (frames_.size() > 1) {
    const Scope& top = frames_.front().scopes.front();
    if (auto found = top.find(name); found != top.end()) return found->second;
  }
  if (auto found = globals_.find(name); found != globals_.end()) return found->second;
  return Value::undefined(str_cat("'", name, "' is undefined"));
}

void Evaluator::assign(const std::string& name, Value value) {
  frames_.back().scopes.back()[name] = std::move(value);
}

Evaluator::Flow Evaluator::exec_body(const Body& body, std::string& out) {
  for (const auto& stmt : body) {
    const Flow flow = exec(*stmt, out);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::exec(const Stmt& stmt, std::string& out) {
  enter(stmt.line, stmt.column);
  if (++steps_ > limits_.max_steps) fail("the chat template runs more than ", limits_.max_steps, " steps");
  switch (stmt.kind) {
    case Stmt::Kind::Text:
      append(out, stmt.text);
      return Flow::Normal;
    case Stmt::Kind::Output:
      append(out, to_str(eval(*stmt.expr)));
      return Flow::Normal;
    case Stmt::Kind::If:
      for (size_t i = 0; i < stmt.conditions.size(); ++i) {
        if (truthy(eval(*stmt.conditions[i]))) return exec_body(stmt.bodies[i], out);
      }
      if (stmt.bodies.size() > stmt.conditions.size()) return exec_body(stmt.bodies.back(), out);
      return Flow::Normal;
    case Stmt::Kind::For: {
      Flow flow = Flow::Normal;
      exec_for(stmt, out, flow);
      return flow;
    }
    case Stmt::Kind::Set:
      exec_set(stmt, eval(*stmt.expr));
      return Flow::Normal;
    case Stmt::Kind::SetBlock:
    case Stmt::Kind::FilterBlock: {
      // The body has its own scope: a set inside it is gone afterwards.
      std::string rendered;
      frames_.back().scopes.emplace_back();
      const Flow flow = exec_body(stmt.bodies[0], rendered);
      frames_.back().scopes.pop_back();
      Value value(std::move(rendered));
      for (const auto& filter : stmt.filters) value = eval_filter(*filter, &value);
      if (stmt.kind == Stmt::Kind::SetBlock) {
        exec_set(stmt, value);
      } else {
        append(out, to_str(value));
      }
      return flow;
    }
    case Stmt::Kind::Macro:
      assign(stmt.name, make_macro(stmt));
      return Flow::Normal;
    case Stmt::Kind::CallBlock: {
      // `caller()` renders the block's body where the call block stands.
      const Stmt* block = &stmt;
      std::vector<Scope> scopes = frames_.back().scopes;
      if (frames_.size() == 1) scopes.erase(scopes.begin());  // the top level stays live, as for macros
      Value caller = Value::callable("caller", [this, block, scopes](Evaluator&, CallArgs& args) {
        return run_macro(*block, block->bodies[0], block->parameters, scopes, args);
      });
      const Expr& call = *stmt.expr;
      Value callee = eval(*call.children[0]);
      CallArgs args = eval_arguments(call, 1);
      args.keyword.emplace_back("caller", caller);
      enter(stmt.line, stmt.column);
      append(out, to_str(this->call(callee, args)));
      return Flow::Normal;
    }
    case Stmt::Kind::With:
    case Stmt::Kind::Scope: {
      Scope scope;
      for (const auto& [name, expr] : stmt.assignments) scope[name] = eval(*expr);
      frames_.back().scopes.push_back(std::move(scope));
      const Flow flow = exec_body(stmt.bodies[0], out);
      frames_.back().scopes.pop_back();
      return flow;
    }
    case Stmt::Kind::Break:
    case Stmt::Kind::Continue:
      if (loop_depth_ == 0) fail("'", stmt.kind == Stmt::Kind::Break ? "break" : "continue", "' outside of a for loop");
      return stmt.kind == Stmt::Kind::Break ? Flow::Break : Flow::Continue;
  }
  return Flow::Normal;
}

void Evaluator::exec_set(const Stmt& stmt, Value value) {
  const Target& target = stmt.target;
  if (!target.attribute.empty()) {
    Value ns = lookup(target.names[0]);
    if (!ns.is_object() || ns.as_object().type_name != "Namespace") {
      fail("cannot assign attribute '", target.attribute, "' on '", target.names[0], "', which is not a namespace()");
    }
    if (target.attribute.rfind('_', 0) == 0) {
      fail("SecurityError: chat templates cannot store underscore-prefixed attributes on a namespace, but got '",
           target.attribute, "'");
    }
    ns.as_object().set(target.attribute, std::move(value));
    return;
  }
  if (target.names.size() == 1) {
    assign(target.names[0], std::move(value));
    return;
  }
  const List items = iterate(value);
  if (items.size() != target.names.size()) {
    fail("ValueError: cannot unpack ", items.size(), " values into ", target.names.size(), " names");
  }
  for (size_t i = 0; i < items.size(); ++i) assign(target.names[i], items[i]);
}

void Evaluator::exec_for(const Stmt& stmt, std::string& out, Flow& flow) {
  const Value iterable = eval(*stmt.expr);
  if (iterable.is_none()) fail("TypeError: 'NoneType' object is not iterable");
  List items = iterate(iterable);
  auto bind = [&](Scope& scope, const Value& item) {
    if (stmt.target.names.size() == 1) {
      scope[stmt.target.names[0]] = item;
      return;
    }
    const List parts = iterate(item);
    if (parts.size() != stmt.target.names.size()) {
      fail("ValueError: cannot unpack ", parts.size(), " values into ", stmt.target.names.size(), " loop variables");
    }
    for (size_t i = 0; i < parts.size(); ++i) scope[stmt.target.names[i]] = parts[i];
  };
  if (stmt.filter) {
    List kept;
    for (const auto& item : items) {
      Scope scope;
      bind(scope, item);
      frames_.back().scopes.push_back(std::move(scope));
      const bool keep = truthy(eval(*stmt.filter));
      frames_.back().scopes.pop_back();
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const auto count = static_cast<int64_t>(items.size());
  ++loop_depth_;
  // One loop object that advances, as jinja2's LoopContext does: `{% set outer = loop %}`
  // keeps seeing the current iteration.
  auto loop = std::make_shared<Object>();
  loop->type_name = "LoopContext";
  const std::weak_ptr<Object> weak_loop = loop;
  loop->attributes = {{"index", Value()},    {"index0", Value()}, {"revindex", Value()}, {"revindex0", Value()},
                      {"first", Value()},    {"last", Value()},   {"length", Value(count)}, {"depth", Value(1)},
                      {"depth0", Value(0)},  {"previtem", Value()}, {"nextitem", Value()},
                      {"cycle", Value::callable("loop.cycle", [weak_loop](Evaluator&, CallArgs& args) {
                         const auto current = weak_loop.lock();
                         if (!current) fail("loop.cycle() called after its loop ended");
                         if (args.positional.empty()) fail("TypeError: loop.cycle() needs at least one argument");
                         const int64_t index0 = current->attributes[1].second.as_int();
                         return args.positional[index0 % static_cast<int64_t>(args.positional.size())];
                       })}};
  const Value loop_value = Value::object(loop);
  // jinja2 runs the else block unless some iteration reached the end of the body: a loop
  // whose every iteration ended in break or continue runs it too.
  bool completed_an_iteration = false;
  for (int64_t i = 0; i < count; ++i) {
    if (++steps_ > limits_.max_steps) fail("the chat template runs more than ", limits_.max_steps, " steps");
    auto& a = loop->attributes;
    a[0].second = Value(i + 1);
    a[1].second = Value(i);
    a[2].second = Value(count - i);
    a[3].second = Value(count - i - 1);
    a[4].second = Value(i == 0);
    a[5].second = Value(i == count - 1);
    a[9].second = i > 0 ? items[i - 1] : Value::undefined("there is no previous item");
    a[10].second = i + 1 < count ? items[i + 1] : Value::undefined("there is no next item");
    Scope scope;
    scope["loop"] = loop_value;
    bind(scope, items[i]);
    frames_.back().scopes.push_back(std::move(scope));
    const Flow body_flow = exec_body(stmt.bodies[0], out);
    frames_.back().scopes.pop_back();
    if (body_flow == Flow::Normal) completed_an_iteration = true;
    if (body_flow == Flow::Break) break;
  }
  --loop_depth_;
  if (!completed_an_iteration && stmt.bodies.size() > 1) flow = exec_body(stmt.bodies[1], out);
}

Value Evaluator::make_macro(const Stmt& stmt) {
  // A macro closes over the scopes it is defined in (a loop's variables, an enclosing
  // macro's parameters). The template's top level stays live: it is looked up at call time.
  std::vector<Scope> closure = frames_.back().scopes;
  if (frames_.size() == 1) closure.erase(closure.begin());
  const Stmt* macro = &stmt;
  return Value::callable(stmt.name, [this, macro, closure](Evaluator&, CallArgs& args) {
    return run_macro(*macro, macro->bodies[0], macro->parameters, closure, args);
  });
}

Value Evaluator::run_macro(const Stmt& stmt, const Body& body,
                           const std::vector<std::pair<std::string, ExprPtr>>& parameters,
                           std::vector<Scope> base_scopes, CallArgs& args) {
  if (depth_ >= limits_.max_depth) fail("macro calls nest deeper than ", limits_.max_depth, " levels");
  Scope scope;
  std::vector<Value> varargs;
  Dict kwargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < parameters.size()) {
      scope[parameters[i].first] = args.positional[i];
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  for (auto& [key, value] : args.keyword) {
    const bool is_parameter = std::any_of(parameters.begin(), parameters.end(), [&key = key](const auto& p) { return p.first == key; });
    if (is_parameter) {
      if (scope.count(key)) fail("TypeError: macro '", stmt.name, "' got multiple values for argument '", key, "'");
      scope[key] = value;
    } else if (key == "caller") {
      scope[key] = value;
    } else {
      kwargs.entries.emplace_back(Value(key), value);
    }
  }
  scope["varargs"] = Value::tuple(std::move(varargs));
  scope["kwargs"] = Value::dict(std::move(kwargs));
  base_scopes.push_back(std::move(scope));
  frames_.push_back(Frame{std::move(base_scopes)});
  ++depth_;
  const int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;
  std::string out;
  try {
    // Defaults are evaluated at call time, inside the macro's scope.
    for (const auto& [name, default_value] : parameters) {
      if (frames_.back().scopes.back().count(name)) continue;
      frames_.back().scopes.back()[name] =
          default_value ? eval(*default_value)
                        : Value::undefined(str_cat("parameter '", name, "' of macro '", stmt.name, "' was not given"));
    }
    if (exec_body(body, out) != Flow::Normal) fail("'break' or 'continue' outside of a for loop");
  } catch (...) {
    frames_.pop_back();
    --depth_;
    loop_depth_ = saved_loop_depth;
    throw;
  }
  frames_.pop_back();
  --depth_;
  loop_depth_ = saved_loop_depth;
  return Value(std::move(out));
}

Value Evaluator::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_callable()) fail("TypeError: '", callee.type_name(), "' object is not callable");
  return callee.as_callable().function(*this, args);
}

CallArgs Evaluator::eval_arguments(const Expr& expr, size_t first_positional) {
  CallArgs args;
  for (size_t i = first_positional; i < expr.children.size(); ++i) args.positional.push_back(eval(*expr.children[i]));
  for (const auto& [key, value] : expr.keyword) args.keyword.emplace_back(key, eval(*value));
  return args;
}

Value Evaluator::get_attribute(const Value& object, const std::string& name) {
  // jinja2 tries the Python attribute first, then the item: `d.items` is the method.
  switch (object.kind()) {
    case Value::Kind::Undefined: fail_undefined(object);
    case Value::Kind::Object: {
      if (const Value* found = object.as_object().find(name)) return *found;
      break;
    }
    case Value::Kind::Dict: {
      Value method = get_method(object, name);
      if (!method.is_undefined()) return method;
      if (const Value* found = object.as_dict().find_string(name)) return *found;
      break;
    }
    case Value::Kind::String:
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      Value method = get_method(object, name);
      if (!method.is_undefined()) return method;
      break;
    }
    default: break;
  }
  return Value::undefined(str_cat("'", object.type_name(), " object' has no attribute '", name, "'"));
}

Value Evaluator::get_item(const Value& object, const Value& key) {
  // jinja2 tries the item first, then the attribute.
  switch (object.kind()) {
    case Value::Kind::Undefined: fail_undefined(object);
    case Value::Kind::Dict:
      if (const Value* found = object.as_dict().find(key)) return *found;
      break;
    case Value::Kind::List:
    case Value::Kind::Tuple:
    case Value::Kind::String:
      // Generators and dict views are not subscriptable; jinja2 turns the TypeError into undefined.
      if (object.is_sequence() && object.flavor() != Value::Flavor::Plain && object.flavor() != Value::Flavor::Range) {
        return Value::undefined(str_cat("'", object.type_name(), "' object is not subscriptable"));
      }
      if (key.is_int()) {
        const int64_t size = length(object);
        int64_t index = key.as_int();
        if (index < 0) index += size;
        if (index < 0 || index >= size) {
          return Value::undefined(str_cat("'", object.type_name(), " object' has no element ", key.as_int()));
        }
        if (object.is_string()) {
          const std::u32string chars = decode_utf8(object.as_string());
          return Value(encode_utf8(std::u32string_view(chars).substr(index, 1)));
        }
        return object.as_list()[index];
      }
      break;
    default: break;
  }
  if (key.is_string()) return get_attribute(object, key.as_string());
  return Value::undefined(str_cat("'", object.type_name(), " object' has no element ", repr(key)));
}

Value Evaluator::eval_slice(const Value& object, const Expr& slice) {
  if (object.is_undefined()) fail_undefined(object);
  auto bound = [&](const ExprPtr& e, bool& given) -> int64_t {
    given = false;
    if (!e) return 0;
    const Value v = eval(*e);
    if (v.is_none()) return 0;
    if (!v.is_int()) fail("TypeError: slice indices must be integers or None");
    given = true;
    return v.as_int();
  };
  bool has_start = false;
  bool has_stop = false;
  bool has_step = false;
  int64_t start = bound(slice.children[0], has_start);
  int64_t stop = bound(slice.children[1], has_stop);
  int64_t step = bound(slice.children[2], has_step);
  if (!has_step) step = 1;
  if (step == 0) fail("ValueError: slice step cannot be zero");
  const bool is_string = object.is_string();
  if (object.is_sequence() && object.flavor() != Value::Flavor::Plain && object.flavor() != Value::Flavor::Range) {
    fail("TypeError: '", object.type_name(), "' object is not subscriptable");
  }
  // Unlike x[i], jinja2 compiles x[a:b] to a plain Python slice, so errors are not softened.
  if (!is_string && !object.is_sequence()) {
    if (object.is_dict()) fail("TypeError: unhashable type: 'slice'");
    fail("TypeError: '", object.type_name(), "' object is not subscriptable");
  }
  const std::u32string chars = is_string ? decode_utf8(object.as_string()) : std::u32string();
  const int64_t size = is_string ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(object.as_list().size());
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](int64_t v, bool given, int64_t missing) {
    if (!given) return missing;
    if (v < 0) {
      v += size;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= size) {
      v = step < 0 ? size - 1 : size;
    }
    return v;
  };
  start = adjust(start, has_start, step < 0 ? size - 1 : 0);
  stop = adjust(stop, has_stop, step < 0 ? -1 : size);
  std::u32string out_chars;
  List out_items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (is_string) {
      out_chars.push_back(chars[i]);
    } else {
      out_items.push_back(object.as_list()[i]);
    }
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  if (is_string) return Value(encode_utf8(out_chars));
  return object.kind() == Value::Kind::List ? Value::list(std::move(out_items)) : Value::tuple(std::move(out_items));
}

Value Evaluator::eval_filter(const Expr& expr, const Value* input) {
  Value value = input ? *input : eval(*expr.children[0]);
  CallArgs args = eval_arguments(expr, 1);
  enter(expr.line, expr.column);
  return apply_filter(*this, expr.name, value, args);
}

Value Evaluator::eval(const Expr& expr) {
  enter(expr.line, expr.column);
  switch (expr.kind) {
    case Expr::Kind::Literal: return expr.value;
    case Expr::Kind::Name: return lookup(expr.name);
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      List items;
      for (const auto& child : expr.children) items.push_back(eval(*child));
      return expr.kind == Expr::Kind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case Expr::Kind::Dict: {
      Dict d;
      for (size_t i = 0; i + 1 < expr.children.size(); i += 2) {
        Value key = eval(*expr.children[i]);
        if (!(key.is_string() || key.is_number() || key.is_none() || key.kind() == Value::Kind::Tuple)) {
          fail("TypeError: unhashable type: '", key.type_name(), "'");
        }
        d.set(std::move(key), eval(*expr.children[i + 1]));
      }
      return Value::dict(std::move(d));
    }
    case Expr::Kind::Unary: {
      const Value operand = eval(*expr.children[0]);
      if (expr.name == "not") return Value(!truthy(operand));
      if (operand.is_undefined()) fail_undefined(operand);
      if (!operand.is_number()) fail("TypeError: bad operand type for unary ", expr.name, ": '", operand.type_name(), "'");
      if (expr.name == "+") return operand.is_bool() ? Value(operand.as_int()) : operand;
      if (operand.kind() == Value::Kind::Float) return Value(-operand.as_double());
      return Value(checked(IntOp::Subtract, 0, operand.as_int()));
    }
    case Expr::Kind::Binary: return eval_binary(expr);
    case Expr::Kind::Compare: return eval_compare(expr);
    case Expr::Kind::Condition: {
      if (truthy(eval(*expr.children[1]))) return eval(*expr.children[0]);
      if (expr.children[2]) return eval(*expr.children[2]);
      return Value::undefined(str_cat("the inline if-expression on line ", expr.line,
                                      " evaluated to false and no else section was defined"));
    }
    case Expr::Kind::GetAttr: {
      const Value object = eval(*expr.children[0]);
      enter(expr.line, expr.column);
      return get_attribute(object, expr.name);
    }
    case Expr::Kind::GetItem: {
      const Value object = eval(*expr.children[0]);
      if (expr.children[1]->kind == Expr::Kind::Slice) return eval_slice(object, *expr.children[1]);
      const Value key = eval(*expr.children[1]);
      enter(expr.line, expr.column);
      return get_item(object, key);
    }
    case Expr::Kind::Slice: fail("a slice is only valid inside [ ]");
    case Expr::Kind::Call: {
      const Value callee = eval(*expr.children[0]);
      CallArgs args = eval_arguments(expr, 1);
      enter(expr.line, expr.column);
      if (depth_ >= limits_.max_depth) fail("calls nest deeper than ", limits_.max_depth, " levels");
      return call(callee, args);
    }
    case Expr::Kind::Filter: return eval_filter(expr, nullptr);
    case Expr::Kind::Test: {
      const Value value = eval(*expr.children[0]);
      CallArgs args = eval_arguments(expr, 1);
      enter(expr.line, expr.column);
      return Value(apply_test(*this, expr.name, value, args) != expr.negated);
    }
  }
  return Value();
}

Value Evaluator::eval_binary(const Expr& expr) {
  const std::string& op = expr.name;
  const Value left = eval(*expr.children[0]);
  // `and` / `or` return an operand, as in Python.
  if (op == "and") return truthy(left) ? eval(*expr.children[1]) : left;
  if (op == "or") return truthy(left) ? left : eval(*expr.children[1]);
  const Value right = eval(*expr.children[1]);
  enter(expr.line, expr.column);
  if (op == "~") {
    std::string joined = to_str(left) + to_str(right);
    check_size(joined.size(), "string");
    return Value(std::move(joined));
  }
  if (left.is_undefined()) fail_undefined(left);
  if (right.is_undefined()) fail_undefined(right);
  const bool ints = left.is_int() && right.is_int();
  const bool numbers = left.is_number() && right.is_number();
  if (op == "+") {
    if (ints) return Value(checked(IntOp::Add, left.as_int(), right.as_int()));
    if (numbers) return Value(left.as_double() + right.as_double());
    if (left.is_string() && right.is_string()) {
      check_size(left.as_string().size() + right.as_string().size(), "string");
      return Value(left.as_string() + right.as_string());
    }
    if (left.is_plain_sequence() && right.is_plain_sequence() && left.kind() == right.kind()) {
      check_size(left.as_list().size() + right.as_list().size(), "list");
      List items = left.as_list();
      items.insert(items.end(), right.as_list().begin(), right.as_list().end());
      return left.kind() == Value::Kind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    if (left.is_string()) {
      fail("TypeError: can only concatenate str (not \"", right.type_name(), "\") to str");
    }
    fail_operands(op, left, right);
  }
  if (op == "-") {
    if (ints) return Value(checked(IntOp::Subtract, left.as_int(), right.as_int()));
    if (numbers) return Value(left.as_double() - right.as_double());
    fail_operands(op, left, right);
  }
  if (op == "*") {
    if (ints) return Value(checked(IntOp::Multiply, left.as_int(), right.as_int()));
    if (numbers) return Value(left.as_double() * right.as_double());
    if ((left.is_string() || left.is_plain_sequence()) && right.is_int()) return repeat(left, right.as_int());
    if ((right.is_string() || right.is_plain_sequence()) && left.is_int()) return repeat(right, left.as_int());
    fail_operands(op, left, right);
  }
  if (op == "/") {
    if (!numbers) fail_operands(op, left, right);
    if (right.as_double() == 0.0) fail("ZeroDivisionError: division by zero");
    return Value(left.as_double() / right.as_double());
  }
  if (op == "//") {
    if (!numbers) fail_operands(op, left, right);
    return python_floordiv(left, right);
  }
  if (op == "%") {
    if (left.is_string()) return Value(percent_format(left.as_string(), right));
    if (!numbers) fail_operands(op, left, right);
    return python_mod(left, right);
  }
  if (op == "**") {
    if (!numbers) fail_operands(op, left, right);
    return python_pow(left, right);
  }
  fail("unsupported operator '", op, "'");
}

Value Evaluator::eval_compare(const Expr& expr) {
  Value left = eval(*expr.children[0]);
  for (size_t i = 0; i < expr.operators.size(); ++i) {
    Value right = eval(*expr.children[i + 1]);
    enter(expr.line, expr.column);
    const std::string& op = expr.operators[i];
    bool result = false;
    if (op == "==") {
      result = equals(left, right);
    } else if (op == "!=") {
      result = !equals(left, right);
    } else if (op == "<") {
      result = less_than(left, right);
    } else if (op == ">") {
      result = less_than(right, left);
    } else if (op == "<=") {
      result = less_than(left, right) || equals(left, right);
    } else if (op == ">=") {
      result = less_than(right, left) || equals(left, right);
    } else if (op == "in") {
      result = contains(right, left);
    } else {
      result = !contains(right, left);
    }
    if (!result) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

}  // namespace shardlm::tokenizer::jinja
