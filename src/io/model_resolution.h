#pragma once
// Turns what a user passes as a model (a directory, or the embedded default) into
// the checkpoint's files.

#include <string>
#include <string_view>

#include "io/model_files.h"

namespace shardlm::io {

// The name of the model linked into the binary; used when no model is given.
inline constexpr std::string_view default_model_id = "embedded:stories260K";

ModelFiles embedded_default_model();

// A local directory, or default_model_id. Throws saying what was tried.
ModelFiles resolve_model(const std::string& path_or_id);

}  // namespace shardlm::io
