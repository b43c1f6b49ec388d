#pragma once
// generate(): a batch of prompts run to completion on the engine (generation/engine.h)
// over a static KV cache of one slot a prompt. Prompts are prefilled in fixed-size chunks
// and decoded one token per row per step, so a whole generation runs on two compiled
// executables (one prefill chunk, one decode step) whatever the prompt lengths. The
// growing sequences stay on the host, as in transformers; only fixed-shape tensors (ids,
// positions, logit rows) go to the device.

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <shardlm/generation_config.h>

#include "backends/backend.h"
#include "generation/engine.h"
#include "generation/sampling.h"
#include "generation/sequence.h"
#include "generation/step_runner.h"
#include "models/causal_lm.h"
#include "tokenizer/tokenizer.h"

namespace shardlm::generation {

struct GenerationResult {
  std::vector<int64_t> generated;  // new tokens only
  FinishReason finish_reason = FinishReason::length;
};

// Called once per generated token with the text it completes (may be empty while a
// UTF-8 character or a strippable space is pending; empty without a tokenizer).
using TokenCallback = std::function<void(size_t row, int64_t token, std::string_view text)>;

// Every setting generate() uses, after the caller's over the model's over transformers' defaults.
struct ResolvedGeneration {
  SamplingSettings sampling;
  int64_t max_new_tokens = 0;
  std::optional<int64_t> max_cache_len{};  // as requested; unset: chosen by the generator
  uint64_t seed = 0;
  std::vector<int64_t> eos_token_id;
  std::vector<std::string> stop_strings{};
  bool compile = true;
  int64_t prefill_chunk_size = default_prefill_chunk_size;
};
ResolvedGeneration resolve_generation(const GenerationConfig& model_defaults, const GenerationConfig& request,
                                      int64_t longest_prompt, int64_t max_position_embeddings);

// How one generate() call went.
struct GenerationStats {
  int64_t compiles = 0;  // executables compiled during the call
  double time_to_first_token_s = 0;
  int64_t prefill_tokens = 0;
  double prefill_s = 0;
  int64_t decode_tokens = 0;
  double decode_s = 0;
  // Of prefill_s and decode_s: seconds in tensor-parallel collectives.
  double prefill_communication_s = 0, decode_communication_s = 0;
  int64_t decode_collectives = 0;
};

class Generator {
 public:
  Generator(const models::CausalLM& model, backends::Backend& backend, GenerationConfig model_defaults);

  // One result per prompt (prompts may differ in length); each row's result equals
  // that prompt generated alone. `text_tokenizer` may be null: then no streamed text
  // and no stop strings.
  std::vector<GenerationResult> generate(const std::vector<std::vector<int64_t>>& prompts,
                                         const GenerationConfig& request, const TokenCallback& on_token = {},
                                         const tokenizer::Tokenizer* text_tokenizer = nullptr);

  // Logits of one sequence fed at positions start..start+n-1 of a batch-1 cache:
  // host f32 [n, vocab] (all_positions) or [1, vocab]. Uses the execution options set last.
  Tensor forward(std::span<const int64_t> ids, int64_t start_position, bool all_positions) {
    return runner_.forward(ids, start_position, all_positions);
  }
  // Makes the cache exactly max_cache_len positions for `batch` rows (reallocating,
  // and dropping its executables, unless it already is).
  void prepare_cache(int64_t batch, int64_t max_cache_len) { runner_.prepare_cache(batch, max_cache_len); }
  // Makes sure the cache holds at least `needed` positions for `batch` rows: reuses it
  // when it does, else allocates the default length (or `needed`, if larger).
  void ensure_cache(int64_t batch, int64_t needed) { runner_.ensure_cache(batch, needed); }
  void set_execution(const ExecutionOptions& options) { runner_.set_execution(options); }
  // Compiles, without running them, the executables generate() uses for `batch` prompts
  // under `request`: its prefill chunk and its decode step over the cache generate() would
  // allocate for a short prompt (pin it with max_cache_len). A backend with a persistent
  // compile cache (pjrt) keeps them there for later processes.
  void compile_ahead(int64_t batch, const GenerationConfig& request);

  const GenerationConfig& model_defaults() const { return model_defaults_; }
  int64_t compiles() const { return runner_.compiles(); }
  size_t cache_bytes() const { return runner_.cache_bytes(); }
  int64_t max_cache_len() const { return runner_.max_cache_len(); }
  // Activation arena bytes of every cached executable.
  size_t arena_bytes() const { return runner_.arena_bytes(); }
  const GenerationStats& last_stats() const { return stats_; }
  StepRunner& runner() { return runner_; }

 private:
  // The cache generate() uses under `settings`: max_cache_len when set, else one that
  // holds the longest prompt and its new tokens.
  void size_cache(int64_t batch, const ResolvedGeneration& settings, int64_t longest_prompt);

  const models::CausalLM& model_;
  GenerationConfig model_defaults_;
  StepRunner runner_;
  GenerationStats stats_;
};

}  // namespace shardlm::generation
