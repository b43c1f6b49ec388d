#include "generation/sequence.h"

#include <algorithm>

#include "backends/cpu/reference_kernels.h"
#include "core/error.h"

namespace shardlm::generation {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::eos: return "eos";
    case FinishReason::length: return "length";
    case FinishReason::stop_string: return "stop_string";
    case FinishReason::cancelled: return "cancelled";
  }
  return "?";
}

namespace {

// True when text[previous_length..] completed a stop string: a match must end past the old text.
bool completes_stop_string(const std::string& text, size_t previous_length, const std::vector<std::string>& stops) {
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    const size_t from = previous_length >= stop.size() ? previous_length - stop.size() + 1 : 0;
    if (text.find(stop, from) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

Sequence::Sequence(uint64_t id, SequenceRequest request, SequenceCallback on_token)
    : id_(id),
      request_(std::move(request)),
      on_token_(std::move(on_token)),
      history_(request_.prompt),
      selector_(request_.sampling, request_.seed) {
  SHARDLM_CHECK(!request_.prompt.empty(), "the prompt is empty: generation needs at least one token (e.g. BOS)");
  SHARDLM_CHECK(request_.stop.max_new_tokens > 0, "max_new_tokens must be positive, got ",
                request_.stop.max_new_tokens);
  SHARDLM_CHECK(request_.stop.stop_strings.empty() || request_.tokenizer, "stop strings need a tokenizer");
  history_.reserve(request_.prompt.size() + static_cast<size_t>(request_.stop.max_new_tokens));
  if (request_.tokenizer) {
    decoder_ = std::make_unique<tokenizer::IncrementalDecoder>(*request_.tokenizer, request_.skip_special_tokens);
    // The prompt primes the decoder, so the first new token gets its leading space right.
    for (int64_t id : request_.prompt) decoder_->push(static_cast<int32_t>(id));
  }
}

void Sequence::cancel() {
  if (finished()) return;
  finish_ = FinishReason::cancelled;
  if (on_token_) on_token_(*this, -1, decoder_ ? decoder_->flush() : std::string());
}

TokenLogprob Sequence::log_softmax(std::span<const float> logits) {
  log_softmax_.resize(logits.size());
  backends::reference::log_softmax(logits, log_softmax_);
  TokenLogprob result;
  const auto count = static_cast<size_t>(std::clamp<int64_t>(request_.top_logprobs, 0, static_cast<int64_t>(logits.size())));
  order_.resize(logits.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int64_t>(i);
  const auto better = [&](int64_t a, int64_t b) {  // ties to the lower id, as torch.topk
    return log_softmax_[a] > log_softmax_[b] || (log_softmax_[a] == log_softmax_[b] && a < b);
  };
  std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(count), order_.end(), better);
  for (size_t i = 0; i < count; ++i) result.top.emplace_back(order_[i], log_softmax_[order_[i]]);
  return result;
}

void Sequence::score_prompt_token(std::span<const float> logits, int64_t position) {
  SHARDLM_CHECK(position + 1 < prompt_length() && position == static_cast<int64_t>(prompt_logprobs_.size()),
                "sequence ", id_, ": prompt position ", position, " scored out of turn");
  TokenLogprob scored = log_softmax(logits);
  scored.logprob = log_softmax_[static_cast<size_t>(request_.prompt[position + 1])];
  prompt_logprobs_.push_back(std::move(scored));
}

void Sequence::select_and_take(std::span<float> logits, std::span<const int32_t> ids) {
  SHARDLM_CHECK(!finished() && pending() == 0, "sequence ", id_, ": a token was selected out of turn");
  std::optional<TokenLogprob> logprob;
  if (request_.logprobs) {
    // Of the model's own distribution, before any sampling setting reshapes it (as vLLM
    // and OpenAI report them): taken before the selector edits the row in place.
    SHARDLM_CHECK(ids.empty(), "logprobs need the whole row of logits");
    logprob = log_softmax(logits);
  }
  const int64_t selected = selector_.select(logits, history_, request_.prompt.size());
  const int64_t token = ids.empty() ? selected : ids[static_cast<size_t>(selected)];
  if (logprob) logprob->logprob = log_softmax_[static_cast<size_t>(token)];
  take(token, std::move(logprob));
}

void Sequence::take(int64_t token, std::optional<TokenLogprob> logprob) {
  history_.push_back(token);
  if (logprob) logprobs_.push_back(std::move(*logprob));
  std::string text = decoder_ ? decoder_->push(static_cast<int32_t>(token)) : std::string();
  const size_t previous_length = text_.size();
  text_ += text;
  const StopRules& stop = request_.stop;
  const auto generated_count = static_cast<int64_t>(history_.size() - request_.prompt.size());
  const bool may_stop_early = generated_count >= stop.min_new_tokens;
  if (may_stop_early && !stop.ignore_eos &&
      std::find(stop.eos_token_id.begin(), stop.eos_token_id.end(), token) != stop.eos_token_id.end()) {
    finish_ = FinishReason::eos;
  } else if (may_stop_early && completes_stop_string(text_, previous_length, stop.stop_strings)) {
    finish_ = FinishReason::stop_string;
  } else if (generated_count == stop.max_new_tokens) {
    finish_ = FinishReason::length;
  }
  if (finish_ && decoder_) {
    const std::string rest = decoder_->flush();
    text += rest;
    text_ += rest;
  }
  if (on_token_) on_token_(*this, token, text);
}

}  // namespace shardlm::generation
