// `shardlm download` and `shardlm generate --model ORG/NAME` against the fake hub.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_runner.h"
#include "io/hub_test_environment.h"

namespace shardlm::testing {
namespace {
namespace fs = std::filesystem;

class HubCliTest : public HubTest {
 protected:
  void SetUp() override {
    HubTest::SetUp();
    set_env("HF_ENDPOINT", hub_.endpoint());
    hub_.add_repo("tiny-org/qwen3-tiny", qwen3_tiny_repo());
  }

  CommandResult run(const std::string& arguments) const { return run_shardlm(arguments); }

  fs::path snapshot() const {
    return cache_dir() / "models--tiny-org--qwen3-tiny" / "snapshots" / FakeHub::default_commit;
  }

  FakeHub hub_;
};

TEST_F(HubCliTest, DownloadPrintsTheSnapshotAndLogsLinesWhenNotATerminal) {
  unset_env("HF_HUB_DISABLE_PROGRESS_BARS");
  CommandResult result = run("download tiny-org/qwen3-tiny");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, snapshot().string() + "\n");
  EXPECT_TRUE(contains(result.err, "[shardlm] downloading model.safetensors (932 kB)")) << result.err;
  EXPECT_TRUE(contains(result.err, "[shardlm] downloaded 3 of 3 files")) << result.err;
  EXPECT_TRUE(fs::exists(snapshot() / "model.safetensors"));
}

TEST_F(HubCliTest, DownloadQuietWithIncludeAndRevision) {
  unset_env("HF_HUB_DISABLE_PROGRESS_BARS");
  CommandResult result =
      run(std::string("download tiny-org/qwen3-tiny --quiet --include '*.json' --revision ") + FakeHub::default_commit);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_TRUE(fs::exists(snapshot() / "config.json"));
  EXPECT_FALSE(fs::exists(snapshot() / "model.safetensors"));
}

TEST_F(HubCliTest, DownloadErrorsSayWhatToDo) {
  CommandResult result = run("download tiny-org/missing");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(contains(result.err, "shardlm: error: model 'tiny-org/missing' was not found")) << result.err;
  result = run("download not//an/id");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(contains(result.err, "is not a Hugging Face model id")) << result.err;
  set_env("HF_HUB_OFFLINE", "1");
  result = run("download tiny-org/qwen3-tiny");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(contains(result.err, "HF_HUB_OFFLINE")) << result.err;
}

TEST_F(HubCliTest, GenerateTakesAModelIdAndRevision) {
  CommandResult result = run(std::string("generate --model tiny-org/qwen3-tiny --revision main ") +
                             "--input-ids 1,2,3 --max-new-tokens 4 --output ids");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(std::count(result.out.begin(), result.out.end(), ','), 3) << result.out;
  hub_.clear_requests();
  set_env("HF_HUB_OFFLINE", "1");
  result = run("generate --model tiny-org/qwen3-tiny --input-ids 1,2,3 --max-new-tokens 4 --output ids");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(hub_.requests().empty());
}

}  // namespace
}  // namespace shardlm::testing
