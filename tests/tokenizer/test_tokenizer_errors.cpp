// Malformed or unsupported tokenizer.json / tokenizer_config.json content must fail with
// a shardlm::Error that says where and what, never crash or silently differ.

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace shardlm::tokenizer {
namespace {

// A tiny valid BPE tokenizer; each test breaks one part of it.
std::string minimal(const std::string& model_extra = "", const std::string& top_extra = "",
                    const std::string& merges = R"(["a b"])") {
  return R"({"version": "1.0", "added_tokens": [], )" + top_extra +
         R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": )" + merges + model_extra + "}}";
}

// Loads `json` and returns the error message (empty if it loaded).
std::string load_error(const std::string& json) {
  try {
    Tokenizer::from_json(json, "test.json");
  } catch (const shardlm::Error& e) {
    return e.what();
  }
  return "";
}

// Encoding bytes that are not UTF-8 is refused, naming the first bad byte and its offset
// (the Rust library cannot receive such bytes at all: its input is a Rust string).
TEST(TokenizerErrors, InvalidUtf8IsRefusedWithTheByteOffset) {
  Tokenizer tok = Tokenizer::from_json(minimal(), "test.json");
  auto error_for = [&](const std::string& text) {
    try {
      tok.encode(text, false);
    } catch (const shardlm::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error_for("ab\xff").find("invalid byte 0xff at offset 2"), std::string::npos) << error_for("ab\xff");
  EXPECT_NE(error_for("a\xe2\x82").find("at offset 1"), std::string::npos);         // truncated sequence
  EXPECT_NE(error_for("\xc0\x80").find("invalid byte 0xc0 at offset 0"), std::string::npos);  // overlong
  EXPECT_NE(error_for("ab\xed\xa0\x80").find("at offset 2"), std::string::npos);    // a UTF-16 surrogate
  EXPECT_NE(error_for("\xf4\x90\x80\x80").find("at offset 0"), std::string::npos);  // above U+10FFFF
  EXPECT_EQ(error_for("ab\xc3\xa9").find("UTF-8"), std::string::npos);  // é is valid UTF-8
}

TEST(TokenizerErrors, MinimalLoadsAndMerges) {
  Tokenizer tok = Tokenizer::from_json(minimal(), "test.json");
  EXPECT_EQ(tok.encode("ab", false), (std::vector<int32_t>{2}));
  EXPECT_EQ(tok.encode("ba", false), (std::vector<int32_t>{1, 0}));
  // Merges as [a, b] arrays load the same.
  Tokenizer arrays = Tokenizer::from_json(minimal("", "", R"([["a", "b"]])"), "test.json");
  EXPECT_EQ(arrays.encode("abab", false), (std::vector<int32_t>{2, 2}));
}

TEST(TokenizerErrors, BadJson) {
  std::string message = load_error("{\"model\": ");
  EXPECT_NE(message.find("test.json"), std::string::npos) << message;
  EXPECT_NE(message.find("invalid JSON"), std::string::npos) << message;
  EXPECT_NE(load_error("[1, 2]").find("expected a JSON object"), std::string::npos);
}

TEST(TokenizerErrors, MissingModel) {
  std::string message = load_error(R"({"version": "1.0", "added_tokens": []})");
  EXPECT_NE(message.find("missing key \"model\""), std::string::npos) << message;
  message = load_error(R"({"model": {"type": "BPE", "merges": []}})");
  EXPECT_NE(message.find("model: missing key \"vocab\""), std::string::npos) << message;
}

TEST(TokenizerErrors, MergeNamesUnknownToken) {
  std::string message = load_error(minimal("", "", R"(["a c"])"));
  EXPECT_NE(message.find("model.merges[0]"), std::string::npos) << message;
  EXPECT_NE(message.find("\"c\""), std::string::npos) << message;
  message = load_error(minimal("", "", R"(["b a"])"));
  EXPECT_NE(message.find("merged token \"ba\""), std::string::npos) << message;
  message = load_error(minimal("", "", R"(["a b c"])"));
  EXPECT_NE(message.find("not two tokens"), std::string::npos) << message;
  message = load_error(minimal("", "", R"([42])"));
  EXPECT_NE(message.find("model.merges[0]"), std::string::npos) << message;
}

TEST(TokenizerErrors, BadRegex) {
  std::string message = load_error(minimal(
      "", R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false}, )"));
  EXPECT_NE(message.find("pre_tokenizer.pattern.Regex"), std::string::npos) << message;
  EXPECT_NE(message.find("invalid regex"), std::string::npos) << message;
  EXPECT_NE(message.find("(unclosed"), std::string::npos) << message;
}

TEST(TokenizerErrors, UnsupportedComponentsAreNamed) {
  struct Case {
    std::string top, expect;
  };
  for (const Case& c : std::vector<Case>{
           {R"("normalizer": {"type": "Precompiled", "precompiled_charsmap": ""}, )", "unsupported normalizer type \"Precompiled\""},
           {R"("pre_tokenizer": {"type": "UnicodeScripts"}, )", "unsupported pre_tokenizer type \"UnicodeScripts\""},
           {R"("decoder": {"type": "CTC"}, )", "unsupported decoder type \"CTC\""},
           {R"("post_processor": {"type": "Fancy"}, )", "unsupported post_processor type \"Fancy\""},
           {R"("pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"}]}, )",
            "pre_tokenizer.pretokenizers[0].behavior: unsupported split behavior \"Sideways\""},
           {R"("pre_tokenizer": {"type": "Metaspace", "replacement": "_", "prepend_scheme": "sometimes"}, )",
            "unsupported prepend_scheme \"sometimes\""},
       }) {
    std::string message = load_error(minimal("", c.top));
    EXPECT_NE(message.find(c.expect), std::string::npos) << message;
    EXPECT_NE(message.find("test.json"), std::string::npos) << message;
  }
  std::string message = load_error(R"({"model": {"type": "Unigram", "vocab": []}})");
  EXPECT_NE(message.find("unsupported model type \"Unigram\""), std::string::npos) << message;
  message = load_error(minimal(R"(, "dropout": 0.1)"));
  EXPECT_NE(message.find("dropout"), std::string::npos) << message;
}

TEST(TokenizerErrors, WrongTypesNameTheKey) {
  std::string message = load_error(minimal(R"(, "byte_fallback": "yes")"));
  EXPECT_NE(message.find("model.byte_fallback: expected true or false"), std::string::npos) << message;
  message = load_error(minimal("", R"("added_tokens": [{"id": -3, "content": "x"}], )"));
  EXPECT_NE(message.find("added_tokens[0].id"), std::string::npos) << message;
}

TEST(TokenizerErrors, InvalidUtf8Input) {
  Tokenizer tok = Tokenizer::from_json(minimal(), "test.json");
  EXPECT_THROW(tok.encode("a\xFF", false), shardlm::Error);
  EXPECT_THROW(tok.encode("\xE4\xBD", false), shardlm::Error);
}

TEST(TokenizerErrors, MissingFile) {
  try {
    Tokenizer::from_file("/nonexistent/tokenizer.json");
    FAIL();
  } catch (const shardlm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tokenizer.json"), std::string::npos);
  }
}

TEST(TokenizerConfigParse, ReadsTokensFlagsAndTemplates) {
  TokenizerConfig config = parse_tokenizer_config(R"({
    "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
    "eos_token": "</s>", "pad_token": null, "add_bos_token": true,
    "model_max_length": 1000000000000000019884624838656, "padding_side": "left",
    "clean_up_tokenization_spaces": false, "tokenizer_class": "LlamaTokenizerFast",
    "chat_template": [{"name": "default", "template": "{{ x }}"}, {"name": "tool_use", "template": "T"}],
    "additional_special_tokens": ["<a>", {"content": "<b>"}]})",
                                                   "tokenizer_config.json");
  EXPECT_EQ(config.bos_token, "<s>");
  EXPECT_EQ(config.eos_token, "</s>");
  EXPECT_FALSE(config.pad_token.has_value());
  EXPECT_FALSE(config.unk_token.has_value());
  EXPECT_EQ(config.add_bos_token, true);
  EXPECT_FALSE(config.add_eos_token.has_value());
  EXPECT_EQ(config.model_max_length, INT64_MAX);
  EXPECT_EQ(config.padding_side, "left");
  EXPECT_EQ(config.clean_up_tokenization_spaces, false);
  EXPECT_EQ(config.tokenizer_class, "LlamaTokenizerFast");
  EXPECT_EQ(config.chat_template, "{{ x }}");
  ASSERT_EQ(config.chat_templates.size(), 2u);
  EXPECT_EQ(config.chat_templates[1].name, "tool_use");
  EXPECT_EQ(config.additional_special_tokens, (std::vector<std::string>{"<a>", "<b>"}));

  TokenizerConfig plain = parse_tokenizer_config(R"({"chat_template": "hi", "model_max_length": 512})", "c.json");
  EXPECT_EQ(plain.chat_template, "hi");
  EXPECT_EQ(plain.model_max_length, 512);
}

TEST(TokenizerConfigParse, Errors) {
  EXPECT_THROW(parse_tokenizer_config("{", "c.json"), shardlm::Error);
  try {
    parse_tokenizer_config(R"({"add_bos_token": "yes"})", "c.json");
    FAIL();
  } catch (const shardlm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("add_bos_token"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("c.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_tokenizer_config(R"({"padding_side": "up"})", "c.json"), shardlm::Error);
  EXPECT_THROW(parse_tokenizer_config(R"({"chat_template": 3})", "c.json"), shardlm::Error);
}

}  // namespace
}  // namespace shardlm::tokenizer
