// Glm4ForCausalLM (GLM-4-0414): a decoder layer with four norms,
//   x += post_self_attn_layernorm(attention(input_layernorm(x)))
//   x += post_mlp_layernorm(mlp(post_attention_layernorm(x)))
// q/k/v biases, a fused gate_up_proj (gate rows first; split packed under tensor
// parallelism), and partial rotary
// embedding on interleaved pairs (transformers' modeling_glm4).
#include "models/pre_norm_decoder.h"
#include "models/registry.h"

namespace shardlm::models {
namespace {

using graph::Builder;
using graph::Value;

struct Glm4Layer {
  Tensor input_layernorm, post_self_attn_layernorm, post_attention_layernorm, post_mlp_layernorm;  // [hidden]
  AttentionWeights self_attn;
  GatedMlpWeights mlp;
};

class Glm4ForCausalLM final : public CausalLM {
 public:
  Glm4ForCausalLM(const io::ModelConfig& config, WeightLoader& loader)
      : CausalLM(config), rotary_(make_rotary_embedding(config_, /*interleaved=*/true)) {
    check_supported_activation(config_);
    const Shape hidden{config_.hidden_size};
    embed_tokens_ = load_embed_tokens(loader, config_);
    for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
      const std::string prefix = str_cat("model.layers.", i);
      layers_.push_back({
          .input_layernorm = loader.require(prefix + ".input_layernorm.weight", hidden),
          .post_self_attn_layernorm = loader.require(prefix + ".post_self_attn_layernorm.weight", hidden),
          .post_attention_layernorm = loader.require(prefix + ".post_attention_layernorm.weight", hidden),
          .post_mlp_layernorm = loader.require(prefix + ".post_mlp_layernorm.weight", hidden),
          .self_attn = load_attention(loader, prefix + ".self_attn", config_,
                                      {.bias_qkv = config_.attention_bias, .bias_o = false}),
          .mlp = load_fused_gated_mlp(loader, prefix + ".mlp", config_),
      });
    }
    norm_ = loader.require("model.norm.weight", hidden);
    lm_head_ = load_lm_head(loader, config_, embed_tokens_);
    weight_bytes_ = loader.loaded_bytes();
  }

  Value forward(Builder& builder, const ForwardInputs& inputs, StaticCache& cache) const override {
    StepContext step = begin_step(builder, inputs, rotary_, process_group());
    Value x = embed_inputs(builder, step, inputs, embed_tokens_);  // [tokens, hidden]
    const double eps = config_.rms_norm_eps;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Glm4Layer& layer = layers_[i];
      const Value kept = step.rows_kept_by(i, layers_.size());
      Value attended = self_attention(builder, layer.self_attn, config_, step, cache.layers[i],
                                      builder.rms_norm(x, builder.bind(layer.input_layernorm), eps),
                                      config_.attention_window(static_cast<int64_t>(i)), kept);
      if (kept.defined()) x = builder.gather_rows(x, kept);  // [count, hidden] from here on
      x = builder.add(x, builder.rms_norm(attended, builder.bind(layer.post_self_attn_layernorm), eps));
      Value mlp = gated_mlp(builder, *step.group, layer.mlp,
                            builder.rms_norm(x, builder.bind(layer.post_attention_layernorm), eps));
      x = builder.add(x, builder.rms_norm(mlp, builder.bind(layer.post_mlp_layernorm), eps));
    }
    return finish_step(builder, step, x, norm_, lm_head_, eps);
  }

  size_t weight_bytes() const override { return weight_bytes_; }

 private:
  backends::RotaryEmbedding rotary_;
  Embedding embed_tokens_;
  Tensor norm_;
  Linear lm_head_;
  std::vector<Glm4Layer> layers_;
  size_t weight_bytes_ = 0;
};

}  // namespace

std::unique_ptr<CausalLM> create_glm4(const io::ModelConfig& config, WeightLoader& loader) {
  return std::make_unique<Glm4ForCausalLM>(config, loader);
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
