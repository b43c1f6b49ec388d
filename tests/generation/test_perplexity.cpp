// Perplexity against the fixtures' golden logits (an independent float64 implementation):
// the negative log-likelihoods of the scored positions, computed here in double from the
// golden logits, must give the same perplexity as shardlm's model does.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backend.h"
#include "generation/perplexity.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "models/causal_lm.h"
#include "test_util.h"

namespace shardlm {
namespace {

struct Fixture {
  explicit Fixture(const std::string& name)
      : files(io::ModelFiles::directory(testing::data_path("fixtures/" + name))),
        config(io::load_model_config(files)),
        checkpoint(io::Checkpoint::open(files)),
        golden(io::SafetensorsFile::open(files.path_of("golden.safetensors"))),
        backend(backends::create_backend("cpu")),
        model(models::create_causal_lm(config, checkpoint, {.kv_cache_dtype = DType::f32, .device = backend.get()})),
        generator(*model, *backend, io::load_generation_config(files, config)) {}
  io::ModelFiles files;
  io::ModelConfig config;
  io::Checkpoint checkpoint;
  io::SafetensorsFile golden;
  std::unique_ptr<backends::Backend> backend;
  std::unique_ptr<models::CausalLM> model;
  generation::Generator generator;
};

// exp(mean over positions first .. n-2 of -log softmax(logits[p])[ids[p + 1]]), in double.
double golden_perplexity(const Tensor& logits, const std::vector<int64_t>& ids, int64_t first) {
  const int64_t vocab = logits.shape()[1];
  double sum = 0;
  int64_t count = 0;
  for (int64_t p = first; p + 1 < static_cast<int64_t>(ids.size()); ++p) {
    const float* row = logits.data<float>() + p * vocab;
    double maximum = row[0], total = 0;
    for (int64_t v = 1; v < vocab; ++v) maximum = std::max(maximum, static_cast<double>(row[v]));
    for (int64_t v = 0; v < vocab; ++v) total += std::exp(row[v] - maximum);
    sum += maximum + std::log(total) - row[ids[p + 1]];
    ++count;
  }
  return std::exp(sum / static_cast<double>(count));
}

TEST(Perplexity, EqualsTheGoldenLogitsPerplexity) {
  for (const char* name : {"llama-tiny", "gemma3-tiny"}) {
    Fixture fixture(name);
    const Tensor input = fixture.golden.tensor("input_ids");
    const std::vector<int64_t> ids(input.data<int64_t>(), input.data<int64_t>() + input.numel());
    const int64_t context = static_cast<int64_t>(ids.size());  // one chunk: the golden prompt
    std::vector<int64_t> tokens = ids;
    tokens.push_back(7);  // past the last whole chunk: dropped
    int64_t progress_calls = 0;
    const generation::Perplexity result = generation::perplexity(
        fixture.generator, tokens, {.context = context}, [&](int64_t chunk, double) { progress_calls = chunk; });
    const double expected = golden_perplexity(fixture.golden.tensor("logits"), ids, context / 2);
    EXPECT_NEAR(result.perplexity, expected, 1e-4 * expected) << name;
    EXPECT_EQ(result.chunks, 1);
    EXPECT_EQ(result.scored_tokens, context - 1 - context / 2);
    EXPECT_EQ(progress_calls, 1);
    EXPECT_GT(result.error, 0);
  }
}

TEST(Perplexity, TwoChunksEachStartFromAnEmptyCacheAndBos) {
  Fixture fixture("llama-tiny");
  const Tensor input = fixture.golden.tensor("input_ids");
  const std::vector<int64_t> ids(input.data<int64_t>(), input.data<int64_t>() + input.numel());
  // The same chunk twice, its first token replaced by a "BOS" equal to it: the estimate is
  // one chunk's, so the second chunk saw nothing of the first.
  std::vector<int64_t> tokens = ids;
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  const auto one = generation::perplexity(fixture.generator, ids, {.context = 20, .bos_id = ids[0]});
  const auto two = generation::perplexity(fixture.generator, tokens, {.context = 20, .bos_id = ids[0]});
  EXPECT_EQ(two.chunks, 2);
  EXPECT_NEAR(two.perplexity, one.perplexity, 1e-6 * one.perplexity);
  const auto limited = generation::perplexity(fixture.generator, tokens, {.context = 20, .max_chunks = 1});
  EXPECT_EQ(limited.chunks, 1);
}

TEST(Perplexity, ATextShorterThanAChunkIsRefused) {
  Fixture fixture("llama-tiny");
  const std::vector<int64_t> tokens(10, 1);
  try {
    generation::perplexity(fixture.generator, tokens, {.context = 20});
    FAIL() << "accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("shorter than one chunk of 20"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace shardlm
