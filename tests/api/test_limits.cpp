// Every limit on what an input file may make shardlm allocate or compute, each with an
// input just over it (and, where cheap, one at it): the error names the file or key,
// the amount asked for and the limit (docs/FUZZING.md lists the limits).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/limits.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "models/causal_lm.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/pretrained_tokenizer.h"

namespace shardlm {
namespace {

using testing::error_of;

class Limits : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 str_cat("shardlm-limits-", ::testing::UnitTest::GetInstance()->current_test_info()->name(), "-",
                         ::getpid());
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  std::string path(const std::string& name) const { return (directory_ / name).string(); }
  // A sparse file of `bytes` bytes: costs no disk, reads as zeros.
  std::string sparse_file(const std::string& name, size_t bytes) const {
    { std::ofstream(path(name)) << "{"; }
    std::filesystem::resize_file(path(name), bytes);
    return path(name);
  }
  std::filesystem::path directory_;
};

TEST_F(Limits, JsonFilesOverTheSizeLimitAreRefusedBeforeReading) {
  sparse_file("config.json", limits::max_json_file_bytes + 1);
  const std::string message = error_of([&] { io::load_model_config(io::ModelFiles::directory(directory_.string())); });
  EXPECT_NE(message.find(str_cat(path("config.json"), " is ", limits::max_json_file_bytes + 1, " bytes, over the limit of ",
                                 limits::max_json_file_bytes)),
            std::string::npos)
      << message;

  const std::string tokenizer = sparse_file("tokenizer.json", limits::max_json_file_bytes + 1);
  EXPECT_NE(error_of([&] { tokenizer::PretrainedTokenizer::from_files(tokenizer, ""); }).find("over the limit"),
            std::string::npos);
  // At the limit the file is read (and then refused as JSON, being zeros).
  sparse_file("at_limit.json", limits::max_json_file_bytes);
  EXPECT_EQ(error_of([&] { tokenizer::PretrainedTokenizer::from_files(path("at_limit.json"), ""); }).find("over the limit"),
            std::string::npos);
}

TEST_F(Limits, SafetensorsHeaderOverOneHundredMegabytes) {
  auto write_header_length = [&](const std::string& name, uint64_t length) {
    std::ofstream out(path(name), std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((length >> (8 * i)) & 0xff));
    out << "{}";
    return path(name);
  };
  std::string message = error_of([&] { io::SafetensorsFile::open(write_header_length("over.safetensors", 100'000'001)); });
  EXPECT_NE(message.find("header length 100000001 exceeds the 100 MB limit"), std::string::npos) << message;
  message = error_of([&] { io::SafetensorsFile::open(write_header_length("at.safetensors", 100'000'000)); });
  EXPECT_NE(message.find("runs past the end of the file"), std::string::npos) << message;
}

// A tensor's byte size must fit in 64 bits, and each dimension in int64, before any
// offset arithmetic: 2^31 × 2^31 float32 elements are exactly 2^64 bytes.
TEST_F(Limits, SafetensorsShapesWhoseSizeOverflows) {
  auto open_with_shape = [&](const std::string& shape) {
    const std::string header =
        str_cat(R"({"w":{"dtype":"F32","shape":)", shape, R"(,"data_offsets":[0,16]}})");
    std::ofstream out(path("s.safetensors"), std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((header.size() >> (8 * i)) & 0xff));
    out << header << std::string(16, '\0');
    out.close();
    return error_of([&] { io::SafetensorsFile::open(path("s.safetensors")); });
  };
  EXPECT_NE(open_with_shape("[2147483648,2147483648]").find("shape size overflows"), std::string::npos);
  const std::string under = open_with_shape("[2147483648,2147483647]");
  EXPECT_EQ(under.find("overflows"), std::string::npos) << under;
  EXPECT_NE(under.find("16"), std::string::npos) << under;  // refused for its size, 16 bytes of data
  EXPECT_NE(open_with_shape("[9223372036854775808]").find("dimension too large"), std::string::npos);
}

std::string tokenizer_json(int64_t vocab_id, int64_t added_id) {
  return str_cat(R"({"version": "1.0", "added_tokens": [{"id": )", added_id,
                 R"(, "content": "<s>", "special": true}], "model": {"type": "BPE", "vocab": {"a": 0, "b": )", vocab_id,
                 R"(}, "merges": []}})");
}

TEST_F(Limits, TokenIdsAboveTheLimitAreRefusedBeforeSizingTables) {
  const int64_t limit = limits::max_token_id;
  auto load = [](const std::string& json) {
    return tokenizer::PretrainedTokenizer::from_texts(json, "tokenizer.json", "", "");
  };
  std::string message = error_of([&] { load(tokenizer_json(limit + 1, 1)); });
  EXPECT_NE(message.find(str_cat("has id ", limit + 1, ", above the limit of ", limit)), std::string::npos) << message;
  EXPECT_NE(message.find("tokenizer.json"), std::string::npos) << message;
  message = error_of([&] { load(tokenizer_json(1, limit + 1)); });
  EXPECT_NE(message.find(str_cat("id ", limit + 1, " is above the limit")), std::string::npos) << message;
  EXPECT_EQ(load(tokenizer_json(limit, limit - 1)).tokenizer().vocab_size(), limit + 1);
}

// The smallest value of a limit under which `render` succeeds, searched upwards from 1.
template <typename Render>
uint64_t smallest_limit_that_renders(Render render, uint64_t upper) {
  for (uint64_t limit = 1; limit <= upper; ++limit)
    if (error_of(render(limit)) == "(no error)") return limit;
  return 0;
}

TEST_F(Limits, ChatTemplateOutputAndSteps) {
  tokenizer::ChatTemplate chat =
      tokenizer::ChatTemplate::parse("{% for m in messages %}{{ m.content * 10 }}{% endfor %}", "template");
  const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "abc"}])");
  tokenizer::ChatRenderOptions options;
  options.max_output_bytes = 30;
  EXPECT_EQ(chat.render(messages, options).size(), 30u);
  options.max_output_bytes = 29;
  EXPECT_NE(error_of([&] { chat.render(messages, options); }).find("exceeds 29 bytes"), std::string::npos);

  tokenizer::ChatTemplate loop =
      tokenizer::ChatTemplate::parse("{% for i in range(40) %}{{ i }}{% endfor %}", "template");
  options = {};
  const uint64_t steps = smallest_limit_that_renders(
      [&](uint64_t limit) {
        return [&, limit] {
          tokenizer::ChatRenderOptions limited;
          limited.max_steps = limit;
          loop.render(messages, limited);
        };
      },
      1000);
  ASSERT_GT(steps, 40u);
  options.max_steps = steps - 1;
  EXPECT_NE(error_of([&] { loop.render(messages, options); }).find(str_cat("runs more than ", steps - 1, " steps")),
            std::string::npos);
}

// The smallest depth at which `source_of(depth)` is refused, searched upwards from 1.
template <typename Source, typename Render>
int first_refused_depth(Source source_of, Render render) {
  for (int depth = 1; depth <= 1000; ++depth)
    if (render(source_of(depth)) != "(no error)") return depth;
  return 0;
}

TEST_F(Limits, ChatTemplateRecursionAndNesting) {
  const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  auto render = [&](const std::string& source) {
    return error_of([&] { tokenizer::ChatTemplate::parse(source, "template").render(messages, {}); });
  };
  auto recursion = [](int depth) {
    return str_cat("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(", depth, ") }}");
  };
  // f(n) nests n + 1 calls: 200 render, 201 are refused.
  EXPECT_EQ(render(recursion(199)), "(no error)");
  EXPECT_NE(render(recursion(200)).find("nest deeper than 200 levels"), std::string::npos) << render(recursion(200));

  // Parsing counts blocks and the expressions inside them on one depth of at most 200.
  auto nested_blocks = [](int depth) {
    std::string source;
    for (int i = 0; i < depth; ++i) source += "{% if true %}";
    for (int i = 0; i < depth; ++i) source += "{% endif %}";
    return source;
  };
  const int blocks = first_refused_depth(nested_blocks, render);
  ASSERT_GT(blocks, 100);
  EXPECT_EQ(render(nested_blocks(blocks - 1)), "(no error)");
  EXPECT_NE(render(nested_blocks(blocks)).find("deeper than 200 levels"), std::string::npos)
      << render(nested_blocks(blocks));

  auto nested_expression = [](int depth) { return "{{ " + std::string(depth, '(') + "1" + std::string(depth, ')') + " }}"; };
  const int parentheses = first_refused_depth(nested_expression, render);
  ASSERT_GT(parentheses, 1);
  EXPECT_EQ(render(nested_expression(parentheses - 1)), "(no error)");
  EXPECT_NE(render(nested_expression(parentheses)).find("expression nests deeper than 200 levels"), std::string::npos);
}

TEST_F(Limits, KvCacheOverTheAvailableMemoryIsRefusedBeforeAllocating) {
  io::ModelFiles files = io::ModelFiles::directory(testing::data_path("fixtures/qwen3-tiny"));
  const io::ModelConfig config = io::load_model_config(files);
  io::Checkpoint checkpoint = io::Checkpoint::open(files);
  std::unique_ptr<models::CausalLM> model = models::create_causal_lm(config, checkpoint, {});
  std::unique_ptr<backends::Backend> backend = backends::create_backend("cpu");
  // Keys and values, every layer, float32.
  const uint64_t bytes_per_position =
      2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * sizeof(float);
  // 2% over what is available now (which moves a little while the test runs).
  const uint64_t available = limits::available_memory_bytes();
  const int64_t positions = static_cast<int64_t>(available / bytes_per_position * 102 / 100);
  const std::string message = error_of([&] { model->allocate_cache(*backend, 1, positions); });
  EXPECT_NE(message.find(str_cat("needs ", positions * bytes_per_position, " bytes but only ")), std::string::npos)
      << message;
  EXPECT_NE(message.find("bytes of memory are available: lower max_cache_len"), std::string::npos) << message;
}

}  // namespace
}  // namespace shardlm
