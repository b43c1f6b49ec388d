// PretrainedTokenizer against transformers' AutoTokenizer ("auto" in goldens.json):
// ids, decodes, padding, truncation and attention masks.

#include <gtest/gtest.h>

#include "golden_data.h"
#include "tokenizer/pretrained_tokenizer.h"

namespace shardlm::tokenizer::testing {
namespace {

const PretrainedTokenizer& auto_tokenizer(const std::string& name) {
  static std::map<std::string, PretrainedTokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, PretrainedTokenizer::from_directory(tokenizer_dir(name))).first;
  return it->second;
}

class AutoGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(AutoGolden, EncodeMatches) {
  const PretrainedTokenizer& tok = auto_tokenizer(GetParam());
  const auto& expected = goldens(GetParam())["auto"];
  const auto& texts = corpus();
  ASSERT_EQ(expected.size(), texts.size());
  int failures = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    for (bool special : {true, false}) {
      auto want = expected[i][special ? "ids" : "ids_plain"].get<std::vector<int32_t>>();
      EncodeOptions options;
      options.add_special_tokens = special;
      auto got = tok.encode(texts[i], options).input_ids.at(0);
      if (got != want && ++failures <= 8) {
        ADD_FAILURE() << "line " << i + 1 << " " << show(texts[i]) << " add_special_tokens=" << special
                      << "\n  want " << show(want) << "\n  got  " << show(got);
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(AutoGolden, DecodeMatches) {
  const PretrainedTokenizer& tok = auto_tokenizer(GetParam());
  int failures = 0;
  for (const auto& entry : goldens(GetParam())["auto"]) {
    auto ids = entry["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      auto want = entry[skip ? "decoded_skip" : "decoded"].get<std::string>();
      auto got = tok.decode(ids, skip);
      if (got != want && ++failures <= 8) {
        ADD_FAILURE() << "ids " << show(ids) << " skip=" << skip << "\n  want " << show(want) << "\n  got  " << show(got);
      }
    }
  }
  for (const auto& entry : goldens(GetParam())["random_decodes"]) {
    auto ids = entry["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      auto want = entry[skip ? "auto_skip" : "auto"].get<std::string>();
      auto got = tok.decode(ids, skip);
      if (got != want && ++failures <= 8) {
        ADD_FAILURE() << "ids " << show(ids) << " skip=" << skip << "\n  want " << show(want) << "\n  got  " << show(got);
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(AutoGolden, BatchPaddingAndTruncationMatch) {
  const PretrainedTokenizer& tok = auto_tokenizer(GetParam());
  const auto& golden = goldens(GetParam());
  if (!golden.contains("batches")) GTEST_SKIP() << "goldens have no batch cases";
  for (const auto& entry : golden["batches"]) {
    const auto& o = entry["options"];
    EncodeOptions options;
    options.add_special_tokens = o.value("add_special_tokens", true);
    if (o.contains("padding")) {
      options.padding = o["padding"].is_boolean() ? (o["padding"].get<bool>() ? Padding::Longest : Padding::None)
                        : o["padding"] == "max_length" ? Padding::MaxLength
                                                       : Padding::Longest;
    }
    options.truncation = o.value("truncation", false);
    if (o.contains("max_length")) options.max_length = o["max_length"].get<int64_t>();
    if (o.contains("padding_side")) options.padding_side = o["padding_side"] == "left" ? Side::Left : Side::Right;
    if (o.contains("truncation_side")) options.truncation_side = o["truncation_side"] == "left" ? Side::Left : Side::Right;
    auto texts = entry["texts"].get<std::vector<std::string>>();
    SCOPED_TRACE(o.dump());
    if (entry.contains("error")) {
      EXPECT_THROW(tok.encode(texts, options), shardlm::Error) << entry["error"];
      continue;
    }
    BatchEncoding got = tok.encode(texts, options);
    EXPECT_EQ(got.input_ids, entry["input_ids"].get<std::vector<std::vector<int32_t>>>());
    EXPECT_EQ(got.attention_mask, entry["attention_mask"].get<std::vector<std::vector<int32_t>>>());
  }
}

// Streaming through the adjusted pipelines (Metaspace + Strip for Llama-2 style) too.
TEST_P(AutoGolden, IncrementalDecodeMatchesDecode) {
  const Tokenizer& tok = auto_tokenizer(GetParam()).tokenizer();
  int failures = 0;
  for (const auto& entry : goldens(GetParam())["auto"]) {
    auto ids = entry["ids"].get<std::vector<int32_t>>();
    IncrementalDecoder stream(tok, /*skip_special_tokens=*/true);
    std::string joined;
    for (int32_t id : ids) joined += stream.push(id);
    joined += stream.flush();
    if (joined != tok.decode(ids, true) && ++failures <= 5) ADD_FAILURE() << show(joined);
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(AllTokenizers, AutoGolden, ::testing::ValuesIn(golden_tokenizer_names()));

// What AutoTokenizer reports for these directories (transformers 5.23).
TEST(PretrainedTokenizer, ClassesAndSpecialTokens) {
  const PretrainedTokenizer& stories = auto_tokenizer("stories260K");
  EXPECT_EQ(stories.tokenizer_class(), "LlamaTokenizer");
  EXPECT_EQ(stories.bos_token_id(), 1);
  EXPECT_EQ(stories.eos_token_id(), 2);
  EXPECT_FALSE(stories.pad_token_id().has_value());
  EXPECT_EQ(stories.padding_side(), Side::Left);
  EXPECT_EQ(stories.model_max_length(), 512);

  const PretrainedTokenizer& qwen = auto_tokenizer("qwen3");
  EXPECT_EQ(qwen.tokenizer_class(), "Qwen2Tokenizer");
  EXPECT_FALSE(qwen.bos_token_id().has_value());
  EXPECT_EQ(qwen.eos_token_id(), 151645);
  EXPECT_EQ(qwen.pad_token_id(), 151643);
  EXPECT_EQ(qwen.padding_side(), Side::Right);
  EXPECT_TRUE(qwen.config().chat_template.has_value());

  const PretrainedTokenizer& deepseek = auto_tokenizer("deepseek_v3");
  EXPECT_EQ(deepseek.tokenizer_class(), "TokenizersBackend");  // LlamaTokenizerFast, but byte-level
  EXPECT_EQ(deepseek.bos_token_id(), 0);

  const PretrainedTokenizer& gemma = auto_tokenizer("gemma3");
  EXPECT_EQ(gemma.tokenizer_class(), "GemmaTokenizer");
  EXPECT_EQ(gemma.pad_token_id(), 0);
  EXPECT_TRUE(gemma.tokenizer().is_special(*gemma.tokenizer().token_to_id("<mask>")));

  EXPECT_EQ(auto_tokenizer("llama3").model_max_length(), INT64_MAX);
}

TEST(PretrainedTokenizer, FromTextsMatchesFromDirectory) {
  std::string dir = tokenizer_dir("stories260K");
  PretrainedTokenizer from_texts = PretrainedTokenizer::from_texts(
      read_file(dir + "/tokenizer.json"), "tokenizer.json", read_file(dir + "/tokenizer_config.json"), "config");
  EXPECT_EQ(from_texts.encode(" Hello  world").input_ids, auto_tokenizer("stories260K").encode(" Hello  world").input_ids);
  PretrainedTokenizer bare = PretrainedTokenizer::from_texts(read_file(dir + "/tokenizer.json"), "tokenizer.json", "", "");
  EXPECT_EQ(bare.tokenizer_class(), "TokenizersBackend");
  EXPECT_THROW(PretrainedTokenizer::from_directory("/nonexistent"), shardlm::Error);
}

}  // namespace
}  // namespace shardlm::tokenizer::testing
