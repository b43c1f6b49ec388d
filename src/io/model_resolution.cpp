#include "io/model_resolution.h"

#include <filesystem>

#include "core/error.h"
#include "core/logging.h"
#include "io/hub/hub_cache.h"
#include "io/hub/snapshot_download.h"

namespace shardlm::io {

ModelFiles resolve_model(const std::string& path_or_id, const ResolveOptions& options) {
  std::error_code error;
  if (std::filesystem::is_directory(path_or_id, error)) return ModelFiles::directory(path_or_id);
  if (path_or_id.empty() || path_or_id == default_model_id) return embedded_default_model();
  if (std::filesystem::exists(path_or_id, error)) {
    if (path_or_id.ends_with(".gguf"))
      fail("model '", path_or_id, "' is a GGUF file, which shardlm cannot run yet (it reads GGUF files but not yet as "
           "models: docs/MODELS.md); pass a Hugging Face checkpoint directory (config.json, *.safetensors) or model id");
    fail("model '", path_or_id, "' is a file; pass the checkpoint directory that holds config.json");
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
