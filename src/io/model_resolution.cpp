#include "io/model_resolution.h"

#include <filesystem>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/logging.h"
#include "io/gguf_model.h"
#include "io/gguf_vocabulary.h"
#include "io/hub/hub_cache.h"
#include "io/hub/snapshot_download.h"

namespace shardlm::io {

namespace {

ModelFiles gguf_model_files(const std::string& path) {
  auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
  std::map<std::string, std::string> derived = gguf_tokenizer_files(*file);
  derived.emplace("config.json", gguf_config_json(*file));
  return ModelFiles::gguf(std::move(file), std::move(derived));
}

// A directory without config.json that holds one .gguf file is that file.
std::optional<std::string> lone_gguf_in(const std::string& directory) {
  std::error_code error;
  if (std::filesystem::exists(std::filesystem::path(directory) / "config.json", error)) return std::nullopt;
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error))
    if (entry.is_regular_file(error) && entry.path().extension() == ".gguf") found.push_back(entry.path().string());
  if (found.size() > 1)
    fail(directory, " holds ", found.size(), " .gguf files and no config.json: pass the one to run, e.g. ", found[0]);
  if (found.empty()) return std::nullopt;
  return found[0];
}

}  // namespace

ModelFiles resolve_model(const std::string& path_or_id, const ResolveOptions& options) {
  std::error_code error;
  if (std::filesystem::is_directory(path_or_id, error)) {
    if (std::optional<std::string> gguf = lone_gguf_in(path_or_id)) return gguf_model_files(*gguf);
    return ModelFiles::directory(path_or_id);
  }
  if (path_or_id.empty() || path_or_id == default_model_id) return embedded_default_model();
  if (std::filesystem::exists(path_or_id, error)) {
    if (path_or_id.ends_with(".gguf")) return gguf_model_files(path_or_id);
    fail("model '", path_or_id, "' is a file; pass the checkpoint directory that holds config.json (or a .gguf file)");
  }
  if (!hub::is_repo_id(path_or_id))
    fail("model '", path_or_id, "' is neither a local directory nor a Hugging Face model id ('org/name'). Pass a "
         "checkpoint directory (config.json, *.safetensors, tokenizer.json), a model id, or '", default_model_id,
         "' for the built-in model");

  hub::HubSettings settings = hub::settings_from_environment();
  settings.offline = settings.offline || options.offline;
  std::filesystem::path snapshot = hub::resolve_snapshot(
      settings, {.repo_id = path_or_id, .revision = options.revision, .progress = options.progress});
  log::info(str_cat(path_or_id, " (revision ", options.revision, ") is ", snapshot.string()));
  return ModelFiles::directory(snapshot.string());
}

}  // namespace shardlm::io
