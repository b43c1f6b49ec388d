// Downloads from a fake hub on 127.0.0.1: the layout they leave, the CDN redirect,
// resuming cut transfers, sha256 checks, tokens, and what each failure says.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "io/hub/checkpoint_files.h"
#include "io/hub/snapshot_download.h"
#include "io/hub_test_environment.h"
#include "test_util.h"
#include "io/model_resolution.h"

namespace shardlm::testing {
namespace {
namespace fs = std::filesystem;

constexpr const char* repo_folder = "models--tiny-org--qwen3-tiny";


class HubDownloadTest : public HubTest {
 protected:
  void SetUp() override {
    HubTest::SetUp();
    set_env("HF_ENDPOINT", hub_.endpoint());
    hub_.add_repo(qwen3_tiny_repo_id, qwen3_tiny_repo());
  }

  fs::path snapshot() const { return repo_dir(repo_folder) / "snapshots" / FakeHub::default_commit; }
  fs::path model_blob() const {
    return repo_dir(repo_folder) / "blobs" / sha256_hex(qwen3_tiny_repo().files.at("model.safetensors"));
  }
  std::vector<std::string> cdn_ranges() const {
    std::vector<std::string> ranges;
    for (const RecordedRequest& request : hub_.requests())
      if (request.path.starts_with("/cdn/")) ranges.push_back(request.range);
    return ranges;
  }

  FakeHub hub_;
};

TEST_F(HubDownloadTest, DownloadsThroughTheCdnRedirectIntoHuggingFaceHubsLayout) {
  io::ModelFiles files = io::resolve_model(qwen3_tiny_repo_id);
  EXPECT_EQ(fs::path(files.location()), snapshot());
  for (const auto& [name, contents] : qwen3_tiny_repo().files) {
    EXPECT_EQ(files.read_text(name), contents) << name;
    const fs::path link = fs::read_symlink(snapshot() / name);
    EXPECT_TRUE(link.string().starts_with("../../blobs/")) << link;
    const std::string etag = name.ends_with(".safetensors") ? sha256_hex(contents) : git_blob_id(contents);
    EXPECT_EQ(link.filename(), etag) << name;
  }
  EXPECT_EQ(read_file((repo_dir(repo_folder) / "refs" / "main").string()), FakeHub::default_commit);
  EXPECT_TRUE(fs::exists(repo_dir(repo_folder) / ".no_exist" / FakeHub::default_commit / "tokenizer.json"));
  EXPECT_EQ(hub_.count("GET", "/cdn/"), 1u);
  EXPECT_EQ(cdn_ranges(), std::vector<std::string>{""});

  // Cached now: one request to learn main's commit, and nothing downloaded.
  hub_.clear_requests();
  EXPECT_EQ(fs::path(io::resolve_model(qwen3_tiny_repo_id).location()), snapshot());
  EXPECT_EQ(hub_.requests().size(), 1u);
  EXPECT_EQ(hub_.count("HEAD", "/resolve/main/config.json"), 1u);
}

TEST_F(HubDownloadTest, OfflineAfterDownloadUsesTheCache) {
  io::resolve_model(qwen3_tiny_repo_id);
  hub_.clear_requests();
  set_env("HF_HUB_OFFLINE", "1");
  EXPECT_EQ(fs::path(io::resolve_model(qwen3_tiny_repo_id).location()), snapshot());
  EXPECT_TRUE(hub_.requests().empty());
}

TEST_F(HubDownloadTest, UnknownRepoSaysNotFound) {
  std::string error = error_of([] { io::resolve_model("tiny-org/does-not-exist"); });
  EXPECT_TRUE(contains(error, "'tiny-org/does-not-exist' was not found on " + hub_.endpoint())) << error;
  EXPECT_TRUE(contains(error, "HTTP 404")) << error;
  EXPECT_TRUE(contains(error, "case-sensitive")) << error;
}

TEST_F(HubDownloadTest, UnknownRevisionSaysSo) {
  std::string error = error_of([] { io::resolve_model(qwen3_tiny_repo_id, {.revision = "v9"}); });
  EXPECT_TRUE(contains(error, "revision 'v9' does not exist")) << error;
}

TEST_F(HubDownloadTest, TagRevisionWritesItsRef) {
  FakeRepo repo = qwen3_tiny_repo();
  repo.refs["v1.0"] = repo.commit;
  hub_.add_repo(qwen3_tiny_repo_id, repo);
  EXPECT_EQ(fs::path(io::resolve_model(qwen3_tiny_repo_id, {.revision = "v1.0"}).location()), snapshot());
  EXPECT_EQ(read_file((repo_dir(repo_folder) / "refs" / "v1.0").string()), FakeHub::default_commit);
}

TEST_F(HubDownloadTest, GatedRepoNeedsAToken) {
  FakeRepo repo = qwen3_tiny_repo();
  repo.gated = true;
  hub_.add_repo("gated-org/tiny", repo);
  std::string error = error_of([] { io::resolve_model("gated-org/tiny"); });
  EXPECT_TRUE(contains(error, "gated")) << error;
  EXPECT_TRUE(contains(error, "HTTP 401")) << error;
  EXPECT_TRUE(contains(error, "HF_TOKEN")) << error;

  set_env("HF_TOKEN", "hf_wrong");
  error = error_of([] { io::resolve_model("gated-org/tiny"); });
  EXPECT_TRUE(contains(error, "HTTP 403")) << error;
  EXPECT_TRUE(contains(error, "the token from HF_TOKEN has no access")) << error;
  EXPECT_TRUE(contains(error, hub_.endpoint() + "/gated-org/tiny")) << error;

  set_env("HF_TOKEN", FakeHub::token);
  io::ModelFiles files = io::resolve_model("gated-org/tiny");
  EXPECT_EQ(files.read_text("config.json"), repo.files.at("config.json"));
  size_t with_token = 0;
  for (const RecordedRequest& request : hub_.requests()) {
    if (request.path.starts_with("/cdn/")) {
      EXPECT_EQ(request.authorization, "") << "the token left the hub";
    }
    with_token += request.authorization == std::string("Bearer ") + FakeHub::token;
  }
  EXPECT_GT(with_token, 0u);
}

TEST_F(HubDownloadTest, TokenFileIsUsed) {
  FakeRepo repo = qwen3_tiny_repo();
  repo.gated = true;
  hub_.add_repo("gated-org/tiny", repo);
  fs::create_directories(root() / "hf_home");
  std::ofstream(root() / "hf_home" / "token") << FakeHub::token << "\n";
  EXPECT_NO_THROW(io::resolve_model("gated-org/tiny"));
}

TEST_F(HubDownloadTest, ACutConnectionIsResumedWhereItStopped) {
  const size_t size = qwen3_tiny_repo().files.at("model.safetensors").size();
  const size_t cut_at = size * 2 / 5;
  hub_.cut_transfers("model.safetensors", cut_at, 1);
  io::ModelFiles files = io::resolve_model(qwen3_tiny_repo_id);
  EXPECT_EQ(files.read_text("model.safetensors"), qwen3_tiny_repo().files.at("model.safetensors"));
  EXPECT_EQ(cdn_ranges(), (std::vector<std::string>{"", "bytes=" + std::to_string(cut_at) + "-"}));
}

TEST_F(HubDownloadTest, AnInterruptedDownloadKeepsItsPartAndResumesOnTheNextRun) {
  const size_t cut_at = 300000;
  hub_.cut_transfers("model.safetensors", cut_at, 1000);
  std::string error = error_of([] { io::resolve_model(qwen3_tiny_repo_id); });
  EXPECT_TRUE(contains(error, "interrupted after " + std::to_string(cut_at))) << error;
  EXPECT_TRUE(contains(error, "run the same command again to resume")) << error;
  const fs::path partial = model_blob().string() + ".incomplete";
  ASSERT_TRUE(fs::exists(partial)) << error;
  EXPECT_EQ(fs::file_size(partial), cut_at);
  EXPECT_FALSE(fs::exists(snapshot() / "model.safetensors"));

  hub_.cut_transfers("model.safetensors", 0, 0);
  hub_.clear_requests();
  io::ModelFiles files = io::resolve_model(qwen3_tiny_repo_id);
  EXPECT_EQ(files.read_text("model.safetensors"), qwen3_tiny_repo().files.at("model.safetensors"));
  EXPECT_EQ(cdn_ranges(), std::vector<std::string>{"bytes=" + std::to_string(cut_at) + "-"});
  EXPECT_FALSE(fs::exists(partial));
}

TEST_F(HubDownloadTest, AServerThatCannotResumeSendsTheWholeFileAgain) {
  hub_.ignore_ranges("model.safetensors");
  fs::create_directories(model_blob().parent_path());
  std::ofstream(model_blob().string() + ".incomplete") << "bytes that a resume would have kept";
  io::ModelFiles files = io::resolve_model(qwen3_tiny_repo_id);
  EXPECT_EQ(files.read_text("model.safetensors"), qwen3_tiny_repo().files.at("model.safetensors"));
  EXPECT_EQ(cdn_ranges(), std::vector<std::string>{"bytes=35-"});
}

TEST_F(HubDownloadTest, AWrongSha256IsDetectedAndDiscarded) {
  hub_.corrupt("model.safetensors");
  std::string error = error_of([] { io::resolve_model(qwen3_tiny_repo_id); });
  EXPECT_TRUE(contains(error, "model.safetensors of 'tiny-org/qwen3-tiny' arrived corrupt")) << error;
  EXPECT_TRUE(contains(error, "sha256")) << error;
  EXPECT_FALSE(fs::exists(model_blob()));
  EXPECT_FALSE(fs::exists(model_blob().string() + ".incomplete"));
  EXPECT_FALSE(fs::exists(snapshot() / "model.safetensors"));
}

TEST_F(HubDownloadTest, NotEnoughDiskSpaceIsReportedBeforeDownloading) {
  hub_.announce_size("model.safetensors", uint64_t{1} << 60);
  std::string error = error_of([] { io::resolve_model(qwen3_tiny_repo_id); });
  EXPECT_TRUE(contains(error, "not enough disk space")) << error;
  EXPECT_TRUE(contains(error, "HF_HUB_CACHE")) << error;
  EXPECT_EQ(hub_.count("GET", "/cdn/"), 0u);
}

TEST_F(HubDownloadTest, ADiskThatFillsUpMidDownloadSaysWhatToDo) {
  // The partial file is written through a link to /dev/full, where every write fails with ENOSPC.
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  fs::create_directories(model_blob().parent_path());
  fs::create_symlink("/dev/full", model_blob().string() + ".incomplete");
  std::string error = error_of([] { io::resolve_model(qwen3_tiny_repo_id); });
  EXPECT_TRUE(contains(error, "No space left on device")) << error;
  EXPECT_TRUE(contains(error, "Free disk space, or set HF_HUB_CACHE to a larger disk")) << error;
  EXPECT_FALSE(fs::exists(model_blob()));
}

TEST_F(HubDownloadTest, EveryShardOfAnIndexIsDownloaded) {
  FakeRepo repo;
  repo.commit = "89abcdef0123456789abcdef0123456789abcdef";
  repo.files["config.json"] = qwen3_tiny_repo().files.at("config.json");
  repo.files["tokenizer.json"] = "{}";
  std::string index = R"({"metadata": {}, "weight_map": {)";
  for (int shard = 1; shard <= 3; ++shard) {
    const std::string name = "model-0000" + std::to_string(shard) + "-of-00003.safetensors";
    repo.files[name] = std::string(200000 + shard, static_cast<char>('a' + shard));
    index += (shard > 1 ? ", " : "") + std::string("\"t") + std::to_string(shard) + "\": \"" + name + "\"";
  }
  repo.files["model.safetensors.index.json"] = index + "}}";
  hub_.add_repo("tiny-org/sharded", repo);

  const fs::path snapshot = io::resolve_model("tiny-org/sharded").location();
  EXPECT_TRUE(io::hub::missing_checkpoint_files(snapshot).empty());
  for (const auto& [name, contents] : repo.files) EXPECT_EQ(read_file((snapshot / name).string()), contents) << name;
  EXPECT_EQ(hub_.count("GET", "/cdn/"), 3u);
}

TEST_F(HubDownloadTest, ARepoWithoutSafetensorsIsRefused) {
  FakeRepo repo;
  repo.commit = FakeHub::default_commit;
  repo.files["config.json"] = "{}";
  repo.files["pytorch_model.bin"] = "pickle";
  hub_.add_repo("tiny-org/pickled", repo);
  std::string error = error_of([] { io::resolve_model("tiny-org/pickled"); });
  EXPECT_TRUE(contains(error, "shardlm loads safetensors checkpoints only")) << error;
}

TEST_F(HubDownloadTest, IncludeGlobsSelectFromTheListing) {
  io::hub::SnapshotRequest request;
  request.repo_id = qwen3_tiny_repo_id;
  request.include = {"*.json"};
  request.progress = io::hub::ProgressMode::quiet;
  const fs::path snapshot = io::hub::download_snapshot(io::hub::settings_from_environment(), request);
  EXPECT_TRUE(fs::exists(snapshot / "config.json"));
  EXPECT_TRUE(fs::exists(snapshot / "generation_config.json"));
  EXPECT_FALSE(fs::exists(snapshot / "model.safetensors"));

  request.include = {"*.bin"};
  std::string error = error_of([&] { io::hub::download_snapshot(io::hub::settings_from_environment(), request); });
  EXPECT_TRUE(contains(error, "no file of 'tiny-org/qwen3-tiny' at revision 'main' matches --include *.bin")) << error;
  EXPECT_TRUE(contains(error, "model.safetensors")) << error;
}

TEST_F(HubDownloadTest, ConcurrentResolutionsDownloadEachBlobOnce) {
  // As tensor-parallel ranks do: every process resolves the same id at once.
  std::vector<std::string> locations(4), errors(4);
  {
    std::vector<std::jthread> ranks;
    for (size_t rank = 0; rank < locations.size(); ++rank)
      ranks.emplace_back([&, rank] {
        errors[rank] = error_of([&] { locations[rank] = io::resolve_model(qwen3_tiny_repo_id).location(); });
      });
  }
  for (size_t rank = 0; rank < locations.size(); ++rank) {
    EXPECT_EQ(errors[rank], "(no error)");
    EXPECT_EQ(fs::path(locations[rank]), snapshot());
  }
  EXPECT_EQ(hub_.count("GET", "/cdn/"), 1u);
  EXPECT_EQ(read_file((snapshot() / "model.safetensors").string()), qwen3_tiny_repo().files.at("model.safetensors"));
}

TEST_F(HubDownloadTest, ARenamedRepoIsFollowed) {
  hub_.add_rename("old-org/qwen3-tiny", qwen3_tiny_repo_id);
  io::ModelFiles files = io::resolve_model("old-org/qwen3-tiny");
  EXPECT_EQ(files.read_text("config.json"), qwen3_tiny_repo().files.at("config.json"));
}

}  // namespace
}  // namespace shardlm::testing
