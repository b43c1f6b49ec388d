#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "io/hub/hub_cache.h"
#include "io/hub/snapshot_download.h"

namespace shardlm::cli {
namespace {

struct DownloadArguments {
  std::string repo_id;
  std::string revision = "main";
  std::vector<std::string> include;
  bool quiet = false;
};

void run_download(const DownloadArguments& args) {
  if (!io::hub::is_repo_id(args.repo_id))
    fail("'", args.repo_id, "' is not a Hugging Face model id: expected 'org/name', e.g. Qwen/Qwen3-0.6B");
  io::hub::HubSettings settings = io::hub::settings_from_environment();
  if (settings.offline)
    fail("HF_HUB_OFFLINE is set, so `shardlm download` may not reach the hub: unset it to download");
  io::hub::SnapshotRequest request;
  request.repo_id = args.repo_id;
  request.revision = args.revision;
  request.include = args.include;
  if (args.quiet) request.progress = io::hub::ProgressMode::quiet;
  std::filesystem::path snapshot = io::hub::download_snapshot(settings, request);
  // The path alone on stdout, so scripts can use $(shardlm download ...).
  std::printf("%s\n", snapshot.string().c_str());
}

}  // namespace

void add_download_command(CLI::App& app) {
  auto args = std::make_shared<DownloadArguments>();
  CLI::App* command = app.add_subcommand(
      "download",
      "Download a model from the Hugging Face hub into its cache (HF_HUB_CACHE, else HF_HOME/hub, else "
      "~/.cache/huggingface/hub), shared with Python's huggingface_hub, and print the snapshot directory.\n"
      "Without --include: config.json, generation_config.json, the tokenizer files and the safetensors weights. "
      "HF_TOKEN (or the token file) is used for gated and private models; HF_ENDPOINT selects a mirror.");
  command->add_option("model", args->repo_id, "Model id, e.g. Qwen/Qwen3-0.6B")->required();
  command->add_option("--revision,-r", args->revision, "Branch, tag or commit hash")->capture_default_str();
  command->add_option("--include", args->include,
                      "Download only the files matching this glob, e.g. '*.json' (repeatable; '*' also matches '/')");
  command->add_flag("--quiet,-q", args->quiet, "Print no progress, only the snapshot directory");
  command->callback([args] { run_download(*args); });
}

}  // namespace shardlm::cli
