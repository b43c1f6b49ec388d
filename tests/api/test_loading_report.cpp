// The loading report, as transformers' missing and unexpected keys: weights a checkpoint
// holds that the architecture does not read are a warning naming them; weights it needs
// that the checkpoint lacks are one error naming every one of them, before any is read.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include <shardlm/auto_model.h>

#include "io/safetensors.h"
#include "test_util.h"

namespace shardlm {
namespace {

namespace fs = std::filesystem;

// A copy of the qwen3-tiny fixture whose weights are `edit` applied to the fixture's.
std::string edited_fixture(const std::string& name, const std::function<void(std::map<std::string, Tensor>&)>& edit) {
  const fs::path source = fs::path(SHARDLM_TEST_DATA_DIR) / "fixtures" / "qwen3-tiny";
  const fs::path directory = fs::temp_directory_path() / ("shardlm-loading-report-" + name);
  fs::remove_all(directory);
  fs::create_directories(directory);
  fs::copy_file(source / "config.json", directory / "config.json");
  const io::SafetensorsFile file = io::SafetensorsFile::open((source / "model.safetensors").string());
  std::map<std::string, Tensor> tensors;
  for (const std::string& tensor : file.names()) tensors.emplace(tensor, file.tensor(tensor));
  edit(tensors);
  io::write_safetensors((directory / "model.safetensors").string(), tensors);
  return directory.string();
}

TEST(LoadingReport, UnusedWeightsAreAWarningNamingThem) {
  const std::string directory = edited_fixture("unused", [](std::map<std::string, Tensor>& tensors) {
    // Biases a Qwen3 config without attention_bias never reads, and a stray tensor.
    const int64_t rows = tensors.at("model.layers.0.self_attn.q_proj.weight").shape()[0];
    tensors.emplace("model.layers.0.self_attn.q_proj.bias", Tensor::zeros({rows}, DType::f32));
    tensors.emplace("model.layers.1.self_attn.q_proj.bias", Tensor::zeros({rows}, DType::f32));
    tensors.emplace("model.extra_projection.weight", Tensor::zeros({2, 2}, DType::f32));
    // Tolerated silently: a saved inv_freq buffer.
    tensors.emplace("model.layers.0.self_attn.rotary_emb.inv_freq", Tensor::zeros({4}, DType::f32));
  });
  ::testing::internal::CaptureStderr();
  AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained(directory);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("3 weights of the checkpoint are not used by Qwen3ForCausalLM"), std::string::npos) << log;
  EXPECT_NE(log.find("model.extra_projection.weight, model.layers.0.self_attn.q_proj.bias, "
                     "model.layers.1.self_attn.q_proj.bias"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("inv_freq"), std::string::npos) << log;
  // The model runs as the fixture does.
  AutoModelForCausalLM fixture =
      AutoModelForCausalLM::from_pretrained(std::string(SHARDLM_TEST_DATA_DIR) + "/fixtures/qwen3-tiny");
  const BatchEncoding prompt{{{1, 5, 9, 13}}, {}};
  EXPECT_EQ(model.generate(prompt, {.max_new_tokens = 6}), fixture.generate(prompt, {.max_new_tokens = 6}));
}

TEST(LoadingReport, ACompleteCheckpointLoadsWithoutAWord) {
  ::testing::internal::CaptureStderr();
  AutoModelForCausalLM::from_pretrained(std::string(SHARDLM_TEST_DATA_DIR) + "/fixtures/qwen3-tiny");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(LoadingReport, MissingWeightsAreOneErrorNamingEachOfThem) {
  const std::string directory = edited_fixture("missing", [](std::map<std::string, Tensor>& tensors) {
    tensors.erase("model.layers.1.self_attn.k_norm.weight");
    tensors.erase("model.layers.0.mlp.down_proj.weight");
  });
  try {
    AutoModelForCausalLM::from_pretrained(directory);
    FAIL() << "a checkpoint without two of its weights loaded";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("the checkpoint lacks 2 weights that Qwen3ForCausalLM"), std::string::npos) << message;
    EXPECT_NE(message.find("model.layers.0.mlp.down_proj.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("model.layers.1.self_attn.k_norm.weight"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace shardlm
