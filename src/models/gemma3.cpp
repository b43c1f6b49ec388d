// Gemma3ForCausalLM (model_type gemma3_text): the decoder with four norms a layer,
//   x += post_attention_layernorm(attention(input_layernorm(x)))
//   x += post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x)))
// every norm (q_norm and k_norm too) scaling by (1 + weight), embeddings scaled by
// sqrt(hidden_size), and GeGLU. What config.json sets: sliding and global layers
// (layer_types), their rope bases, query_pre_attn_scalar and soft-capping (io/config.cpp).
#include "models/pre_norm_decoder.h"
#include "models/registry.h"

namespace shardlm::models {

std::unique_ptr<CausalLM> create_gemma3(const io::ModelConfig& config, WeightLoader& loader) {
  return create_decoder(config, loader,
                        {.attention = {.bias_qkv = config.attention_bias, .bias_o = config.attention_bias,
                                       .qk_norm = true},
                         .attention_output_norm = "post_attention_layernorm",
                         .mlp_norm = "pre_feedforward_layernorm",
                         .mlp_output_norm = "post_feedforward_layernorm",
                         .norm_plus_one = true,
                         .scale_embeddings = true});
}

}  // namespace shardlm::models
