#pragma once
// Shared building blocks of decoder-only transformers. Architecture files compose
// them; a block takes its weights and config, never an architecture name.

#include <string>

#include "backends/rotary.h"
#include "graph/builder.h"
#include "io/config.h"
#include "models/kv_cache.h"
#include "models/weights.h"

namespace shardlm::models {

struct AttentionWeights {
  Tensor q_proj, k_proj, v_proj, o_proj;  // [heads * head_dim, hidden] ... [hidden, heads * head_dim]
  Tensor q_bias, k_bias, v_bias;          // [out] or undefined
  Tensor o_bias;                          // [hidden] or undefined
  Tensor q_norm, k_norm;                  // [head_dim] or undefined (Qwen3's per-head RMSNorm before RoPE)
};

struct GatedMlpWeights {
  Tensor gate_proj, up_proj;  // [intermediate, hidden]
  Tensor down_proj;           // [hidden, intermediate]
  Tensor gate_bias{}, up_bias{}, down_bias{};  // [out] or undefined
};

struct AttentionOptions {
  bool bias_qkv = false;  // q/k/v projections carry a bias
  bool bias_o = false;
  bool qk_norm = false;   // per-head q_norm/k_norm weights
};

// Loads `prefix`.{q,k,v,o}_proj (+ biases, q_norm/k_norm as `options` says), e.g. prefix "model.layers.3.self_attn".
AttentionWeights load_attention(WeightLoader& loader, const std::string& prefix, const io::ModelConfig& config,
                                const AttentionOptions& options);
// Loads `prefix`.{gate,up,down}_proj, e.g. prefix "model.layers.3.mlp".
GatedMlpWeights load_gated_mlp(WeightLoader& loader, const std::string& prefix, const io::ModelConfig& config,
                               bool bias);

// transformers' inverse frequencies for config.rope (default, linear, llama3).
backends::RotaryEmbedding make_rotary_embedding(const io::ModelConfig& config, bool interleaved);

// What every layer's attention needs to know about the current step.
struct StepContext {
  int64_t batch = 0, seq = 0;
  graph::Value positions;       // i32 [batch, seq]
  graph::Value flat_positions;  // i32 [batch * seq]
  const backends::RotaryEmbedding* rotary = nullptr;
};

// Self-attention with RoPE over the static cache. x [tokens, hidden] (already normed) -> [tokens, hidden].
// sliding_window 0: the whole cache prefix is visible.
graph::Value self_attention(graph::Builder& builder, const AttentionWeights& weights, const io::ModelConfig& config,
                            const StepContext& step, LayerCache& cache, graph::Value x, int64_t sliding_window);

// down(silu(gate(x)) * up(x)). x [tokens, hidden] -> [tokens, hidden]
graph::Value gated_mlp(graph::Builder& builder, const GatedMlpWeights& weights, graph::Value x);

// Binds a weight that may be undefined (an absent bias) as an undefined Value.
graph::Value bind_optional(graph::Builder& builder, const Tensor& tensor);

}  // namespace shardlm::models
