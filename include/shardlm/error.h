#pragma once
// The one exception type shardlm throws. Its message says what went wrong, where
// (file, tensor name, config key) and, where there is one, what the user can do.
// A vocabulary header: the standard library only (as dtype.h and generation_config.h).

#include <stdexcept>
#include <string>

#include <shardlm/export.h>

namespace shardlm {

class SHARDLM_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// An error that every process of a tensor-parallel job raised together (they agreed on it
// through their process group), so none of them is left waiting for the others.
class SHARDLM_API JobError : public Error {
 public:
  using Error::Error;
};

}  // namespace shardlm
