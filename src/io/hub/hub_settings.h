#pragma once
// Where the hub is and how to reach it, read from the environment variables
// huggingface_hub reads, so that Python tools and shardlm share one cache and one token.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace shardlm::io::hub {

inline constexpr std::string_view default_endpoint = "https://huggingface.co";

struct HubSettings {
  std::string endpoint{default_endpoint};  // HF_ENDPOINT, without a trailing slash
  std::filesystem::path cache_dir;         // holds models--{org}--{name}/
  std::optional<std::string> token;        // sent as "Authorization: Bearer ..."
  std::string token_source;                // shown in messages: "HF_TOKEN" or the token file
  std::filesystem::path token_path;        // where a token file is looked for, for messages
  bool offline = false;                    // HF_HUB_OFFLINE: never touch the network
  long metadata_timeout_seconds = 10;      // HF_HUB_ETAG_TIMEOUT
  long download_timeout_seconds = 10;      // HF_HUB_DOWNLOAD_TIMEOUT: connecting, and the longest stall
  bool progress_bars_disabled = false;     // HF_HUB_DISABLE_PROGRESS_BARS
};

// HF_HUB_CACHE, else HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub; the token from HF_TOKEN, else HF_TOKEN_PATH, else HF_HOME/token.
HubSettings settings_from_environment();

}  // namespace shardlm::io::hub
