#pragma once
// Internal code includes this: the public type (include/shardlm/error.h) and the helpers
// that build its messages, which are not part of the public API.
#include <shardlm/error.h>

#include <sstream>
#include <string>

namespace shardlm {

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

// Checks an invariant that bad *input* can break; programming errors use assert.
#define SHARDLM_CHECK(condition, ...)            \
  do {                                           \
    if (!(condition)) ::shardlm::fail(__VA_ARGS__); \
  } while (0)
