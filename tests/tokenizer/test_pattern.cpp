// Regex compatibility with the Oniguruma patterns of real tokenizer.json files.

#include <gtest/gtest.h>

#include "tokenizer/pattern.h"

namespace shardlm::tokenizer::detail {
namespace {

std::vector<std::string> matches(const std::string& pattern, std::string_view text) {
  std::string source = "test";
  Regex regex(pattern, JsonPath{&source, "pattern"});
  std::vector<Match> found;
  regex.find_all(text, found);
  std::vector<std::string> out;
  for (const Match& m : found) out.emplace_back(text.substr(m.first, m.second - m.first));
  return out;
}

TEST(Pattern, CategoriesKnowUnicode16) {
  // U+1FA75 LIGHT BLUE HEART (15.0), U+1FAE9 (16.0) are symbols; U+105C0 (16.0) a letter.
  EXPECT_EQ(matches(R"( ?[\p{P}\p{S}]+)", "a \U0001FA75\U0001FAE9b"), (std::vector<std::string>{" \U0001FA75\U0001FAE9"}));
  EXPECT_EQ(matches(R"(\p{L}+)", "1\U000105C0\U000105C1 "), (std::vector<std::string>{"\U000105C0\U000105C1"}));
  EXPECT_EQ(matches(R"([^\s\p{L}\p{N}]+)", "x\U000105C0!"), (std::vector<std::string>{"!"}));
  EXPECT_EQ(matches(R"(\P{L}+)", "ab\U000105C0 c"), (std::vector<std::string>{" "}));
}

TEST(Pattern, WideningLeavesOtherSyntaxAlone) {
  EXPECT_EQ(widen_unicode_classes(R"((?i:'s|'t)|\s+(?!\S)|[\r\n]+|\Q\p{L}\E|[]a]|[[:alpha:]])"),
            R"((?i:'s|'t)|\s+(?!\S)|[\r\n]+|\Q\p{L}\E|[]a]|[[:alpha:]])");
  std::string widened = widen_unicode_classes(R"([^\p{L}]\pN)");
  EXPECT_TRUE(widened.starts_with(R"([^\p{L}\x{)")) << widened;
  EXPECT_NE(widened.find(R"(][\p{N}\x{)"), std::string::npos) << widened;
}

TEST(Pattern, EmptyMatchesFollowOniguruma) {
  EXPECT_EQ(matches("a*", "baa"), (std::vector<std::string>{"", "aa"}));
  EXPECT_EQ(matches("x?", "ab").size(), 3u);  // empty at 0, 1 and 2
}

}  // namespace
}  // namespace shardlm::tokenizer::detail
