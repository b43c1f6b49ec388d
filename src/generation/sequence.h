#pragma once
// One sequence of the engine: its tokens, how much of them the KV cache holds, how it picks
// its next token, when it stops, and the text it has streamed. The scheduler moves it
// through waiting -> running (holding a cache slot) -> finished; nothing here touches a
// device.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "generation/sampling.h"
#include "tokenizer/tokenizer.h"

namespace shardlm::generation {

enum class FinishReason { eos, length, stop_string, cancelled };
std::string_view finish_reason_name(FinishReason reason);

// When a sequence ends: max_new_tokens tokens, an eos id, or a stop string in its text
// (only once min_new_tokens are out; ignore_eos disables the eos ids, as vLLM's options do).
struct StopRules {
  int64_t max_new_tokens = 0;
  int64_t min_new_tokens = 0;
  std::vector<int64_t> eos_token_id{};
  bool ignore_eos = false;
  std::vector<std::string> stop_strings{};
};

struct SequenceRequest {
  std::vector<int64_t> prompt;
  SamplingSettings sampling{};
  uint64_t seed = 0;
  StopRules stop{};
  // Streamed text and stop strings; null: neither.
  const tokenizer::Tokenizer* tokenizer = nullptr;
  bool skip_special_tokens = true;  // in the streamed text
  // The log-softmax of each chosen token and of the `top_logprobs` best at its step.
  bool logprobs = false;
  int64_t top_logprobs = 0;
  // The same for every prompt token after the first (what evaluation harnesses score);
  // the prompt is then prefilled in full, never from a cached prefix.
  bool prompt_logprobs = false;
};

// One chosen token's log-probability and the best alternatives at its step (best first).
struct TokenLogprob {
  float logprob = 0;
  std::vector<std::pair<int64_t, float>> top{};
};

class Sequence;
// Called for each token a sequence takes, with the text it completes (may be empty while a
// UTF-8 character or a strippable space is pending; at the end, the rest of the text).
using SequenceCallback = std::function<void(const Sequence& sequence, int64_t token, std::string_view text)>;

class Sequence {
 public:
  Sequence(uint64_t id, SequenceRequest request, SequenceCallback on_token);

  uint64_t id() const { return id_; }
  const SequenceRequest& request() const { return request_; }
  // Prompt and generated tokens: [prompt_length() + generated().size()].
  std::span<const int64_t> tokens() const { return history_; }
  int64_t prompt_length() const { return static_cast<int64_t>(request_.prompt.size()); }
  std::span<const int64_t> generated() const {
    return std::span(history_).subspan(request_.prompt.size());
  }
  const std::vector<TokenLogprob>& logprobs() const { return logprobs_; }
  // Of prompt tokens 1.. (request().prompt_logprobs), as far as prefilled.
  const std::vector<TokenLogprob>& prompt_logprobs() const { return prompt_logprobs_; }
  const std::string& text() const { return text_; }

  // Tokens whose keys and values are in the cache: the next step feeds tokens()[cached()..].
  int64_t cached() const { return cached_; }
  int64_t pending() const { return static_cast<int64_t>(history_.size()) - cached_; }
  // More than the last token is pending: the prompt (or its rest) is still to prefill.
  bool prefilling() const { return pending() > 1; }
  void mark_cached(int64_t count) { cached_ += count; }
  // The slot this sequence takes already holds the keys and values of its first `count`
  // prompt tokens (a finished sequence's shared prefix): they are not prefilled again.
  void reuse_prefix(int64_t count) { cached_ = reused_ = count; }
  int64_t reused_prefix() const { return reused_; }

  int64_t slot() const { return slot_; }
  void set_slot(int64_t slot) { slot_ = slot; }

  bool finished() const { return finish_.has_value(); }
  std::optional<FinishReason> finish_reason() const { return finish_; }
  // Ends the sequence without a token (reported to its callback with an empty text).
  void cancel();

  // Picks the next token from this step's logits of its last token (the whole row
  // [vocab], or the candidates `ids` of the best logits when given) and takes it.
  void select_and_take(std::span<float> logits, std::span<const int32_t> ids = {});
  // Scores prompt token `position` + 1 by the logits [vocab] of position `position`.
  void score_prompt_token(std::span<const float> logits, int64_t position);

 private:
  void take(int64_t token, std::optional<TokenLogprob> logprob);
  // The log-softmax of `logits` into log_softmax_, and the best top_logprobs of it.
  TokenLogprob log_softmax(std::span<const float> logits);

  uint64_t id_;
  SequenceRequest request_;
  SequenceCallback on_token_;
  std::vector<int64_t> history_;
  int64_t cached_ = 0, reused_ = 0;
  int64_t slot_ = -1;
  TokenSelector selector_;
  std::unique_ptr<tokenizer::IncrementalDecoder> decoder_;
  std::string text_;
  std::vector<TokenLogprob> logprobs_, prompt_logprobs_;
  std::vector<float> log_softmax_;  // scratch [vocab]
  std::vector<int64_t> order_;      // scratch [vocab]
  std::optional<FinishReason> finish_;
};

}  // namespace shardlm::generation
