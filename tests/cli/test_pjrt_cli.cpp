// `shardlm` on the pjrt backend as a user runs it: a second process with the same compile
// cache compiles nothing, and every way a plugin can be wrong is a clear error.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli_runner.h"
#include "test_util.h"

namespace shardlm {
namespace {

using testing::CommandResult;

bool mentions(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// Why `shardlm devices` says pjrt cannot run here, or "" when it can.
std::string pjrt_unavailable() {
  const CommandResult devices = testing::run_shardlm("devices");
  for (size_t at = devices.out.find("\npjrt "); at != std::string::npos;) {
    const std::string line = devices.out.substr(at + 1, devices.out.find('\n', at + 1) - at - 1);
    return mentions(line, " yes ") ? "" : line;
  }
  return "shardlm devices lists no pjrt backend";
}

std::string fresh_directory(const std::string& name) {
  const auto path = std::filesystem::temp_directory_path() / str_cat("shardlm_", name, "_", ::getpid());
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path.string();
}

size_t programs_in(const std::string& cache) {
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cache))
    files += entry.path().extension() == ".pjrt" && entry.file_size() > 0;
  return files;
}

TEST(PjrtCli, ASecondProcessWithTheSameCompileCacheCompilesNothing) {
  if (const std::string why = pjrt_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::string cache = fresh_directory("compile_cache");
  const std::string command =
      "generate --device pjrt --compile-cache " + cache + " --input-ids 1,403,407 -n 8 --output ids --stats";
  const CommandResult first = testing::run_shardlm(command), second = testing::run_shardlm(command);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_TRUE(mentions(first.err, "pjrt programs: 2 compiled, 0 loaded")) << first.err;
  EXPECT_TRUE(mentions(second.err, "pjrt programs: 0 compiled, 2 loaded")) << second.err;
  EXPECT_EQ(first.out, second.out);
  EXPECT_EQ(programs_in(cache), 2u);
  std::filesystem::remove_all(cache);
}

// Ahead of time: `shardlm compile` for batch sizes 1 and 2 fills the cache with what
// `generate` then needs for either batch, so generate compiles nothing.
TEST(PjrtCli, CompileAheadLeavesGenerateNothingToCompile) {
  if (const std::string why = pjrt_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::string cache = fresh_directory("compile_ahead");
  const CommandResult compiled = testing::run_shardlm("compile --device pjrt --compile-cache " + cache + " -b 1,2 -n 8");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  EXPECT_TRUE(mentions(compiled.out, "batch 1: prefill chunk and decode step over a 512-position cache: 2 compiled"))
      << compiled.out;
  EXPECT_TRUE(mentions(compiled.out, "batch 2: ")) << compiled.out;
  const CommandResult one = testing::run_shardlm("generate --device pjrt --compile-cache " + cache +
                                                 " --input-ids 1,403,407 -n 8 --output ids --stats");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_TRUE(mentions(one.err, "pjrt programs: 0 compiled, 2 loaded")) << one.err;
  const CommandResult two = testing::run_shardlm("generate --device pjrt --compile-cache " + cache +
                                                 " -p \"Once upon\" -p \"The dog\" -n 8 --stats");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_TRUE(mentions(two.err, "pjrt programs: 0 compiled, 2 loaded")) << two.err;
  std::filesystem::remove_all(cache);
}

// A TPU user's preparation on a machine without a TPU: libtpu compiles for a v5e 2x2
// topology through PJRT_Compile, and the executables land in the compile cache.
TEST(PjrtCli, CompilesForATpuTopologyOnAMachineWithoutATpu) {
  const std::string libtpu = SHARDLM_TEST_LIBTPU;
  if (!std::filesystem::exists(libtpu)) GTEST_SKIP() << "no libtpu at " << libtpu << " (scripts/fetch_pjrt_plugin.sh)";
  const std::string cache = fresh_directory("topology");
  const std::string command =
      str_cat("compile --device tpu --pjrt-plugin ", libtpu, " --topology v5e:2x2 --compile-cache ", cache, " -b 1 -n 8");
  const CommandResult first = testing::run_shardlm(command);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(mentions(first.out, "batch 1: prefill chunk and decode step over a 512-position cache for topology "
                                  "v5e:2x2: 2 compiled, 0 already in the compile cache"))
      << first.out;
  EXPECT_EQ(programs_in(cache), 2u);
  const CommandResult second = testing::run_shardlm(command);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_TRUE(mentions(second.out, "0 compiled, 2 already in the compile cache")) << second.out;

  const CommandResult unknown = testing::run_shardlm(
      str_cat("compile --device tpu --pjrt-plugin ", libtpu, " --topology v99:9x9 --compile-cache ", cache, " -b 1"));
  EXPECT_EQ(unknown.exit_code, 1) << unknown.err;
  EXPECT_TRUE(mentions(unknown.err, "PJRT_TopologyDescription_Create")) << unknown.err;
  EXPECT_TRUE(mentions(unknown.err, "libtpu.so")) << unknown.err;
  const CommandResult nowhere = testing::run_shardlm(
      str_cat("compile --device tpu --pjrt-plugin ", libtpu, " --topology v5e:2x2 --compile-cache none -b 1"));
  EXPECT_EQ(nowhere.exit_code, 1) << nowhere.err;
  EXPECT_TRUE(mentions(nowhere.err, "--compile-cache none leaves nowhere to put them")) << nowhere.err;
  std::filesystem::remove_all(cache);
}

TEST(PjrtCli, ATopologyIsRefusedForTheCpu) {
  const CommandResult result = testing::run_shardlm("compile --device cpu --topology v5e:2x2 -b 1");
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_TRUE(mentions(result.err, "use it with --device tpu")) << result.err;
}

TEST(PjrtCli, CompileAheadOnTheCpuSaysThereIsNothingToKeep) {
  const CommandResult result = testing::run_shardlm("compile --device cpu -b 1");
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_TRUE(mentions(result.err, "use --device pjrt or tpu")) << result.err;
}

TEST(PjrtCli, AMissingPluginIsAClearError) {
  const CommandResult result = testing::run_shardlm("generate --device pjrt --pjrt-plugin /nonexistent/plugin.so -n 2");
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_TRUE(mentions(result.err, "/nonexistent/plugin.so")) << result.err;
  EXPECT_TRUE(result.out.empty()) << result.out;
}

TEST(PjrtCli, AFileThatIsNotAPluginIsAClearError) {
  const std::string directory = fresh_directory("not_a_plugin");
  const std::string text_file = directory + "/plugin.so";
  std::ofstream(text_file) << "not a shared library\n";
  for (const std::string& path : {text_file, std::string("/lib/x86_64-linux-gnu/libz.so.1")}) {
    if (!std::filesystem::exists(path)) continue;
    const CommandResult result = testing::run_shardlm("generate --device pjrt --pjrt-plugin " + path + " -n 2");
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_TRUE(mentions(result.err, path)) << result.err;
    EXPECT_TRUE(mentions(result.err, "PJRT")) << result.err;
  }
  std::filesystem::remove_all(directory);
}

TEST(PjrtCli, APluginOfAnotherApiVersionIsAClearError) {
  const CommandResult result =
      testing::run_shardlm(str_cat("generate --device pjrt --pjrt-plugin ", SHARDLM_FAKE_PJRT_FLAW_1, " -n 2"));
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_TRUE(mentions(result.err, SHARDLM_FAKE_PJRT_FLAW_1)) << result.err;
  EXPECT_TRUE(mentions(result.err, "PJRT API 1.0")) << result.err;
  EXPECT_TRUE(result.out.empty()) << result.out;
}

// As libtpu on a machine without a TPU: the plugin loads, its client does not start.
TEST(PjrtCli, APluginWhoseClientCannotStartIsAClearError) {
  const CommandResult result =
      testing::run_shardlm(str_cat("generate --device pjrt --pjrt-plugin ", SHARDLM_FAKE_PJRT_FLAW_4, " -n 2"));
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_TRUE(mentions(result.err, SHARDLM_FAKE_PJRT_FLAW_4)) << result.err;
  EXPECT_TRUE(mentions(result.err, "no device found")) << result.err;
  EXPECT_TRUE(mentions(result.err, "shardlm devices")) << result.err;
  EXPECT_TRUE(result.out.empty()) << result.out;
  const CommandResult devices =
      testing::run_shardlm(str_cat("devices --pjrt-plugin ", SHARDLM_FAKE_PJRT_FLAW_4));
  EXPECT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_TRUE(mentions(devices.out, "no device found")) << devices.out;
}

TEST(PjrtCli, TpuWithoutLibtpuSaysWhereItLooked) {
  const CommandResult result = testing::run_shardlm("generate --device tpu -n 2");
  if (result.exit_code == 0) GTEST_SKIP() << "this machine has a TPU";
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_TRUE(mentions(result.err, "libtpu")) << result.err;
  const CommandResult devices = testing::run_shardlm("devices");
  EXPECT_TRUE(mentions(devices.out, "\ntpu ")) << devices.out;
}

}  // namespace
}  // namespace shardlm
