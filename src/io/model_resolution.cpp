#include "io/model_resolution.h"

#include <filesystem>

#include "core/error.h"

namespace shardlm::io {

ModelFiles resolve_model(const std::string& path_or_id) {
  std::error_code error;
  if (std::filesystem::is_directory(path_or_id, error)) return ModelFiles::directory(path_or_id);
  if (path_or_id.empty() || path_or_id == default_model_id) return embedded_default_model();
  if (std::filesystem::exists(path_or_id, error))
    fail("model '", path_or_id, "' is a file; pass the checkpoint directory that holds config.json");
  fail("model '", path_or_id, "' is not a local directory. Pass a checkpoint directory (config.json, "
       "*.safetensors, tokenizer.json), or '", default_model_id, "' for the built-in model");
}

}  // namespace shardlm::io
