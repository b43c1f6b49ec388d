#include "generation/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backends/cpu/reference_kernels.h"
#include "core/error.h"

namespace shardlm::generation {
namespace {
constexpr float removed = -std::numeric_limits<float>::infinity();
}

void apply_repetition_penalty(std::span<float> logits, std::span<const int64_t> history, float penalty,
                              std::vector<std::pair<int64_t, float>>& updates) {
  if (penalty == 1.0f) return;
  // transformers gathers the scores of the seen tokens first, then scatters the
  // penalized values back: a token seen twice is penalized once.
  updates.clear();
  for (int64_t token : history) {
    if (token < 0 || token >= static_cast<int64_t>(logits.size())) continue;
    float value = logits[token];
    updates.emplace_back(token, value < 0 ? value * penalty : value / penalty);
  }
  for (const auto& [token, value] : updates) logits[token] = value;
}

void apply_presence_frequency_penalty(std::span<float> logits, std::span<const int64_t> generated, float presence,
                                      float frequency, std::vector<int64_t>& scratch) {
  if ((presence == 0.0f && frequency == 0.0f) || generated.empty()) return;
  scratch.assign(generated.begin(), generated.end());
  std::sort(scratch.begin(), scratch.end());
  for (size_t i = 0; i < scratch.size();) {
    size_t end = i;
    while (end < scratch.size() && scratch[end] == scratch[i]) ++end;
    const int64_t token = scratch[i];
    if (token >= 0 && token < static_cast<int64_t>(logits.size()))
      logits[token] -= presence + frequency * static_cast<float>(end - i);
    i = end;
  }
}

void apply_temperature(std::span<float> logits, float temperature) {
  if (temperature == 1.0f) return;
  for (float& value : logits) value /= temperature;
}

void apply_top_k(std::span<float> logits, int64_t top_k, std::vector<float>& scratch) {
  if (top_k <= 0 || top_k >= static_cast<int64_t>(logits.size())) return;
  scratch.assign(logits.begin(), logits.end());
  std::nth_element(scratch.begin(), scratch.begin() + (top_k - 1), scratch.end(), std::greater<float>());
  const float threshold = scratch[top_k - 1];
  for (float& value : logits)
    if (value < threshold) value = removed;
}

void apply_top_p(std::span<float> logits, float top_p, std::vector<int64_t>& scratch) {
  if (top_p >= 1.0f) return;
  // transformers sorts ascending, removes the prefix whose cumulative probability is
  // <= 1 - top_p, and always keeps the most likely token.
  scratch.resize(logits.size());
  std::iota(scratch.begin(), scratch.end(), 0);
  // Ties ordered by id: deterministic like a stable sort, without its temporary buffer.
  std::sort(scratch.begin(), scratch.end(),
            [&](int64_t a, int64_t b) { return logits[a] < logits[b] || (logits[a] == logits[b] && a < b); });
  const float maximum = logits[scratch.back()];
  double total = 0;
  for (float value : logits) total += value == removed ? 0.0 : std::exp(static_cast<double>(value - maximum));
  double cumulative = 0;
  for (size_t i = 0; i + 1 < scratch.size(); ++i) {
    float& value = logits[scratch[i]];
    cumulative += value == removed ? 0.0 : std::exp(static_cast<double>(value - maximum)) / total;
    if (cumulative <= 1.0 - top_p) value = removed;
  }
}

void apply_min_p(std::span<float> logits, float min_p, std::vector<float>& scratch) {
  scratch.resize(logits.size());
  backends::reference::softmax(logits, scratch);
  const float top_probability = *std::max_element(scratch.begin(), scratch.end());
  const float threshold = min_p * top_probability;
  for (size_t i = 0; i < logits.size(); ++i)
    if (scratch[i] < threshold) logits[i] = removed;
}

TokenSelector::TokenSelector(SamplingSettings settings, uint64_t seed) : settings_(settings), random_(seed) {
  SHARDLM_CHECK(settings_.repetition_penalty > 0, "repetition_penalty must be positive, got ",
                settings_.repetition_penalty);
  if (!settings_.do_sample) return;  // as transformers, greedy ignores the sampling settings
  SHARDLM_CHECK(settings_.temperature > 0, "temperature must be positive, got ", settings_.temperature,
                " (for greedy decoding set do_sample to false)");
  SHARDLM_CHECK(settings_.top_p > 0 && settings_.top_p <= 1, "top_p must be in (0, 1], got ", settings_.top_p);
  SHARDLM_CHECK(!settings_.min_p || (*settings_.min_p >= 0 && *settings_.min_p <= 1), "min_p must be in [0, 1]");
  SHARDLM_CHECK(settings_.top_k >= 0, "top_k must be >= 0 (0 disables it), got ", settings_.top_k);
}

double TokenSelector::uniform() { return static_cast<double>(random_() >> 11) * 0x1.0p-53; }

int64_t TokenSelector::select(std::span<float> logits, std::span<const int64_t> history, size_t prompt_length) {
  for (float value : logits)
    if (std::isnan(value)) fail("the model produced NaN logits: the weights are corrupt or overflowed in this dtype");
  apply_repetition_penalty(logits, history, settings_.repetition_penalty, penalty_updates_);
  apply_presence_frequency_penalty(logits, history.subspan(std::min(prompt_length, history.size())),
                                   settings_.presence_penalty, settings_.frequency_penalty, counted_);
  if (!settings_.do_sample) return backends::reference::argmax(logits);
  apply_temperature(logits, settings_.temperature);
  apply_top_k(logits, settings_.top_k, probabilities_);
  apply_top_p(logits, settings_.top_p, order_);
  if (settings_.min_p) apply_min_p(logits, *settings_.min_p, probabilities_);

  probabilities_.resize(logits.size());
  backends::reference::softmax(logits, probabilities_);
  const double target = uniform();
  double cumulative = 0;
  int64_t last_possible = 0;
  for (size_t i = 0; i < probabilities_.size(); ++i) {
    if (probabilities_[i] == 0) continue;
    cumulative += probabilities_[i];
    last_possible = static_cast<int64_t>(i);
    if (target < cumulative) return last_possible;
  }
  return last_possible;  // rounding left the total just under 1
}

}  // namespace shardlm::generation
