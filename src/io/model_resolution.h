#pragma once
// Turns what a user passes as a model (a directory, a Hugging Face model id, or the
// embedded default) into the checkpoint's files.

#include <string>
#include <string_view>

#include "io/hub/progress.h"
#include "io/model_files.h"

namespace shardlm::io {

// The name of the model linked into the binary; used when no model is given.
inline constexpr std::string_view default_model_id = "embedded:stories260K";

ModelFiles embedded_default_model();

struct ResolveOptions {
  std::string revision = "main";  // for a model id: a branch, tag or commit hash
  bool offline = false;           // as if HF_HUB_OFFLINE=1: use the cache only
  hub::ProgressMode progress = hub::ProgressMode::automatic;
};

// In this order: a local directory; default_model_id; a model id ("org/name")
// looked up in the Hugging Face cache (docs/HUB.md) and downloaded into it when
// missing. Throws saying what was tried and what to do.
ModelFiles resolve_model(const std::string& path_or_id, const ResolveOptions& options = {});

}  // namespace shardlm::io
