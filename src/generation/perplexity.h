#pragma once
// Perplexity of a token sequence as llama.cpp's llama-perplexity computes it, so that the
// two can be compared on the same text and model: the tokens are cut into chunks of
// `context` (what does not fill a chunk is dropped); each chunk is evaluated from an empty
// cache, its first token replaced by BOS where the tokenizer adds one, and only the second
// half of each chunk is scored (each of those positions then sees at least context / 2
// tokens before it). PPL = exp(mean negative log-likelihood of the scored tokens).

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include "generation/generator.h"

namespace shardlm::generation {

struct PerplexityOptions {
  int64_t context = 512;              // tokens a chunk
  int64_t max_chunks = 0;             // 0: every whole chunk
  std::optional<int64_t> bos_id{};    // replaces each chunk's first token
};

struct Perplexity {
  double perplexity = 0;
  double error = 0;  // one standard error of the estimate, as llama-perplexity states it
  int64_t chunks = 0, scored_tokens = 0;
};

// `progress(chunk, running)`: after each chunk, the perplexity of the chunks so far.
Perplexity perplexity(Generator& generator, std::span<const int64_t> tokens, const PerplexityOptions& options,
                      const std::function<void(int64_t, double)>& progress = {});

}  // namespace shardlm::generation
