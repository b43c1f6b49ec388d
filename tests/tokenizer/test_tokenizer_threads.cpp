// One Tokenizer shared by several threads (the word cache is shared) gives the same ids
// as a single thread.

#include <gtest/gtest.h>

#include <thread>

#include "golden_data.h"

namespace shardlm::tokenizer::testing {
namespace {

TEST(TokenizerThreads, ConcurrentEncodeMatchesGoldens) {
  for (const char* name : {"qwen3", "stories260K"}) {
    Tokenizer tok = Tokenizer::from_file(tokenizer_dir(name) + "/tokenizer.json");  // cold cache
    const auto& expected = goldens(name)["library"];
    const auto& texts = corpus();
    std::vector<int> failures(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < 3; ++round) {
          for (size_t i = 0; i < texts.size(); ++i) {
            size_t at = (i * 7 + static_cast<size_t>(t) * 131) % texts.size();
            if (tok.encode(texts[at], true) != expected[at]["ids"].get<std::vector<int32_t>>()) ++failures[t];
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], 0) << name << " thread " << t;
  }
}

}  // namespace
}  // namespace shardlm::tokenizer::testing
