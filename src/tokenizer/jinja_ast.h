#pragma once
// The syntax tree the parser builds and the evaluator walks.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace shardlm::tokenizer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,    // value
    Name,       // name
    List,       // children
    Tuple,      // children
    Dict,       // children: key, value, key, value, ...
    Unary,      // name: "-", "+", "not"; children[0]
    Binary,     // name: "+", "-", "*", "/", "//", "%", "**", "~", "and", "or"
    Compare,    // children: operands; operators: the comparisons between them
    Condition,  // children: true branch, condition, false branch (may be null)
    GetAttr,    // children[0].name
    GetItem,    // children[0][children[1]]
    Slice,      // children: start, stop, step (each may be null)
    Call,       // children[0](children[1..], keyword)
    Filter,     // name; children[0] is the input, then arguments
    Test,       // name; children[0] is the input, then arguments; negated
  };

  Kind kind;
  int line = 0;
  int column = 0;
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  std::vector<std::string> operators;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Where a set statement or for loop stores values: a name, a tuple of names, or ns.attr.
struct Target {
  std::vector<std::string> names;  // more than one: unpack a sequence
  std::string attribute;           // set: `ns.attr = ...` (names has the one namespace)
};

struct Stmt {
  enum class Kind {
    Text,      // text
    Output,    // expr
    If,        // conditions[i] guards bodies[i]; a trailing extra body is the else
    For,       // target in expr [if filter]; bodies[0] loop, bodies[1] else
    Set,       // target = expr
    SetBlock,  // target = rendered bodies[0], through filters (Filter exprs with null input)
    Macro,     // name(parameters) bodies[0]
    CallBlock, // expr called with `caller` bound to bodies[0]
    FilterBlock,  // bodies[0] rendered, then passed through filters
    With,      // assignments, bodies[0]
    Scope,     // bodies[0] (jinja's generation blocks render their body unchanged)
    Break,
    Continue,
  };

  Kind kind;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;  // For: the `if` condition
  Target target;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  std::vector<ExprPtr> filters;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> parameters;  // macro / call-block parameters and defaults
  std::vector<std::pair<std::string, ExprPtr>> assignments;  // with
};

struct Template {
  std::string source_name;
  Body body;
};

}  // namespace shardlm::tokenizer::jinja
