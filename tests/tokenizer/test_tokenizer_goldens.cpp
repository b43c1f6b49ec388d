// Every corpus string, every tokenizer: ids and decodes must equal what the Rust
// `tokenizers` library produced (tests/data/tokenizers/<name>/goldens.json, "library").

#include <gtest/gtest.h>

#include "golden_data.h"

namespace shardlm::tokenizer::testing {
namespace {

class LibraryGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(LibraryGolden, EncodeMatches) {
  const Tokenizer& tok = library_tokenizer(GetParam());
  const auto& expected = goldens(GetParam())["library"];
  const auto& texts = corpus();
  ASSERT_EQ(expected.size(), texts.size()) << "goldens were made from a different corpus";
  int failures = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    for (bool special : {true, false}) {
      auto want = expected[i][special ? "ids" : "ids_plain"].get<std::vector<int32_t>>();
      auto got = tok.encode(texts[i], special);
      if (got != want && ++failures <= 8) {
        ADD_FAILURE() << "line " << i + 1 << " " << show(texts[i]) << " add_special_tokens=" << special
                      << "\n  want " << show(want) << "\n  got  " << show(got);
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(LibraryGolden, DecodeMatches) {
  const Tokenizer& tok = library_tokenizer(GetParam());
  const auto& expected = goldens(GetParam())["library"];
  int failures = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    auto ids = expected[i]["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      auto want = expected[i][skip ? "decoded_skip" : "decoded"].get<std::string>();
      auto got = tok.decode(ids, skip);
      if (got != want && ++failures <= 8) {
        ADD_FAILURE() << "line " << i + 1 << " skip_special_tokens=" << skip << "\n  want " << show(want)
                      << "\n  got  " << show(got);
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(LibraryGolden, RandomIdsDecodeMatches) {
  const Tokenizer& tok = library_tokenizer(GetParam());
  int failures = 0;
  for (const auto& entry : goldens(GetParam())["random_decodes"]) {
    auto ids = entry["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      auto want = entry[skip ? "library_skip" : "library"].get<std::string>();
      auto got = tok.decode(ids, skip);
      if (got != want && ++failures <= 8) {
        ADD_FAILURE() << "ids " << show(ids) << " skip=" << skip << "\n  want " << show(want) << "\n  got  "
                      << show(got);
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

// Streaming every corpus string id by id gives exactly decode(ids), and no piece holds
// a broken character.
TEST_P(LibraryGolden, IncrementalDecodeMatchesDecode) {
  const Tokenizer& tok = library_tokenizer(GetParam());
  const auto& expected = goldens(GetParam())["library"];
  int failures = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    auto ids = expected[i]["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      IncrementalDecoder stream(tok, skip);
      std::string joined;
      bool broken = false;
      for (int32_t id : ids) {
        std::string piece = stream.push(id);
        broken = broken || piece.find("\xEF\xBF\xBD") != std::string::npos;
        joined += piece;
      }
      joined += stream.flush();
      std::string want = tok.decode(ids, skip);
      bool want_has_replacement = want.find("\xEF\xBF\xBD") != std::string::npos;
      if ((joined != want || (broken && !want_has_replacement)) && ++failures <= 8) {
        ADD_FAILURE() << "line " << i + 1 << " skip=" << skip << "\n  want " << show(want) << "\n  got  "
                      << show(joined);
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(AllTokenizers, LibraryGolden, ::testing::ValuesIn(golden_tokenizer_names()));

}  // namespace
}  // namespace shardlm::tokenizer::testing
