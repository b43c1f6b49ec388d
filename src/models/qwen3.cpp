// Qwen3ForCausalLM: the pre-norm decoder with a per-head RMSNorm on queries and
// keys (q_norm, k_norm) before RoPE; attention_bias adds q/k/v/o biases.
#include "models/pre_norm_decoder.h"
#include "models/registry.h"

namespace shardlm::models {

std::unique_ptr<CausalLM> create_qwen3(const io::ModelConfig& config, WeightLoader& loader) {
  return create_decoder(
      config, loader,
      {.attention = {.bias_qkv = config.attention_bias, .bias_o = config.attention_bias, .qk_norm = true}});
}

}  // namespace shardlm::models
