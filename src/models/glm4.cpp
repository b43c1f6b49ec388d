// Glm4ForCausalLM (GLM-4-0414): a decoder layer with four norms,
//   x += post_self_attn_layernorm(attention(input_layernorm(x)))
//   x += post_mlp_layernorm(mlp(post_attention_layernorm(x)))
// q/k/v biases, a fused gate_up_proj (gate rows first; split packed under tensor
// parallelism), and partial rotary embedding on interleaved pairs (transformers'
// modeling_glm4).
#include "models/pre_norm_decoder.h"
#include "models/registry.h"

namespace shardlm::models {

std::unique_ptr<CausalLM> create_glm4(const io::ModelConfig& config, WeightLoader& loader) {
  return create_decoder(config, loader,
                        {.attention = {.bias_qkv = config.attention_bias, .bias_o = false},
                         .fused_gate_up = true,
                         .interleaved_rope = true,
                         .attention_output_norm = "post_self_attn_layernorm",
                         .mlp_output_norm = "post_mlp_layernorm"});
}

parallel::TpPlan glm4_tp_plan() {
  // transformers replicates gate_up_proj ("colwise_rep") because its forward chunks the
  // fused output; here each rank takes matching gate and up rows instead.
  return parallel::TpPlan({{"model.embed_tokens", "embedding_rowwise"},
                           {"model.layers.*.self_attn.q_proj", "colwise"},
                           {"model.layers.*.self_attn.k_proj", "colwise"},
                           {"model.layers.*.self_attn.v_proj", "colwise"},
                           {"model.layers.*.self_attn.o_proj", "rowwise"},
                           {"model.layers.*.mlp.gate_up_proj", "packed_colwise"},
                           {"model.layers.*.mlp.down_proj", "rowwise"},
                           {"lm_head", "colwise_gather_output"}},
                          "the default tp_plan");
}

}  // namespace shardlm::models
