// GGUF files as models: tests/data/gguf/{qwen3,llama}-tiny.gguf are the golden fixtures
// written as llama.cpp's converter writes them (make_fixture_ggufs.py; llama.cpp itself
// reproduces the fixtures' greedy ids from them). Loaded from the GGUF, each fixture must
// give the config its config.json gives, and its golden logits and greedy ids, compiled
// and eager: this checks the metadata mapping, the tensor names, and (Llama) undoing the
// converter's q/k permutation, whose mistakes change the logits by 8e-3 or more. And
// llama-tiny-q8_0.gguf, quantized by llama.cpp's llama-quantize, must continue the prompt
// as llama.cpp does on the same file (llama-tiny-q8_0.json). gemma3-tiny.gguf is a random
// Gemma 3 as llama.cpp's converter writes one (norms stored as 1 + weight, llama.cpp's
// fixed layer pattern and local rope base): transformers and llama.cpp continue its
// prompt, longer than the window, alike (gemma3-tiny.json), and so must shardlm.
// llama-k-quant.gguf is a random Llama quantized to Q4_K_M by llama-quantize (Q4_K and Q6_K
// matrices, make_k_quant_gguf.py): on the CPU its matrices run as stored, elsewhere decoded
// at load, and on every device it must give the logits and greedy ids transformers gives
// on the dequantized weights in float64 (llama-k-quant.json).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "generation/generator.h"
#include "io/config.h"
#include "io/model_resolution.h"
#include "io/safetensors.h"
#include "models/causal_lm.h"
#include "test_util.h"

namespace shardlm {
namespace {

using testing::relative_error;

// A GGUF file loaded as a model on the CPU, with an f32 KV cache (the goldens' tolerance).
struct LoadedGguf {
  explicit LoadedGguf(const std::string& path, const std::string& device = "cpu")
      : files(io::resolve_model(path, {})),
        config(io::load_model_config(files)),
        checkpoint(io::Checkpoint::open(files)),
        backend(backends::create_backend(device)),
        model(models::create_causal_lm(config, checkpoint, {.kv_cache_dtype = DType::f32, .device = backend.get()})),
        generator(*model, *backend, io::load_generation_config(files, config)) {}

  std::vector<int64_t> greedy(const std::vector<int64_t>& prompt, int64_t count, bool disable_compile) {
    GenerationConfig request{.max_new_tokens = count};
    request.eos_token_id = std::vector<int64_t>{};  // the goldens never stop at EOS
    request.disable_compile = disable_compile;
    return generator.generate({prompt}, request).front().generated;
  }

  io::ModelFiles files;
  io::ModelConfig config;
  io::Checkpoint checkpoint;
  std::unique_ptr<backends::Backend> backend;
  std::unique_ptr<models::CausalLM> model;
  generation::Generator generator;
};

class GgufFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufFixture, ConfigEqualsTheFixturesConfigJson) {
  const io::ModelConfig from_gguf =
      io::load_model_config(io::resolve_model(testing::data_path("gguf/" + GetParam() + ".gguf"), {}));
  const io::ModelConfig expected =
      io::load_model_config(io::ModelFiles::directory(testing::data_path("fixtures/" + GetParam())));
  EXPECT_EQ(from_gguf.architectures, expected.architectures);
  EXPECT_EQ(from_gguf.vocab_size, expected.vocab_size);
  EXPECT_EQ(from_gguf.hidden_size, expected.hidden_size);
  EXPECT_EQ(from_gguf.intermediate_size, expected.intermediate_size);
  EXPECT_EQ(from_gguf.num_hidden_layers, expected.num_hidden_layers);
  EXPECT_EQ(from_gguf.num_attention_heads, expected.num_attention_heads);
  EXPECT_EQ(from_gguf.num_key_value_heads, expected.num_key_value_heads);
  EXPECT_EQ(from_gguf.head_dim, expected.head_dim);
  EXPECT_EQ(from_gguf.max_position_embeddings, expected.max_position_embeddings);
  EXPECT_FLOAT_EQ(static_cast<float>(from_gguf.rms_norm_eps), static_cast<float>(expected.rms_norm_eps));
  EXPECT_FLOAT_EQ(static_cast<float>(from_gguf.rope.theta), static_cast<float>(expected.rope.theta));
  EXPECT_EQ(from_gguf.tie_word_embeddings, expected.tie_word_embeddings);
  EXPECT_EQ(from_gguf.attention_bias, expected.attention_bias);
  EXPECT_EQ(from_gguf.bos_token_id, expected.bos_token_id);
  EXPECT_EQ(from_gguf.eos_token_id, expected.eos_token_id);
}

TEST_P(GgufFixture, GeneratesTheGoldenIdsCompiledAndEager) {
  LoadedGguf gguf(testing::data_path("gguf/" + GetParam() + ".gguf"));
  const io::SafetensorsFile golden =
      io::SafetensorsFile::open(testing::data_path("fixtures/" + GetParam() + "/golden.safetensors"));
  const auto ids = [&](const char* name) {
    const Tensor t = golden.tensor(name);
    return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
  };
  const std::vector<int64_t> prompt = ids("input_ids"), greedy = ids("greedy_ids");
  gguf.generator.prepare_cache(1, static_cast<int64_t>(prompt.size()));
  const Tensor logits = gguf.generator.forward(prompt, 0, /*all_positions=*/true);
  const Tensor expected = golden.tensor("logits");
  ASSERT_EQ(logits.shape(), expected.shape());
  EXPECT_LT(relative_error(logits.data<float>(), expected.data<float>(), expected.numel()), 1e-4);
  for (bool disable_compile : {false, true})
    EXPECT_EQ(gguf.greedy(prompt, static_cast<int64_t>(greedy.size()), disable_compile), greedy)
        << "disable_compile " << disable_compile;
}

TEST(GgufQuantized, Q8_0FromLlamaQuantizeContinuesAsLlamaCppDoes) {
  std::ifstream file(testing::data_path("gguf/llama-tiny-q8_0.json"));
  const nlohmann::json expected = nlohmann::json::parse(file);
  const auto prompt = expected["input_ids"].get<std::vector<int64_t>>();
  const auto ids = expected["llama_cpp_greedy_ids"].get<std::vector<int64_t>>();
  LoadedGguf gguf(testing::data_path("gguf/llama-tiny-q8_0.gguf"));
  for (bool disable_compile : {false, true})
    EXPECT_EQ(gguf.greedy(prompt, static_cast<int64_t>(ids.size()), disable_compile), ids)
        << "disable_compile " << disable_compile;
}

TEST(GgufGemma3, ContinuesAsTransformersAndLlamaCppDo) {
  std::ifstream file(testing::data_path("gguf/gemma3-tiny.json"));
  const nlohmann::json expected = nlohmann::json::parse(file);
  const auto prompt = expected["input_ids"].get<std::vector<int64_t>>();
  const auto ids = expected["transformers_greedy_ids"].get<std::vector<int64_t>>();
  ASSERT_EQ(ids, expected["llama_cpp_0_5_0_greedy_ids"].get<std::vector<int64_t>>());
  LoadedGguf gguf(testing::data_path("gguf/gemma3-tiny.gguf"));
  EXPECT_EQ(gguf.config.architectures.front(), "Gemma3ForCausalLM");
  EXPECT_EQ(gguf.config.layer_types[5], "full_attention");
  EXPECT_EQ(gguf.config.layer_types[6], "sliding_attention");
  EXPECT_EQ(gguf.config.sliding_window, 7);
  EXPECT_EQ(gguf.config.query_pre_attn_scalar, 24.0);
  for (bool disable_compile : {false, true})
    EXPECT_EQ(gguf.greedy(prompt, static_cast<int64_t>(ids.size()), disable_compile), ids)
        << "disable_compile " << disable_compile;
}

class GgufKQuants : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufKQuants, GiveTransformersLogitsAndIds) {
  std::ifstream file(testing::data_path("gguf/llama-k-quant.json"));
  const nlohmann::json expected = nlohmann::json::parse(file);
  const auto prompt = expected["input_ids"].get<std::vector<int64_t>>();
  const auto ids = expected["transformers_greedy_ids"].get<std::vector<int64_t>>();
  std::vector<float> golden_logits;  // [prompt, vocab]
  for (const auto& row : expected["transformers_logits"])
    for (double value : row) golden_logits.push_back(static_cast<float>(value));
  LoadedGguf gguf(testing::data_path("gguf/llama-k-quant.gguf"), GetParam());
  if (GetParam() == "cpu") {
    EXPECT_EQ(gguf.checkpoint.tensor("model.layers.0.self_attn.q_proj.weight").dtype(), DType::q4_k);
    EXPECT_EQ(gguf.checkpoint.tensor("lm_head.weight").dtype(), DType::q6_k);
  }
  gguf.generator.prepare_cache(1, static_cast<int64_t>(prompt.size()));
  const Tensor logits = gguf.generator.forward(prompt, 0, /*all_positions=*/true).to_dtype(DType::f32);
  ASSERT_EQ(static_cast<size_t>(logits.numel()), golden_logits.size());
  EXPECT_LT(relative_error(logits.data<float>(), golden_logits.data(), logits.numel()), 1e-4);
  for (bool disable_compile : {false, true})
    EXPECT_EQ(gguf.greedy(prompt, static_cast<int64_t>(ids.size()), disable_compile), ids)
        << "disable_compile " << disable_compile;
}

// The CPU runs the blocks as stored, pjrt the values decoded at load.
std::vector<std::string> cpu_and_pjrt() {
  std::vector<std::string> devices;
  for (const backends::BackendInfo& info : backends::list_backends())
    if (info.available && (info.name == "cpu" || info.name == "pjrt")) devices.push_back(info.name);
  return devices;
}

INSTANTIATE_TEST_SUITE_P(CpuAndPjrt, GgufKQuants, ::testing::ValuesIn(cpu_and_pjrt()),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(TwinsOfFixtures, GgufFixture, ::testing::Values("qwen3-tiny", "llama-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace shardlm
