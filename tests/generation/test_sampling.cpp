// Logits processors on fixed logits, checked against what transformers documents
// (and computes) for each, plus reproducibility of seeded sampling.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "generation/generator.h"
#include "generation/sampling.h"

namespace shardlm::generation {
namespace {

constexpr float minus_infinity = -std::numeric_limits<float>::infinity();

TEST(RepetitionPenalty, DividesPositiveAndMultipliesNegativeScoresOnce) {
  std::vector<float> logits{2.0f, -1.0f, 0.5f, 3.0f};
  std::vector<std::pair<int64_t, float>> scratch;
  std::vector<int64_t> history{0, 1, 0, 0};  // token 0 seen three times: penalized once
  apply_repetition_penalty(logits, history, 2.0f, scratch);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f}));
}

// OpenAI's definition: each generated occurrence costs frequency, any occurrence presence
// once; the prompt's tokens are not counted.
TEST(PresenceFrequencyPenalty, SubtractsPerOccurrenceAndOncePerToken) {
  std::vector<float> logits{2.0f, -1.0f, 0.5f, 3.0f};
  std::vector<int64_t> scratch, generated{3, 0, 3, 3};
  apply_presence_frequency_penalty(logits, generated, 0.5f, 0.25f, scratch);
  EXPECT_EQ(logits, (std::vector<float>{2.0f - 0.75f, -1.0f, 0.5f, 3.0f - 1.25f}));
  TokenSelector greedy({.do_sample = false, .presence_penalty = 2.0f}, 0);
  std::vector<float> row{1.0f, 2.0f, 1.5f};
  const std::vector<int64_t> history{1, 1, 0};  // prompt {1, 1}, generated {0}
  EXPECT_EQ(greedy.select(row, history, 2), 1) << "the prompt's token 1 is not penalized";
  row = {1.0f, 2.0f, 1.5f};
  EXPECT_EQ(greedy.select(row, history, 0), 2) << "counted as generated, token 1 drops below token 2";
}

TEST(Temperature, ScalesLogits) {
  std::vector<float> logits{1.0f, -2.0f};
  apply_temperature(logits, 0.5f);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -4.0f}));
}

TEST(TopK, KeepsTheKLargestAndTiesAtTheThreshold) {
  std::vector<float> scratch;
  std::vector<float> logits{0.1f, 0.9f, 0.5f, 0.5f, 0.2f};
  apply_top_k(logits, 2, scratch);
  // The 2nd largest is 0.5, held by two tokens: torch keeps both.
  EXPECT_EQ(logits, (std::vector<float>{minus_infinity, 0.9f, 0.5f, 0.5f, minus_infinity}));
  std::vector<float> unchanged{1, 2, 3};
  apply_top_k(unchanged, 0, scratch);
  apply_top_k(unchanged, 10, scratch);
  EXPECT_EQ(unchanged, (std::vector<float>{1, 2, 3}));
}

TEST(TopP, KeepsTheSmallestSetReachingTheMass) {
  std::vector<int64_t> scratch;
  // Probabilities 0.5, 0.25, 0.125, 0.125 (as log-probabilities).
  std::vector<float> logits{std::log(0.125f), std::log(0.5f), std::log(0.125f), std::log(0.25f)};
  std::vector<float> kept_at_07 = logits;
  apply_top_p(kept_at_07, 0.7f, scratch);  // 0.5 + 0.25 >= 0.7
  EXPECT_EQ(kept_at_07[0], minus_infinity);
  EXPECT_EQ(kept_at_07[2], minus_infinity);
  EXPECT_NE(kept_at_07[1], minus_infinity);
  EXPECT_NE(kept_at_07[3], minus_infinity);
  std::vector<float> kept_at_04 = logits;
  apply_top_p(kept_at_04, 0.4f, scratch);  // the top token alone is always kept
  EXPECT_NE(kept_at_04[1], minus_infinity);
  EXPECT_EQ(kept_at_04[3], minus_infinity);
}

TEST(MinP, DropsTokensBelowAFractionOfTheTopProbability) {
  std::vector<float> scratch;
  std::vector<float> logits{std::log(0.6f), std::log(0.25f), std::log(0.1f), std::log(0.05f)};
  apply_min_p(logits, 0.2f, scratch);  // threshold 0.12
  EXPECT_NE(logits[0], minus_infinity);
  EXPECT_NE(logits[1], minus_infinity);
  EXPECT_EQ(logits[2], minus_infinity);
  EXPECT_EQ(logits[3], minus_infinity);
}

std::vector<float> some_logits() { return {0.3f, 1.2f, -0.5f, 0.9f, 1.1f, -2.0f, 0.0f, 0.7f}; }

TEST(TokenSelector, GreedyPicksTheArgmaxAfterTheRepetitionPenalty) {
  TokenSelector greedy({.do_sample = false}, 1);
  std::vector<float> logits = some_logits();
  EXPECT_EQ(greedy.select(logits, {}), 1);
  TokenSelector penalized({.do_sample = false, .repetition_penalty = 1.5f}, 1);
  logits = some_logits();
  std::vector<int64_t> history{1};
  EXPECT_EQ(penalized.select(logits, history), 4);  // 1.2 / 1.5 = 0.8 < 1.1
}

TEST(TokenSelector, TopKOneEqualsGreedy) {
  TokenSelector sampler({.do_sample = true, .temperature = 1.7f, .top_k = 1}, 42);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> logits = some_logits();
    EXPECT_EQ(sampler.select(logits, {}), 1);
  }
}

TEST(TokenSelector, FixedSeedIsReproducible) {
  SamplingSettings settings{.do_sample = true, .temperature = 0.9f, .top_k = 0, .top_p = 0.95f};
  auto draw = [&](uint64_t seed) {
    TokenSelector sampler(settings, seed);
    std::vector<int64_t> tokens;
    for (int i = 0; i < 200; ++i) {
      std::vector<float> logits = some_logits();
      tokens.push_back(sampler.select(logits, {}));
    }
    return tokens;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
}

TEST(TokenSelector, SamplesInProportionToTheWarpedDistribution) {
  // Temperature 0.5 over logits {0, ln 2}: probabilities 1/5 and 4/5.
  TokenSelector sampler({.do_sample = true, .temperature = 0.5f, .top_k = 0}, 3);
  std::map<int64_t, int> counts;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> logits{0.0f, std::log(2.0f)};
    ++counts[sampler.select(logits, {})];
  }
  EXPECT_NEAR(counts[1] / static_cast<double>(draws), 0.8, 0.015);
}

TEST(TokenSelector, RejectsInvalidSettings) {
  EXPECT_THROW(TokenSelector({.do_sample = true, .temperature = 0.0f}, 1), Error);
  EXPECT_THROW(TokenSelector({.do_sample = true, .top_p = 1.5f}, 1), Error);
  EXPECT_NO_THROW(TokenSelector({.do_sample = false, .temperature = 0.0f}, 1));  // greedy ignores it, as transformers
  EXPECT_THROW(TokenSelector({.repetition_penalty = 0.0f}, 1), Error);
  EXPECT_THROW(TokenSelector({.do_sample = true, .top_k = -1}, 1), Error);
  std::vector<float> nan_logits{0.5f, NAN};
  TokenSelector greedy({}, 1);
  EXPECT_THROW(greedy.select(nan_logits, {}), Error);
}

TEST(ResolveGeneration, RequestOverridesModelOverridesDefaults) {
  GenerationConfig model;
  model.temperature = 0.6f;
  model.top_k = 20;
  model.eos_token_id = std::vector<int64_t>{2};
  GenerationConfig request;
  request.do_sample = true;
  request.top_k = 5;
  request.max_new_tokens = 10;
  ResolvedGeneration resolved = resolve_generation(model, request, 4, 512);
  EXPECT_TRUE(resolved.sampling.do_sample);
  EXPECT_FLOAT_EQ(resolved.sampling.temperature, 0.6f);
  EXPECT_EQ(resolved.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(resolved.sampling.top_p, 1.0f);
  EXPECT_EQ(resolved.eos_token_id, (std::vector<int64_t>{2}));
  EXPECT_FALSE(resolved.max_cache_len.has_value());  // the generator chooses
  EXPECT_EQ(resolve_generation(model, {}, 4, 512).max_new_tokens, 16);  // max_length 20 - prompt
}

TEST(ResolveGeneration, RequestsBeyondTheModelOrCacheFailBeforeAnyWork) {
  GenerationConfig request;
  request.max_new_tokens = 100;
  try {
    resolve_generation({}, request, 500, 512);
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("max_position_embeddings (512)"), std::string::npos) << error.what();
  }
  request.max_new_tokens = 10;
  request.max_cache_len = 12;
  EXPECT_THROW(resolve_generation({}, request, 5, 512), Error);
  EXPECT_THROW(resolve_generation({}, {}, 0, 512), Error);
  request.max_cache_len.reset();
  request.cache_implementation = "dynamic";
  EXPECT_THROW(resolve_generation({}, request, 5, 512), Error);
}

}  // namespace
}  // namespace shardlm::generation
