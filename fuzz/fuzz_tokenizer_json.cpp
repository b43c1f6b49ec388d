// tokenizer.json from strangers: every component's parser and the tables built from it;
// a tokenizer that loads then encodes and decodes a fixed text.
#include "fuzz_util.h"
#include "tokenizer/pretrained_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardlm;
  return fuzz::run_input([&] {
    tokenizer::PretrainedTokenizer loaded =
        tokenizer::PretrainedTokenizer::from_texts(fuzz::as_text(data, size), "tokenizer.json", "", "");
    tokenizer::BatchEncoding encoded = loaded.encode("Hello, world! 123 héllo <|endoftext|>");
    (void)loaded.decode(encoded.input_ids.front());
  });
}
