// A GGUF file's vocabulary as a tokenizer: qwen3-vocab.gguf holds Qwen3's real vocabulary
// as llama.cpp's converter writes it, and llama.cpp 0.5.0 tokenized every line of the
// tokenizer corpus with it (tests/data/gguf/make_vocab_gguf.py). Loaded from the same file,
// shardlm must tokenize each line as llama.cpp did, special tokens in the text included.
#include <gtest/gtest.h>

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

TEST(GgufVocabulary, TokenizesTheCorpusAsLlamaCppDoes) {
  const std::string directory = SHARDLM_GGUF_VOCAB_DIR;
  const AutoTokenizer tokenizer = AutoTokenizer::from_pretrained(directory + "/qwen3-vocab.gguf");
  std::ifstream corpus(testing::data_path("tokenizers/corpus.jsonl"));
  std::ifstream expected(directory + "/qwen3-vocab.llama_cpp.txt");
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

}  // namespace
}  // namespace shardlm
