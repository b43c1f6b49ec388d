// The `shardlm` binary as a user runs it: exit codes, stdout, stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace shardlm {
namespace {

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

CommandResult run(const std::string& arguments) {
  const std::string err_path = std::filesystem::temp_directory_path() / ("shardlm_cli_err_" + std::to_string(::getpid()));
  const std::string command = std::string(SHARDLM_CLI_PATH) + " " + arguments + " 2>" + err_path;
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) result.out.append(buffer, n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  result.err.assign(std::istreambuf_iterator<char>(err), {});
  std::filesystem::remove(err_path);
  return result;
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

TEST(Cli, BadInputGetsAClearErrorAndNoOutput) {
  struct Case {
    std::string arguments, message;
  };
  for (const Case& c : std::vector<Case>{
           {"generate --input-ids 1,x,3", "'x' is not a non-negative integer"},
           {"generate --model /nonexistent/dir -p hi", "/nonexistent/dir"},
           {"generate --device cuda -p hi", "no CUDA backend"},
           {"generate --dtype float8 -p hi", "float8"},
           {"generate -p hi -n 600", "max_position_embeddings"},
           {"generate --input-ids 1,9999 -n 2", "outside the vocabulary"},
           {"generate -p hi --greedy --sample", "contradict"},
           {"generate -p hi --temperature 0", "temperature must be positive"},
       }) {
    CommandResult result = run(c.arguments);
    EXPECT_EQ(result.exit_code, 1) << c.arguments;
    EXPECT_TRUE(contains(result.err, c.message)) << c.arguments << ": " << result.err;
    EXPECT_TRUE(contains(result.err, "shardlm: error:")) << result.err;
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
                             "--device", "--output", "--stop"})
    EXPECT_TRUE(contains(generate.out, option)) << option;
  EXPECT_EQ(run("devices --help").exit_code, 0);
}

TEST(Cli, DevicesListsTheCpu) {
  CommandResult result = run("devices");
  ASSERT_EQ(result.exit_code, 0);
  EXPECT_TRUE(contains(result.out, "cpu    yes")) << result.out;
  EXPECT_TRUE(contains(result.out, "cuda")) << result.out;
}

}  // namespace
}  // namespace shardlm
