#pragma once
// Options of generate(), named as transformers' GenerationConfig names them.
// Every field is optional: an unset field takes the model's generation_config.json
// value, else transformers' default (in brackets). So
//   model.generate(inputs, {.do_sample = true, .max_new_tokens = 50})
// keeps e.g. the temperature the model ships with, as transformers does.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardlm {

struct GenerationConfig {
  std::optional<bool> do_sample{};                 // [false]: greedy
  std::optional<int64_t> max_new_tokens{};         // [max_length - prompt length]
  std::optional<int64_t> max_length{};             // [20], prompt included; only without max_new_tokens
  std::optional<float> temperature{};              // [1.0]
  std::optional<int64_t> top_k{};                  // [50]; 0 disables
  std::optional<float> top_p{};                    // [1.0]; 1 disables
  std::optional<float> min_p{};                    // [unset]
  std::optional<float> repetition_penalty{};       // [1.0]; 1 disables
  std::optional<uint64_t> seed{};                  // [from the clock]
  std::optional<std::vector<int64_t>> eos_token_id{};  // any of these ends a sequence
  std::optional<int64_t> pad_token_id{};
  std::optional<int64_t> bos_token_id{};
  std::vector<std::string> stop_strings{};         // needs a tokenizer; the match stays in the output
  std::optional<int64_t> max_cache_len{};          // [min(max_position_embeddings, 4096), or more if the request
                                                 //  needs it; an existing cache that is large enough is reused]
  std::optional<std::string> cache_implementation{};  // ["static"]: the only one
  std::optional<bool> disable_compile{};           // [false]: run the graph eagerly (the reference path)
  std::optional<int64_t> prefill_chunk_size{};     // [32]: prompt tokens per prefill step (the last chunk padded)
};

}  // namespace shardlm
