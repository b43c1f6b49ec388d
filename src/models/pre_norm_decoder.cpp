#include "models/pre_norm_decoder.h"

namespace shardlm::models {

using graph::Builder;
using graph::Value;

void check_supported_activation(const io::ModelConfig& config) {
  if (config.hidden_act != "silu")
    fail(config.source, ": hidden_act '", config.hidden_act, "' is not supported (supported: silu)");
}

Tensor load_lm_head(WeightLoader& loader, const io::ModelConfig& config, const Tensor& embed_tokens) {
  if (config.tie_word_embeddings) return embed_tokens;
  if (!loader.contains("lm_head.weight"))
    fail("lm_head.weight is missing and ", config.source,
         " says tie_word_embeddings is false: the checkpoint is incomplete, or set tie_word_embeddings to true");
  return loader.require("lm_head.weight", {config.vocab_size, config.hidden_size});
}

PreNormDecoderWeights load_pre_norm_decoder(WeightLoader& loader, const io::ModelConfig& config,
                                            const AttentionOptions& attention, bool mlp_bias) {
  const Shape hidden{config.hidden_size};
  PreNormDecoderWeights weights;
  weights.embed_tokens = loader.require("model.embed_tokens.weight", {config.vocab_size, config.hidden_size});
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string prefix = str_cat("model.layers.", i);
    weights.layers.push_back({
        .input_layernorm = loader.require(prefix + ".input_layernorm.weight", hidden),
        .self_attn = load_attention(loader, prefix + ".self_attn", config, attention),
        .post_attention_layernorm = loader.require(prefix + ".post_attention_layernorm.weight", hidden),
        .mlp = load_gated_mlp(loader, prefix + ".mlp", config, mlp_bias),
    });
  }
  weights.norm = loader.require("model.norm.weight", hidden);
  weights.lm_head = load_lm_head(loader, config, weights.embed_tokens);
  return weights;
}

PreNormDecoderLM::PreNormDecoderLM(io::ModelConfig config, PreNormDecoderWeights weights, size_t weight_bytes)
    : CausalLM(std::move(config)),
      weights_(std::move(weights)),
      rotary_(make_rotary_embedding(config_, /*interleaved=*/false)),
      weight_bytes_(weight_bytes) {}

StepContext begin_step(Builder& builder, const ForwardInputs& inputs, const backends::RotaryEmbedding& rotary) {
  StepContext step;
  step.batch = inputs.input_ids.shape()[0];
  step.seq = inputs.input_ids.shape()[1];
  step.positions = builder.bind(inputs.positions);
  step.flat_positions = builder.reshape(step.positions, {step.batch * step.seq});
  step.rotary = &rotary;
  return step;
}

Value finish_step(Builder& builder, const ForwardInputs& inputs, Value hidden, const Tensor& final_norm,
                  const Tensor& lm_head, double eps) {
  if (inputs.logit_rows.defined()) hidden = builder.gather_rows(hidden, builder.bind(inputs.logit_rows));
  hidden = builder.rms_norm(hidden, builder.bind(final_norm), eps);
  return builder.linear(hidden, builder.bind(lm_head));  // [rows, vocab]
}

Value PreNormDecoderLM::forward(Builder& builder, const ForwardInputs& inputs, StaticCache& cache) const {
  StepContext step = begin_step(builder, inputs, rotary_);
  Value ids = builder.reshape(builder.bind(inputs.input_ids), {step.batch * step.seq});
  Value x = builder.embedding(builder.bind(weights_.embed_tokens), ids);  // [tokens, hidden]
  for (size_t i = 0; i < weights_.layers.size(); ++i) {
    const PreNormDecoderWeights::Layer& layer = weights_.layers[i];
    Value normed = builder.rms_norm(x, builder.bind(layer.input_layernorm), config_.rms_norm_eps);
    Value attended =
        self_attention(builder, layer.self_attn, config_, step, cache.layers[i], normed, config_.attention_window(i));
    x = builder.add(x, attended);
    normed = builder.rms_norm(x, builder.bind(layer.post_attention_layernorm), config_.rms_norm_eps);
    x = builder.add(x, gated_mlp(builder, layer.mlp, normed));
  }
  return finish_step(builder, inputs, x, weights_.norm, weights_.lm_head, config_.rms_norm_eps);
}

}  // namespace shardlm::models
