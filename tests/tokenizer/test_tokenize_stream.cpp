#include <gtest/gtest.h>

#include <sstream>

#include "core/error.h"
#include "golden_data.h"
#include "tokenizer/tokenize_stream.h"

namespace shardlm::tokenizer::testing {
namespace {

const PretrainedTokenizer& stories() {
  static PretrainedTokenizer tok = PretrainedTokenizer::from_directory(tokenizer_dir("stories260K"));
  return tok;
}

std::string run(const std::string& input, const TokenizeStreamOptions& options) {
  std::istringstream in(input);
  std::ostringstream out;
  run_tokenize_stream(stories(), in, out, options);
  return out.str();
}

TEST(TokenizeStream, EncodesJsonLinesAndPlainText) {
  EXPECT_EQ(run("\"Hello world\"\n\"\"\n", {}), "{\"ids\":[346,306,414,263,304,341]}\n{\"ids\":[]}\n");
  TokenizeStreamOptions options;
  options.add_special_tokens = true;
  options.plain = true;
  EXPECT_EQ(run("Hello world\n", options), "{\"ids\":[1,346,306,414,263,304,341]}\n");
}

TEST(TokenizeStream, DecodesIdLines) {
  TokenizeStreamOptions options;
  options.decode = true;
  EXPECT_EQ(run("{\"ids\":[1,346,306,414,263,304,341]}\n[2]\n", options), "\"<s> Hello world\"\n\"</s>\"\n");
  options.skip_special_tokens = true;
  EXPECT_EQ(run("{\"ids\":[1,346,306,414,263,304,341]}\n", options), "\"Hello world\"\n");
}

TEST(TokenizeStream, BadLineNamesItsNumberAfterWritingEarlierLines) {
  std::istringstream in("\"ok\"\nnot json\n\"never\"\n");
  std::ostringstream out;
  try {
    run_tokenize_stream(stories(), in, out, {});
    FAIL();
  } catch (const shardlm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(out.str(), "{\"ids\":" + nlohmann::json(stories().encode("ok", {.add_special_tokens = false}).input_ids[0]).dump() + "}\n");
  TokenizeStreamOptions decode;
  decode.decode = true;
  EXPECT_THROW(run("{\"ids\":[-1]}\n", decode), shardlm::Error);
  EXPECT_THROW(run("{\"tokens\":[]}\n", decode), shardlm::Error);
}

}  // namespace
}  // namespace shardlm::tokenizer::testing
