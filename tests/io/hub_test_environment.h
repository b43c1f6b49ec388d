#pragma once
// A test fixture that gives each test its own Hugging Face environment: the cache,
// HF_HOME and every variable shardlm reads point into a fresh temporary directory,
// and whatever the developer's shell had is restored afterwards.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "io/fake_hub.h"

namespace shardlm::testing {

class HubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    root_ = std::filesystem::temp_directory_path() /
            ("shardlm_hub_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    for (const char* name : {"HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HF_TOKEN", "HF_TOKEN_PATH", "HF_ENDPOINT",
                             "HF_HUB_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS", "HF_HUB_ETAG_TIMEOUT",
                             "HF_HUB_DOWNLOAD_TIMEOUT", "HOME"}) {
      const char* value = std::getenv(name);
      saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
      ::unsetenv(name);
    }
    set_env("HOME", (root_ / "home").string());
    set_env("HF_HUB_CACHE", cache_dir().string());
    set_env("HF_HOME", (root_ / "hf_home").string());
    set_env("HF_HUB_DISABLE_PROGRESS_BARS", "1");
    set_env("HF_HUB_ETAG_TIMEOUT", "5");
    set_env("HF_HUB_DOWNLOAD_TIMEOUT", "5");
  }

  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }

  static void set_env(const std::string& name, const std::string& value) { ::setenv(name.c_str(), value.c_str(), 1); }
  static void unset_env(const std::string& name) { ::unsetenv(name.c_str()); }

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path cache_dir() const { return root_ / "hub"; }
  std::filesystem::path repo_dir(const std::string& folder) const { return cache_dir() / folder; }

  // The qwen3-tiny fixture as a hub repository, published as qwen3_tiny_repo_id.
  static constexpr const char* qwen3_tiny_repo_id = "tiny-org/qwen3-tiny";
  static FakeRepo qwen3_tiny_repo() {
    const std::string fixture = std::string(SHARDLM_TEST_DATA_DIR) + "/fixtures/qwen3-tiny/";
    FakeRepo repo;
    repo.commit = FakeHub::default_commit;
    for (const char* name : {"config.json", "generation_config.json", "model.safetensors"})
      repo.files[name] = read_file(fixture + name);
    return repo;
  }

 private:
  std::filesystem::path root_;
  std::map<std::string, std::optional<std::string>> saved_;
};

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace shardlm::testing
