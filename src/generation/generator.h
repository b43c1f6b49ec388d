#pragma once
// The generate loop over a static KV cache. Prompts are prefilled in fixed-size
// chunks and decoded one token per row per step, so a whole generation runs on
// two compiled executables (one prefill chunk, one decode step) whatever the
// prompt lengths. The growing sequences stay on the host, as in transformers;
// only fixed-shape tensors (ids, positions, logit rows) go to the device.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <shardlm/generation_config.h>

#include "backends/backend.h"
#include "generation/sampling.h"
#include "graph/compile.h"
#include "graph/compile_cache.h"
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
using TokenCallback = std::function<void(size_t row, int64_t token, std::string_view text)>;

// Prompt tokens per prefill step. Every row of a chunk costs a full forward even when
// it is padding, so short prompts favour small chunks; 32 rows already reuse each
// weight row 32 times.
inline constexpr int64_t default_prefill_chunk_size = 32;

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
};

struct ExecutionOptions {
  bool compile = true;
  int64_t prefill_chunk_size = default_prefill_chunk_size;
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
  Tensor forward(std::span<const int64_t> ids, int64_t start_position, bool all_positions);
  // Makes the cache exactly max_cache_len positions for `batch` rows (reallocating,
  // and dropping its executables, unless it already is).
  void prepare_cache(int64_t batch, int64_t max_cache_len);
  // Makes sure the cache holds at least `needed` positions for `batch` rows: reuses it
  // when it does, else allocates the default length (or `needed`, if larger).
  void ensure_cache(int64_t batch, int64_t needed);
  void set_execution(const ExecutionOptions& options) { execution_ = options; }
  // Compiles, without running them, the executables generate() uses for `batch` prompts
  // under `request`: its prefill chunk and its decode step over the cache generate() would
  // allocate for a short prompt (pin it with max_cache_len). A backend with a persistent
  // compile cache (pjrt) keeps them there for later processes.
  void compile_ahead(int64_t batch, const GenerationConfig& request);

  const GenerationConfig& model_defaults() const { return model_defaults_; }
  int64_t compiles() const { return compiled_.compiles(); }
  size_t cache_bytes() const { return cache_.bytes(); }
  int64_t max_cache_len() const { return cache_.max_cache_len; }
  // Activation arena bytes of every cached executable.
  size_t arena_bytes() const;
  const GenerationStats& last_stats() const { return stats_; }

 private:
  // Fixed-shape buffers of one step shape, reused across calls.
  struct StepSlot {
    // i32 [batch, tokens], [batch, tokens], [batch], [logit_rows]
    Tensor host_ids, host_positions, host_cache_rows, host_rows;
    Tensor ids, positions, cache_rows, rows;  // the same on the device
    Tensor host_logits;                          // f32 [logit_rows, vocab]
    // Sampling on the device: each row's best logits and their ids, [logit_rows, count].
    Tensor candidate_values, candidate_ids, host_candidate_values, host_candidate_ids;
    std::optional<graph::Executable> executable{};
    graph::Value logits, best_values, best_ids;  // best_*: the top_k in the graph, when its key has candidates
    Tensor eager_logits;  // the last eager run's logits (on the device)
  };
  // The cache generate() uses under `settings`: max_cache_len when set, else one that
  // holds the longest prompt and its new tokens.
  void size_cache(int64_t batch, const ResolvedGeneration& settings, int64_t longest_prompt);
  graph::CompileKey key_for(const char* phase, int64_t batch, int64_t tokens, int64_t logit_rows,
                            int64_t candidates) const;
  StepSlot make_slot(const graph::CompileKey& key) const;
  // The slot for a step shape: compiled (and cached) or eager. `candidates` > 0: a backend
  // that compiles whole graphs computes each row's best `candidates` logits in the step's
  // own program (one program per step, only the candidates leave the device).
  StepSlot& slot(const char* phase, int64_t batch, int64_t tokens, int64_t logit_rows, int64_t candidates = 0);
  // Runs the step whose inputs the caller wrote into `slot`; returns the logits where
  // they were computed (on the device).
  const Tensor& run_on_device(StepSlot& slot);
  // The same, with the logits copied to the host.
  const Tensor& run(StepSlot& slot);
  // The same, copying only each row's `count` best logits and their ids to the slot's host
  // candidates (top_k on the device); returns the logits left on the device.
  const Tensor& run_to_candidates(StepSlot& slot, int64_t count);
  // Prefills every row in chunks; returns each row's last-position logits [vocab].
  std::vector<std::vector<float>> prefill(const std::vector<std::vector<int64_t>>& prompts);

  const models::CausalLM& model_;
  backends::Backend& backend_;
  GenerationConfig model_defaults_;
  ExecutionOptions execution_;
  models::StaticCache cache_;
  graph::CompileCache<StepSlot> compiled_;
  std::map<graph::CompileKey, StepSlot> eager_slots_;
  GenerationStats stats_;
};

}  // namespace shardlm::generation
