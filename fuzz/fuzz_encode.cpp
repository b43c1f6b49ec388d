// Encoding arbitrary bytes with real tokenizers (Qwen3's byte-level BPE with special
// tokens, Gemma 3's SentencePiece-style BPE, BERT's WordPiece). Invalid UTF-8 is refused
// with an error naming the byte offset (docs/FUZZING.md); nothing else may go wrong.
#include <memory>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/pretrained_tokenizer.h"

namespace {

std::vector<shardlm::tokenizer::PretrainedTokenizer> load_tokenizers() {
  std::vector<shardlm::tokenizer::PretrainedTokenizer> tokenizers;
  for (const char* name : {"qwen3", "gemma3", "synthetic_wordpiece_bert"})
    tokenizers.push_back(shardlm::tokenizer::PretrainedTokenizer::from_directory(
        shardlm::fuzz::tokenizer_dir(name)));
  return tokenizers;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardlm;
  static const std::vector<tokenizer::PretrainedTokenizer> tokenizers = load_tokenizers();
  if (size == 0) return 0;
  // The first byte picks the tokenizer and whether special tokens are added.
  const tokenizer::PretrainedTokenizer& chosen = tokenizers[data[0] % tokenizers.size()];
  tokenizer::EncodeOptions options;
  options.add_special_tokens = (data[0] & 0x80) != 0;
  return fuzz::run_input([&] {
    tokenizer::BatchEncoding encoded = chosen.encode(fuzz::as_text(data + 1, size - 1), options);
    (void)chosen.decode(encoded.input_ids.front());
  });
}
