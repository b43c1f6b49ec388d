#include "generation/engine.h"

#include <algorithm>

#include "core/error.h"
#include "parallel/fault_injection.h"

namespace shardlm::generation {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Sorted, positive, at most `largest`, ending at `largest` (so every size fits one bucket).
std::vector<int64_t> normalized_buckets(std::vector<int64_t> buckets, int64_t largest, const char* what,
                                        const char* largest_is) {
  for (int64_t bucket : buckets)
    SHARDLM_CHECK(bucket > 0 && bucket <= largest, what, " bucket ", bucket, " must be in [1, ", largest, "] (",
                  largest_is, ")");
  buckets.push_back(largest);
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  return buckets;
}

int64_t bucket_for(const std::vector<int64_t>& buckets, int64_t rows) {
  return *std::lower_bound(buckets.begin(), buckets.end(), rows);
}

}  // namespace

int64_t candidate_count(const SequenceRequest& request, int64_t max_top_k, int64_t vocab) {
  const SamplingSettings& sampling = request.sampling;
  if (sampling.repetition_penalty != 1.0f || sampling.presence_penalty != 0.0f || sampling.frequency_penalty != 0.0f ||
      request.logprobs)
    return 0;
  const int64_t count = !sampling.do_sample ? 1 : sampling.top_k > 0 ? sampling.top_k + 1 : 0;
  return count > 0 && count <= max_top_k && count < vocab ? count : 0;
}

Engine::Engine(StepRunner& runner, EngineOptions options) : runner_(runner), options_(std::move(options)) {
  const int64_t slots = runner_.slots();
  SHARDLM_CHECK(slots > 0, "the engine needs an allocated KV cache");
  decode_buckets_ = normalized_buckets(options_.decode_buckets, slots, "decode", "the cache's sequence slots");
  prefill_buckets_ = normalized_buckets(options_.prefill_buckets, slots, "prefill", "the cache's sequence slots");
  chunk_buckets_ = normalized_buckets(options_.prefill_chunk_buckets, runner_.execution().prefill_chunk_size,
                                      "prefill chunk", "the prefill chunk size");
  SHARDLM_CHECK(options_.token_budget >= 0, "the token budget must not be negative, got ", options_.token_budget);
  for (int64_t slot = 0; slot < slots; ++slot) free_slots_.push_back(slot);
  slot_tokens_.resize(static_cast<size_t>(slots));
  slot_used_.resize(static_cast<size_t>(slots));
}

uint64_t Engine::add(SequenceRequest request, SequenceCallback on_token) {
  const int64_t vocab = runner_.model().config().vocab_size;
  for (int64_t id : request.prompt)
    SHARDLM_CHECK(id >= 0 && id < vocab, "token id ", id, " is outside the vocabulary [0, ", vocab, ")");
  const int64_t needed = static_cast<int64_t>(request.prompt.size()) + request.stop.max_new_tokens;
  SHARDLM_CHECK(needed <= runner_.max_cache_len(), "the prompt (", request.prompt.size(),
                " tokens) plus max_new_tokens (", request.stop.max_new_tokens, ") is ", needed,
                " positions, beyond the KV cache's ", runner_.max_cache_len(),
                " per sequence: shorten the prompt or lower max_new_tokens");
  const uint64_t id = next_id_++;
  waiting_.push_back(std::make_unique<Sequence>(id, std::move(request), std::move(on_token)));
  return id;
}

void Engine::cancel(uint64_t id) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
    if ((*it)->id() == id) {
      (*it)->cancel();
      finished_.push_back(std::move(*it));
      waiting_.erase(it);
      return;
    }
  cancelled_.push_back(id);
}

std::pair<size_t, int64_t> Engine::pick_slot(std::span<const int64_t> prompt) const {
  size_t best = 0;
  int64_t longest = 0;
  if (!options_.prefix_caching) return {best, longest};
  for (size_t i = 0; i < free_slots_.size(); ++i) {
    const std::vector<int64_t>& held = slot_tokens_[static_cast<size_t>(free_slots_[i])];
    // At least the prompt's last token is fed again: its logits pick the first new token.
    const size_t limit = std::min(held.size(), prompt.size() - 1);
    const auto shared = static_cast<int64_t>(
        std::mismatch(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(limit), prompt.begin()).first -
        held.begin());
    if (shared > longest) best = i, longest = shared;
  }
  return {best, longest};
}

void Engine::admit() {
  while (!free_slots_.empty() && !waiting_.empty()) {
    std::unique_ptr<Sequence> sequence = std::move(waiting_.front());
    waiting_.pop_front();
    auto [index, shared] = pick_slot(sequence->tokens());
    if (sequence->request().prompt_logprobs) shared = 0;
    const int64_t slot = free_slots_[index];
    free_slots_.erase(free_slots_.begin() + static_cast<std::ptrdiff_t>(index));
    sequence->set_slot(slot);
    sequence->reuse_prefix(shared);
    stats_.reused_prefix_tokens += shared;
    slot_tokens_[static_cast<size_t>(slot)].clear();  // overwritten from `shared` on
    running_.push_back(std::move(sequence));
  }
}

void Engine::retire_finished() {
  for (uint64_t id : cancelled_)
    for (auto& sequence : running_)
      if (sequence->id() == id) sequence->cancel();
  cancelled_.clear();
  // In place, keeping admission order (std::stable_partition would allocate a buffer a step).
  size_t kept = 0;
  for (auto& sequence : running_) {
    if (!sequence->finished()) {
      running_[kept++] = std::move(sequence);
      continue;
    }
    const auto slot = static_cast<size_t>(sequence->slot());
    slot_tokens_[slot].assign(sequence->tokens().begin(), sequence->tokens().begin() + sequence->cached());
    free_slots_.push_back(sequence->slot());
    sequence->set_slot(-1);
    finished_.push_back(std::move(sequence));
  }
  running_.resize(kept);
}

void Engine::step() {
  parallel::inject_fault_if_asked(runner_.model().process_group(), stats_.steps);
  retire_finished();
  admit();
  decoding_.clear();
  prefilling_.clear();
  for (auto& sequence : running_)
    (sequence->cached() < sequence->prompt_length() ? prefilling_ : decoding_).push_back(sequence.get());
  if (!decoding_.empty()) run_decode(decoding_);
  if (!prefilling_.empty()) {
    const int64_t chunk = runner_.execution().prefill_chunk_size;
    int64_t rows = prefill_buckets_.back();
    if (options_.token_budget > 0)
      rows = std::clamp<int64_t>((options_.token_budget - static_cast<int64_t>(decoding_.size())) / chunk, 1, rows);
    if (static_cast<int64_t>(prefilling_.size()) > rows) prefilling_.resize(static_cast<size_t>(rows));
    // A prompt to score needs the logits of every position: a step of its own shape.
    const auto scored = std::find_if(prefilling_.begin(), prefilling_.end(),
                                     [](const Sequence* s) { return s->request().prompt_logprobs; });
    if (scored != prefilling_.end()) {
      scored_.assign(1, *scored);
      run_prefill(scored_, /*every_position=*/true);
      prefilling_.erase(std::remove_if(prefilling_.begin(), prefilling_.end(),
                                       [](const Sequence* s) { return s->request().prompt_logprobs; }),
                        prefilling_.end());
    }
    if (!prefilling_.empty()) run_prefill(prefilling_, /*every_position=*/false);
  }
  ++stats_.steps;
  retire_finished();
}

void Engine::pad_rows(StepBuffers& step, int64_t used, int64_t logit_rows_per_row) {
  std::fill(slot_used_.begin(), slot_used_.end(), false);
  for (int64_t r = 0; r < used; ++r) slot_used_[static_cast<size_t>(step.cache_row()[r])] = true;
  int64_t spare = 0;
  for (int64_t r = used; r < step.batch(); ++r) {
    while (slot_used_[static_cast<size_t>(spare)]) ++spare;
    step.cache_row()[r] = static_cast<int32_t>(spare++);
    std::fill(step.ids_of(r), step.ids_of(r) + step.tokens(), 0);
    std::fill(step.positions_of(r), step.positions_of(r) + step.tokens(), -1);  // padding: no writes, no work
    for (int64_t j = 0; j < logit_rows_per_row; ++j)
      step.logit_row()[r * logit_rows_per_row + j] = static_cast<int32_t>(r * step.tokens());
  }
}

int64_t Engine::step_candidates(const std::vector<Sequence*>& rows) const {
  const int64_t max_top_k = runner_.backend().max_top_k(), vocab = runner_.model().config().vocab_size;
  int64_t count = 0;
  for (const Sequence* sequence : rows) {
    const int64_t wanted = candidate_count(sequence->request(), max_top_k, vocab);
    if (wanted == 0 || (!options_.any_candidate_count && wanted != 1)) return 0;
    count = std::max(count, wanted);
  }
  return count;
}

void Engine::run_decode(const std::vector<Sequence*>& decoding) {
  const auto start = std::chrono::steady_clock::now();
  parallel::ProcessGroup& group = runner_.model().process_group();
  const double communication_before = group.communication_seconds();
  const int64_t collectives_before = group.collective_count();
  const int64_t count = static_cast<int64_t>(decoding.size()), vocab = runner_.model().config().vocab_size;
  const int64_t batch = bucket_for(decode_buckets_, count), candidates = step_candidates(decoding);
  StepBuffers& step = runner_.buffers("decode", batch, 1, batch, candidates);
  for (int64_t r = 0; r < count; ++r) {
    const Sequence& sequence = *decoding[r];
    step.ids_of(r)[0] = static_cast<int32_t>(sequence.tokens().back());
    step.positions_of(r)[0] = static_cast<int32_t>(sequence.tokens().size() - 1);
    step.cache_row()[r] = static_cast<int32_t>(sequence.slot());
    step.logit_row()[r] = static_cast<int32_t>(r);
  }
  pad_rows(step, count, 1);
  const auto whole_row = [&](int64_t r) { return std::span(step.host_logits.mutable_data<float>() + r * vocab, vocab); };
  if (candidates == 0) {
    runner_.run(step);
    for (int64_t r = 0; r < count; ++r) {
      decoding[r]->mark_cached(1);
      decoding[r]->select_and_take(whole_row(r));
    }
  } else {
    const Tensor& device_logits = runner_.run_to_candidates(step, candidates);
    bool whole_rows_copied = false;
    for (int64_t r = 0; r < count; ++r) {
      Sequence& sequence = *decoding[r];
      sequence.mark_cached(1);
      const float* values = step.host_candidate_values.data<float>() + r * candidates;
      const int32_t* ids = step.host_candidate_ids.data<int32_t>() + r * candidates;
      const SamplingSettings& sampling = sequence.request().sampling;
      const int64_t kept = sampling.do_sample ? sampling.top_k : 1;
      // A tie across the top_k boundary keeps more than top_k tokens; a short row lacks some.
      bool whole_row_needed = kept < candidates && values[kept - 1] == values[kept];
      for (int64_t j = 0; j < std::min(kept + 1, candidates); ++j) whole_row_needed |= ids[j] < 0;
      if (whole_row_needed) {
        if (!whole_rows_copied) runner_.copy_logits(step, device_logits);
        whole_rows_copied = true;
        sequence.select_and_take(whole_row(r));
        continue;
      }
      // In id order, so that a draw walks the tokens in the order it would over the whole row.
      by_id_.clear();
      for (int64_t j = 0; j < kept; ++j) by_id_.emplace_back(ids[j], values[j]);
      std::sort(by_id_.begin(), by_id_.end());
      candidate_ids_.clear();
      candidate_logits_.clear();
      for (const auto& [id, value] : by_id_) candidate_ids_.push_back(id), candidate_logits_.push_back(value);
      sequence.select_and_take(candidate_logits_, candidate_ids_);
    }
  }
  stats_.decode_tokens += count;
  stats_.decode_s += seconds_since(start);
  stats_.decode_communication_s += group.communication_seconds() - communication_before;
  stats_.decode_collectives += group.collective_count() - collectives_before;
}

void Engine::run_prefill(const std::vector<Sequence*>& prefilling, bool every_position) {
  const auto start = std::chrono::steady_clock::now();
  parallel::ProcessGroup& group = runner_.model().process_group();
  const double communication_before = group.communication_seconds();
  const int64_t count = static_cast<int64_t>(prefilling.size()), vocab = runner_.model().config().vocab_size;
  int64_t longest = 0;  // of the pieces the rows feed
  for (const Sequence* sequence : prefilling)
    longest = std::max(longest, std::min(chunk_buckets_.back(), sequence->prompt_length() - sequence->cached()));
  // A scored prompt's step has the one shape compile_all made for it.
  const int64_t chunk = every_position ? chunk_buckets_.back() : bucket_for(chunk_buckets_, longest);
  const int64_t batch = every_position ? 1 : bucket_for(prefill_buckets_, count);
  const int64_t logits_per_row = every_position ? chunk : 1;
  StepBuffers& step = runner_.buffers("prefill", batch, chunk, batch * logits_per_row);
  fed_.resize(static_cast<size_t>(count));
  for (int64_t r = 0; r < count; ++r) {
    const Sequence& sequence = *prefilling[r];
    const int64_t begin = sequence.cached();
    const int64_t real = std::min(chunk, sequence.prompt_length() - begin);
    fed_[r] = real;
    for (int64_t j = 0; j < chunk; ++j) {  // positions past the prompt are padding
      step.ids_of(r)[j] = j < real ? static_cast<int32_t>(sequence.tokens()[begin + j]) : 0;
      step.positions_of(r)[j] = j < real ? static_cast<int32_t>(begin + j) : -1;
    }
    step.cache_row()[r] = static_cast<int32_t>(sequence.slot());
    for (int64_t j = 0; j < logits_per_row; ++j)
      step.logit_row()[r * logits_per_row + j] = static_cast<int32_t>(r * chunk + (every_position ? j : real - 1));
  }
  pad_rows(step, count, logits_per_row);
  stats_.prefill_padding += (batch - count) * chunk;
  runner_.run(step);
  const auto logits_of = [&](int64_t row) { return std::span(step.host_logits.mutable_data<float>() + row * vocab, vocab); };
  for (int64_t r = 0; r < count; ++r) {
    Sequence& sequence = *prefilling[r];
    const int64_t begin = sequence.cached();
    sequence.mark_cached(fed_[r]);
    stats_.prefill_tokens += fed_[r];
    stats_.prefill_padding += chunk - fed_[r];
    if (every_position)
      for (int64_t j = 0; j < fed_[r] && begin + j + 1 < sequence.prompt_length(); ++j)
        sequence.score_prompt_token(logits_of(j), begin + j);
    if (sequence.cached() == sequence.prompt_length())  // the last chunk: its last logits pick the first token
      sequence.select_and_take(logits_of(every_position ? fed_[r] - 1 : r));
  }
  stats_.prefill_s += seconds_since(start);
  stats_.prefill_communication_s += group.communication_seconds() - communication_before;
}

void Engine::compile_all() {
  for (int64_t chunk : chunk_buckets_)
    for (int64_t batch : prefill_buckets_) runner_.buffers("prefill", batch, chunk, batch);
  const int64_t chunk = chunk_buckets_.back();
  runner_.buffers("prefill", 1, chunk, chunk);  // a prompt scored at every position
  for (int64_t batch : decode_buckets_) {
    runner_.buffers("decode", batch, 1, batch, 0);
    if (runner_.backend().compiles_graphs()) runner_.buffers("decode", batch, 1, batch, 1);
  }
}

}  // namespace shardlm::generation
