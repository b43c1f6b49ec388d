// The random-weight fixtures of ../shared/fixtures (copied to tests/data/fixtures)
// against golden logits from an independent float64 re-implementation of the
// transformers modeling code. Tolerances are the fixtures' README's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/cpu/kernel_table.h"
#include "generation/generator.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "models/causal_lm.h"
#include "test_util.h"

namespace shardlm {
namespace {

using testing::relative_error;

struct Fixture {
  std::string name;
  double tolerance;  // rel = max|ours - golden| / max|golden|
  std::string device = "cpu";
  // Compiled against eager execution of the same graph: the same kernels, so 1e-5; where
  // bf16 activations are rounded, a chunk's rows decide whether they are (the CPU's gemv
  // keeps them f32), and fused and unfused matmuls round them differently.
  double compiled_tolerance = 1e-5;
};

void PrintTo(const Fixture& fixture, std::ostream* out) { *out << fixture.name << " on " << fixture.device; }

// Whether `device` multiplies a bf16 model's activations rounded to bf16 in prefill's
// matmuls (as transformers runs a bf16 model): an accelerator does, and so does the CPU
// where it runs the AMX table (backends/cpu/kernel_table.h; the fixtures' rows, 64, 128
// and 160 long, are whole 32-element tiles).
bool rounds_bf16_activations(const std::string& device) {
  return device != "cpu" || backends::cpu::gemm_rounds_input_to_bf16(backends::cpu::cpu_kernels(), DType::bf16, 64);
}

// Every fixture on every device this build can run. Where bf16 weights multiply
// bf16-rounded activations: the fixtures' README bound for bf16 activations, 2e-2 with
// exact greedy ids.
std::vector<Fixture> fixtures_on_every_device() {
  const std::vector<Fixture> fixtures{{"llama-tiny", 1e-4},        {"llama3-tiny", 1e-4}, {"qwen3-tiny", 1e-4},
                                      {"qwen3-tiny-untied", 1e-4}, {"qwen3-tiny-bf16", 1e-3},
                                      {"qwen2-tiny", 1e-4},        {"glm4-tiny", 1e-4},
                                      {"gemma3-tiny", 1e-4},       {"gemma3-tiny-bf16", 1e-3}};
  std::vector<Fixture> runs;
  for (const backends::BackendInfo& info : backends::list_backends()) {
    if (!info.available) continue;
    for (Fixture fixture : fixtures) {
      fixture.device = info.name;
      if (rounds_bf16_activations(info.name) && fixture.name.ends_with("-bf16"))
        fixture.tolerance = fixture.compiled_tolerance = 2e-2;
      runs.push_back(fixture);
    }
  }
  return runs;
}

// Everything a test needs to run one fixture.
struct LoadedFixture {
  // The cache is f32 unless asked: the fixtures' tolerances assume f32 activations.
  explicit LoadedFixture(const std::string& name, std::optional<DType> dtype = {},
                         DType kv_cache_dtype = DType::f32, const std::string& device = "cpu")
      : files(io::ModelFiles::directory(testing::data_path("fixtures/" + name))),
        config(io::load_model_config(files)),
        checkpoint(io::Checkpoint::open(files)),
        golden(io::SafetensorsFile::open(files.path_of("golden.safetensors"))),
        backend(backends::create_backend(device)),
        model(models::create_causal_lm(config, checkpoint,
                                       {.dtype = dtype, .kv_cache_dtype = kv_cache_dtype, .device = backend.get()})),
        generator(*model, *backend, io::load_generation_config(files, config)) {}

  std::vector<int64_t> ids(const std::string& tensor) const {
    Tensor t = golden.tensor(tensor);
    return {t.data<int64_t>(), t.data<int64_t>() + t.numel()};
  }

  io::ModelFiles files;
  io::ModelConfig config;
  io::Checkpoint checkpoint;
  io::SafetensorsFile golden;
  std::unique_ptr<backends::Backend> backend;
  std::unique_ptr<models::CausalLM> model;
  generation::Generator generator;
};

class GoldenFixture : public ::testing::TestWithParam<Fixture> {};

TEST_P(GoldenFixture, PromptLogits) {
  LoadedFixture fixture(GetParam().name, {}, DType::f32, GetParam().device);
  std::vector<int64_t> prompt = fixture.ids("input_ids");
  fixture.generator.prepare_cache(1, static_cast<int64_t>(prompt.size()));
  Tensor logits = fixture.generator.forward(prompt, 0, /*all_positions=*/true);
  Tensor golden = fixture.golden.tensor("logits");
  ASSERT_EQ(logits.shape(), golden.shape());
  double error = relative_error(logits.data<float>(), golden.data<float>(), golden.numel());
  EXPECT_LT(error, GetParam().tolerance);
  RecordProperty("prompt_logits_rel_error", std::to_string(error));
}

// Decodes the golden continuation one token at a time through the KV cache and
// checks every step's logits and its argmax.
TEST_P(GoldenFixture, StepByStepDecodeThroughTheCache) {
  LoadedFixture fixture(GetParam().name, {}, DType::f32, GetParam().device);
  std::vector<int64_t> prompt = fixture.ids("input_ids");
  std::vector<int64_t> greedy = fixture.ids("greedy_ids");
  Tensor golden = fixture.golden.tensor("greedy_logits");  // [steps, vocab]
  const int64_t vocab = golden.shape()[1];
  fixture.generator.prepare_cache(1, static_cast<int64_t>(prompt.size() + greedy.size()));
  Tensor logits = fixture.generator.forward(prompt, 0, /*all_positions=*/false);
  double worst = 0;
  for (size_t step = 0; step < greedy.size(); ++step) {
    if (step > 0) logits = fixture.generator.forward(std::span(&greedy[step - 1], 1), prompt.size() + step - 1, false);
    const float* expected = golden.data<float>() + step * vocab;
    worst = std::max(worst, relative_error(logits.data<float>(), expected, vocab));
    EXPECT_EQ(backends::reference::argmax({logits.data<float>(), static_cast<size_t>(vocab)}), greedy[step])
        << "step " << step;
  }
  EXPECT_LT(worst, GetParam().tolerance);
}

TEST_P(GoldenFixture, GreedyGenerationMatches) {
  LoadedFixture fixture(GetParam().name, {}, DType::f32, GetParam().device);
  std::vector<int64_t> prompt = fixture.ids("input_ids");
  std::vector<int64_t> greedy = fixture.ids("greedy_ids");
  GenerationConfig request;
  request.max_new_tokens = static_cast<int64_t>(greedy.size());
  request.eos_token_id = std::vector<int64_t>{};  // the goldens never stop at EOS
  EXPECT_EQ(fixture.generator.generate({prompt}, request).front().generated, greedy);
}

// The compiled path (fusions, memory plan, chunked prefill) against eager execution of
// the same graph, and both against the goldens.
TEST_P(GoldenFixture, CompiledEqualsEagerForEveryChunkSize) {
  LoadedFixture fixture(GetParam().name, {}, DType::f32, GetParam().device);
  std::vector<int64_t> prompt = fixture.ids("input_ids");
  std::vector<int64_t> greedy = fixture.ids("greedy_ids");
  Tensor golden = fixture.golden.tensor("logits");
  fixture.generator.prepare_cache(1, static_cast<int64_t>(prompt.size()));
  fixture.generator.set_execution({.compile = false});
  Tensor eager = fixture.generator.forward(prompt, 0, true);
  EXPECT_LT(relative_error(eager.data<float>(), golden.data<float>(), golden.numel()), GetParam().tolerance);
  for (int64_t chunk : {1, 7, 32, 128}) {
    fixture.generator.set_execution({.compile = true, .prefill_chunk_size = chunk});
    Tensor compiled = fixture.generator.forward(prompt, 0, true);
    EXPECT_LT(relative_error(compiled.data<float>(), eager.data<float>(), eager.numel()), GetParam().compiled_tolerance)
        << "chunk " << chunk;
    for (bool disable_compile : {false, true}) {
      GenerationConfig request{.max_new_tokens = static_cast<int64_t>(greedy.size())};
      request.eos_token_id = std::vector<int64_t>{};
      request.disable_compile = disable_compile;
      request.prefill_chunk_size = chunk;
      EXPECT_EQ(fixture.generator.generate({prompt}, request).front().generated, greedy)
          << "chunk " << chunk << " disable_compile " << disable_compile;
    }
  }
}

// Four prompts of different lengths in one batch equal each prompt alone, with one
// row made to stop early at an EOS while the others go on.
TEST_P(GoldenFixture, BatchOfFourEqualsEachPromptAlone) {
  LoadedFixture fixture(GetParam().name, {}, DType::f32, GetParam().device);
  const std::vector<int64_t> prompt = fixture.ids("input_ids");
  std::vector<std::vector<int64_t>> prompts;
  for (size_t length : {prompt.size(), size_t{13}, size_t{6}, size_t{1}})
    prompts.emplace_back(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(length));
  GenerationConfig request{.max_new_tokens = 12};
  request.eos_token_id = std::vector<int64_t>{};
  request.prefill_chunk_size = 5;
  // Row 2's fourth greedy token becomes the EOS, so row 2 ends after at most 4 tokens.
  request.eos_token_id = std::vector<int64_t>{fixture.generator.generate({prompts[2]}, request).front().generated[3]};
  for (bool disable_compile : {false, true}) {
    request.disable_compile = disable_compile;
    std::vector<generation::GenerationResult> together = fixture.generator.generate(prompts, request);
    ASSERT_EQ(together.size(), 4u);
    for (size_t row = 0; row < prompts.size(); ++row) {
      generation::GenerationResult alone = fixture.generator.generate({prompts[row]}, request).front();
      EXPECT_EQ(together[row].generated, alone.generated) << "row " << row << " disable_compile " << disable_compile;
      EXPECT_EQ(together[row].finish_reason, alone.finish_reason) << "row " << row;
    }
    EXPECT_EQ(together[2].finish_reason, generation::FinishReason::eos);
    EXPECT_LE(together[2].generated.size(), 4u);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryFixture, GoldenFixture, ::testing::ValuesIn(fixtures_on_every_device()),
                         [](const ::testing::TestParamInfo<Fixture>& info) {
                           std::string name = info.param.name + "_" + info.param.device;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(GoldenFixtureDtype, Bf16ConversionOnLoadStaysCloseToTheBf16Golden) {
  // The f32 weights rounded to bf16 at load are exactly the bf16 fixture's weights.
  LoadedFixture converted("qwen3-tiny", DType::bf16);
  LoadedFixture reference_golden("qwen3-tiny-bf16");
  std::vector<int64_t> prompt = converted.ids("input_ids");
  converted.generator.prepare_cache(1, static_cast<int64_t>(prompt.size()));
  Tensor logits = converted.generator.forward(prompt, 0, true);
  Tensor golden = reference_golden.golden.tensor("logits");
  EXPECT_LT(relative_error(logits.data<float>(), golden.data<float>(), golden.numel()),
            rounds_bf16_activations("cpu") ? 2e-2 : 1e-3);
}

// The default for bf16 weights is a bf16 cache: part of the activations is then bf16,
// for which the fixtures' README gives 2e-2 with exact greedy ids.
TEST(GoldenFixtureDtype, Bf16KvCacheStaysWithinTheBf16ActivationTolerance) {
  LoadedFixture fixture("qwen3-tiny-bf16", {}, DType::bf16);
  std::vector<int64_t> prompt = fixture.ids("input_ids"), greedy = fixture.ids("greedy_ids");
  fixture.generator.prepare_cache(1, static_cast<int64_t>(prompt.size()));
  Tensor logits = fixture.generator.forward(prompt, 0, true);
  Tensor golden = fixture.golden.tensor("logits");
  EXPECT_LT(relative_error(logits.data<float>(), golden.data<float>(), golden.numel()), 2e-2);
  GenerationConfig request;
  request.do_sample = false;
  request.max_new_tokens = static_cast<int64_t>(greedy.size());
  request.eos_token_id = std::vector<int64_t>{};
  EXPECT_EQ(fixture.generator.generate({prompt}, request).front().generated, greedy);
}

TEST(GoldenFixtureDtype, KvCacheDefaultsToTheWeightsPrecision) {
  io::ModelFiles files = io::ModelFiles::directory(testing::data_path("fixtures/qwen3-tiny"));
  io::ModelConfig config = io::load_model_config(files);
  io::Checkpoint checkpoint = io::Checkpoint::open(files);
  EXPECT_EQ(models::create_causal_lm(config, checkpoint, {})->kv_cache_dtype(), DType::f32);
  EXPECT_EQ(models::create_causal_lm(config, checkpoint, {.dtype = DType::bf16})->kv_cache_dtype(), DType::bf16);
  EXPECT_EQ(models::create_causal_lm(config, checkpoint, {.quantize_int8 = true})->kv_cache_dtype(), DType::bf16);
  EXPECT_THROW(models::create_causal_lm(config, checkpoint, {.kv_cache_dtype = DType::f16}), Error);
}

TEST(ModelRegistry, UnknownArchitectureListsTheSupportedOnes) {
  io::ModelConfig config = io::load_model_config(io::ModelFiles::directory(testing::data_path("fixtures/qwen3-tiny")));
  config.architectures = {"MambaForCausalLM"};
  io::Checkpoint checkpoint = io::Checkpoint::open(io::ModelFiles::directory(testing::data_path("fixtures/qwen3-tiny")));
  try {
    models::create_causal_lm(config, checkpoint, {});
    FAIL();
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("MambaForCausalLM"), std::string::npos);
    EXPECT_NE(message.find("LlamaForCausalLM"), std::string::npos);
    EXPECT_NE(message.find("Qwen3ForCausalLM"), std::string::npos);
  }
}

TEST(ModelRegistry, ConfigThatDoesNotMatchTheWeightsNamesTheTensor) {
  io::ModelFiles files = io::ModelFiles::directory(testing::data_path("fixtures/llama-tiny"));
  io::ModelConfig config = io::load_model_config(files);
  config.intermediate_size += 1;
  io::Checkpoint checkpoint = io::Checkpoint::open(files);
  try {
    models::create_causal_lm(config, checkpoint, {});
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << error.what();
  }
  config = io::load_model_config(files);
  config.architectures = {"Qwen3ForCausalLM"};  // Llama weights have no q_norm
  EXPECT_THROW(models::create_causal_lm(config, checkpoint, {}), Error);
}

}  // namespace
}  // namespace shardlm

namespace shardlm {
namespace {

// With a sliding window W, positions before W see what full attention sees; later ones
// differ; and decoding through the cache step by step equals one prefill of every position.
TEST(SlidingWindow, WindowedLayersAreConsistentAcrossPrefillAndDecode) {
  io::ModelFiles files = io::ModelFiles::directory(testing::data_path("fixtures/qwen2-tiny"));
  io::Checkpoint checkpoint = io::Checkpoint::open(files);
  std::string text = files.read_text("config.json");
  text.replace(text.find("\"use_sliding_window\": false"), 27, "\"use_sliding_window\": true");
  text.replace(text.find("\"sliding_window\": null"), 22, "\"sliding_window\": 4");
  text.replace(text.find("\"max_window_layers\": 2"), 22, "\"max_window_layers\": 1");
  io::ModelConfig windowed_config = io::parse_model_config(text, "windowed config.json");
  ASSERT_EQ(windowed_config.attention_window(1), 4);
  std::unique_ptr<backends::Backend> backend = backends::create_backend("cpu");
  auto windowed = models::create_causal_lm(windowed_config, checkpoint, {});
  auto full = models::create_causal_lm(io::load_model_config(files), checkpoint, {});
  generation::Generator windowed_run(*windowed, *backend, {}), full_run(*full, *backend, {});

  std::vector<int64_t> ids{5, 77, 300, 12, 9, 1000, 42, 8};
  const int64_t vocab = windowed_config.vocab_size, count = static_cast<int64_t>(ids.size());
  windowed_run.prepare_cache(1, count);
  full_run.prepare_cache(1, count);
  Tensor windowed_logits = windowed_run.forward(ids, 0, true), full_logits = full_run.forward(ids, 0, true);
  for (int64_t p = 0; p < count; ++p) {
    double difference = relative_error(windowed_logits.data<float>() + p * vocab, full_logits.data<float>() + p * vocab, vocab);
    if (p < 4) EXPECT_EQ(difference, 0.0) << p;
    else EXPECT_GT(difference, 1e-6) << p;
  }
  windowed_run.prepare_cache(1, count);
  for (int64_t p = 0; p < count; ++p) {
    Tensor step = windowed_run.forward(std::span(&ids[p], 1), p, false);
    EXPECT_LT(relative_error(step.data<float>(), windowed_logits.data<float>() + p * vocab, vocab), 1e-5) << p;
  }
}

// A multimodal Gemma 3 checkpoint as transformers writes one (Gemma3ForConditionalGeneration:
// model_type gemma3, the text model's config in text_config, its weights under
// language_model.model., a vision tower beside them) runs its text model: gemma3-tiny's
// weights so stored continue gemma3-tiny's golden prompt with its golden ids.
TEST(Gemma3Multimodal, TheTextModelOfAMultimodalCheckpointRuns) {
  const io::ModelFiles tiny = io::ModelFiles::directory(testing::data_path("fixtures/gemma3-tiny"));
  const std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("shardlm_gemma3_multimodal_" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  nlohmann::json text_config = nlohmann::json::parse(tiny.read_text("config.json"));
  text_config.erase("architectures");
  const nlohmann::json config = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                                 {"model_type", "gemma3"},
                                 {"text_config", text_config},
                                 {"vision_config", {{"hidden_size", 8}, {"model_type", "siglip_vision_model"}}},
                                 {"mm_tokens_per_image", 4}};
  std::ofstream(directory / "config.json") << config.dump(2);
  const io::Checkpoint stored = io::Checkpoint::open(tiny);
  std::map<std::string, Tensor> tensors;
  for (const std::string& name : stored.names()) tensors["language_model." + name] = stored.tensor(name);
  tensors["vision_tower.embeddings.patch_embedding.weight"] = Tensor::zeros({8, 3}, DType::f32);
  tensors["multi_modal_projector.mm_input_projection_weight"] = Tensor::zeros({8, 72}, DType::f32);
  io::write_safetensors((directory / "model.safetensors").string(), tensors);

  const io::ModelFiles files = io::ModelFiles::directory(directory.string());
  const io::ModelConfig parsed = io::load_model_config(files);
  EXPECT_EQ(parsed.architectures, std::vector<std::string>{"Gemma3ForCausalLM"});
  const io::Checkpoint checkpoint = io::Checkpoint::open(files);
  EXPECT_TRUE(checkpoint.contains("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_FALSE(checkpoint.contains("vision_tower.embeddings.patch_embedding.weight"));
  std::unique_ptr<backends::Backend> backend = backends::create_backend("cpu");
  auto model = models::create_causal_lm(parsed, checkpoint, {.kv_cache_dtype = DType::f32});
  generation::Generator generator(*model, *backend, io::load_generation_config(files, parsed));
  const io::SafetensorsFile golden = io::SafetensorsFile::open(tiny.path_of("golden.safetensors"));
  const auto ids = [&](const char* name) {
    const Tensor t = golden.tensor(name);
    return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
  };
  GenerationConfig request{.max_new_tokens = 32};
  request.eos_token_id = std::vector<int64_t>{};
  EXPECT_EQ(generator.generate({ids("input_ids")}, request).front().generated, ids("greedy_ids"));
  std::filesystem::remove_all(directory);
}

}  // namespace
}  // namespace shardlm
