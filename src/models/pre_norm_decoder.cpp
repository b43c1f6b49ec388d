#include "models/pre_norm_decoder.h"

#include "models/registry.h"

namespace shardlm::models {

using graph::Builder;
using graph::Value;

void check_supported_activation(const io::ModelConfig& config) {
  if (config.hidden_act != "silu")
    fail(config.source, ": hidden_act '", config.hidden_act, "' is not supported (supported: silu)");
}

Embedding load_embed_tokens(WeightLoader& loader, const io::ModelConfig& config) {
  return load_embedding(loader, "model.embed_tokens.weight", config.vocab_size, config.hidden_size);
}

Linear load_lm_head(WeightLoader& loader, const io::ModelConfig& config, const Embedding& embed_tokens) {
  const FeatureSplit vocab_split = even_feature_split(loader, config.vocab_size, config.hidden_size);
  const std::string embedding_name = "model.embed_tokens.weight";
  if (!config.tie_word_embeddings) {
    if (!loader.contains("lm_head.weight"))
      fail("lm_head.weight is missing and ", config.source,
           " says tie_word_embeddings is false: the checkpoint is incomplete, or set tie_word_embeddings to true");
    return load_linear(loader, "lm_head", vocab_split, /*bias=*/false);
  }
  const parallel::ShardStyle style = loader.style_for("lm_head.weight");
  const bool head_rows_split = style == parallel::ShardStyle::colwise ||
                               style == parallel::ShardStyle::colwise_gather_output ||
                               style == parallel::ShardStyle::packed_colwise;
  const bool same_rows = embed_tokens.vocab_split ? head_rows_split && vocab_split.output.ranges.front().first ==
                                                                          embed_tokens.first_row
                                                  : style == parallel::ShardStyle::replicate;
  if (same_rows) return {.weight = embed_tokens.table, .style = style, .split = vocab_split};
  return load_linear(loader, "lm_head", vocab_split, /*bias=*/false, embedding_name);
}

PreNormDecoderWeights load_pre_norm_decoder(WeightLoader& loader, const io::ModelConfig& config,
                                            const AttentionOptions& attention, bool mlp_bias) {
  const Shape hidden{config.hidden_size};
  PreNormDecoderWeights weights;
  weights.embed_tokens = load_embed_tokens(loader, config);
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

StepContext begin_step(Builder& builder, const ForwardInputs& inputs, const backends::RotaryEmbedding& rotary,
                       parallel::ProcessGroup& group) {
  StepContext step;
  step.batch = inputs.input_ids.shape()[0];
  step.seq = inputs.input_ids.shape()[1];
  step.positions = builder.bind(inputs.positions);
  step.flat_positions = builder.reshape(step.positions, {step.batch * step.seq});
  SHARDLM_CHECK(inputs.cache_rows.defined() && inputs.cache_rows.shape() == Shape{step.batch},
                "forward: cache_rows must be i32 [", step.batch, "] (one KV cache row per batch row)");
  step.cache_rows = builder.bind(inputs.cache_rows);
  step.rotary = &rotary;
  step.group = &group;
  if (inputs.logit_rows.defined()) step.logit_rows = builder.bind(inputs.logit_rows);
  return step;
}

Value embed_inputs(Builder& builder, const StepContext& step, const ForwardInputs& inputs,
                   const Embedding& embed_tokens) {
  Value ids = builder.reshape(builder.bind(inputs.input_ids), {step.batch * step.seq});
  return embed(builder, *step.group, embed_tokens, ids);  // [tokens, hidden]
}

Value finish_step(Builder& builder, const StepContext& step, Value hidden, const Tensor& final_norm,
                  const Linear& lm_head, double eps) {
  const Sharded normed{.value = builder.rms_norm(hidden, builder.bind(final_norm), eps)};
  return to_whole(builder, *step.group, apply(builder, *step.group, normed, lm_head));  // [rows, vocab]
}

Value PreNormDecoderLM::forward(Builder& builder, const ForwardInputs& inputs, StaticCache& cache) const {
  StepContext step = begin_step(builder, inputs, rotary_, process_group());
  Value x = embed_inputs(builder, step, inputs, weights_.embed_tokens);  // [tokens, hidden]
  for (size_t i = 0; i < weights_.layers.size(); ++i) {
    const PreNormDecoderWeights::Layer& layer = weights_.layers[i];
    Value normed = builder.rms_norm(x, builder.bind(layer.input_layernorm), config_.rms_norm_eps);
    const Value kept = step.rows_kept_by(i, weights_.layers.size());
    Value attended = self_attention(builder, layer.self_attn, config_, step, cache.layers[i], normed,
                                    config_.attention_window(i), kept);
    if (kept.defined()) x = builder.gather_rows(x, kept);  // [count, hidden] from here on
    x = builder.add(x, attended);
    normed = builder.rms_norm(x, builder.bind(layer.post_attention_layernorm), config_.rms_norm_eps);
    x = builder.add(x, gated_mlp(builder, *step.group, layer.mlp, normed));
  }
  return finish_step(builder, step, x, weights_.norm, weights_.lm_head, config_.rms_norm_eps);
}

parallel::TpPlan pre_norm_decoder_tp_plan() {
  return parallel::TpPlan({{"model.embed_tokens", "embedding_rowwise"},
                           {"model.layers.*.self_attn.q_proj", "colwise"},
                           {"model.layers.*.self_attn.k_proj", "colwise"},
                           {"model.layers.*.self_attn.v_proj", "colwise"},
                           {"model.layers.*.self_attn.o_proj", "rowwise"},
                           {"model.layers.*.mlp.gate_proj", "colwise"},
                           {"model.layers.*.mlp.up_proj", "colwise"},
                           {"model.layers.*.mlp.down_proj", "rowwise"},
                           {"lm_head", "colwise_gather_output"}},
                          "the default tp_plan");
}

}  // namespace shardlm::models
