// Unit tests of the chat-template interpreter's pieces: lexer whitespace rules, values,
// JSON output, errors with locations, limits, and the input preparation
// apply_chat_template does. Whole-template behaviour is in test_chat_template.cpp.

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_value.h"
#include "test_util.h"

namespace shardlm::tokenizer {
namespace {

using ::shardlm::testing::error_of;

using nlohmann::ordered_json;

const ordered_json kOneMessage = ordered_json::array({{{"role", "user"}, {"content", "hi"}}});

std::string render(const std::string& source, ordered_json variables = ordered_json::object(),
                   const ordered_json& messages = kOneMessage) {
  ChatRenderOptions options;
  options.extra_variables = std::move(variables);
  return ChatTemplate::parse(source, "test.jinja").render(messages, options);
}


std::string parse_error(const std::string& source) {
  return error_of([&] { ChatTemplate::parse(source, "test.jinja"); });
}

std::string render_error(const std::string& source, ordered_json variables = ordered_json::object()) {
  return error_of([&] { render(source, std::move(variables)); });
}

TEST(JinjaLexer, SplitsTextAndTags) {
  const auto tokens = jinja::tokenize("a{{ b.c }}d", "t");
  ASSERT_EQ(tokens.size(), 8u);
  EXPECT_EQ(tokens[0].type, jinja::TokenType::Data);
  EXPECT_EQ(tokens[0].text, "a");
  EXPECT_EQ(tokens[1].type, jinja::TokenType::VariableBegin);
  EXPECT_EQ(tokens[2].text, "b");
  EXPECT_EQ(tokens[3].text, ".");
  EXPECT_EQ(tokens[4].text, "c");
  EXPECT_EQ(tokens[5].type, jinja::TokenType::VariableEnd);
  EXPECT_EQ(tokens[6].text, "d");
  EXPECT_EQ(tokens[7].type, jinja::TokenType::End);
}

TEST(JinjaLexer, TracksLinesAndColumns) {
  const auto tokens = jinja::tokenize("x\n  {{ name }}", "t");
  ASSERT_GE(tokens.size(), 3u);
  EXPECT_EQ(tokens[2].text, "name");
  EXPECT_EQ(tokens[2].line, 2);
  EXPECT_EQ(tokens[2].column, 6);
}

TEST(JinjaLexer, DecodesStringEscapesLikePython) {
  const auto tokens = jinja::tokenize(R"({{ 'a\n\t\'\\\x41\u00e9\d' }})", "t");
  EXPECT_EQ(tokens[1].type, jinja::TokenType::String);
  EXPECT_EQ(tokens[1].text, "a\n\t'\\A\xc3\xa9\\d");
}

TEST(JinjaWhitespace, TrimBlocksEatsOneNewlineAfterABlockTag) {
  EXPECT_EQ(render("{% if true %}\nx\n{% endif %}\ny"), "x\ny");
  // Only block tags trim; a variable tag keeps the newline after it.
  EXPECT_EQ(render("{{ 'a' }}\nb"), "a\nb");
}

TEST(JinjaWhitespace, LstripBlocksRemovesIndentationBeforeBlockTags) {
  EXPECT_EQ(render("  {% if true %}x{% endif %}"), "x");
  EXPECT_EQ(render("a\n    {% if true %}x{% endif %}"), "a\nx");
  // Not before variable tags, and not when text precedes the tag on its line.
  EXPECT_EQ(render("  {{ 'x' }}"), "  x");
  EXPECT_EQ(render("a  {% if true %}x{% endif %}"), "a  x");
  EXPECT_EQ(render("a\n  {%+ if true %}x{% endif %}"), "a\n  x");
}

TEST(JinjaWhitespace, DashesStripAllWhitespaceOnTheirSide) {
  EXPECT_EQ(render("a \n\t {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(render("a\n{%- if true -%}\n\n b \n{%- endif %}"), "ab");
  EXPECT_EQ(render("a {#- note -#} b"), "ab");
}

TEST(JinjaWhitespace, DropsOneTrailingNewlineAndNormalizesLineEnds) {
  EXPECT_EQ(render("x\n"), "x");
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("a\r\nb\rc"), "a\nb\nc");
}

TEST(JinjaValues, FloatsPrintLikePythonRepr) {
  EXPECT_EQ(jinja::repr_float(0.1), "0.1");
  EXPECT_EQ(jinja::repr_float(1.0), "1.0");
  EXPECT_EQ(jinja::repr_float(-0.0), "-0.0");
  EXPECT_EQ(jinja::repr_float(1e16), "1e+16");
  EXPECT_EQ(jinja::repr_float(1.5e15), "1500000000000000.0");
  EXPECT_EQ(jinja::repr_float(1e-5), "1e-05");
  EXPECT_EQ(jinja::repr_float(0.0001), "0.0001");
  EXPECT_EQ(jinja::repr_float(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(jinja::repr_float(5e-324), "5e-324");
  EXPECT_EQ(jinja::repr_float(1.7976931348623157e308), "1.7976931348623157e+308");
}

TEST(JinjaValues, ReprQuotesStringsLikePython) {
  EXPECT_EQ(jinja::repr(jinja::Value("it's")), "\"it's\"");
  EXPECT_EQ(jinja::repr(jinja::Value("say \"hi\" it's")), "'say \"hi\" it\\'s'");
  EXPECT_EQ(jinja::repr(jinja::Value("\x01\n")), "'\\x01\\n'");
  EXPECT_EQ(jinja::repr(jinja::Value::tuple({jinja::Value(1)})), "(1,)");
}

TEST(JinjaValues, PythonEqualityAcrossNumberTypes) {
  EXPECT_TRUE(jinja::equals(jinja::Value(1), jinja::Value(1.0)));
  EXPECT_TRUE(jinja::equals(jinja::Value(true), jinja::Value(1)));
  EXPECT_FALSE(jinja::equals(jinja::Value("1"), jinja::Value(1)));
  EXPECT_FALSE(jinja::equals(jinja::Value::list({}), jinja::Value::tuple({})));
  EXPECT_THROW(jinja::less_than(jinja::Value("a"), jinja::Value(1)), Error);
}

TEST(JinjaValues, JsonDumpMatchesPythonJsonDumps) {
  const jinja::Value value = jinja::Value::from_json(
      ordered_json::parse(R"({"z": [1, 2.5, null, true], "a": "é\u0001\"", "e": {}})"));
  jinja::JsonDumpOptions compact;
  compact.item_separator = ", ";
  compact.key_separator = ": ";
  EXPECT_EQ(jinja::dump_json(value, compact), "{\"z\": [1, 2.5, null, true], \"a\": \"é\\u0001\\\"\", \"e\": {}}");
  jinja::JsonDumpOptions pretty;
  pretty.indent = 2;
  pretty.item_separator = ",";
  pretty.key_separator = ": ";
  pretty.sort_keys = true;
  pretty.ensure_ascii = true;
  EXPECT_EQ(jinja::dump_json(value, pretty),
            "{\n  \"a\": \"\\u00e9\\u0001\\\"\",\n  \"e\": {},\n  \"z\": [\n    1,\n    2.5,\n    null,\n    true\n  ]\n}");
}

TEST(JinjaValues, StringLengthAndIndexingCountCodePoints) {
  EXPECT_EQ(render("{{ s | length }} {{ s[1] }} {{ s[-1] }} {{ s[1:3] }}", {{"s", "a日本😀"}}), "4 日 😀 日本");
}

TEST(ChatTemplateErrors, SyntaxErrorsNameSourceLineAndColumn) {
  const std::string message = parse_error("line one\n{% for x in y %}\n{{ x | nope }}{% endfor %}");
  EXPECT_NE(message.find("test.jinja:3:"), std::string::npos) << message;
  EXPECT_NE(message.find("no filter named 'nope'"), std::string::npos) << message;
}

TEST(ChatTemplateErrors, UnclosedBlocksNameTheBlock) {
  const std::string message = parse_error("{% if a %}\n{% for x in y %}x{% endfor %}");
  EXPECT_NE(message.find("'if'"), std::string::npos) << message;
  EXPECT_NE(message.find("endif"), std::string::npos) << message;
  EXPECT_NE(parse_error("{{ a ").find("never closed"), std::string::npos);
  EXPECT_NE(parse_error("{# a ").find("comment"), std::string::npos);
  EXPECT_NE(parse_error("{% raw %}a").find("raw"), std::string::npos);
}

TEST(ChatTemplateErrors, UnsupportedConstructsAreNamed) {
  EXPECT_NE(parse_error("{% include 'x.jinja' %}").find("'include'"), std::string::npos);
  EXPECT_NE(parse_error("{% extends 'x.jinja' %}").find("'extends'"), std::string::npos);
  EXPECT_NE(parse_error("{% for x in y recursive %}{% endfor %}").find("recursive"), std::string::npos);
  EXPECT_NE(parse_error("{{ f(*args) }}").find("*args"), std::string::npos);
  EXPECT_NE(render_error("{{ 'a'.swapcase() }}").find("swapcase"), std::string::npos);
  EXPECT_NE(render_error("{{ 'x' | truncate(3) }}").find("truncate"), std::string::npos);
  EXPECT_NE(render_error("{{ joiner() }}").find("joiner"), std::string::npos);
}

TEST(ChatTemplateErrors, BadExpressionsFailToParse) {
  for (const char* source : {"{{ 1 + }}", "{{ (1 }}", "{{ [1, }}", "{{ {'a' 1} }}", "{% set %}", "{% if %}{% endif %}",
                             "{% for in x %}{% endfor %}", "{{ a | }}", "{{ 'unterminated }}", "{% endfor %}",
                             "{% else %}", "{{ a is }}", "{% macro m(a=1, b) %}{% endmacro %}", "{{ 1 ] }}"}) {
    EXPECT_THROW(ChatTemplate::parse(source, "test.jinja"), Error) << source;
  }
}

TEST(ChatTemplateErrors, RaiseExceptionCarriesTheMessage) {
  const std::string message = render_error("{{ raise_exception('Roles must alternate!') }}");
  EXPECT_NE(message.find("Roles must alternate!"), std::string::npos) << message;
  EXPECT_NE(message.find("test.jinja:1:"), std::string::npos) << message;
}

TEST(ChatTemplateErrors, RuntimeErrorsReadLikeJinja2s) {
  EXPECT_NE(render_error("{{ missing.attribute }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ d.a.b }}", {{"d", ordered_json::object()}}).find("has no attribute 'a'"), std::string::npos);
  EXPECT_NE(render_error("{{ 1 / 0 }}").find("ZeroDivisionError"), std::string::npos);
  EXPECT_NE(render_error("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(render_error("{% break %}").find("outside of a for loop"), std::string::npos);
  EXPECT_NE(render_error("{% set x = 1 %}{% set x.a = 2 %}").find("namespace"), std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace() %}{% set ns._secret = 1 %}").find("underscore"), std::string::npos);
}

TEST(ChatTemplateUndefined, BehavesLikeJinja2DefaultUndefined) {
  EXPECT_EQ(render("[{{ nothing }}][{{ nothing is defined }}][{{ nothing | default('d') }}][{% for x in nothing %}x{% endfor %}]"),
            "[][False][d][]");
  EXPECT_EQ(render("{{ messages[0].missing is defined }} {{ messages[5] is defined }}"), "False False");
  EXPECT_EQ(render("{{ 'yes' if nothing else 'no' }}"), "no");
}

TEST(ChatTemplateValues, GeneratorsAndViewsActLikePythons) {
  // jinja2 would print "<generator object ... at 0x...>": an address, never a prompt.
  EXPECT_NE(render_error("{{ [1, 2] | select('odd') }}").find("generator"), std::string::npos);
  EXPECT_NE(render_error("{{ [1, 2] | map('string') | length }}").find("len()"), std::string::npos);
  EXPECT_EQ(render("{% if [] | select('odd') %}always truthy{% endif %}"), "always truthy");
  EXPECT_EQ(render("{{ d.items() }} {{ range(2, 8, 3) }}", {{"d", {{"k", 1}}}}), "dict_items([('k', 1)]) range(2, 8, 3)");
}

TEST(ChatTemplateLimits, RecursionFailsWithAClearError) {
  const std::string message = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(message.find("deeper than"), std::string::npos) << message;
}

TEST(ChatTemplateLimits, DeepNestingFailsToParseInsteadOfCrashing) {
  EXPECT_NE(parse_error("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("deeper"),
            std::string::npos);
  std::string nested;
  for (int i = 0; i < 5000; ++i) nested += "{% if true %}";
  EXPECT_THROW(ChatTemplate::parse(nested, "test.jinja"), Error);
}

TEST(ChatTemplateLimits, OutputSizeIsCapped) {
  ChatRenderOptions options;
  options.max_output_bytes = 1000;
  const ChatTemplate t = ChatTemplate::parse("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", "test.jinja");
  const std::string message = error_of([&] { t.render(kOneMessage, options); });
  EXPECT_NE(message.find("exceeds 1000 bytes"), std::string::npos) << message;
  EXPECT_NE(render_error("{{ range(1000000) | length }}").find("range too big"), std::string::npos);
}

TEST(ChatTemplateLimits, RunawayLoopsAndHugeValuesFailInsteadOfHanging) {
  ChatRenderOptions options;
  options.max_steps = 100000;
  const ChatTemplate nested_loops =
      ChatTemplate::parse("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "t");
  EXPECT_NE(error_of([&] { nested_loops.render(kOneMessage, options); }).find("100000 steps"), std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}")
                .find("larger than"),
            std::string::npos);
  EXPECT_NE(render_error("{{ 'x' * 9223372036854775807 }}").find("larger than"), std::string::npos);
  EXPECT_EQ(render("{{ [1, 2, 3][::9223372036854775807] }}"), "[1]");
  EXPECT_EQ(render("{{ -9223372036854775807 // -1 }} {{ 7 % -1 }}"), "9223372036854775807 0");
  EXPECT_NE(render_error("{{ 'a,b'.split(',', 'x') }}").find("TypeError"), std::string::npos);
}

TEST(ChatTemplateInput, DropsNullValuesAndAliasesReasoningAsTransformersDoes) {
  const ordered_json messages = ordered_json::parse(
      R"([{"role": "assistant", "content": null, "reasoning": "because", "tool_calls": null}])");
  EXPECT_EQ(render("{{ messages[0].content is defined }}|{{ messages[0] | tojson }}", ordered_json::object(), messages),
            "False|{\"thinking\": \"because\", \"role\": \"assistant\", \"reasoning\": \"because\", "
            "\"reasoning_content\": \"because\"}");
}

TEST(ChatTemplateInput, RejectsMalformedInput) {
  const ChatTemplate t = ChatTemplate::parse("x", "test.jinja");
  ChatRenderOptions options;
  EXPECT_THROW(t.render(ordered_json::array(), options), Error);
  EXPECT_THROW(t.render(ordered_json::object(), options), Error);
  EXPECT_THROW(t.render(ordered_json::array({"not an object"}), options), Error);
  options.tools = ordered_json::array({"not a schema"});
  EXPECT_THROW(t.render(kOneMessage, options), Error);
  options.tools = nullptr;
  options.extra_variables = {{"messages", 1}};
  EXPECT_THROW(t.render(kOneMessage, options), Error);
}

TEST(ChatTemplateInput, SpecialTokensAndVariables) {
  const ChatTemplate t = ChatTemplate::parse(
      "{{ bos_token }}|{{ eos_token is defined }}|{{ add_generation_prompt }}|{{ tools is none }}|{{ enable_thinking }}",
      "test.jinja");
  ChatRenderOptions options;
  options.bos_token = "<s>";
  options.add_generation_prompt = true;
  options.extra_variables = {{"enable_thinking", false}};
  EXPECT_EQ(t.render(kOneMessage, options), "<s>|False|True|True|False");
}

TEST(ChatTemplateInput, AcceptsUnorderedJsonToo) {
  const nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", "hey"}}});
  const ChatTemplate t = ChatTemplate::parse("{{ messages[0].content }}", "test.jinja");
  EXPECT_EQ(t.render(messages, ChatRenderOptions{}), "hey");
}

TEST(ChatTemplateGlobals, StrftimeNowUsesThePinnedTime) {
  const ChatTemplate t = ChatTemplate::parse("{{ strftime_now('%d %b %Y') }}", "test.jinja");
  ChatRenderOptions options;
  std::tm pinned{};
  pinned.tm_year = 2024 - 1900;
  pinned.tm_mon = 6;
  pinned.tm_mday = 26;
  options.strftime_now_time = pinned;
  EXPECT_EQ(t.render(kOneMessage, options), "26 Jul 2024");
  // The weekday is derived from the date; callers need not fill it in.
  EXPECT_EQ(ChatTemplate::parse("{{ strftime_now('%A %j') }}", "t").render(kOneMessage, options), "Friday 208");
  options.strftime_now_time.reset();
  EXPECT_EQ(t.render(kOneMessage, options).size(), 11u);
}

TEST(ChatTemplateConcurrency, OneTemplateRendersOnManyThreads) {
  const ChatTemplate t = ChatTemplate::parse(
      "{% macro m(x) %}<{{ x }}>{% endmacro %}{% set ns = namespace(n=0) %}"
      "{% for i in range(200) %}{% set ns.n = ns.n + i %}{{ m(i) }}{% endfor %}{{ ns.n }}",
      "test.jinja");
  const std::string expected = t.render(kOneMessage, ChatRenderOptions{});
  std::vector<std::thread> threads;
  std::vector<std::string> results(4);
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = t.render(kOneMessage, ChatRenderOptions{}); });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& result : results) EXPECT_EQ(result, expected);
}

}  // namespace
}  // namespace shardlm::tokenizer
