#include "models/pre_norm_decoder.h"

#include <cmath>

#include "models/registry.h"

namespace shardlm::models {

using graph::Builder;
using graph::Value;

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

namespace {

// Sets up positions and the step context shared by every layer.
StepContext begin_step(Builder& builder, const ForwardInputs& inputs, parallel::ProcessGroup& group) {
  StepContext step;
  step.batch = inputs.input_ids.shape()[0];
  step.seq = inputs.input_ids.shape()[1];
  step.positions = builder.bind(inputs.positions);
  step.flat_positions = builder.reshape(step.positions, {step.batch * step.seq});
  SHARDLM_CHECK(inputs.cache_rows.defined() && inputs.cache_rows.shape() == Shape{step.batch},
                "forward: cache_rows must be i32 [", step.batch, "] (one KV cache row per batch row)");
  step.cache_rows = builder.bind(inputs.cache_rows);
  step.group = &group;
  if (inputs.logit_rows.defined()) step.logit_rows = builder.bind(inputs.logit_rows);
  return step;
}

// transformers scales Gemma's embeddings by sqrt(hidden_size) rounded to the table's dtype.
float embedding_scale(int64_t hidden_size, DType table_dtype) {
  const Tensor scale = Tensor::from_f32(std::vector<float>{std::sqrt(static_cast<float>(hidden_size))}, {1});
  if (table_dtype != DType::bf16 && table_dtype != DType::f16) return scale.data<float>()[0];
  return scale.to_dtype(table_dtype).to_dtype(DType::f32).data<float>()[0];
}

}  // namespace

std::unique_ptr<CausalLM> create_decoder(const io::ModelConfig& config, WeightLoader& loader, const DecoderSpec& spec) {
  activation_of(config);  // an unsupported one fails before any weight is read
  const int64_t hidden = config.hidden_size;
  const auto norm = [&](const std::string& prefix, const std::string& name) {
    return name.empty() ? Tensor() : load_norm(loader, prefix + "." + name + ".weight", hidden, spec.norm_plus_one);
  };
  AttentionOptions attention = spec.attention;
  attention.norm_plus_one = spec.norm_plus_one;
  DecoderWeights weights;
  weights.embed_tokens = load_embed_tokens(loader, config);
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string prefix = str_cat("model.layers.", i);
    // Load order is the checkpoint's usual tensor order (the loading report lists it so).
    DecoderWeights::Layer& layer = weights.layers.emplace_back();
    layer.attention_norm = norm(prefix, spec.attention_norm);
    layer.self_attn = load_attention(loader, prefix + ".self_attn", config, attention);
    layer.attention_output_norm = norm(prefix, spec.attention_output_norm);
    layer.mlp_norm = norm(prefix, spec.mlp_norm);
    layer.mlp = spec.fused_gate_up ? load_fused_gated_mlp(loader, prefix + ".mlp", config)
                                   : load_gated_mlp(loader, prefix + ".mlp", config, spec.mlp_bias);
    layer.mlp_output_norm = norm(prefix, spec.mlp_output_norm);
  }
  weights.norm = load_norm(loader, "model.norm.weight", hidden, spec.norm_plus_one);
  weights.lm_head = load_lm_head(loader, config, weights.embed_tokens);
  return std::make_unique<DecoderLM>(config, spec, std::move(weights), loader.loaded_bytes());
}

DecoderLM::DecoderLM(io::ModelConfig config, const DecoderSpec& spec, DecoderWeights weights, size_t weight_bytes)
    : CausalLM(std::move(config)),
      weights_(std::move(weights)),
      activation_(activation_of(config_)),
      rotary_(make_rotary_embedding(config_, config_.rope, spec.interleaved_rope)),
      weight_bytes_(weight_bytes) {
  if (config_.sliding_rope)
    sliding_rotary_ = make_rotary_embedding(config_, *config_.sliding_rope, spec.interleaved_rope);
  // Rounded as transformers would, in the weights' dtype: the table's, or, for a table
  // quantized at load, the checkpoint's.
  if (spec.scale_embeddings) {
    const DType table = weights_.embed_tokens.table.dtype();
    embedding_scale_ = embedding_scale(config_.hidden_size,
                                       is_floating(table) ? table : config_.torch_dtype.value_or(DType::f32));
  }
}

Value DecoderLM::layer_forward(Builder& builder, StepContext& step, size_t index, LayerCache& cache, Value x) const {
  const DecoderWeights::Layer& layer = weights_.layers[index];
  const double eps = config_.rms_norm_eps;
  const int64_t i = static_cast<int64_t>(index);
  const auto output_norm = [&](Value y, const Tensor& weight) {
    return weight.defined() ? builder.rms_norm(y, builder.bind(weight), eps) : y;
  };
  const bool sliding = config_.layer_types[index] == "sliding_attention";
  step.rotary = sliding && sliding_rotary_ ? &*sliding_rotary_ : &rotary_;
  const Value kept = step.rows_kept_by(index, weights_.layers.size());
  Value attended = self_attention(builder, layer.self_attn, config_, step, cache,
                                  builder.rms_norm(x, builder.bind(layer.attention_norm), eps),
                                  config_.attention_window(i), kept);
  if (kept.defined()) x = builder.gather_rows(x, kept);  // [count, hidden] from here on
  x = builder.add(x, output_norm(attended, layer.attention_output_norm));
  const Value mlp = gated_mlp(builder, *step.group, layer.mlp, builder.rms_norm(x, builder.bind(layer.mlp_norm), eps),
                              activation_);
  return builder.add(x, output_norm(mlp, layer.mlp_output_norm));
}

Value DecoderLM::forward(Builder& builder, const ForwardInputs& inputs, StaticCache& cache) const {
  StepContext step = begin_step(builder, inputs, process_group());
  Value ids = builder.reshape(builder.bind(inputs.input_ids), {step.batch * step.seq});
  Value x = embed(builder, *step.group, weights_.embed_tokens, ids);  // [tokens, hidden]
  if (embedding_scale_) x = builder.scale(x, *embedding_scale_);
  for (size_t i = 0; i < weights_.layers.size(); ++i) x = layer_forward(builder, step, i, cache.layers[i], x);
  // x: [rows, hidden], only the rows logits are wanted for (StepContext::rows_kept_by)
  const Sharded normed{.value = builder.rms_norm(x, builder.bind(weights_.norm), config_.rms_norm_eps)};
  Value logits = to_whole(builder, *step.group, apply(builder, *step.group, normed, weights_.lm_head));  // [rows, vocab]
  if (config_.final_logit_softcapping)
    logits = builder.softcap(logits, static_cast<float>(*config_.final_logit_softcapping));
  return logits;
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
