#include "tokenizer/jinja_parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/error.h"
#include "tokenizer/jinja_lexer.h"

namespace shardlm::tokenizer::jinja {

namespace {

bool is_one_of(const std::string& text, std::initializer_list<const char*> options) {
  return std::any_of(options.begin(), options.end(), [&](const char* o) { return text == o; });
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string source_name)
      : tokens_(std::move(tokens)), name_(std::move(source_name)) {}

  Body parse_all() {
    Body body = subparse({}, "");
    return body;
  }

 private:
  // ---- token stream -------------------------------------------------------------
  const Token& current() const { return tokens_[position_]; }
  const Token& peek(size_t ahead = 1) const { return tokens_[std::min(position_ + ahead, tokens_.size() - 1)]; }
  void advance() {
    if (position_ + 1 < tokens_.size()) ++position_;
  }
  bool is_operator(const char* op) const { return current().type == TokenType::Operator && current().text == op; }
  bool is_name(const char* name) const { return current().type == TokenType::Name && current().text == name; }
  bool skip_operator(const char* op) {
    if (!is_operator(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }

  static std::string describe(const Token& token) {
    switch (token.type) {
      case TokenType::Data: return "template text";
      case TokenType::VariableBegin: return "'{{'";
      case TokenType::VariableEnd: return "end of print statement '}}'";
      case TokenType::BlockBegin: return "'{%'";
      case TokenType::BlockEnd: return "end of statement block '%}'";
      case TokenType::String: return "string literal";
      case TokenType::Integer:
      case TokenType::Float: return str_cat("number ", token.text);
      case TokenType::End: return "end of template";
      default: return str_cat("'", token.text, "'");
    }
  }

  [[noreturn]] void fail_here(const std::string& message) const { fail_at(current(), message); }
  [[noreturn]] void fail_at(const Token& token, const std::string& message) const {
    fail(location(name_, token.line, token.column), "template syntax error: ", message);
  }

  void expect_operator(const char* op) {
    if (!skip_operator(op)) fail_here(str_cat("expected '", op, "', got ", describe(current())));
  }
  void expect_block_end(const std::string& construct) {
    if (current().type != TokenType::BlockEnd) {
      fail_here(str_cat("expected end of statement block after '", construct, "', got ", describe(current())));
    }
    advance();
  }
  std::string expect_name(const std::string& what) {
    if (current().type != TokenType::Name) fail_here(str_cat("expected ", what, ", got ", describe(current())));
    std::string name = current().text;
    advance();
    return name;
  }

  ExprPtr make(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }

  // ---- statements ------------------------------------------------------------------
  // Parses until `{% name %}` with a name in end_names; leaves the stream at that name.
  Body subparse(const std::vector<std::string>& end_names, const std::string& construct) {
    Body body;
    const Token opener = position_ > 0 ? tokens_[position_ - 1] : current();
    while (true) {
      const Token& token = current();
      if (token.type == TokenType::Data) {
        auto s = make_stmt(Stmt::Kind::Text, token);
        s->text = token.text;
        body.push_back(std::move(s));
        advance();
      } else if (token.type == TokenType::VariableBegin) {
        advance();
        auto s = make_stmt(Stmt::Kind::Output, token);
        s->expr = parse_tuple(true, {});
        if (current().type != TokenType::VariableEnd) {
          fail_here(str_cat("expected end of print statement '}}', got ", describe(current())));
        }
        advance();
        body.push_back(std::move(s));
      } else if (token.type == TokenType::BlockBegin) {
        advance();
        if (current().type == TokenType::Name &&
            std::find(end_names.begin(), end_names.end(), current().text) != end_names.end()) {
          return body;
        }
        body.push_back(parse_statement());
      } else if (token.type == TokenType::End) {
        if (!end_names.empty()) {
          std::string wanted;
          for (const auto& n : end_names) wanted += (wanted.empty() ? "'" : " or '") + n + "'";
          fail_at(opener, str_cat("unexpected end of template: the '", construct, "' block opened here is never closed (",
                                  "looking for ", wanted, ")"));
        }
        return body;
      } else {
        fail_here(str_cat("unexpected ", describe(token)));
      }
    }
  }

  StmtPtr make_stmt(Stmt::Kind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = at.line;
    s->column = at.column;
    return s;
  }

  StmtPtr parse_statement() {
    const Token token = current();
    struct DepthGuard {
      int& depth;
      explicit DepthGuard(int& d) : depth(d) { ++depth; }
      ~DepthGuard() { --depth; }
    } guard(depth_);
    if (depth_ > kMaxNesting) fail_here(str_cat("blocks nest deeper than ", kMaxNesting, " levels"));
    if (token.type != TokenType::Name) fail_here(str_cat("expected a statement name, got ", describe(token)));
    const std::string& tag = token.text;
    if (tag == "for") return parse_for();
    if (tag == "if") return parse_if();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "call") return parse_call_block();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "generation") return parse_scope("generation", "endgeneration");
    if (tag == "break" || tag == "continue") {
      advance();
      expect_block_end(tag);
      return make_stmt(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, token);
    }
    if (is_one_of(tag, {"block", "extends", "include", "import", "from", "autoescape", "do"})) {
      fail_here(str_cat("the '", tag, "' statement is not supported in chat templates"));
    }
    if (tag.rfind("end", 0) == 0 || tag == "else" || tag == "elif") {
      fail_here(str_cat("unexpected '", tag, "' with no open block that it closes"));
    }
    fail_here(str_cat("unknown tag '", tag, "'"));
  }

  Target parse_target(bool allow_attribute) {
    Target target;
    const bool parenthesized = skip_operator("(");
    target.names.push_back(expect_name("a variable name"));
    if (allow_attribute && !parenthesized && is_operator(".")) {
      advance();
      target.attribute = expect_name("an attribute name");
      return target;
    }
    while (skip_operator(",")) {
      if (current().type != TokenType::Name) break;
      target.names.push_back(expect_name("a variable name"));
    }
    if (parenthesized) expect_operator(")");
    return target;
  }

  StmtPtr parse_for() {
    auto s = make_stmt(Stmt::Kind::For, current());
    advance();
    s->target = parse_target(false);
    if (!skip_name("in")) fail_here(str_cat("expected 'in' in for loop, got ", describe(current())));
    s->expr = parse_tuple(false, {"recursive"});
    if (skip_name("if")) s->filter = parse_expression(true);
    if (is_name("recursive")) fail_here("recursive for loops are not supported");
    expect_block_end("for");
    s->bodies.push_back(subparse({"endfor", "else"}, "for"));
    if (skip_name("else")) {
      expect_block_end("else");
      s->bodies.push_back(subparse({"endfor"}, "for"));
    }
    advance();
    expect_block_end("endfor");
    return s;
  }

  StmtPtr parse_if() {
    auto s = make_stmt(Stmt::Kind::If, current());
    advance();
    while (true) {
      s->conditions.push_back(parse_tuple(false, {}));
      expect_block_end("if");
      s->bodies.push_back(subparse({"elif", "else", "endif"}, "if"));
      if (skip_name("elif")) continue;
      if (skip_name("else")) {
        expect_block_end("else");
        s->bodies.push_back(subparse({"endif"}, "if"));
      }
      advance();
      expect_block_end("endif");
      return s;
    }
  }

  StmtPtr parse_set() {
    const Token token = current();
    advance();
    Target target = parse_target(true);
    if (skip_operator("=")) {
      auto s = make_stmt(Stmt::Kind::Set, token);
      s->target = std::move(target);
      s->expr = parse_tuple(true, {});
      expect_block_end("set");
      return s;
    }
    auto s = make_stmt(Stmt::Kind::SetBlock, token);
    if (target.names.size() != 1 || !target.attribute.empty()) fail_at(token, "a block set assigns one plain name");
    s->target = std::move(target);
    while (skip_operator("|")) s->filters.push_back(parse_filter(nullptr));
    expect_block_end("set");
    s->bodies.push_back(subparse({"endset"}, "set"));
    advance();
    expect_block_end("endset");
    return s;
  }

  void parse_signature(std::vector<std::pair<std::string, ExprPtr>>& parameters) {
    expect_operator("(");
    while (!is_operator(")")) {
      if (!parameters.empty()) expect_operator(",");
      std::string name = expect_name("a parameter name");
      ExprPtr default_value;
      if (skip_operator("=")) {
        default_value = parse_expression(true);
      } else if (!parameters.empty() && parameters.back().second) {
        fail_here("a parameter without a default follows one with a default");
      }
      parameters.emplace_back(std::move(name), std::move(default_value));
    }
    advance();
  }

  StmtPtr parse_macro() {
    auto s = make_stmt(Stmt::Kind::Macro, current());
    advance();
    s->name = expect_name("a macro name");
    parse_signature(s->parameters);
    expect_block_end("macro");
    s->bodies.push_back(subparse({"endmacro"}, "macro"));
    advance();
    expect_block_end("endmacro");
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = make_stmt(Stmt::Kind::CallBlock, current());
    advance();
    if (is_operator("(")) parse_signature(s->parameters);
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::Call) fail_at(tokens_[position_ - 1], "expected a call after 'call'");
    expect_block_end("call");
    s->bodies.push_back(subparse({"endcall"}, "call"));
    advance();
    expect_block_end("endcall");
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = make_stmt(Stmt::Kind::FilterBlock, current());
    advance();
    do {
      s->filters.push_back(parse_filter(nullptr));
    } while (skip_operator("|"));
    expect_block_end("filter");
    s->bodies.push_back(subparse({"endfilter"}, "filter"));
    advance();
    expect_block_end("endfilter");
    return s;
  }

  StmtPtr parse_with() {
    auto s = make_stmt(Stmt::Kind::With, current());
    advance();
    while (current().type != TokenType::BlockEnd) {
      if (!s->assignments.empty()) expect_operator(",");
      std::string name = expect_name("a variable name");
      expect_operator("=");
      s->assignments.emplace_back(std::move(name), parse_expression(true));
    }
    expect_block_end("with");
    s->bodies.push_back(subparse({"endwith"}, "with"));
    advance();
    expect_block_end("endwith");
    return s;
  }

  StmtPtr parse_scope(const char* tag, const char* end_tag) {
    auto s = make_stmt(Stmt::Kind::Scope, current());
    advance();
    expect_block_end(tag);
    s->bodies.push_back(subparse({end_tag}, tag));
    advance();
    expect_block_end(end_tag);
    return s;
  }

  // ---- expressions -----------------------------------------------------------------
  bool at_tuple_end(const std::vector<std::string>& extra_end_names) const {
    const Token& t = current();
    if (t.type == TokenType::VariableEnd || t.type == TokenType::BlockEnd || t.type == TokenType::End) return true;
    if (t.type == TokenType::Operator && t.text == ")") return true;
    return t.type == TokenType::Name &&
           std::find(extra_end_names.begin(), extra_end_names.end(), t.text) != extra_end_names.end();
  }

  ExprPtr parse_tuple(bool with_condition, const std::vector<std::string>& extra_end_names,
                      bool explicit_parentheses = false) {
    const Token start = current();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_operator(",");
      if (at_tuple_end(extra_end_names)) break;
      items.push_back(parse_expression(with_condition));
      if (is_operator(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) fail_here(str_cat("expected an expression, got ", describe(current())));
    }
    auto e = make(Expr::Kind::Tuple, start);
    e->children = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condition) {
    return with_condition ? parse_condition() : parse_or();
  }

  ExprPtr parse_condition() {
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      const Token token = current();
      advance();
      auto e = make(Expr::Kind::Condition, token);
      ExprPtr condition = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_condition() : nullptr;
      e->children.push_back(std::move(expr));
      e->children.push_back(std::move(condition));
      e->children.push_back(std::move(otherwise));
      expr = std::move(e);
    }
    return expr;
  }

  ExprPtr binary(const std::string& op, const Token& at, ExprPtr left, ExprPtr right) {
    auto e = make(Expr::Kind::Binary, at);
    e->name = op;
    e->children.push_back(std::move(left));
    e->children.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const Token t = current();
      advance();
      left = binary("or", t, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const Token t = current();
      advance();
      left = binary("and", t, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      auto e = make(Expr::Kind::Unary, current());
      advance();
      e->name = "not";
      e->children.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token start = current();
    ExprPtr first = parse_math1();
    std::vector<std::string> operators;
    std::vector<ExprPtr> operands;
    while (true) {
      if (current().type == TokenType::Operator && is_one_of(current().text, {"==", "!=", "<", ">", "<=", ">="})) {
        operators.push_back(current().text);
        advance();
      } else if (is_name("in")) {
        operators.push_back("in");
        advance();
      } else if (is_name("not") && peek().type == TokenType::Name && peek().text == "in") {
        operators.push_back("not in");
        advance();
        advance();
      } else {
        break;
      }
      operands.push_back(parse_math1());
    }
    if (operators.empty()) return first;
    auto e = make(Expr::Kind::Compare, start);
    e->children.push_back(std::move(first));
    for (auto& o : operands) e->children.push_back(std::move(o));
    e->operators = std::move(operators);
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_operator("+") || is_operator("-")) {
      const Token t = current();
      advance();
      left = binary(t.text, t, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_operator("~")) {
      const Token t = current();
      advance();
      left = binary("~", t, std::move(left), parse_math2());
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_operator("*") || is_operator("/") || is_operator("//") || is_operator("%")) {
      const Token t = current();
      advance();
      left = binary(t.text, t, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_operator("**")) {
      const Token t = current();
      advance();
      left = binary("**", t, std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    // Nesting is bounded so that hostile input fails with an error instead of the stack.
    struct DepthGuard {
      int& depth;
      explicit DepthGuard(int& d) : depth(d) { ++depth; }
      ~DepthGuard() { --depth; }
    } guard(depth_);
    if (depth_ > kMaxNesting) fail_here(str_cat("expression nests deeper than ", kMaxNesting, " levels"));
    ExprPtr node;
    if (is_operator("-") || is_operator("+")) {
      node = make(Expr::Kind::Unary, current());
      node->name = current().text;
      advance();
      node->children.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token token = current();
    switch (token.type) {
      case TokenType::Name: {
        advance();
        auto e = make(Expr::Kind::Literal, token);
        if (is_one_of(token.text, {"true", "True"})) {
          e->value = Value(true);
        } else if (is_one_of(token.text, {"false", "False"})) {
          e->value = Value(false);
        } else if (is_one_of(token.text, {"none", "None"})) {
          e->value = Value::none();
        } else {
          e->kind = Expr::Kind::Name;
          e->name = token.text;
        }
        return e;
      }
      case TokenType::String: {
        std::string text;
        // Adjacent string literals concatenate, as in Python.
        while (current().type == TokenType::String) {
          text += current().text;
          advance();
        }
        auto e = make(Expr::Kind::Literal, token);
        e->value = Value(std::move(text));
        return e;
      }
      case TokenType::Integer: {
        advance();
        auto e = make(Expr::Kind::Literal, token);
        errno = 0;
        const long long v = std::strtoll(token.text.c_str(), nullptr, 10);
        if (errno == ERANGE) fail_at(token, str_cat("integer literal ", token.text, " does not fit in 64 bits"));
        e->value = Value(static_cast<int64_t>(v));
        return e;
      }
      case TokenType::Float: {
        advance();
        auto e = make(Expr::Kind::Literal, token);
        e->value = Value(std::strtod(token.text.c_str(), nullptr));
        return e;
      }
      default: break;
    }
    if (skip_operator("(")) {
      ExprPtr e = parse_tuple(true, {}, true);
      expect_operator(")");
      return e;
    }
    if (skip_operator("[")) {
      auto e = make(Expr::Kind::List, token);
      while (!is_operator("]")) {
        if (!e->children.empty()) {
          expect_operator(",");
          if (is_operator("]")) break;
        }
        e->children.push_back(parse_expression(true));
      }
      advance();
      return e;
    }
    if (skip_operator("{")) {
      auto e = make(Expr::Kind::Dict, token);
      while (!is_operator("}")) {
        if (!e->children.empty()) {
          expect_operator(",");
          if (is_operator("}")) break;
        }
        e->children.push_back(parse_expression(true));
        expect_operator(":");
        e->children.push_back(parse_expression(true));
      }
      advance();
      return e;
    }
    fail_here(str_cat("unexpected ", describe(token), " in an expression"));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      const Token token = current();
      if (skip_operator(".")) {
        if (current().type == TokenType::Name) {
          auto e = make(Expr::Kind::GetAttr, token);
          e->name = current().text;
          advance();
          e->children.push_back(std::move(node));
          node = std::move(e);
        } else if (current().type == TokenType::Integer) {
          auto e = make(Expr::Kind::GetItem, token);
          auto index = make(Expr::Kind::Literal, current());
          index->value = Value(static_cast<int64_t>(std::strtoll(current().text.c_str(), nullptr, 10)));
          advance();
          e->children.push_back(std::move(node));
          e->children.push_back(std::move(index));
          node = std::move(e);
        } else {
          fail_here(str_cat("expected an attribute name after '.', got ", describe(current())));
        }
      } else if (skip_operator("[")) {
        std::vector<ExprPtr> args;
        while (!is_operator("]")) {
          if (!args.empty()) {
            expect_operator(",");
            if (is_operator("]")) break;
          }
          args.push_back(parse_subscribed());
        }
        advance();
        // `x[]` subscripts with an empty tuple, as jinja2 parses it.
        auto e = make(Expr::Kind::GetItem, token);
        e->children.push_back(std::move(node));
        if (args.size() == 1) {
          e->children.push_back(std::move(args[0]));
        } else {
          auto tuple = make(Expr::Kind::Tuple, token);
          tuple->children = std::move(args);
          e->children.push_back(std::move(tuple));
        }
        node = std::move(e);
      } else if (is_operator("(")) {
        auto e = make(Expr::Kind::Call, token);
        e->children.push_back(std::move(node));
        parse_call_arguments(*e);
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscribed() {
    const Token token = current();
    auto slice = make(Expr::Kind::Slice, token);
    if (skip_operator(":")) {
      slice->children.push_back(nullptr);
    } else {
      ExprPtr node = parse_expression(true);
      if (!skip_operator(":")) return node;
      slice->children.push_back(std::move(node));
    }
    auto bound_ends = [&] { return is_operator("]") || is_operator(","); };
    if (is_operator(":") || bound_ends()) {
      slice->children.push_back(nullptr);
    } else {
      slice->children.push_back(parse_expression(true));
    }
    if (skip_operator(":")) {
      slice->children.push_back(bound_ends() ? nullptr : parse_expression(true));
    } else {
      slice->children.push_back(nullptr);
    }
    return slice;
  }

  // Appends positional arguments to e.children and keyword ones to e.keyword.
  void parse_call_arguments(Expr& e) {
    expect_operator("(");
    bool first = true;
    while (!is_operator(")")) {
      if (!first) {
        expect_operator(",");
        if (is_operator(")")) break;
      }
      first = false;
      if (is_operator("*") || is_operator("**")) fail_here("*args and **kwargs in calls are not supported");
      if (current().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == "=") {
        std::string key = current().text;
        advance();
        advance();
        e.keyword.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.keyword.empty()) fail_here("a positional argument follows a keyword argument");
        e.children.push_back(parse_expression(true));
      }
    }
    advance();
  }

  std::string parse_dotted_name(const char* what) {
    std::string name = expect_name(what);
    while (is_operator(".")) {
      advance();
      name += "." + expect_name(what);
    }
    return name;
  }

  ExprPtr parse_filter(ExprPtr input) {
    const Token token = current();
    auto e = make(Expr::Kind::Filter, token);
    e->name = parse_dotted_name("a filter name");
    e->children.push_back(std::move(input));
    if (is_operator("(")) parse_call_arguments(*e);
    return e;
  }

  ExprPtr parse_test(ExprPtr input) {
    const Token token = current();
    auto e = make(Expr::Kind::Test, token);
    e->negated = skip_name("not");
    e->name = parse_dotted_name("a test name");
    e->children.push_back(std::move(input));
    const Token& next = current();
    if (is_operator("(")) {
      parse_call_arguments(*e);
    } else if ((next.type == TokenType::Name || next.type == TokenType::String || next.type == TokenType::Integer ||
                next.type == TokenType::Float || is_operator("[") || is_operator("{")) &&
               !(next.type == TokenType::Name && is_one_of(next.text, {"else", "or", "and"}))) {
      // jinja2 reads `x is divisibleby 3` and `x is sameas false`: one argument without parentheses.
      if (is_name("is")) fail_here("tests cannot be chained with 'is'");
      e->children.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_operator("|")) {
        advance();
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        advance();
        node = parse_test(std::move(node));
      } else if (is_operator("(")) {
        auto e = make(Expr::Kind::Call, current());
        e->children.push_back(std::move(node));
        parse_call_arguments(*e);
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  static constexpr int kMaxNesting = 200;
  std::vector<Token> tokens_;
  std::string name_;
  size_t position_ = 0;
  int depth_ = 0;
};

}  // namespace

std::shared_ptr<const Template> parse_template(std::string_view source, const std::string& source_name) {
  auto t = std::make_shared<Template>();
  t->source_name = source_name;
  t->body = Parser(tokenize(source, source_name), source_name).parse_all();
  check_filter_and_test_names(*t);
  return t;
}

}  // namespace shardlm::tokenizer::jinja
