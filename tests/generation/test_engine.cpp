// The engine (continuous batching): sequences that join and leave at step boundaries,
// through fewer cache slots than requests, with prompts prefilled in chunks between decode
// steps, produce exactly what each produces alone through generate(); cancelling frees a
// slot; logprobs are the model's log-softmax. On every backend this build can run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "backends/backend.h"
#include "generation/engine.h"
#include "generation/generator.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace shardlm::generation {
namespace {

class EngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    files_ = io::ModelFiles::directory(testing::data_path("fixtures/qwen3-tiny"));
    checkpoint_ = io::Checkpoint::open(*files_);
    config_ = io::parse_model_config(files_->read_text("config.json"), "config.json");
    backend_ = backends::create_backend(GetParam(), {.compile_cache_dir = "none"});
    model_ = models::create_causal_lm(config_, *checkpoint_, {.device = backend_.get()});
  }

  // Prompt `i` of a workload: lengths from 1 to past four prefill chunks.
  std::vector<int64_t> prompt(int64_t i) const {
    std::vector<int64_t> ids;
    const int64_t length = std::vector<int64_t>{5, 70, 1, 17, 33, 9, 48}[static_cast<size_t>(i % 7)];
    for (int64_t t = 0; t < length; ++t) ids.push_back((t * 31 + i * 7 + 3) % config_.vocab_size);
    return ids;
  }

  SequenceRequest request(int64_t i, bool sample = false) const {
    SequenceRequest r{.prompt = prompt(i), .seed = static_cast<uint64_t>(100 + i)};
    r.sampling.do_sample = sample;
    r.sampling.top_k = 20;
    r.sampling.temperature = 0.8f;
    r.stop.max_new_tokens = 3 + (i * 5 + 7) % 11;
    return r;
  }

  // The same request through generate(), alone.
  std::vector<int64_t> alone(const SequenceRequest& r, int64_t chunk) {
    Generator generator(*model_, *backend_, {});
    GenerationConfig config{.do_sample = r.sampling.do_sample,
                            .max_new_tokens = r.stop.max_new_tokens,
                            .temperature = r.sampling.temperature,
                            .top_k = r.sampling.top_k,
                            .seed = r.seed};
    config.eos_token_id = std::vector<int64_t>{};
    config.prefill_chunk_size = chunk;
    return generator.generate({r.prompt}, config).at(0).generated;
  }

  std::optional<io::ModelFiles> files_;
  std::optional<io::Checkpoint> checkpoint_;
  io::ModelConfig config_;
  std::unique_ptr<backends::Backend> backend_;
  std::unique_ptr<models::CausalLM> model_;
};

// Seven requests through three slots, arriving over the first steps; decode batches of 1,
// 2 or 3 and prefill rows of 1 (a token budget of 20 leaves room for one 16-token chunk).
TEST_P(EngineTest, StaggeredRequestsThroughFewerSlotsEqualEachAlone) {
  for (bool sample : {false, true}) {
    StepRunner runner(*model_, *backend_);
    runner.set_execution({.compile = true, .prefill_chunk_size = 16});
    runner.prepare_cache(3, 128);
    Engine engine(runner, {.decode_buckets = {1, 2}, .prefill_buckets = {1}, .token_budget = 20});
    std::map<uint64_t, int64_t> request_of;
    std::vector<std::pair<int64_t, int64_t>> tokens_at;  // (step, request) of every token
    int64_t added = 0;
    while (added < 7 || !engine.idle()) {
      if (added < 7 && engine.stats().steps % 2 == 0) {
        request_of[engine.add(request(added, sample), [&](const Sequence& s, int64_t, std::string_view) {
          tokens_at.emplace_back(engine.stats().steps, request_of.at(s.id()));
        })] = added;
        ++added;
      }
      engine.step();
      ASSERT_LT(engine.stats().steps, 200) << "the engine does not finish";
    }
    // Request 1 (added at step 2) has a 70-token prompt, five chunks: the others keep
    // decoding while it prefills.
    const auto first_of_1 = std::find_if(tokens_at.begin(), tokens_at.end(), [](auto t) { return t.second == 1; });
    ASSERT_NE(first_of_1, tokens_at.end());
    EXPECT_GE(first_of_1->first, 2 + 4);
    int64_t decoded_meanwhile = 0;
    for (const auto& [step, i] : tokens_at) decoded_meanwhile += step >= 2 && step < first_of_1->first && i != 1;
    EXPECT_GE(decoded_meanwhile, 3);
    ASSERT_EQ(engine.finished().size(), 7u);
    EXPECT_EQ(engine.free_slots(), 3);
    for (const auto& sequence : engine.finished()) {
      const int64_t i = request_of.at(sequence->id());
      const auto generated = sequence->generated();
      EXPECT_EQ(std::vector<int64_t>(generated.begin(), generated.end()), alone(request(i, sample), 16))
          << "request " << i << (sample ? " sampled" : " greedy");
      EXPECT_EQ(sequence->finish_reason(), FinishReason::length);
    }
  }
}

// compile_all compiles every shape a workload then uses: serving compiles nothing more.
TEST_P(EngineTest, CompileAllLeavesNothingToCompile) {
  StepRunner runner(*model_, *backend_);
  runner.set_execution({.compile = true, .prefill_chunk_size = 16});
  runner.prepare_cache(4, 128);
  Engine engine(runner, {.decode_buckets = {1, 2}, .prefill_buckets = {1, 2}, .prefill_chunk_buckets = {4},
                         .token_budget = 40, .any_candidate_count = false});
  engine.compile_all();
  const int64_t compiled = runner.compiles();
  // prefill {1, 2, 4} rows of chunks {4, 16}, and one scoring every position; decode
  // {1, 2, 4}, greedy (candidates on the device) and not
  EXPECT_EQ(compiled, backend_->compiles_graphs() ? 7 + 3 * 2 : 7 + 3);
  for (int64_t i = 0; i < 9; ++i) engine.add(request(i, i % 2 == 1));
  while (!engine.idle()) engine.step();
  EXPECT_EQ(runner.compiles(), compiled);
}

// With chunk lengths of 4, 8 and 16, a prompt's last piece, and the rest of a prompt whose
// prefix a slot held, run in the shortest chunk that holds them: less padding than whole
// 16-token chunks for the same requests, and each request's tokens as it generates alone.
TEST_P(EngineTest, ShortPiecesOfPromptsRunInShortChunks) {
  int64_t padding_of_whole_chunks = 0;
  for (bool buckets : {false, true}) {
    StepRunner runner(*model_, *backend_);
    runner.set_execution({.compile = true, .prefill_chunk_size = 16});
    runner.prepare_cache(4, 128);  // a slot a request: request 1's slot still holds its prompt at the end
    // One prefill row a step (the budget holds one chunk): no padding rows, only padded rows.
    EngineOptions options{.decode_buckets = {1}, .prefill_buckets = {1}, .token_budget = 16};
    if (buckets) options.prefill_chunk_buckets = {4, 8};
    Engine engine(runner, options);
    std::map<uint64_t, SequenceRequest> requests;
    for (int64_t i : {0, 1, 3, 4}) {  // prompts of 5, 70, 17 and 33 tokens
      SequenceRequest r = request(i);
      requests[engine.add(r)] = r;
    }
    while (!engine.idle()) engine.step();
    // Then request 1's prompt again with two tokens more: its slot holds the first 70.
    SequenceRequest longer = request(1);
    longer.prompt.push_back(7);
    longer.prompt.push_back(8);
    requests[engine.add(longer)] = longer;
    while (!engine.idle()) engine.step();
    ASSERT_EQ(engine.finished().size(), 5u);
    EXPECT_EQ(engine.stats().reused_prefix_tokens, 70);
    for (const auto& sequence : engine.finished()) {
      const auto generated = sequence->generated();
      EXPECT_EQ(std::vector<int64_t>(generated.begin(), generated.end()), alone(requests.at(sequence->id()), 16))
          << "prompt of " << sequence->prompt_length() << (buckets ? ", chunk buckets" : "");
    }
    if (!buckets) {
      padding_of_whole_chunks = engine.stats().prefill_padding;
      continue;
    }
    // Whole chunks: 5 -> 11, 70 -> 10, 17 -> 15, 33 -> 15, the last 2 -> 14 padding; in
    // buckets: 5 -> 3, 70 (16 x 4 + 6) -> 2, 17 (16 + 1) -> 3, 33 (16 x 2 + 1) -> 3, 2 -> 2.
    EXPECT_EQ(padding_of_whole_chunks, 65);
    EXPECT_EQ(engine.stats().prefill_padding, 13);
  }
}

// A cancelled sequence ends at the next step boundary and its slot goes to the next
// request in the queue, which then generates as it would alone.
TEST_P(EngineTest, CancellingFreesTheSlotForTheQueue) {
  StepRunner runner(*model_, *backend_);
  runner.set_execution({.compile = true, .prefill_chunk_size = 16});
  runner.prepare_cache(1, 128);
  Engine engine(runner, {});
  SequenceRequest first = request(0);
  first.stop.max_new_tokens = 50;
  int64_t cancelled_callbacks = 0;
  const uint64_t running = engine.add(first, [&](const Sequence&, int64_t token, std::string_view) {
    if (token < 0) ++cancelled_callbacks;
  });
  const uint64_t queued = engine.add(request(3));
  for (int i = 0; i < 4; ++i) engine.step();
  EXPECT_EQ(engine.running(), 1u);
  EXPECT_EQ(engine.waiting(), 1u);
  engine.cancel(running);
  while (!engine.idle()) engine.step();
  ASSERT_EQ(engine.finished().size(), 2u);
  EXPECT_EQ(engine.finished()[0]->id(), running);
  EXPECT_EQ(engine.finished()[0]->finish_reason(), FinishReason::cancelled);
  EXPECT_EQ(cancelled_callbacks, 1);
  EXPECT_LT(engine.finished()[0]->generated().size(), 50u);
  EXPECT_EQ(engine.finished()[1]->id(), queued);
  const auto generated = engine.finished()[1]->generated();
  EXPECT_EQ(std::vector<int64_t>(generated.begin(), generated.end()), alone(request(3), 16));
  EXPECT_EQ(engine.free_slots(), 1);
}

// A prompt that shares a prefix with what a freed slot holds starts after that prefix, and
// generates what it would alone: another continuation of the same first 60 tokens, the same
// prompt again (all but its last token reused), and one that shares nothing.
TEST_P(EngineTest, APrefixAFinishedSequenceLeftInItsSlotIsNotPrefilledAgain) {
  StepRunner runner(*model_, *backend_);
  runner.set_execution({.compile = true, .prefill_chunk_size = 16});
  runner.prepare_cache(2, 128);
  Engine engine(runner, {});
  const SequenceRequest first = request(1);  // 70 prompt tokens
  SequenceRequest branch = request(1), again = request(1), unrelated = request(4);
  branch.prompt.resize(60);
  for (int64_t t = 0; t < 9; ++t) branch.prompt.push_back((t * 13 + 5) % config_.vocab_size);
  for (const auto& [next, reused] : {std::pair{&branch, 60}, std::pair{&again, 69}, std::pair{&unrelated, 0}}) {
    engine.add(first);
    while (!engine.idle()) engine.step();
    const int64_t prefilled_before = engine.stats().prefill_tokens;
    engine.add(*next);
    while (!engine.idle()) engine.step();
    const Sequence& sequence = *engine.finished().back();
    EXPECT_EQ(sequence.reused_prefix(), reused);
    EXPECT_EQ(engine.stats().prefill_tokens - prefilled_before, sequence.prompt_length() - reused);
    const auto generated = sequence.generated();
    EXPECT_EQ(std::vector<int64_t>(generated.begin(), generated.end()), alone(*next, 16)) << "reused " << reused;
  }
}

// A request that cannot fit a slot is refused when it is added, naming what to change.
TEST_P(EngineTest, ARequestBeyondTheSlotIsRefusedBeforeAnyWork) {
  StepRunner runner(*model_, *backend_);
  runner.prepare_cache(2, 64);
  Engine engine(runner, {});
  SequenceRequest r = request(1);  // 70 prompt tokens
  try {
    engine.add(r);
    FAIL() << "a 70-token prompt was queued for a 64-position slot";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("max_new_tokens"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(engine.idle());
}

// Each token's logprob and the best alternatives equal a float64 log-softmax of the
// model's logits at that position (from a separate forward over the same tokens), for the
// generated tokens and for the prompt's (a 17-token prompt: two chunks).
TEST_P(EngineTest, LogprobsAreTheModelsLogSoftmax) {
  StepRunner runner(*model_, *backend_);
  runner.set_execution({.compile = true, .prefill_chunk_size = 16});
  runner.prepare_cache(2, 128);
  Engine engine(runner, {});
  SequenceRequest r = request(3);
  r.logprobs = true;
  r.top_logprobs = 4;
  r.prompt_logprobs = true;
  r.stop.max_new_tokens = 5;
  engine.add(r);
  engine.add(request(4));
  while (!engine.idle()) engine.step();
  const Sequence* sequence = nullptr;
  for (const auto& s : engine.finished())
    if (s->request().logprobs) sequence = s.get();
  ASSERT_NE(sequence, nullptr);
  ASSERT_EQ(sequence->logprobs().size(), 5u);

  StepRunner check(*model_, *backend_);
  check.set_execution({.compile = false, .prefill_chunk_size = 16});
  check.prepare_cache(1, 128);
  const std::vector<int64_t> tokens(sequence->tokens().begin(), sequence->tokens().end() - 1);
  const Tensor logits = check.forward(tokens, 0, /*all_positions=*/true);  // [tokens, vocab]
  const int64_t vocab = config_.vocab_size;
  const auto expect_log_softmax = [&](const TokenLogprob& got, int64_t position, int64_t token) {
    const float* row = logits.data<float>() + position * vocab;
    double maximum = -INFINITY, sum = 0;
    for (int64_t v = 0; v < vocab; ++v) maximum = std::max<double>(maximum, row[v]);
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - maximum);
    const auto log_probability = [&](int64_t v) { return row[v] - maximum - std::log(sum); };
    EXPECT_NEAR(got.logprob, log_probability(token), 1e-4) << "position " << position;
    ASSERT_EQ(got.top.size(), 4u);
    for (size_t j = 0; j < got.top.size(); ++j) {
      EXPECT_NEAR(got.top[j].second, log_probability(got.top[j].first), 1e-4);
      if (j > 0) {
        EXPECT_LE(got.top[j].second, got.top[j - 1].second);
      }
    }
  };
  for (size_t k = 0; k < 5; ++k) {
    const TokenLogprob& got = sequence->logprobs()[k];
    expect_log_softmax(got, sequence->prompt_length() - 1 + static_cast<int64_t>(k), sequence->generated()[k]);
    EXPECT_EQ(got.top.at(0).first, sequence->generated()[k]) << "greedy takes the best";
  }
  ASSERT_EQ(sequence->prompt_logprobs().size(), static_cast<size_t>(sequence->prompt_length() - 1));
  for (int64_t p = 0; p + 1 < sequence->prompt_length(); ++p)
    expect_log_softmax(sequence->prompt_logprobs()[static_cast<size_t>(p)], p, sequence->tokens()[p + 1]);
}

std::vector<std::string> available_backends() {
  std::vector<std::string> names;
  for (const backends::BackendInfo& info : backends::list_backends())
    if (info.available) names.push_back(info.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, EngineTest, ::testing::ValuesIn(available_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace shardlm::generation
