#include "models/blocks.h"

#include <cmath>
#include <numbers>

namespace shardlm::models {

using graph::Builder;
using graph::Value;

AttentionWeights load_attention(WeightLoader& loader, const std::string& prefix, const io::ModelConfig& config,
                                const AttentionOptions& options) {
  const int64_t hidden = config.hidden_size, head_dim = config.head_dim;
  const int64_t q_width = config.num_attention_heads * head_dim, kv_width = config.num_key_value_heads * head_dim;
  AttentionWeights weights;
  weights.q_proj = loader.require(prefix + ".q_proj.weight", {q_width, hidden});
  weights.k_proj = loader.require(prefix + ".k_proj.weight", {kv_width, hidden});
  weights.v_proj = loader.require(prefix + ".v_proj.weight", {kv_width, hidden});
  weights.o_proj = loader.require(prefix + ".o_proj.weight", {hidden, q_width});
  if (options.bias_qkv) {
    weights.q_bias = loader.require(prefix + ".q_proj.bias", {q_width});
    weights.k_bias = loader.require(prefix + ".k_proj.bias", {kv_width});
    weights.v_bias = loader.require(prefix + ".v_proj.bias", {kv_width});
  }
  if (options.bias_o) weights.o_bias = loader.require(prefix + ".o_proj.bias", {hidden});
  if (options.qk_norm) {
    weights.q_norm = loader.require(prefix + ".q_norm.weight", {head_dim});
    weights.k_norm = loader.require(prefix + ".k_norm.weight", {head_dim});
  }
  return weights;
}

GatedMlpWeights load_gated_mlp(WeightLoader& loader, const std::string& prefix, const io::ModelConfig& config,
                               bool bias) {
  const int64_t hidden = config.hidden_size, intermediate = config.intermediate_size;
  GatedMlpWeights weights;
  weights.gate_proj = loader.require(prefix + ".gate_proj.weight", {intermediate, hidden});
  weights.up_proj = loader.require(prefix + ".up_proj.weight", {intermediate, hidden});
  weights.down_proj = loader.require(prefix + ".down_proj.weight", {hidden, intermediate});
  if (bias) {
    weights.gate_bias = loader.require(prefix + ".gate_proj.bias", {intermediate});
    weights.up_bias = loader.require(prefix + ".up_proj.bias", {intermediate});
    weights.down_bias = loader.require(prefix + ".down_proj.bias", {hidden});
  }
  return weights;
}

backends::RotaryEmbedding make_rotary_embedding(const io::ModelConfig& config, bool interleaved) {
  const io::RopeConfig& rope = config.rope;
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

Value bind_optional(Builder& builder, const Tensor& tensor) {
  return tensor.defined() ? builder.bind(tensor) : Value{};
}

Value self_attention(Builder& builder, const AttentionWeights& weights, const io::ModelConfig& config,
                     const StepContext& step, LayerCache& cache, Value x, int64_t sliding_window) {
  const int64_t tokens = step.batch * step.seq, head_dim = config.head_dim;
  const int64_t heads = config.num_attention_heads, kv_heads = config.num_key_value_heads;

  Value q = builder.linear(x, builder.bind(weights.q_proj), bind_optional(builder, weights.q_bias));
  Value k = builder.linear(x, builder.bind(weights.k_proj), bind_optional(builder, weights.k_bias));
  Value v = builder.linear(x, builder.bind(weights.v_proj), bind_optional(builder, weights.v_bias));
  q = builder.reshape(q, {tokens, heads, head_dim});
  k = builder.reshape(k, {tokens, kv_heads, head_dim});
  if (weights.q_norm.defined()) {
    q = builder.rms_norm(q, builder.bind(weights.q_norm), config.rms_norm_eps);
    k = builder.rms_norm(k, builder.bind(weights.k_norm), config.rms_norm_eps);
  }
  q = builder.rope(q, step.flat_positions, *step.rotary);
  k = builder.rope(k, step.flat_positions, *step.rotary);

  Value k_cache = builder.bind(cache.keys);  // [batch, kv_heads, max_cache_len, head_dim]
  Value v_cache = builder.bind(cache.values);
  builder.kv_cache_write(k_cache, builder.reshape(k, {step.batch, step.seq, kv_heads, head_dim}), step.positions);
  builder.kv_cache_write(v_cache, builder.reshape(v, {step.batch, step.seq, kv_heads, head_dim}), step.positions);

  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  Value attended = builder.attention(builder.reshape(q, {step.batch, step.seq, heads, head_dim}), k_cache, v_cache,
                                     step.positions, scale, sliding_window);  // [batch, seq, heads, head_dim]
  return builder.linear(builder.reshape(attended, {tokens, heads * head_dim}), builder.bind(weights.o_proj),
                        bind_optional(builder, weights.o_bias));
}

Value gated_mlp(Builder& builder, const GatedMlpWeights& weights, Value x) {
  Value gate = builder.linear(x, builder.bind(weights.gate_proj), bind_optional(builder, weights.gate_bias));
  Value up = builder.linear(x, builder.bind(weights.up_proj), bind_optional(builder, weights.up_bias));
  return builder.linear(builder.silu_mul(gate, up), builder.bind(weights.down_proj),
                        bind_optional(builder, weights.down_bias));
}

}  // namespace shardlm::models
