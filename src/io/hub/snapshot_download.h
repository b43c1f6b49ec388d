#pragma once
// A repository revision as a snapshot folder in the cache: found there, or
// downloaded into it (files in parallel), in huggingface_hub's layout.

#include <filesystem>
#include <string>
#include <vector>

#include "io/hub/hub_settings.h"
#include "io/hub/progress.h"

namespace shardlm::io::hub {

struct SnapshotRequest {
  std::string repo_id;
  std::string revision = "main";     // branch, tag or commit hash
  std::vector<std::string> include{};  // glob patterns; empty: the files a causal LM needs
  ProgressMode progress = ProgressMode::automatic;
  size_t parallel_downloads = 8;
};

// Asks the hub which commit the revision names, downloads whatever of the wanted
// files the cache lacks, and returns snapshots/{commit}.
std::filesystem::path download_snapshot(const HubSettings& settings, const SnapshotRequest& request);

// What from_pretrained does with a model id: a commit hash that is fully cached is
// used without the network; offline, the cached snapshot of the revision; online,
// download_snapshot, falling back to a complete cached snapshot if the hub is
// unreachable.
std::filesystem::path resolve_snapshot(const HubSettings& settings, const SnapshotRequest& request);

}  // namespace shardlm::io::hub
