// LlamaForCausalLM: the pre-norm decoder with optional attention_bias / mlp_bias
// and any rope scaling io/config.h accepts (default, linear, llama3).
#include "models/pre_norm_decoder.h"
#include "models/registry.h"

namespace shardlm::models {

std::unique_ptr<CausalLM> create_llama(const io::ModelConfig& config, WeightLoader& loader) {
  return create_decoder(config, loader,
                        {.attention = {.bias_qkv = config.attention_bias, .bias_o = config.attention_bias},
                         .mlp_bias = config.mlp_bias});
}

}  // namespace shardlm::models
