// Decoding arbitrary ids (out of range and negative included) with real tokenizers, at
// once and token by token as streaming does.
#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/pretrained_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardlm;
  static const std::vector<tokenizer::PretrainedTokenizer> tokenizers = [] {
    std::vector<tokenizer::PretrainedTokenizer> loaded;
    for (const char* name : {"qwen3", "gemma3", "llama3", "synthetic_metaspace_bpe"})
      loaded.push_back(tokenizer::PretrainedTokenizer::from_directory(fuzz::tokenizer_dir(name)));
    return loaded;
  }();
  if (size == 0) return 0;
  const tokenizer::PretrainedTokenizer& chosen = tokenizers[data[0] % tokenizers.size()];
  const bool skip_special_tokens = (data[0] & 0x80) != 0;
  std::vector<int32_t> ids((size - 1) / sizeof(int32_t));
  if (!ids.empty()) std::memcpy(ids.data(), data + 1, ids.size() * sizeof(int32_t));
  // Mostly ids inside the vocabulary, where the interesting byte sequences are.
  for (int32_t& id : ids)
    if (id >= 0) id %= 300'000;
  return fuzz::run_input([&] {
    (void)chosen.decode(ids, skip_special_tokens);
    tokenizer::IncrementalDecoder streaming(chosen.tokenizer(), skip_special_tokens);
    for (int32_t id : ids) (void)streaming.push(id);
    (void)streaming.flush();
  });
}
