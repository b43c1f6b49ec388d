// The cache as huggingface_hub lays it out, read without the network: settings from
// the environment, a snapshot built by hand (blobs + relative symlinks + refs),
// revisions, offline mode, and what the errors say. The same check against
// huggingface_hub itself, both ways, was done once by hand: docs/HUB.md.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "io/config.h"
#include "io/hub/checkpoint_files.h"
#include "io/hub/hub_cache.h"
#include "io/hub/hub_settings.h"
#include "io/model_resolution.h"
#include "io/hub_test_environment.h"
#include "test_util.h"

namespace shardlm::testing {
namespace {
namespace fs = std::filesystem;
using io::hub::RepoCache;

constexpr const char* commit = "0123456789abcdef0123456789abcdef01234567";


void write(const fs::path& path, const std::string& contents) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << contents;
}

class HubCacheTest : public HubTest {
 protected:
  // What huggingface_hub leaves after downloading the fixture: blobs named by etag,
  // relative symlinks in the snapshot, and refs/main holding the bare commit.
  fs::path build_cache_by_hand(const std::map<std::string, std::string>& refs = {{"main", commit}}) {
    const fs::path repo = repo_dir("models--tiny-org--qwen3-tiny");
    for (const auto& [name, contents] : qwen3_tiny_repo().files) {
      const std::string etag = name.ends_with(".safetensors") ? sha256_hex(contents) : git_blob_id(contents);
      write(repo / "blobs" / etag, contents);
      fs::create_directories(repo / "snapshots" / commit);
      fs::create_symlink(fs::path("../../blobs") / etag, repo / "snapshots" / commit / name);
    }
    for (const auto& [revision, target] : refs) write(repo / "refs" / revision, target);
    return repo / "snapshots" / commit;
  }
};

TEST_F(HubCacheTest, CacheDirectoryFollowsHuggingFaceHubPrecedence) {
  EXPECT_EQ(io::hub::settings_from_environment().cache_dir, cache_dir());
  unset_env("HF_HUB_CACHE");
  EXPECT_EQ(io::hub::settings_from_environment().cache_dir, root() / "hf_home" / "hub");
  unset_env("HF_HOME");
  set_env("XDG_CACHE_HOME", (root() / "xdg").string());
  EXPECT_EQ(io::hub::settings_from_environment().cache_dir, root() / "xdg" / "huggingface" / "hub");
  unset_env("XDG_CACHE_HOME");
  EXPECT_EQ(io::hub::settings_from_environment().cache_dir, root() / "home" / ".cache" / "huggingface" / "hub");
}

TEST_F(HubCacheTest, TokenComesFromHfTokenElseTheTokenFile) {
  EXPECT_FALSE(io::hub::settings_from_environment().token);
  write(root() / "hf_home" / "token", "hf_from_file\n");
  io::hub::HubSettings settings = io::hub::settings_from_environment();
  EXPECT_EQ(settings.token, "hf_from_file");
  EXPECT_EQ(settings.token_source, (root() / "hf_home" / "token").string());
  set_env("HF_TOKEN", "hf_from_env");
  EXPECT_EQ(io::hub::settings_from_environment().token, "hf_from_env");
  unset_env("HF_TOKEN");
  write(root() / "elsewhere", "hf_from_token_path");
  set_env("HF_TOKEN_PATH", (root() / "elsewhere").string());
  EXPECT_EQ(io::hub::settings_from_environment().token, "hf_from_token_path");
}

TEST_F(HubCacheTest, EndpointAndOfflineVariables) {
  EXPECT_EQ(io::hub::settings_from_environment().endpoint, io::hub::default_endpoint);
  set_env("HF_ENDPOINT", "http://mirror.invalid/");
  EXPECT_EQ(io::hub::settings_from_environment().endpoint, "http://mirror.invalid");
  for (const char* yes : {"1", "true", "ON", "yes"}) {
    set_env("HF_HUB_OFFLINE", yes);
    EXPECT_TRUE(io::hub::settings_from_environment().offline) << yes;
  }
  set_env("HF_HUB_OFFLINE", "0");
  EXPECT_FALSE(io::hub::settings_from_environment().offline);
  set_env("HF_HUB_ETAG_TIMEOUT", "soon");
  EXPECT_TRUE(contains(error_of([] { io::hub::settings_from_environment(); }), "HF_HUB_ETAG_TIMEOUT"));
}

TEST(HubNames, RepoIdsAndFolders) {
  for (const char* good : {"Qwen/Qwen3-0.6B", "gpt2", "meta-llama/Llama-3.1-8B", "a_b/c.d"})
    EXPECT_TRUE(io::hub::is_repo_id(good)) << good;
  for (const char* bad : {"", "a/b/c", "../x", "/abs/path", "./dir", "org--x/y", "org/-x", "org/x.git", "o/"})
    EXPECT_FALSE(io::hub::is_repo_id(bad)) << bad;
  EXPECT_EQ(io::hub::repo_folder_name("Qwen/Qwen3-0.6B"), "models--Qwen--Qwen3-0.6B");
  EXPECT_EQ(io::hub::repo_folder_name("gpt2"), "models--gpt2");
  EXPECT_TRUE(io::hub::is_commit_hash(commit));
  EXPECT_FALSE(io::hub::is_commit_hash("main"));
  EXPECT_FALSE(io::hub::is_commit_hash("0123456789ABCDEF0123456789abcdef01234567"));
}

TEST(HubNames, IncludeGlobsMatchLikeHuggingFaceHub) {
  EXPECT_TRUE(io::hub::matches_glob("*.json", "config.json"));
  EXPECT_TRUE(io::hub::matches_glob("*.json", "onnx/config.json"));  // '*' crosses '/'
  EXPECT_TRUE(io::hub::matches_glob("onnx/", "onnx/model.onnx"));
  EXPECT_TRUE(io::hub::matches_glob("model-0000?-of-*.safetensors", "model-00001-of-00002.safetensors"));
  EXPECT_FALSE(io::hub::matches_glob("*.safetensors", "config.json"));
}

TEST_F(HubCacheTest, ReadsACacheLaidOutByHuggingFaceHub) {
  const fs::path snapshot = build_cache_by_hand();
  set_env("HF_HUB_OFFLINE", "1");
  io::ModelFiles files = io::resolve_model(qwen3_tiny_repo_id);
  EXPECT_EQ(fs::path(files.location()), snapshot);
  EXPECT_EQ(io::load_model_config(files).architectures.front(), "Qwen3ForCausalLM");
  const std::string weights = qwen3_tiny_repo().files.at("model.safetensors");
  io::ByteRegion mapped = files.map("model.safetensors");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped.bytes.data()), mapped.bytes.size()), weights);
}

TEST_F(HubCacheTest, RevisionsResolveThroughRefsOrCommitHash) {
  const fs::path snapshot = build_cache_by_hand({{"main", commit}, {"v1.0", commit}});
  set_env("HF_HUB_OFFLINE", "1");
  EXPECT_EQ(fs::path(io::resolve_model(qwen3_tiny_repo_id, {.revision = "v1.0"}).location()), snapshot);
  EXPECT_EQ(fs::path(io::resolve_model(qwen3_tiny_repo_id, {.revision = commit}).location()), snapshot);
  std::string error = error_of([] { io::resolve_model(qwen3_tiny_repo_id, {.revision = "v2.0"}); });
  EXPECT_TRUE(contains(error, "revision 'v2.0'")) << error;
  EXPECT_TRUE(contains(error, "HF_HUB_OFFLINE")) << error;
}

TEST_F(HubCacheTest, CachedCommitHashNeedsNoNetwork) {
  const fs::path snapshot = build_cache_by_hand({});
  set_env("HF_ENDPOINT", "http://127.0.0.1:9");  // nothing listens there
  EXPECT_EQ(fs::path(io::resolve_model(qwen3_tiny_repo_id, {.revision = commit}).location()), snapshot);
}

TEST_F(HubCacheTest, UnreachableHubFallsBackToACompleteCache) {
  const fs::path snapshot = build_cache_by_hand();
  set_env("HF_ENDPOINT", "http://127.0.0.1:9");
  EXPECT_EQ(fs::path(io::resolve_model(qwen3_tiny_repo_id).location()), snapshot);
  std::string error = error_of([] { io::resolve_model("tiny-org/not-cached"); });
  EXPECT_TRUE(contains(error, "cannot download 'tiny-org/not-cached' from http://127.0.0.1:9")) << error;
  EXPECT_TRUE(contains(error, "HF_ENDPOINT")) << error;
}

TEST_F(HubCacheTest, OfflineWithNothingCachedSaysWhatToDo) {
  std::string error = error_of([] { io::resolve_model(qwen3_tiny_repo_id, {.offline = true}); });
  EXPECT_TRUE(contains(error, "not in the Hugging Face cache at " + cache_dir().string())) << error;
  EXPECT_TRUE(contains(error, "shardlm download tiny-org/qwen3-tiny")) << error;
}

TEST_F(HubCacheTest, OfflineWithAnIncompleteSnapshotNamesWhatIsMissing) {
  const fs::path snapshot = build_cache_by_hand();
  fs::remove(snapshot / "model.safetensors");
  set_env("HF_HUB_OFFLINE", "1");
  std::string error = error_of([] { io::resolve_model(qwen3_tiny_repo_id); });
  EXPECT_TRUE(contains(error, "lacks model.safetensors")) << error;
}

TEST_F(HubCacheTest, ShardedSnapshotIsCompleteOnlyWithEveryShard) {
  const fs::path snapshot = root() / "sharded";
  write(snapshot / "config.json", "{}");
  write(snapshot / "model.safetensors.index.json",
        R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
                           "c": "model-00001-of-00002.safetensors"}})");
  write(snapshot / "model-00001-of-00002.safetensors", "x");
  EXPECT_EQ(io::hub::missing_checkpoint_files(snapshot), std::vector<std::string>{"model-00002-of-00002.safetensors"});
  write(snapshot / "model-00002-of-00002.safetensors", "y");
  EXPECT_TRUE(io::hub::missing_checkpoint_files(snapshot).empty());
}

TEST_F(HubCacheTest, WritesRefsAndRelativeSymlinks) {
  RepoCache cache(cache_dir(), qwen3_tiny_repo_id);
  write(cache.blob_path("abc"), "contents");
  cache.link_snapshot_file(commit, "nested/dir/file.txt", "abc");
  const fs::path pointer = cache.snapshot_dir(commit) / "nested/dir/file.txt";
  EXPECT_EQ(fs::read_symlink(pointer), fs::path("../../../../blobs/abc"));
  EXPECT_EQ(read_file(pointer.string()), "contents");
  cache.write_ref("main", commit);
  EXPECT_EQ(read_file((cache.directory() / "refs" / "main").string()), commit);  // no trailing newline
  EXPECT_EQ(cache.commit_for("main"), commit);
  EXPECT_FALSE(cache.commit_for("dev"));
  EXPECT_TRUE(contains(error_of([&] { cache.commit_for("../../etc"); }), "not a plain relative name"));
}

TEST_F(HubCacheTest, NeitherDirectoryNorIdSaysBoth) {
  std::string error = error_of([] { io::resolve_model("./no/such/dir"); });
  EXPECT_TRUE(contains(error, "neither a local directory nor a Hugging Face model id")) << error;
}

}  // namespace
}  // namespace shardlm::testing
