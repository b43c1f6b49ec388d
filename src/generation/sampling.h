#pragma once
// Logits processors and token selection, with transformers' semantics:
// repetition_penalty applies in greedy and sampling; temperature, top_k, top_p and
// min_p (in that order) only when sampling. Removed tokens get -inf.

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace shardlm::generation {

struct SamplingSettings {
  bool do_sample = false;
  float temperature = 1.0f;
  int64_t top_k = 50;
  float top_p = 1.0f;
  std::optional<float> min_p{};
  float repetition_penalty = 1.0f;
  // OpenAI's: logit -= presence_penalty * (count > 0) + frequency_penalty * count, by how
  // often the token was generated so far (the prompt does not count). Greedy too.
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
};

// Each edits `logits` (one row, [vocab]) in place.
// Every token in `history` (prompt and generated): logit < 0 ? logit * penalty : logit / penalty.
void apply_repetition_penalty(std::span<float> logits, std::span<const int64_t> history, float penalty,
                              std::vector<std::pair<int64_t, float>>& scratch);
// Every token in `generated` (c times): logit -= presence * (c > 0) + frequency * c.
void apply_presence_frequency_penalty(std::span<float> logits, std::span<const int64_t> generated, float presence,
                                      float frequency, std::vector<int64_t>& scratch);
void apply_temperature(std::span<float> logits, float temperature);
// Keeps the logits >= the k-th largest (ties at the threshold stay, as with torch.topk).
void apply_top_k(std::span<float> logits, int64_t top_k, std::vector<float>& scratch);
// Keeps the smallest set of most likely tokens whose probability mass reaches top_p.
void apply_top_p(std::span<float> logits, float top_p, std::vector<int64_t>& scratch);
// Keeps tokens whose probability is at least min_p times the most likely one's.
void apply_min_p(std::span<float> logits, float min_p, std::vector<float>& scratch);

// Chooses the next token from one row of logits. Holds its own random generator,
// so a fixed seed reproduces a whole generation; scratch space is reused per step.
class TokenSelector {
 public:
  TokenSelector(SamplingSettings settings, uint64_t seed);
  // history[prompt_length..] is what was generated (what presence and frequency penalties count).
  int64_t select(std::span<float> logits, std::span<const int64_t> history, size_t prompt_length = 0);
  const SamplingSettings& settings() const { return settings_; }

 private:
  double uniform();  // [0, 1)

  SamplingSettings settings_;
  std::mt19937_64 random_;
  std::vector<float> probabilities_;
  std::vector<int64_t> order_, counted_;
  std::vector<std::pair<int64_t, float>> penalty_updates_;
};

}  // namespace shardlm::generation
