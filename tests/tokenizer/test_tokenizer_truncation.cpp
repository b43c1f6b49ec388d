// tokenizer.json's own "truncation" and "padding", which the library applies in encode
// and encode_batch. Expected ids come from tokenizers 0.23.3 (enable_truncation /
// enable_padding on synthetic_wordpiece_bert, serialized to the JSON used here).

#include <gtest/gtest.h>

#include "golden_data.h"

namespace shardlm::tokenizer::testing {
namespace {

Tokenizer with_settings(const std::string& truncation, const std::string& padding) {
  auto json = nlohmann::json::parse(read_file(tokenizer_dir("synthetic_wordpiece_bert") + "/tokenizer.json"));
  json["truncation"] = nlohmann::json::parse(truncation);
  json["padding"] = nlohmann::json::parse(padding);
  return Tokenizer::from_json(json.dump(), "synthetic_wordpiece_bert with truncation");
}

const std::vector<std::string> kTexts = {"Hello world, this is a longer sentence with many words", "short", ""};

TEST(TokenizerTruncation, LeftTruncationFixedLeftPadding) {
  Tokenizer tok = with_settings(
      R"({"direction": "Left", "max_length": 6, "strategy": "LongestFirst", "stride": 0})",
      R"({"strategy": {"Fixed": 8}, "direction": "Left", "pad_to_multiple_of": null, "pad_id": 3, "pad_type_id": 0, "pad_token": "[PAD]"})");
  EXPECT_EQ(tok.encode_batch(kTexts, true),
            (std::vector<std::vector<int32_t>>{{3, 3, 1, 874, 875, 891, 867, 2}, {3, 3, 1, 893, 874, 875, 869, 2},
                                               {3, 3, 3, 3, 3, 3, 1, 2}}));
  EXPECT_EQ(tok.encode(kTexts[0], true), (std::vector<int32_t>{3, 3, 1, 874, 875, 891, 867, 2}));
  EXPECT_EQ(tok.encode(kTexts[1], false), (std::vector<int32_t>{3, 3, 3, 61, 893, 874, 875, 869}));
}

TEST(TokenizerTruncation, RightTruncationBatchLongestToMultiple) {
  Tokenizer tok = with_settings(
      R"({"direction": "Right", "max_length": 7, "strategy": "LongestFirst", "stride": 0})",
      R"({"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": 4, "pad_id": 3, "pad_type_id": 0, "pad_token": "[PAD]"})");
  EXPECT_EQ(tok.encode_batch(kTexts, true),
            (std::vector<std::vector<int32_t>>{{1, 50, 890, 894, 894, 874, 2, 3}, {1, 61, 893, 874, 875, 869, 2, 3},
                                               {1, 2, 3, 3, 3, 3, 3, 3}}));
  EXPECT_EQ(tok.encode(kTexts[1], true), (std::vector<int32_t>{1, 61, 893, 874, 875, 869, 2, 3}));
}

TEST(TokenizerTruncation, BadSettingsAreNamed) {
  try {
    with_settings(R"({"direction": "Up", "max_length": 3})", "null");
    FAIL();
  } catch (const shardlm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncation.direction"), std::string::npos) << e.what();
  }
  EXPECT_THROW(with_settings("null", R"({"strategy": "Sometimes"})"), shardlm::Error);
}

}  // namespace
}  // namespace shardlm::tokenizer::testing
