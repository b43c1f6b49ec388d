// The normalizers' fast path: a character it calls stable must come out of utf8proc's
// normalization unchanged, alone and next to others.

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <random>

#include "tokenizer/components.h"
#include "tokenizer/utf8.h"

namespace shardlm::tokenizer::detail {
namespace {

std::string normalize(const std::string& text, bool compose, bool compatibility) {
  auto options = utf8proc_option_t(UTF8PROC_STABLE | (compose ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) |
                                   (compatibility ? UTF8PROC_COMPAT : 0));
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                    static_cast<utf8proc_ssize_t>(text.size()), &out, options);
  std::string result = n < 0 ? std::string("<error>") : std::string(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

TEST(NormalizationFastPath, StableCharactersAreUnchanged) {
  for (bool compose : {true, false}) {
    for (bool compat : {false, true}) {
      std::vector<uint32_t> stable;
      for (uint32_t c = 0; c < 0x30000; ++c) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        if (!normalization_stable(c, compose, compat)) continue;
        stable.push_back(c);
        std::string s;
        utf8::append(s, c);
        ASSERT_EQ(normalize(s, compose, compat), s) << std::hex << "U+" << c << " compose=" << compose << " compat=" << compat;
      }
      // Runs of stable characters stay stable together.
      std::mt19937 rng(compose * 2 + compat);
      for (int round = 0; round < 20000; ++round) {
        std::string s;
        for (int i = 0; i < 6; ++i) utf8::append(s, stable[rng() % stable.size()]);
        ASSERT_EQ(normalize(s, compose, compat), s);
      }
    }
  }
}

}  // namespace
}  // namespace shardlm::tokenizer::detail
