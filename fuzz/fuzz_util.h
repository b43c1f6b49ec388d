#pragma once
// What every harness shares: a shardlm::Error is the expected answer to bad input; any
// other exception escapes and libFuzzer reports it (with the crash, leak, out-of-bounds
// read or undefined behaviour that the sanitizers catch) as a finding.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/error.h"

namespace shardlm::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A real tokenizer's directory: unpacked into the build tree when stored compressed
// (tests/tokenizer/CMakeLists.txt), else in tests/data/tokenizers/.
inline std::string tokenizer_dir(const std::string& name) {
  const std::string unpacked = std::string(SHARDLM_TOKENIZER_EXTRACTED_DIR) + "/" + name;
  if (std::filesystem::exists(unpacked + "/tokenizer.json")) return unpacked;
  return std::string(SHARDLM_TEST_DATA_DIR) + "/tokenizers/" + name;
}

// Runs `body`; a shardlm::Error (a clear refusal) ends the input quietly.
template <typename Body>
int run_input(Body body) {
  try {
    body();
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace shardlm::fuzz
