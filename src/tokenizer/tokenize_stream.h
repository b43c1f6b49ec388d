#pragma once
// The line protocol of `shardlm tokenize` (like llama.cpp's llama-tokenize), kept here
// so the CLI is a thin wrapper and tests and benchmarks can drive it directly.
//
// Encode (default): each input line is a JSON string (or, with `plain`, raw text); each
// output line is {"ids":[...]}. Decode: each input line is {"ids":[...]} (or a bare
// array); each output line is the decoded text as a JSON string.

#include <iosfwd>

#include "tokenizer/pretrained_tokenizer.h"

namespace shardlm::tokenizer {

struct TokenizeStreamOptions {
  bool decode = false;
  bool plain = false;  // encode: lines are raw text, not JSON strings
  bool add_special_tokens = false;
  bool skip_special_tokens = false;
};

// Processes `in` to its end. A malformed line throws shardlm::Error naming the line
// number; every line before it has been written and flushed in full.
void run_tokenize_stream(const PretrainedTokenizer& tokenizer, std::istream& in, std::ostream& out,
                         const TokenizeStreamOptions& options);

}  // namespace shardlm::tokenizer
