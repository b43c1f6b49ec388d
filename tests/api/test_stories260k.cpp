// stories260K, a real trained Llama, against greedy outputs of llama2.c's run.c (an
// independent implementation), through the public API as a user calls it.
#include <gtest/gtest.h>

#include <shardlm/shardlm.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"

namespace shardlm {
namespace {

struct Reference {
  std::string prompt;
  std::vector<int64_t> prompt_ids, generated_ids;
  std::string text;
};

std::vector<int64_t> parse_line(const std::string& line, const std::string& label) {
  EXPECT_EQ(line.rfind(label, 0), 0u) << line;
  std::istringstream in(line.substr(label.size()));
  std::vector<int64_t> ids;
  for (int64_t id; in >> id;) ids.push_back(id);
  return ids;
}

Reference load_reference(const std::string& name) {
  std::ifstream prompts(testing::data_path("stories260K/prompts.json"));
  Reference reference;
  reference.prompt = nlohmann::json::parse(prompts)["prompts"][name].get<std::string>();
  std::ifstream ids(testing::data_path("stories260K/" + name + ".ids.txt"));
  std::string line;
  std::getline(ids, line);
  reference.prompt_ids = parse_line(line, "PROMPT_IDS:");
  std::getline(ids, line);
  reference.generated_ids = parse_line(line, "GEN_IDS:");
  std::ifstream text(testing::data_path("stories260K/" + name + ".txt"));
  reference.text.assign(std::istreambuf_iterator<char>(text), {});
  return reference;
}

class Stories260K : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    model_ = std::make_unique<AutoModelForCausalLM>(AutoModelForCausalLM::from_pretrained("embedded:stories260K"));
    tokenizer_ = std::make_unique<AutoTokenizer>(AutoTokenizer::from_pretrained("embedded:stories260K"));
  }
  static void TearDownTestSuite() {
    model_.reset();
    tokenizer_.reset();
  }
  static std::unique_ptr<AutoModelForCausalLM> model_;
  static std::unique_ptr<AutoTokenizer> tokenizer_;
};
std::unique_ptr<AutoModelForCausalLM> Stories260K::model_;
std::unique_ptr<AutoTokenizer> Stories260K::tokenizer_;

TEST_P(Stories260K, TokenizerEncodesThePromptAsRunC) {
  Reference reference = load_reference(GetParam());
  EXPECT_EQ((*tokenizer_)(reference.prompt).input_ids.front(), reference.prompt_ids);
}

TEST_P(Stories260K, GreedyGenerationReproducesRunC) {
  Reference reference = load_reference(GetParam());
  // run.c takes 200 steps counting the prompt (BOS included).
  for (bool disable_compile : {false, true}) {
    GenerationConfig config{.max_new_tokens = static_cast<int64_t>(reference.generated_ids.size())};
    config.disable_compile = disable_compile;
    std::vector<int64_t> output = model_->generate(BatchEncoding{{reference.prompt_ids}, {}}, config).front();
    std::vector<int64_t> generated(output.begin() + reference.prompt_ids.size(), output.end());
    EXPECT_EQ(generated.size(), GetParam() == "empty" ? 200u : 196u);
    EXPECT_EQ(generated, reference.generated_ids) << "disable_compile " << disable_compile;
  }
}

TEST_P(Stories260K, StreamedTextEqualsTheDecodedOutput) {
  Reference reference = load_reference(GetParam());
  std::string streamed;
  GenerationConfig config{.max_new_tokens = 60};
  std::vector<int64_t> output =
      model_->generate((*tokenizer_)(reference.prompt), config,
                       [&](size_t, int64_t, std::string_view text) { streamed += text; }, tokenizer_.get())
          .front();
  std::vector<int64_t> generated(output.begin() + reference.prompt_ids.size(), output.end());
  std::string whole = tokenizer_->decode(output, /*skip_special_tokens=*/true);
  EXPECT_EQ(whole, tokenizer_->decode(reference.prompt_ids, true) + streamed);
  // run.c's text output starts with the same words.
  EXPECT_EQ(reference.text.substr(0, 40), whole.substr(0, 40));
}

INSTANTIATE_TEST_SUITE_P(RunCReferences, Stories260K, ::testing::Values("once_upon_a_time", "the_little_dog", "empty"));

// Four prompts of different lengths in one batch: every row equals the prompt alone,
// including rows that stop early (EOS / stop string) while others go on.
TEST(Stories260KGeneration, BatchedRowsEqualEachPromptAlone) {
  AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained("embedded:stories260K");
  AutoTokenizer tokenizer = AutoTokenizer::from_pretrained("embedded:stories260K");
  std::vector<std::string> texts{"Once upon a time", "The little dog", "", "Tom and Lily went to the park to play"};
  BatchEncoding batch = tokenizer(texts);
  for (bool disable_compile : {false, true}) {
    GenerationConfig config{.max_new_tokens = 48};
    config.disable_compile = disable_compile;
    config.prefill_chunk_size = 4;
    config.stop_strings = {"park."};
    std::vector<std::vector<int64_t>> together = model.generate(batch, config, {}, &tokenizer);
    ASSERT_EQ(together.size(), 4u);
    for (size_t row = 0; row < texts.size(); ++row) {
      std::vector<int64_t> alone = model.generate(tokenizer(texts[row]), config, {}, &tokenizer).front();
      EXPECT_EQ(together[row], alone) << "row " << row << " disable_compile " << disable_compile;
    }
  }
  // Left padding with an attention mask is dropped before generation.
  BatchEncoding padded{{{0, 0, 1, 403, 407}, {1, 291, 376, 400, 428}}, {{0, 0, 1, 1, 1}, {1, 1, 1, 1, 1}}};
  GenerationConfig config{.max_new_tokens = 10};
  std::vector<std::vector<int64_t>> outputs = model.generate(padded, config);
  std::vector<int64_t> alone = model.generate(BatchEncoding{{{1, 403, 407}}, {}}, config).front();
  EXPECT_EQ(std::vector<int64_t>(outputs[0].begin() + 2, outputs[0].end()), alone);
}

TEST(Stories260KGeneration, TokenizerPaddingAndTruncationOptions) {
  AutoTokenizer tokenizer = AutoTokenizer::from_pretrained("embedded:stories260K");
  BatchEncoding truncated = tokenizer({"Once upon a time"}, EncodeOptions{.truncation = true, .max_length = 3});
  EXPECT_EQ(truncated.input_ids.front(), (std::vector<int64_t>{1, 403, 407}));
  try {
    tokenizer({"a", "Once upon a time"}, EncodeOptions{.padding = "longest"});
    FAIL() << "stories260K has no pad token";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("pad_token"), std::string::npos) << error.what();
  }
  EXPECT_THROW(tokenizer({"a"}, EncodeOptions{.padding = "sideways"}), Error);
}

TEST(Stories260KGeneration, StopStringsEndGenerationAndStayInTheOutput) {
  AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained("embedded:stories260K");
  AutoTokenizer tokenizer = AutoTokenizer::from_pretrained("embedded:stories260K");
  GenerationConfig config{.max_new_tokens = 150};
  config.stop_strings = {"Lily."};
  std::vector<int64_t> output = model.generate(tokenizer("Once upon a time"), config, {}, &tokenizer).front();
  std::string text = tokenizer.decode(output, true);
  EXPECT_EQ(text, "Once upon a time, there was a little girl named Lily.");
  config.stop_strings = {"Lily."};
  EXPECT_THROW(model.generate(tokenizer("Once upon a time"), config), Error);  // no tokenizer given
}

TEST(Stories260KGeneration, SeededSamplingIsReproducibleAndTopKOneIsGreedy) {
  AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained("embedded:stories260K");
  BatchEncoding prompt{{{1, 403, 407, 261, 378}}, {}};
  GenerationConfig sampled{.do_sample = true, .max_new_tokens = 40, .temperature = 1.0f, .seed = 11};
  EXPECT_EQ(model.generate(prompt, sampled), model.generate(prompt, sampled));
  GenerationConfig greedy{.max_new_tokens = 40};
  GenerationConfig top1{.do_sample = true, .max_new_tokens = 40, .temperature = 1.3f, .top_k = 1, .seed = 5};
  EXPECT_EQ(model.generate(prompt, greedy), model.generate(prompt, top1));
  EXPECT_NE(model.generate(prompt, sampled), model.generate(prompt, greedy));
}

TEST(Stories260KGeneration, RequestBeyondMaxPositionEmbeddingsFailsBeforeWork) {
  AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained("embedded:stories260K");
  GenerationConfig config{.max_new_tokens = 600};
  try {
    model.generate(BatchEncoding{{{1, 403}}, {}}, config);
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("max_position_embeddings (512)"), std::string::npos) << error.what();
  }
}

TEST(Stories260KGeneration, LoadsFromADirectoryAndConvertsDtypes) {
  const std::string directory = std::string(SHARDLM_DATA_DIR) + "/models/stories260K";
  BatchEncoding prompt{{{1, 403, 407, 261, 378}}, {}};
  GenerationConfig config{.max_new_tokens = 30};
  AutoModelForCausalLM from_directory = AutoModelForCausalLM::from_pretrained(directory);
  AutoModelForCausalLM embedded = AutoModelForCausalLM::from_pretrained("embedded:stories260K");
  EXPECT_EQ(from_directory.generate(prompt, config), embedded.generate(prompt, config));
  EXPECT_EQ(from_directory.architecture(), "LlamaForCausalLM");
  EXPECT_EQ(from_directory.device(), "cpu");
  for (DType dtype : {DType::bf16, DType::f16}) {
    AutoModelForCausalLM converted = AutoModelForCausalLM::from_pretrained(directory, {.dtype = dtype});
    EXPECT_EQ(converted.weight_bytes() * 2, from_directory.weight_bytes());
    std::vector<std::vector<float>> reduced = converted.logits({1, 403, 407, 261, 378});
    std::vector<std::vector<float>> full = from_directory.logits({1, 403, 407, 261, 378});
    EXPECT_LT(testing::relative_error(reduced.back().data(), full.back().data(), full.back().size()), 2e-2);
  }
  EXPECT_THROW(AutoModelForCausalLM::from_pretrained(directory, {.device_map = "tpu"}), Error);
  EXPECT_THROW(AutoModelForCausalLM::from_pretrained("/nonexistent/model"), Error);
}

}  // namespace
}  // namespace shardlm

namespace shardlm {
namespace {

// The example of DESIGN.md's "The user's view", as written there (on the built-in model).
TEST(UsersView, DesignExampleCompilesAndRuns) {
  auto tokenizer = shardlm::AutoTokenizer::from_pretrained("embedded:stories260K");
  auto model = shardlm::AutoModelForCausalLM::from_pretrained(
      "embedded:stories260K", {.dtype = shardlm::DType::bf16, .device_map = "cpu"});
  auto inputs = tokenizer("The French Bread Law states");
  auto output = model.generate(inputs, {.do_sample = true, .max_new_tokens = 50, .cache_implementation = "static"});
  std::string text = tokenizer.decode(output[0], /*skip_special_tokens=*/true);
  EXPECT_EQ(text.rfind("The French Bread Law states", 0), 0u) << text;
  EXPECT_GT(output[0].size(), inputs.input_ids[0].size());  // sampling may end at EOS before 50
  EXPECT_LE(output[0].size(), inputs.input_ids[0].size() + 50);
}

}  // namespace
}  // namespace shardlm
