#pragma once
// Rotary position embedding parameters shared by every backend's rope kernel.

#include <cstdint>
#include <vector>

namespace shardlm::backends {

struct RotaryEmbedding {
  // inv_freq[i] for i < rotary_dim / 2, in double: angles reach position * inv_freq
  // ~ 1e5 rad, where f32 inverse frequencies alone would cost 1e-3 rad.
  std::vector<double> inv_freq{};
  int64_t rotary_dim = 0;  // the first rotary_dim dims of each head rotate; the rest pass through
  // false: HF rotate_half pairs (i, i + rotary_dim/2) (Llama, Qwen); true: pairs (2i, 2i+1) (GLM-4).
  bool interleaved = false;
};

}  // namespace shardlm::backends
