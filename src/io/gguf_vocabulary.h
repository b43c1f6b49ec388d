#pragma once
// A GGUF file's vocabulary (tokenizer.ggml.*) as tokenizer.json and tokenizer_config.json
// for a tokenizer that splits text as llama.cpp does. Two kinds:
//   "gpt2"  byte-level BPE with the pre-tokenizer regex of tokenizer.ggml.pre ("qwen2",
//           "llama-bpe"), no normalizer;
//   "llama" SentencePiece (Gemma, Llama 2): spaces become "▁" (one prefixed where
//           add_space_prefix says), pieces join by llama.cpp's rule, the adjacent pair
//           whose join is the token of highest score first, and what no token covers
//           falls back to its bytes. As BPE, that rule is merges ranked by that score.
// Both match CONTROL and USER_DEFINED tokens whole in the text, add BOS where add_bos_token
// says, and carry the special ids and the chat template.

#include <map>
#include <string>

#include "io/gguf.h"

namespace shardlm::io {

// tokenizer.json and tokenizer_config.json; empty where the file has no vocabulary or one of
// a kind not read (see gguf_vocabulary_unread_reason).
std::map<std::string, std::string> gguf_tokenizer_files(const GgufFile& file);
// Why gguf_tokenizer_files gives nothing, for messages ("its vocabulary is of kind 'rwkv'...").
std::string gguf_vocabulary_unread_reason(const GgufFile& file);

}  // namespace shardlm::io
