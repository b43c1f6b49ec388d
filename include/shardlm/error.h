#pragma once
// The one exception type shardlm throws. Its message says what went wrong, where
// (file, tensor name, config key) and, where there is one, what the user can do.

#include <sstream>
#include <stdexcept>
#include <string>

namespace shardlm {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// An error that every process of a tensor-parallel job raised together (they agreed on it
// through their process group), so none of them is left waiting for the others.
class JobError : public Error {
 public:
  using Error::Error;
};

// Concatenates any streamable values: str_cat("tensor ", name, " has ", n, " dims").
template <typename... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  throw Error(str_cat(parts...));
}

}  // namespace shardlm
