#pragma once
// Splits a template into text and tag tokens the way jinja2's lexer does with
// trim_blocks=True and lstrip_blocks=True (transformers' settings): whitespace control
// happens here, so the parser and evaluator never see the whitespace a tag removes.

#include <string>
#include <string_view>
#include <vector>

namespace shardlm::tokenizer::jinja {

enum class TokenType { Data, VariableBegin, VariableEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, End };

struct Token {
  TokenType type;
  std::string text;  // for String, the value after escapes
  int line = 0;
  int column = 0;
};

std::vector<Token> tokenize(std::string_view source, const std::string& source_name);

// The location prefix of every error about a template: "NAME:LINE:COLUMN: ".
std::string location(const std::string& source_name, int line, int column);

}  // namespace shardlm::tokenizer::jinja
