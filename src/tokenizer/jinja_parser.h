#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/jinja_ast.h"

namespace shardlm::tokenizer::jinja {

// Parses with jinja2's grammar and operator precedence; throws shardlm::Error naming
// the line, column and construct on a syntax error or an unsupported statement.
std::shared_ptr<const Template> parse_template(std::string_view source, const std::string& source_name);

// Fails on a filter or test jinja2 does not know, where jinja2 fails at compile time.
void check_filter_and_test_names(const Template& tmpl);

}  // namespace shardlm::tokenizer::jinja
