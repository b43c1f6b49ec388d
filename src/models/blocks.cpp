#include "models/blocks.h"

#include <cmath>
#include <numbers>

namespace shardlm::models {

using graph::Builder;
using graph::Value;

AttentionWeights load_attention(WeightLoader& loader, const std::string& prefix, const io::ModelConfig& config,
                                const AttentionOptions& options) {
  const int64_t hidden = config.hidden_size, head_dim = config.head_dim;
  const int64_t heads = config.num_attention_heads, kv_heads = config.num_key_value_heads;
  const std::string q = prefix + ".q_proj", k = prefix + ".k_proj", v = prefix + ".v_proj", o = prefix + ".o_proj";

  // Query heads split evenly; o_proj's input follows them.
  FeatureSplit query_split = even_feature_split(loader, heads * head_dim, hidden, head_dim);
  FeatureSplit output_split = even_feature_split(loader, hidden, heads * head_dim);
  output_split.input = query_split.output;
  FeatureSplit kv_split = even_feature_split(loader, kv_heads * head_dim, hidden, head_dim);

  auto splits_heads = [&](const std::string& module) {
    const parallel::ShardStyle style = loader.style_for(module + ".weight");
    return style == parallel::ShardStyle::colwise || style == parallel::ShardStyle::packed_colwise;
  };
  const bool heads_split = splits_heads(q);
  if (splits_heads(k) != heads_split || splits_heads(v) != heads_split)
    fail("the tp_plan splits the heads of only some of '", q, "', '", k, "' and '", v,
         "': attention needs all three split colwise (each rank attends with its own heads) or none");
  if (heads_split) {
    const auto [first, end] = query_split.output.ranges.front();
    kv_split.output = {};
    for (int64_t kv_head :
         parallel::kv_heads_for_query_heads(first / head_dim, (end - first) / head_dim, heads, kv_heads))
      kv_split.output.ranges.emplace_back(kv_head * head_dim, (kv_head + 1) * head_dim);
  }

  AttentionWeights weights;
  weights.q_proj = load_linear(loader, q, query_split, options.bias_qkv);
  weights.k_proj = load_linear(loader, k, kv_split, options.bias_qkv);
  weights.v_proj = load_linear(loader, v, kv_split, options.bias_qkv);
  weights.o_proj = load_linear(loader, o, output_split, options.bias_o);
  if (options.qk_norm) {
    weights.q_norm = load_norm(loader, prefix + ".q_norm.weight", head_dim, options.norm_plus_one);
    weights.k_norm = load_norm(loader, prefix + ".k_norm.weight", head_dim, options.norm_plus_one);
  }
  loader.add_cache_layer(weights.k_proj.splits_output() ? kv_split.output.size() / head_dim : kv_heads);
  return weights;
}

Activation activation_of(const io::ModelConfig& config) {
  if (config.hidden_act == "silu") return Activation::silu;
  // gelu_new is the same tanh approximation under its older name.
  if (config.hidden_act == "gelu_pytorch_tanh" || config.hidden_act == "gelu_new") return Activation::gelu_tanh;
  fail(config.source, ": hidden_act '", config.hidden_act,
       "' is not supported (supported: silu, gelu_pytorch_tanh, gelu_new)");
}

Tensor load_norm(WeightLoader& loader, const std::string& name, int64_t dim, bool plus_one) {
  return plus_one ? loader.require_plus(name, {dim}, 1.0f) : loader.require(name, {dim});
}

GatedMlpWeights load_gated_mlp(WeightLoader& loader, const std::string& prefix, const io::ModelConfig& config,
                               bool bias) {
  const int64_t hidden = config.hidden_size, intermediate = config.intermediate_size;
  const FeatureSplit up_split = even_feature_split(loader, intermediate, hidden);
  return {.gate_proj = load_linear(loader, prefix + ".gate_proj", up_split, bias),
          .up_proj = load_linear(loader, prefix + ".up_proj", up_split, bias),
          .down_proj = load_linear(loader, prefix + ".down_proj", even_feature_split(loader, hidden, intermediate), bias)};
}

GatedMlpWeights load_fused_gated_mlp(WeightLoader& loader, const std::string& prefix, const io::ModelConfig& config) {
  const int64_t hidden = config.hidden_size, intermediate = config.intermediate_size;
  const FeatureSplit half_split = even_feature_split(loader, intermediate, hidden);
  FeatureSplit fused_split = even_feature_split(loader, 2 * intermediate, hidden);
  fused_split.output = parallel::packed_split(2, intermediate, 1, loader.tp_rank(), loader.tp_size());
  const Linear fused = load_linear(loader, prefix + ".gate_up_proj", fused_split, /*bias=*/false);
  // [2 * rows, in]: rows [0, rows) are gate, [rows, 2 * rows) up; split as zero-copy views.
  const int64_t rows = fused.weight.shape()[0] / 2;
  GatedMlpWeights weights{.gate_proj = fused, .up_proj = fused,
                          .down_proj = load_linear(loader, prefix + ".down_proj",
                                                   even_feature_split(loader, hidden, intermediate), false)};
  weights.gate_proj.weight = fused.weight.slice_rows(0, rows);
  weights.up_proj.weight = fused.weight.slice_rows(rows, 2 * rows);
  weights.gate_proj.split = weights.up_proj.split = half_split;
  return weights;
}

backends::RotaryEmbedding make_rotary_embedding(const io::ModelConfig& config, const io::RopeConfig& rope,
                                                bool interleaved) {
  backends::RotaryEmbedding rotary;
  rotary.interleaved = interleaved;
  rotary.rotary_dim = static_cast<int64_t>(static_cast<double>(config.head_dim) * rope.partial_rotary_factor);
  rotary.rotary_dim -= rotary.rotary_dim % 2;
  if (rotary.rotary_dim <= 0) fail(config.source, ": head_dim × partial_rotary_factor leaves no dimension to rotate");
  const int64_t pairs = rotary.rotary_dim / 2;
  for (int64_t i = 0; i < pairs; ++i) {
    double inv_freq = std::pow(rope.theta, -static_cast<double>(2 * i) / static_cast<double>(rotary.rotary_dim));
    if (rope.rope_type == "linear") {
      inv_freq /= rope.factor;
    } else if (rope.rope_type == "llama3") {
      // transformers' _compute_llama3_parameters: long wavelengths are divided by
      // `factor`, short ones kept, and the band between interpolated smoothly.
      const double original = static_cast<double>(rope.original_max_position_embeddings);
      const double low_freq_wavelen = original / rope.low_freq_factor;
      const double high_freq_wavelen = original / rope.high_freq_factor;
      const double wavelen = 2 * std::numbers::pi / inv_freq;
      if (wavelen > low_freq_wavelen) {
        inv_freq /= rope.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const double smooth =
            (original / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
        inv_freq = (1 - smooth) * inv_freq / rope.factor + smooth * inv_freq;
      }
    }
    rotary.inv_freq.push_back(inv_freq);
  }
  return rotary;
}

Value self_attention(Builder& builder, const AttentionWeights& weights, const io::ModelConfig& config,
                     const StepContext& step, LayerCache& cache, Value x, int64_t sliding_window,
                     Value output_rows) {
  const int64_t tokens = step.batch * step.seq, head_dim = config.head_dim;
  parallel::ProcessGroup& group = *step.group;
  const Sharded input{.value = x};
  // Heads split colwise stay this rank's; anything else is made whole first.
  auto heads_of = [&](const Linear& projection) {
    Sharded projected = apply(builder, group, input, projection);
    if (projected.layout == Sharded::Layout::split) return projected;
    return Sharded{.value = to_whole(builder, group, projected)};
  };
  const Sharded q_heads = heads_of(weights.q_proj);
  Value q = q_heads.value, k = heads_of(weights.k_proj).value, v = heads_of(weights.v_proj).value;
  const int64_t heads = builder.shape(q)[1] / head_dim, kv_heads = builder.shape(k)[1] / head_dim;
  q = builder.reshape(q, {tokens, heads, head_dim});
  k = builder.reshape(k, {tokens, kv_heads, head_dim});
  if (weights.q_norm.defined()) {
    q = builder.rms_norm(q, builder.bind(weights.q_norm), config.rms_norm_eps);
    k = builder.rms_norm(k, builder.bind(weights.k_norm), config.rms_norm_eps);
  }
  q = builder.rope(q, step.flat_positions, *step.rotary);
  k = builder.rope(k, step.flat_positions, *step.rotary);

  Value k_cache = builder.bind(cache.keys);  // [slots, kv_heads (this rank's), max_cache_len, head_dim]
  Value v_cache = builder.bind(cache.values);
  builder.kv_cache_write(k_cache, builder.reshape(k, {step.batch, step.seq, kv_heads, head_dim}), step.positions,
                         step.cache_rows);
  builder.kv_cache_write(v_cache, builder.reshape(v, {step.batch, step.seq, kv_heads, head_dim}), step.positions,
                         step.cache_rows);

  const double scaled_by = config.query_pre_attn_scalar.value_or(static_cast<double>(head_dim));
  const float scale = static_cast<float>(1.0 / std::sqrt(scaled_by));
  Value attended = builder.attention(builder.reshape(q, {step.batch, step.seq, heads, head_dim}), k_cache, v_cache,
                                     step.positions, step.cache_rows, scale, sliding_window);  // [batch, seq, heads, head_dim]
  Sharded heads_out = q_heads;
  heads_out.value = builder.reshape(attended, {tokens, heads * head_dim});
  if (output_rows.defined())
    heads_out.value = builder.gather_rows(heads_out.value, output_rows);  // [count, heads * head_dim]
  return to_whole(builder, group, apply(builder, group, heads_out, weights.o_proj));
}

Value gated_mlp(Builder& builder, parallel::ProcessGroup& group, const GatedMlpWeights& weights, Value x,
                Activation activation) {
  const Sharded input{.value = x};
  Sharded gate = apply(builder, group, input, weights.gate_proj), up = apply(builder, group, input, weights.up_proj);
  const auto gated = [&](Value g, Value u) {
    return activation == Activation::silu ? builder.silu_mul(g, u) : builder.gelu_tanh_mul(g, u);
  };
  Sharded product = gate;
  if (gate.layout == Sharded::Layout::split && up.layout == Sharded::Layout::split && gate.features == up.features) {
    product.value = gated(gate.value, up.value);
  } else {
    product = {.value = gated(to_whole(builder, group, gate), to_whole(builder, group, up))};
  }
  return to_whole(builder, group, apply(builder, group, product, weights.down_proj));
}

}  // namespace shardlm::models
