#pragma once
// The scheduler of sequences over one StepRunner (continuous batching). The KV cache has a
// fixed number of sequence slots; sequences wait in a queue, take a free slot, prefill their
// prompt in fixed-size chunks, then decode one token a step, and give the slot back the
// step they finish or are cancelled. Each engine step runs one decode step over every
// decoding sequence (at the smallest compiled batch that holds them) and then as many prompt
// chunks as the token budget leaves room for, so a long prompt delays the others by a chunk
// a step, not by its whole length. Every step shape is one of a fixed set, compiled once.
// A sequence's tokens do not depend on what else is in the batch: rows are independent.

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "generation/sequence.h"
#include "generation/step_runner.h"

namespace shardlm::generation {

// How many of each row's best logits decide its next token (sampling on the device), or 0
// when the whole row is needed: a repetition penalty reorders logits by history, sampling
// without top_k reads every token, and logprobs are over the whole row. Sampling fetches one
// more than top_k, to see whether the k-th value ties with the next (torch.topk then keeps both).
int64_t candidate_count(const SequenceRequest& request, int64_t max_top_k, int64_t vocab);

struct EngineOptions {
  // Batch sizes of the decode steps: each step runs at the smallest that holds every
  // decoding sequence (padding rows fill it). Empty: just the cache's slot count.
  std::vector<int64_t> decode_buckets{};
  // The same for the prefill steps' rows (one chunk of one prompt a row).
  std::vector<int64_t> prefill_buckets{};
  // Chunk lengths of the prefill steps: each runs at the smallest that holds the longest
  // piece of prompt its rows feed, up to the runner's prefill_chunk_size (the last piece of
  // a prompt, a prompt whose prefix a slot held, a short prompt: padding rows cost a full
  // forward each). Empty: just prefill_chunk_size.
  std::vector<int64_t> prefill_chunk_buckets{};
  // Tokens one engine step may feed: a decode row counts 1, a prefill row its chunk; at
  // least one prefill row runs whenever a prompt waits. 0: no limit.
  int64_t token_budget = 0;
  // Sampling on the device with any candidate count a request's top_k asks for (fewest
  // bytes moved); false: only greedy steps take candidates, so that the set of compiled
  // shapes does not depend on what requests ask (serving).
  bool any_candidate_count = true;
  // A sequence takes the free slot whose cached tokens share the longest prefix with its
  // prompt and starts after them (prefix caching); a slot keeps what its last sequence
  // cached until another sequence takes it, and the slot freed longest ago goes first.
  bool prefix_caching = true;
};

// What an engine has done since it was made.
struct EngineStats {
  int64_t steps = 0;
  int64_t prefill_tokens = 0, decode_tokens = 0;  // real tokens fed (padding not counted)
  int64_t prefill_padding = 0;                    // padding positions of prefill steps' rows
  int64_t reused_prefix_tokens = 0;               // prompt tokens found in a slot, not prefilled
  double prefill_s = 0, decode_s = 0;             // in prefill and decode steps
  double prefill_communication_s = 0, decode_communication_s = 0;  // of those, in collectives
  int64_t decode_collectives = 0;  // collectives the decode steps made
};

class Engine {
 public:
  // The runner's cache (already allocated) gives the slot count and each slot's length.
  Engine(StepRunner& runner, EngineOptions options);

  // Queues a sequence; its prompt plus max_new_tokens must fit a slot (checked here, before
  // any work). Returns its id.
  uint64_t add(SequenceRequest request, SequenceCallback on_token = {});
  // Ends a sequence at the next step boundary (a waiting one at once); unknown ids are ignored.
  void cancel(uint64_t id);
  // One engine step (see above). Sequences that finish are moved to finished().
  void step();
  bool idle() const { return running_.empty() && waiting_.empty(); }

  // Sequences that have finished, in the order they did; the caller may take them.
  std::vector<std::unique_ptr<Sequence>>& finished() { return finished_; }
  size_t running() const { return running_.size(); }
  size_t waiting() const { return waiting_.size(); }
  int64_t slots() const { return runner_.slots(); }
  int64_t free_slots() const { return static_cast<int64_t>(free_slots_.size()); }
  const std::vector<int64_t>& decode_buckets() const { return decode_buckets_; }
  const std::vector<int64_t>& prefill_buckets() const { return prefill_buckets_; }
  const std::vector<int64_t>& prefill_chunk_buckets() const { return chunk_buckets_; }
  const EngineStats& stats() const { return stats_; }

  // Compiles every step shape step() can run, so none compiles while serving.
  void compile_all();

 private:
  void admit();
  // The free slot `prompt` should take, and how many of its tokens that slot holds already.
  std::pair<size_t, int64_t> pick_slot(std::span<const int64_t> prompt) const;
  void retire_finished();
  void run_decode(const std::vector<Sequence*>& decoding);
  // One chunk of each prompt; every_position: of one prompt, with the logits of every
  // position (its tokens scored).
  void run_prefill(const std::vector<Sequence*>& prefilling, bool every_position);
  // The device candidate count a decode step over `rows` uses (0: whole rows of logits).
  int64_t step_candidates(const std::vector<Sequence*>& rows) const;
  // Fills rows [used, bucket) of `step` with padding over slots no real row of it uses.
  void pad_rows(StepBuffers& step, int64_t used, int64_t logit_rows_per_row);

  StepRunner& runner_;
  EngineOptions options_;
  std::vector<int64_t> decode_buckets_, prefill_buckets_, chunk_buckets_;
  uint64_t next_id_ = 0;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
  std::vector<std::unique_ptr<Sequence>> finished_;
  std::vector<int64_t> free_slots_;                 // freed longest ago first
  std::vector<std::vector<int64_t>> slot_tokens_;   // [slots]: tokens whose keys and values a free slot holds
  std::vector<uint64_t> cancelled_;
  std::vector<Sequence*> decoding_, prefilling_, scored_;  // scratch of step
  std::vector<bool> slot_used_;                     // scratch of pad_rows
  std::vector<int64_t> fed_;                        // scratch of run_prefill: prompt tokens fed a row
  EngineStats stats_;
  // Decode candidates: this row's (id, logit), sorted by id, split in ids and logits.
  std::vector<std::pair<int32_t, float>> by_id_;
  std::vector<int32_t> candidate_ids_;
  std::vector<float> candidate_logits_;
};

}  // namespace shardlm::generation
