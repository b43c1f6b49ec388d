// A GGUF file's vocabulary as a tokenizer: qwen3-vocab.gguf holds Qwen3's real vocabulary
// (byte-level BPE) as llama.cpp's converter writes it, gemma3-vocab.gguf the real Gemma 3
// 270M file's (SentencePiece), and llama.cpp 0.5.0 tokenized every line of the tokenizer
// corpus with each (tests/data/gguf/make_vocab_gguf.py, make_gemma3_vocab_gguf.py). Loaded
// from the same file, shardlm must tokenize each line as llama.cpp did, special tokens in
// the text included.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include <shardlm/auto_tokenizer.h>

#include "test_util.h"

namespace shardlm {
namespace {

std::vector<int64_t> parse_ids(const std::string& line) {
  std::vector<int64_t> ids;
  std::stringstream stream(line);
  for (std::string id; std::getline(stream, id, ',');) ids.push_back(std::stoll(id));
  return ids;
}

class GgufVocabulary : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufVocabulary, TokenizesTheCorpusAsLlamaCppDoes) {
  const std::string directory = SHARDLM_GGUF_VOCAB_DIR;
  const AutoTokenizer tokenizer = AutoTokenizer::from_pretrained(directory + "/" + GetParam() + ".gguf");
  std::ifstream corpus(testing::data_path("tokenizers/corpus.jsonl"));
  std::ifstream expected(directory + "/" + GetParam() + ".llama_cpp.txt");
  int lines = 0, same = 0;
  for (std::string text_line, ids_line; std::getline(corpus, text_line) && std::getline(expected, ids_line); ++lines) {
    const std::string text = nlohmann::json::parse(text_line).get<std::string>();
    const std::vector<int64_t> ids = tokenizer.encode(text, /*add_special_tokens=*/false);
    if (ids == parse_ids(ids_line)) ++same;
    else ADD_FAILURE() << "line " << lines + 1 << " " << text_line << ": llama.cpp " << ids_line;
  }
  EXPECT_EQ(lines, 586);
  EXPECT_EQ(same, lines);
  // Decoding gives the text back for a plain line.
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("Hello, world!", false)), "Hello, world!");
}

INSTANTIATE_TEST_SUITE_P(QwenAndGemma, GgufVocabulary, ::testing::Values("qwen3-vocab", "gemma3-vocab"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace shardlm
