// Compile-time checks jinja2 makes on a parsed template.

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_parser.h"

namespace shardlm::tokenizer::jinja {

namespace {

// jinja2 rejects an unknown filter or test when it compiles the template, even in code
// never run, except inside an if statement or an inline if, where the error waits until
// it runs ("soft" frames in jinja2's compiler). Loops and macros inside those are strict again.
class NameValidator {
 public:
  explicit NameValidator(const std::string& source_name) : name_(source_name) {}

  void body(const Body& statements, bool soft) {
    for (const auto& s : statements) statement(*s, soft);
  }

 private:
  void statement(const Stmt& s, bool soft) {
    switch (s.kind) {
      case Stmt::Kind::If:
        for (const auto& c : s.conditions) expr(c.get(), true);
        for (const auto& b : s.bodies) body(b, true);
        return;
      case Stmt::Kind::For:
        expr(s.expr.get(), soft);
        expr(s.filter.get(), false);
        for (const auto& b : s.bodies) body(b, false);
        return;
      case Stmt::Kind::Macro:
      case Stmt::Kind::CallBlock:
        for (const auto& [name, value] : s.parameters) expr(value.get(), false);
        expr(s.expr.get(), soft);
        for (const auto& b : s.bodies) body(b, false);
        return;
      default:
        expr(s.expr.get(), soft);
        for (const auto& f : s.filters) expr(f.get(), false);
        for (const auto& [name, value] : s.assignments) expr(value.get(), soft);
        for (const auto& b : s.bodies) body(b, s.kind == Stmt::Kind::Scope && soft);
    }
  }

  void expr(const Expr* e, bool soft) {
    if (e == nullptr) return;
    if (e->kind == Expr::Kind::Condition) soft = true;
    if (!soft && e->kind == Expr::Kind::Filter && !is_known_filter(e->name)) {
      fail(location(name_, e->line, e->column), "template syntax error: no filter named '", e->name, "'");
    }
    if (!soft && e->kind == Expr::Kind::Test && !is_known_test(e->name)) {
      fail(location(name_, e->line, e->column), "template syntax error: no test named '", e->name, "'");
    }
    for (const auto& c : e->children) expr(c.get(), soft);
    for (const auto& [name, value] : e->keyword) expr(value.get(), soft);
  }

  const std::string& name_;
};

}  // namespace

void check_filter_and_test_names(const Template& tmpl) { NameValidator(tmpl.source_name).body(tmpl.body, false); }

}  // namespace shardlm::tokenizer::jinja
