// Weight-only int8 (--quantize int8) against float: the logits of real sequences, as
// top-1 agreement and max|int8 - float| / max|float|, on stories260K (a trained model)
// and every fixture (random weights, against their float64 golden logits). The figures
// are printed, and recorded in docs/PERFORMANCE.md. Bounds: Q8_0-style blocks keep
// each weight within half a step (max|w| / 254) of its float value.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include <shardlm/auto_model.h>

#include "io/safetensors.h"
#include "test_util.h"

namespace shardlm {
namespace {

struct Agreement {
  double top1 = 0, relative_error = 0;
};

// Compares two [positions][vocab] logit tables.
Agreement compare(const std::vector<std::vector<float>>& actual, const std::vector<std::vector<float>>& expected) {
  int64_t same = 0;
  double difference = 0, magnitude = 0;
  for (size_t p = 0; p < expected.size(); ++p) {
    const auto top = [](const std::vector<float>& row) { return std::max_element(row.begin(), row.end()) - row.begin(); };
    same += top(actual[p]) == top(expected[p]);
    for (size_t v = 0; v < expected[p].size(); ++v) {
      difference = std::max(difference, std::abs(static_cast<double>(actual[p][v]) - expected[p][v]));
      magnitude = std::max(magnitude, std::abs(static_cast<double>(expected[p][v])));
    }
  }
  return {static_cast<double>(same) / static_cast<double>(expected.size()), difference / magnitude};
}

std::vector<int64_t> read_ids(const std::string& path) {
  std::ifstream in(path);
  std::vector<int64_t> ids;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line.substr(line.find(':') + 1));
    for (int64_t id; words >> id;) ids.push_back(id);
  }
  return ids;
}

TEST(Int8Quantization, Stories260KStaysCloseToFloat) {
  // The prompt and llama2.c's greedy continuation: 40+ real positions.
  const std::vector<int64_t> ids = read_ids(testing::data_path("stories260K/once_upon_a_time.ids.txt"));
  ASSERT_GT(ids.size(), 20u);
  AutoModelForCausalLM float_model = AutoModelForCausalLM::from_pretrained("embedded:stories260K");
  PretrainedOptions options;
  options.quantize = "int8";
  AutoModelForCausalLM int8_model = AutoModelForCausalLM::from_pretrained("embedded:stories260K", options);
  EXPECT_LT(int8_model.weight_bytes(), float_model.weight_bytes() / 2);
  const Agreement agreement = compare(int8_model.logits(ids), float_model.logits(ids));
  std::cout << "stories260K int8 vs f32: top-1 agreement " << agreement.top1 << ", logit error "
            << agreement.relative_error << " over " << ids.size() << " positions\n";
  EXPECT_GE(agreement.top1, 0.9);
  EXPECT_LT(agreement.relative_error, 0.05);
}

class Int8Fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(Int8Fixture, LogitsStayCloseToTheGolden) {
  const std::string directory = testing::data_path("fixtures/" + GetParam());
  io::SafetensorsFile golden = io::SafetensorsFile::open(directory + "/golden.safetensors");
  Tensor input = golden.tensor("input_ids"), logits = golden.tensor("logits");  // [positions, vocab]
  const std::vector<int64_t> ids(input.data<int64_t>(), input.data<int64_t>() + input.numel());
  std::vector<std::vector<float>> expected;
  const int64_t vocab = logits.shape().back();
  for (int64_t p = 0; p < logits.numel() / vocab; ++p)
    expected.emplace_back(logits.data<float>() + p * vocab, logits.data<float>() + (p + 1) * vocab);
  PretrainedOptions options;
  options.quantize = "int8";
  const Agreement agreement = compare(AutoModelForCausalLM::from_pretrained(directory, options).logits(ids), expected);
  std::cout << GetParam() << " int8 vs float64 golden: top-1 agreement " << agreement.top1 << ", logit error "
            << agreement.relative_error << "\n";
  EXPECT_GE(agreement.top1, 0.9);
  EXPECT_LT(agreement.relative_error, 0.05);
}

INSTANTIATE_TEST_SUITE_P(EveryFixture, Int8Fixture,
                         ::testing::Values("llama-tiny", "llama3-tiny", "qwen2-tiny", "qwen3-tiny", "qwen3-tiny-bf16",
                                           "qwen3-tiny-untied", "glm4-tiny", "gemma3-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Int8Quantization, RejectsAnUnknownScheme) {
  PretrainedOptions options;
  options.quantize = "int4";
  EXPECT_THROW(AutoModelForCausalLM::from_pretrained("embedded:stories260K", options), Error);
}

}  // namespace
}  // namespace shardlm
