// The `shardlm` binary as a user runs it: exit codes, stdout, stderr.
#include <gtest/gtest.h>

#include <cstdlib>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "test_util.h"

namespace shardlm {
namespace {

using testing::CommandResult;

CommandResult run(const std::string& arguments, const std::string& input = "") {
  return testing::run_shardlm(arguments, input);
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

TEST(Cli, GenerateIdsMatchTheRunCGolden) {
  std::ifstream golden(testing::data_path("stories260K/once_upon_a_time.ids.txt"));
  std::string prompt_line, generated_line;
  std::getline(golden, prompt_line);
  std::getline(golden, generated_line);
  std::string expected = generated_line.substr(std::string("GEN_IDS: ").size());
  std::replace(expected.begin(), expected.end(), ' ', ',');
  CommandResult result = run("generate --input-ids 1,403,407,261,378 --max-new-tokens 196 --output ids");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, expected + "\n");
}

TEST(Cli, GenerateStreamsTextOnTheDefaultModel) {
  CommandResult result = run("generate --prompt 'Once upon a time' --max-new-tokens 30");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << result.out;
  EXPECT_TRUE(result.err.empty()) << result.err;
}

TEST(Cli, JsonOutputIsOneObject) {
  CommandResult result = run("generate -p 'The little dog' -n 12 --temperature 0.7 --seed 4 --output json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  nlohmann::json parsed = nlohmann::json::parse(result.out);
  EXPECT_EQ(parsed["prompt_ids"], nlohmann::json({1, 291, 376, 400, 428}));
  EXPECT_EQ(parsed["generated_ids"].size(), 12u);
  EXPECT_TRUE(parsed["text"].is_string());
  EXPECT_EQ(run("generate -p 'The little dog' -n 12 --temperature 0.7 --seed 4 --output json").out, result.out);
}

TEST(Cli, ModelWithoutTokenizerTakesIds) {
  const std::string model = testing::data_path("fixtures/qwen3-tiny-untied");
  CommandResult ids = run("generate --model " + model + " --input-ids 5,6,7 -n 4 --output ids");
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  EXPECT_EQ(std::count(ids.out.begin(), ids.out.end(), ','), 3);
  CommandResult text = run("generate --model " + model + " --prompt hello");
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_TRUE(contains(text.err, "no tokenizer.json")) << text.err;
  EXPECT_TRUE(text.out.empty());
}

// A command that cannot run without a tokenizer says so before it reads any weight: here
// the weights are cut short, and the error is still the tokenizer's.
TEST(Cli, MissingTokenizerFailsBeforeTheWeightsLoad) {
  const std::filesystem::path model =
      std::filesystem::temp_directory_path() / ("shardlm_no_tokenizer_" + std::to_string(::getpid()));
  std::filesystem::remove_all(model);
  std::filesystem::create_directories(model);
  const std::filesystem::path fixture = testing::data_path("fixtures/qwen3-tiny-untied");
  std::filesystem::copy_file(fixture / "config.json", model / "config.json");
  std::filesystem::copy_file(fixture / "model.safetensors", model / "model.safetensors");
  std::filesystem::resize_file(model / "model.safetensors", std::filesystem::file_size(model / "model.safetensors") / 2);
  std::ofstream(model / "text.txt") << "some text to score";
  const std::string text = (model / "text.txt").string();
  for (const std::string& command : {std::string("generate --prompt hello"), std::string("chat"), "perplexity -f " + text}) {
    CommandResult result = run(command + " --model " + model.string(), "hi\n");
    EXPECT_EQ(result.exit_code, 1) << command;
    EXPECT_TRUE(contains(result.err, "no tokenizer")) << command << ": " << result.err;
    EXPECT_FALSE(contains(result.err, "safetensors")) << command << ": " << result.err;
    EXPECT_TRUE(result.out.empty()) << command;
  }
  CommandResult ids = run("generate --input-ids 5,6 -n 2 --output ids --model " + model.string());
  EXPECT_EQ(ids.exit_code, 1);
  EXPECT_TRUE(contains(ids.err, "model.safetensors")) << ids.err;
  std::filesystem::remove_all(model);
}

TEST(Cli, BadInputGetsAClearErrorAndNoOutput) {
  struct Case {
    std::string arguments, message;
  };
  for (const Case& c : std::vector<Case>{
           {"generate --input-ids 1,x,3", "'x' is not a non-negative integer"},
           {"generate --model /nonexistent/dir -p hi", "/nonexistent/dir"},
           {"generate --device cuda:x -p hi", "\"cuda:N\""},
           {"generate --dtype float8 -p hi", "float8"},
           {"generate -p hi -n 600", "max_position_embeddings"},
           {"generate --input-ids 1,9999 -n 2", "outside the vocabulary"},
           {"generate -p hi --greedy --sample", "contradict"},
           {"generate -p hi --temperature 0", "temperature must be positive"},
           {"generate -p hi --max-cache-len 1000000000000000", "lower max_cache_len"},
           {"generate -p hi --prefill-chunk 0", "prefill_chunk_size must be positive"},
       }) {
    CommandResult result = run(c.arguments);
    EXPECT_EQ(result.exit_code, 1) << c.arguments;
    EXPECT_TRUE(contains(result.err, c.message)) << c.arguments << ": " << result.err;
    EXPECT_TRUE(contains(result.err, "shardlm: error:")) << result.err;
    EXPECT_TRUE(result.out.empty()) << c.arguments << ": " << result.out;
  }
  CommandResult bad_choice = run("generate --output xml");
  EXPECT_NE(bad_choice.exit_code, 0);
  EXPECT_TRUE(contains(bad_choice.err, "xml")) << bad_choice.err;
  EXPECT_NE(run("frobnicate").exit_code, 0);
}

TEST(Cli, HelpExplainsEachCommand) {
  CommandResult top = run("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_TRUE(contains(top.out, "generate"));
  EXPECT_TRUE(contains(top.out, "devices"));
  CommandResult generate = run("generate --help");
  EXPECT_EQ(generate.exit_code, 0);
  for (const char* option : {"--model", "--prompt", "--input-ids", "--max-new-tokens", "--temperature", "--top-k",
                             "--top-p", "--min-p", "--repetition-penalty", "--seed", "--greedy", "--dtype",
                             "--device", "--output", "--stop", "--threads", "--quantize", "--kv-cache-dtype"})
    EXPECT_TRUE(contains(generate.out, option)) << option;
  EXPECT_EQ(run("devices --help").exit_code, 0);
  CommandResult chat = run("chat --help");
  EXPECT_EQ(chat.exit_code, 0);
  EXPECT_TRUE(contains(chat.out, "--system") && contains(chat.out, "--enable-thinking")) << chat.out;
  CommandResult tokenize = run("tokenize --help");
  EXPECT_EQ(tokenize.exit_code, 0);
  EXPECT_TRUE(contains(tokenize.out, "--decode") && contains(tokenize.out, "--plain")) << tokenize.out;
  EXPECT_EQ(run("download --help").exit_code, 0);
  for (const char* command : {"bench", "quantize", "random-model"}) {
    EXPECT_TRUE(contains(top.out, command)) << command;
    EXPECT_EQ(run(std::string(command) + " --help").exit_code, 0) << command;
  }
  CommandResult bench = run("bench --help");
  for (const char* option : {"--prompt-tokens", "--gen-tokens", "--repetitions", "--threads", "--output"})
    EXPECT_TRUE(contains(bench.out, option)) << option;
}

TEST(Cli, BatchOfPromptsPrintsOneLinePerPrompt) {
  CommandResult result = run("generate -p 'Once upon a time' -p 'The little dog' -n 8 --output ids --stats");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(std::count(result.out.begin(), result.out.end(), '\n'), 2);
  EXPECT_TRUE(contains(result.err, "compiles: 2")) << result.err;
  EXPECT_TRUE(contains(result.err, "decode:")) << result.err;
  CommandResult eager = run("generate -p 'Once upon a time' -p 'The little dog' -n 8 --output ids --no-compile");
  EXPECT_EQ(eager.out, result.out);
}

TEST(Cli, TokenizeEncodesAndDecodesLines) {
  CommandResult encoded = run("tokenize --add-special-tokens", "\"Once upon a time\"\n\"The little dog\"\n");
  ASSERT_EQ(encoded.exit_code, 0) << encoded.err;
  EXPECT_EQ(encoded.out, "{\"ids\":[1,403,407,261,378]}\n{\"ids\":[1,291,376,400,428]}\n");
  CommandResult decoded = run("tokenize --decode --skip-special-tokens", "{\"ids\":[1,403,407,261,378]}\n");
  ASSERT_EQ(decoded.exit_code, 0) << decoded.err;
  EXPECT_EQ(decoded.out, "\"Once upon a time\"\n");
  CommandResult bad = run("tokenize", "not json\n");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.err, "line 1")) << bad.err;
}

TEST(Cli, ChatRendersTheTemplateAndKeepsTheConversation) {
  namespace fs = std::filesystem;
  const fs::path directory = fs::temp_directory_path() / ("shardlm_chat_" + std::to_string(::getpid()));
  fs::create_directories(directory);
  const fs::path stories = fs::path(SHARDLM_DATA_DIR) / "models/stories260K";
  for (const char* file : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"})
    fs::copy_file(stories / file, directory / file, fs::copy_options::overwrite_existing);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(stories / "tokenizer_config.json"));
  // A minimal template: user turns start with BOS, assistant turns end with EOS.
  config["chat_template"] =
      "{% for m in messages %}{% if m['role'] == 'user' %}{{ bos_token }}{{ m['content'] }}"
      "{% else %}{{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}";
  std::ofstream(directory / "tokenizer_config.json") << config.dump();

  CommandResult chat = run("chat -m " + directory.string() + " -n 12", "Once upon a time\nThe dog\n/exit\n");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_EQ(std::count(chat.out.begin(), chat.out.end(), '\n'), 2) << chat.out;
  EXPECT_EQ(chat.out.rfind(", there was a little girl named Lily.", 0), 0u) << chat.out;

  CommandResult no_template = run("chat", "hello\n");
  EXPECT_EQ(no_template.exit_code, 1);
  EXPECT_TRUE(contains(no_template.err, "no chat_template")) << no_template.err;
  fs::remove_all(directory);
}

TEST(Cli, DevicesListsTheCpu) {
  CommandResult result = run("devices");
  ASSERT_EQ(result.exit_code, 0);
  EXPECT_TRUE(contains(result.out, "cpu    yes")) << result.out;
  EXPECT_TRUE(contains(result.out, "cuda")) << result.out;
  CommandResult picked = run("generate --device auto -n 3 --output ids");
  EXPECT_EQ(picked.exit_code, 0) << picked.err;
  EXPECT_TRUE(contains(picked.err, "device_map=auto: using cpu")) << picked.err;
}

// SHARDLM_PROFILE_OPS=1 prints where the time went, op kind by op kind, to stderr at exit,
// and changes nothing of the output; unset, nothing is printed.
TEST(Cli, OpProfileIsPrintedWhenAsked) {
  CommandResult plain = run("generate -n 8 --output ids");
  ::setenv("SHARDLM_PROFILE_OPS", "1", 1);
  CommandResult profiled = run("generate -n 8 --output ids");
  ::unsetenv("SHARDLM_PROFILE_OPS");
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  EXPECT_EQ(profiled.out, plain.out);
  EXPECT_FALSE(contains(plain.err, "op profile")) << plain.err;
  EXPECT_TRUE(contains(profiled.err, "shardlm op profile (SHARDLM_PROFILE_OPS)")) << profiled.err;
  for (const char* op : {"\nattention ", "\nrms_norm_linear ", "\ntotal ", "\nevery call at its kind's median: "})
    EXPECT_TRUE(contains(profiled.err, op)) << op << " missing from:\n" << profiled.err;
}

// SHARDLM_CPU_KERNELS picks the matmul table (A/B runs on one machine): the portable one
// gives the default's greedy ids; a name the CPU does not run is an error, before any output.
TEST(Cli, CpuKernelsAreChosenByTheEnvironment) {
  CommandResult best = run("generate -n 8 --output ids");
  ASSERT_EQ(best.exit_code, 0) << best.err;
  ::setenv("SHARDLM_CPU_KERNELS", "portable", 1);
  CommandResult listed = run("devices"), portable = run("generate -n 8 --output ids");
  ::setenv("SHARDLM_CPU_KERNELS", "avx3", 1);
  CommandResult wrong = run("devices");
  ::unsetenv("SHARDLM_CPU_KERNELS");
  EXPECT_TRUE(contains(listed.out, "CPU kernels portable (of portable")) << listed.out;
  EXPECT_EQ(portable.out, best.out) << portable.err;
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_EQ(wrong.out, "");
  EXPECT_TRUE(contains(wrong.err, "SHARDLM_CPU_KERNELS=avx3 names no matmul kernel table")) << wrong.err;
}

}  // namespace
}  // namespace shardlm
