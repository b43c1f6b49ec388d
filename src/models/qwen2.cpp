// Qwen2ForCausalLM (Qwen2, Qwen2.5): the pre-norm decoder with q/k/v biases, which
// transformers' Qwen2Attention always creates whatever attention_bias says; o_proj
// has none. Sliding-window layers come from config.layer_types (io/config.cpp).
#include "models/pre_norm_decoder.h"
#include "models/registry.h"

namespace shardlm::models {

std::unique_ptr<CausalLM> create_qwen2(const io::ModelConfig& config, WeightLoader& loader) {
  return create_decoder(config, loader, {.attention = {.bias_qkv = true, .bias_o = false}});
}

}  // namespace shardlm::models
