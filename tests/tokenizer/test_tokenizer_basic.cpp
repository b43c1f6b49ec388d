// Hand-checked behaviour of the stories260K tokenizer (Llama-2 style: Prepend+Replace
// normalizer, byte fallback, TemplateProcessing BOS, Strip decoder).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace shardlm::tokenizer {
namespace {

const std::string kStories = std::string(SHARDLM_TEST_DATA_DIR) + "/tokenizers/stories260K/tokenizer.json";

TEST(TokenizerStories, EncodesWithAndWithoutBos) {
  Tokenizer tok = Tokenizer::from_file(kStories);
  EXPECT_EQ(tok.encode("Hello world", true), (std::vector<int32_t>{1, 346, 306, 414, 263, 304, 341}));
  EXPECT_EQ(tok.encode("Hello world", false), (std::vector<int32_t>{346, 306, 414, 263, 304, 341}));
  // The normalizer runs per piece between added tokens, so "x" gets its own "▁".
  EXPECT_EQ(tok.encode(" Hello  world<s>x</s>", true),
            (std::vector<int32_t>{1, 410, 346, 306, 414, 410, 263, 304, 341, 1, 410, 444, 2}));
  EXPECT_TRUE(tok.encode("", false).empty());
  EXPECT_EQ(tok.encode("", true), (std::vector<int32_t>{1}));
}

TEST(TokenizerStories, VocabularyLookups) {
  Tokenizer tok = Tokenizer::from_file(kStories);
  EXPECT_EQ(tok.vocab_size(), 512);
  EXPECT_EQ(tok.token_to_id("<s>"), 1);
  EXPECT_EQ(tok.id_to_token(2), "</s>");
  EXPECT_EQ(tok.id_to_token(100000), "");
  EXPECT_FALSE(tok.token_to_id("no such token").has_value());
  EXPECT_TRUE(tok.is_special(1));
  EXPECT_FALSE(tok.is_special(300));
  EXPECT_EQ(tok.num_special_tokens_to_add(), 1);
}

TEST(TokenizerStories, DecodeRoundTripsAndByteFallback) {
  Tokenizer tok = Tokenizer::from_file(kStories);
  std::string text = "Once upon a time, a little dog said \xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80!";
  std::vector<int32_t> ids = tok.encode(text, true);
  EXPECT_EQ(tok.decode(ids, true), text);
  EXPECT_EQ(tok.decode(ids, false), "<s> " + text);
}

TEST(IncrementalDecoder, ConcatenationEqualsDecode) {
  Tokenizer tok = Tokenizer::from_file(kStories);
  std::string text = "Once upon a time \xE4\xBD\xA0\xE5\xA5\xBD, the dog \xF0\x9F\x90\xB6 ran.";
  std::vector<int32_t> ids = tok.encode(text, true);
  for (bool skip : {true, false}) {
    IncrementalDecoder stream(tok, skip);
    std::string out;
    for (int32_t id : ids) {
      std::string piece = stream.push(id);
      EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos);
      out += piece;
    }
    out += stream.flush();
    EXPECT_EQ(out, tok.decode(ids, skip));
  }
}

}  // namespace
}  // namespace shardlm::tokenizer
