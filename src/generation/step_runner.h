#pragma once
// Runs forward steps of fixed shapes over one static KV cache: compiles each step shape
// once (or runs it eagerly), owns its host and device buffers, and moves only fixed-shape
// tensors (ids, positions, cache rows, logit rows in; logits or their best candidates out).
// The cache holds `slots` sequences; a step's rows name the slots they use, so one set of
// executables serves any mix of sequences (backend.h, cache_rows).

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "backends/backend.h"
#include "graph/compile.h"
#include "graph/compile_cache.h"
#include "models/causal_lm.h"

namespace shardlm::generation {

// Prompt tokens per prefill step. Every row of a chunk costs a full forward even when
// it is padding, so short prompts favour small chunks; 32 rows already reuse each
// weight row 32 times.
inline constexpr int64_t default_prefill_chunk_size = 32;

struct ExecutionOptions {
  bool compile = true;
  int64_t prefill_chunk_size = default_prefill_chunk_size;
};

// Fixed-shape buffers of one step shape, reused across steps. The caller writes the host
// inputs, runs the step, and reads the host outputs.
struct StepBuffers {
  graph::CompileKey key;
  // i32 [batch, tokens], [batch, tokens] (negative: padding), [batch], [logit_rows]
  Tensor host_ids, host_positions, host_cache_rows, host_rows;
  Tensor ids, positions, cache_rows, rows;  // the same on the device
  Tensor host_logits;                       // f32 [logit_rows, vocab]
  // Sampling on the device: each row's best logits and their ids, [logit_rows, count].
  Tensor candidate_values, candidate_ids, host_candidate_values, host_candidate_ids;
  std::optional<graph::Executable> executable{};
  graph::Value logits, best_values, best_ids;  // best_*: the top_k in the graph, when its key has candidates
  Tensor eager_logits;  // the last eager run's logits (on the device)

  int64_t batch() const { return host_ids.shape()[0]; }
  int64_t tokens() const { return host_ids.shape()[1]; }
  int32_t* ids_of(int64_t row) { return host_ids.mutable_data<int32_t>() + row * tokens(); }
  int32_t* positions_of(int64_t row) { return host_positions.mutable_data<int32_t>() + row * tokens(); }
  int32_t* cache_row() { return host_cache_rows.mutable_data<int32_t>(); }
  int32_t* logit_row() { return host_rows.mutable_data<int32_t>(); }
};

class StepRunner {
 public:
  StepRunner(const models::CausalLM& model, backends::Backend& backend) : model_(model), backend_(backend) {}

  const models::CausalLM& model() const { return model_; }
  backends::Backend& backend() const { return backend_; }
  void set_execution(const ExecutionOptions& options) { execution_ = options; }
  const ExecutionOptions& execution() const { return execution_; }

  // Makes the cache exactly max_cache_len positions for `slots` sequences (reallocating,
  // and dropping its executables, unless it already is).
  void prepare_cache(int64_t slots, int64_t max_cache_len);
  // Makes sure the cache holds at least `needed` positions for `slots` sequences: reuses
  // it when it does, else allocates the default length (or `needed`, if larger).
  void ensure_cache(int64_t slots, int64_t needed);
  int64_t slots() const { return cache_.batch; }
  int64_t max_cache_len() const { return cache_.max_cache_len; }
  size_t cache_bytes() const { return cache_.bytes(); }

  // The buffers of a step shape: compiled (and cached) or eager. `candidates` > 0: a
  // backend that compiles whole graphs computes each row's best `candidates` logits in the
  // step's own program (one program per step, only the candidates leave the device).
  StepBuffers& buffers(const char* phase, int64_t batch, int64_t tokens, int64_t logit_rows, int64_t candidates = 0);
  // Runs the step whose host inputs the caller wrote; copies the logits to host_logits.
  const Tensor& run(StepBuffers& step);
  // The same, copying only each row's `count` best logits and their ids to the host
  // candidates (top_k on the device); returns the logits left on the device.
  const Tensor& run_to_candidates(StepBuffers& step, int64_t count);
  // Copies logits that run_to_candidates left on the device to host_logits.
  void copy_logits(StepBuffers& step, const Tensor& device_logits) { backend_.copy_to_host(device_logits, step.host_logits); }

  // Logits of one sequence fed at positions start..start+n-1 of slot 0: host f32
  // [n, vocab] (all_positions) or [1, vocab].
  Tensor forward(std::span<const int64_t> ids, int64_t start_position, bool all_positions);

  int64_t compiles() const { return compiled_.compiles(); }
  // Activation arena bytes of every cached executable.
  size_t arena_bytes() const;

  // Tensor parallelism where one rank decides every step (a server): after lead(), this
  // runner (rank 0) sends each cache allocation, compile and step (its shape and host
  // inputs) over the model's process group before doing it, and the runners of the other
  // ranks, in follow(), do the same until release_followers(). Sampling stays on rank 0:
  // every rank computes the same logits. A follower's failure ends the whole job.
  void lead();
  void follow();
  void release_followers();

 private:
  enum class PlanCommand : int32_t { stop = 1, cache = 2, compile = 3, run = 4 };
  // Sends a command and a step shape (compile, run) or cache size (cache) to the followers.
  void send_plan(PlanCommand command, const graph::CompileKey& key);
  graph::CompileKey key_for(const char* phase, int64_t batch, int64_t tokens, int64_t logit_rows,
                            int64_t candidates) const;
  StepBuffers make_buffers(const graph::CompileKey& key) const;
  // Runs the step; returns the logits where they were computed (on the device).
  const Tensor& run_on_device(StepBuffers& step);

  const models::CausalLM& model_;
  backends::Backend& backend_;
  ExecutionOptions execution_;
  models::StaticCache cache_;
  graph::CompileCache<StepBuffers> compiled_;
  std::map<graph::CompileKey, StepBuffers> eager_;
  bool leading_ = false;
  Tensor plan_;  // i32 [7]: command, then the fields of send_plan's key
};

}  // namespace shardlm::generation
