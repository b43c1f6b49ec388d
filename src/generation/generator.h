#pragma once
// The generate loop: prefill the prompt into the static cache, then one decode
// step per token. The growing sequence stays on the host, as in transformers;
// only fixed-shape tensors (ids, positions) go to the device each step.

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <shardlm/generation_config.h>

#include "backends/backend.h"
#include "generation/sampling.h"
#include "models/causal_lm.h"
#include "tokenizer/tokenizer.h"

namespace shardlm::generation {

enum class FinishReason { eos, length, stop_string };
std::string_view finish_reason_name(FinishReason reason);

struct GenerationResult {
  std::vector<int64_t> generated;  // new tokens only
  FinishReason finish_reason = FinishReason::length;
};

// Called once per generated token with the text it completes (may be empty while a
// UTF-8 character or a strippable space is pending; empty without a tokenizer).
using TokenCallback = std::function<void(int64_t token, std::string_view text)>;

// Every setting generate() uses, after the caller's over the model's over transformers' defaults.
struct ResolvedGeneration {
  SamplingSettings sampling;
  int64_t max_new_tokens = 0;
  int64_t max_cache_len = 0;
  uint64_t seed = 0;
  std::vector<int64_t> eos_token_id;
  std::vector<std::string> stop_strings;
};
ResolvedGeneration resolve_generation(const GenerationConfig& model_defaults, const GenerationConfig& request,
                                      int64_t prompt_length, int64_t max_position_embeddings);

class Generator {
 public:
  Generator(const models::CausalLM& model, backends::Backend& backend, GenerationConfig model_defaults);

  // `text_tokenizer` may be null: then no streamed text and no stop strings.
  GenerationResult generate(std::span<const int64_t> prompt, const GenerationConfig& request,
                            const TokenCallback& on_token = {}, const tokenizer::Tokenizer* text_tokenizer = nullptr);

  // Runs the model on `ids` at positions start..start+n-1 of a batch-1 cache and returns
  // host logits f32 [n, vocab] (all_positions) or [1, vocab] (last position only).
  Tensor forward(std::span<const int64_t> ids, int64_t start_position, bool all_positions);
  // Makes sure the cache holds max_cache_len positions for batch 1, reusing it when it does.
  void prepare_cache(int64_t max_cache_len);

  const GenerationConfig& model_defaults() const { return model_defaults_; }
  size_t cache_bytes() const { return cache_.bytes(); }

 private:
  const models::CausalLM& model_;
  backends::Backend& backend_;
  GenerationConfig model_defaults_;
  models::StaticCache cache_;
};

}  // namespace shardlm::generation
