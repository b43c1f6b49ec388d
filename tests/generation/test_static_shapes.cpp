// Static shapes: a whole workload of prompt lengths runs on one prefill and one
// decode executable, and a warmed-up decode step allocates nothing on the heap.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "backends/backend.h"
#include "generation/generator.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<int64_t> allocations{0};
}  // namespace

// Every heap allocation in this test binary passes through here. new and delete are
// replaced together (malloc/free), which GCC's mismatch heuristic cannot see.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* memory = std::malloc(size ? size : 1)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, size_t) noexcept { std::free(memory); }

namespace shardlm::generation {
namespace {

// qwen3-tiny with room for 1,000-token prompts (its weights do not depend on it).
struct LongContextModel {
  LongContextModel()
      : files(io::ModelFiles::directory(testing::data_path("fixtures/qwen3-tiny"))),
        checkpoint(io::Checkpoint::open(files)),
        backend(backends::create_backend("cpu")) {
    std::string text = files.read_text("config.json");
    text.replace(text.find("\"max_position_embeddings\": 512"), 30, "\"max_position_embeddings\": 2048");
    config = io::parse_model_config(text, "long-context config.json");
    model = models::create_causal_lm(config, checkpoint, {});
  }
  io::ModelFiles files;
  io::Checkpoint checkpoint;
  io::ModelConfig config;
  std::unique_ptr<backends::Backend> backend;
  std::unique_ptr<models::CausalLM> model;
};

// Runs `count` prompts of distinct lengths spread over 1..1000 tokens in batches of
// `batch` rows and returns the compiles they caused.
int64_t compiles_for_workload(LongContextModel& fixture, Generator& generator, int64_t batch, int64_t count) {
  GenerationConfig request{.max_new_tokens = 2};
  request.prefill_chunk_size = 64;
  const int64_t before = generator.compiles();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t length = 1 + i * 999 / (count - 1);
    std::vector<std::vector<int64_t>> prompts;
    for (int64_t row = 0; row < batch; ++row) {
      std::vector<int64_t>& prompt = prompts.emplace_back();
      for (int64_t t = 0; t < std::max<int64_t>(1, length - row); ++t)
        prompt.push_back((t * 37 + row) % fixture.config.vocab_size);
    }
    std::vector<GenerationResult> results = generator.generate(prompts, request);
    EXPECT_EQ(results.size(), static_cast<size_t>(batch));
    EXPECT_EQ(results.back().generated.size(), 2u);
  }
  return generator.compiles() - before;
}

TEST(StaticShapes, HundredPromptLengthsCompileOncePerPhase) {
  LongContextModel fixture;
  Generator generator(*fixture.model, *fixture.backend, {});
  EXPECT_EQ(compiles_for_workload(fixture, generator, 1, 100), 2);
  EXPECT_EQ(generator.max_cache_len(), 2048);
  RecordProperty("arena_bytes", std::to_string(generator.arena_bytes()));
}

TEST(StaticShapes, BatchedWorkloadCompilesOncePerPhase) {
  LongContextModel fixture;
  Generator generator(*fixture.model, *fixture.backend, {});
  EXPECT_EQ(compiles_for_workload(fixture, generator, 3, 12), 2);
}

TEST(StaticShapes, WarmDecodeStepsDoNotAllocate) {
  LongContextModel fixture;
  Generator generator(*fixture.model, *fixture.backend, {});
  std::vector<int64_t> prompt{3, 14, 15, 92, 65, 35};
  GenerationConfig request{.max_new_tokens = 40};
  request.eos_token_id = std::vector<int64_t>{};
  for (bool sample : {false, true}) {
    request.do_sample = sample;
    request.seed = 1;
    request.top_p = 0.9f;
    int64_t steps = 0, allocating_steps = 0;
    // Counts what happens between one token's callback and the next: a whole decode step.
    generator.generate({prompt}, request, [&](size_t, int64_t, std::string_view) {
      counting = false;
      if (steps >= 3 && allocations.load() > 0) ++allocating_steps;
      ++steps;
      allocations = 0;
      counting = steps >= 3;
    });
    counting = false;
    EXPECT_EQ(steps, 40);
    EXPECT_EQ(allocating_steps, 0) << (sample ? "sampling" : "greedy");
  }
  std::printf("activation arena: %zu bytes; KV cache: %zu bytes\n", generator.arena_bytes(), generator.cache_bytes());
}

// Decode steps select among the top_k (or, greedy, the best) logits the backend picked
// on the device; each must choose exactly what the selector picks from the whole row.
TEST(StaticShapes, CandidateSelectionEqualsSelectionOverTheWholeRow) {
  LongContextModel fixture;
  Generator generator(*fixture.model, *fixture.backend, {});
  const std::vector<int64_t> prompt{3, 14, 15, 92, 65, 35};
  for (const SamplingSettings& sampling : {SamplingSettings{.do_sample = false},
                                           SamplingSettings{.do_sample = true, .temperature = 1.7f, .top_k = 4},
                                           SamplingSettings{.do_sample = true, .top_k = 20, .top_p = 0.8f}}) {
    GenerationConfig request{.do_sample = sampling.do_sample, .max_new_tokens = 24};
    request.temperature = sampling.temperature;
    request.top_k = sampling.top_k;
    request.top_p = sampling.top_p;
    request.seed = 11;
    request.eos_token_id = std::vector<int64_t>{};
    const std::vector<int64_t> generated = generator.generate({prompt}, request).front().generated;

    TokenSelector selector(sampling, 11);
    std::vector<int64_t> history = prompt, expected;
    Tensor logits = generator.forward(prompt, 0, /*all_positions=*/false);
    while (expected.size() < generated.size()) {
      const int64_t token = selector.select({logits.mutable_data<float>(), static_cast<size_t>(logits.numel())}, history);
      expected.push_back(token);
      history.push_back(token);
      logits = generator.forward(std::span(&history.back(), 1), static_cast<int64_t>(history.size()) - 1, false);
    }
    EXPECT_EQ(generated, expected) << "do_sample " << sampling.do_sample << " top_k " << sampling.top_k;
  }
}

TEST(StaticShapes, CacheIsReusedAndRequestsBeyondItFail) {
  LongContextModel fixture;
  Generator generator(*fixture.model, *fixture.backend, {});
  GenerationConfig request{.max_new_tokens = 4};
  request.max_cache_len = 64;
  generator.generate({{1, 2, 3}}, request);
  const int64_t compiles = generator.compiles();
  generator.generate({{4, 5, 6, 7, 8}}, request);
  EXPECT_EQ(generator.compiles(), compiles);  // same cache, same executables
  EXPECT_EQ(generator.max_cache_len(), 64);
  request.max_new_tokens = 62;
  try {
    generator.generate({{1, 2, 3}}, request);
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("max_cache_len 64"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace shardlm::generation
