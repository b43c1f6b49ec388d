#pragma once
// Shared building blocks of decoder-only transformers. Architecture files compose
// them; a block takes its weights and config, never an architecture name.

#include <string>

#include "backends/rotary.h"
#include "graph/builder.h"
#include "io/config.h"
#include "models/kv_cache.h"
#include "models/sharded.h"
#include "models/weights.h"

namespace shardlm::models {

// With tensor parallelism a rank holds the query heads of an even split and exactly the
// KV heads those read (repeated where two of its head groups read one), whether or not
// kv_heads divides tp_size.
struct AttentionWeights {
  Linear q_proj, k_proj, v_proj;  // [heads * head_dim, hidden], [kv_heads * head_dim, hidden] (+ biases)
  Linear o_proj;                  // [hidden, heads * head_dim] (+ bias)
  Tensor q_norm, k_norm;          // [head_dim] or undefined (Qwen3's per-head RMSNorm before RoPE)
};

struct GatedMlpWeights {
  Linear gate_proj, up_proj;  // [intermediate, hidden] (+ biases)
  Linear down_proj;           // [hidden, intermediate] (+ bias)
};

struct AttentionOptions {
  bool bias_qkv = false;  // q/k/v projections carry a bias
  bool bias_o = false;
  bool qk_norm = false;   // per-head q_norm/k_norm weights
  bool norm_plus_one = false;  // they scale by (1 + weight) (Gemma)
};

// The gated MLP's activation, from config.hidden_act.
enum class Activation { silu, gelu_tanh };
// config.hidden_act as an Activation; an unsupported one is an error naming the supported.
Activation activation_of(const io::ModelConfig& config);

// The norm weight `name` [dim]; with plus_one the (1 + weight) Gemma's norms scale by, as f32.
Tensor load_norm(WeightLoader& loader, const std::string& name, int64_t dim, bool plus_one);

// Loads `prefix`.{q,k,v,o}_proj (+ biases, q_norm/k_norm as `options` says), e.g. prefix "model.layers.3.self_attn".
AttentionWeights load_attention(WeightLoader& loader, const std::string& prefix, const io::ModelConfig& config,
                                const AttentionOptions& options);
// Loads `prefix`.{gate,up,down}_proj, e.g. prefix "model.layers.3.mlp".
GatedMlpWeights load_gated_mlp(WeightLoader& loader, const std::string& prefix, const io::ModelConfig& config,
                               bool bias);
// Loads a fused `prefix`.gate_up_proj [2 * intermediate, hidden] (gate rows first) and
// `prefix`.down_proj; split colwise, each rank takes matching gate and up rows.
GatedMlpWeights load_fused_gated_mlp(WeightLoader& loader, const std::string& prefix, const io::ModelConfig& config);

// transformers' inverse frequencies for `rope` (default, linear, llama3) over config.head_dim.
backends::RotaryEmbedding make_rotary_embedding(const io::ModelConfig& config, const io::RopeConfig& rope,
                                                bool interleaved);

// What every layer's attention needs to know about the current step.
struct StepContext {
  int64_t batch = 0, seq = 0;
  graph::Value positions;       // i32 [batch, seq]
  graph::Value flat_positions;  // i32 [batch * seq]
  graph::Value cache_rows;      // i32 [batch]: each row's sequence slot in the KV cache
  const backends::RotaryEmbedding* rotary = nullptr;
  parallel::ProcessGroup* group = nullptr;  // the model's tensor-parallel group
  graph::Value logit_rows;                  // i32 [count] of the flattened tokens; undefined: every token

  // The rows of layer `layer`'s attention output that anything after it reads: past the
  // last layer's attention, only those logits are wanted for, since every token's keys
  // and values are in the cache by then (llama.cpp drops the same rows, after the output
  // projection). That skips the last layer's o_proj and MLP on every other prompt token
  // (on Qwen3-0.6B's 28 layers, 2.6% of a long prompt's matmul FLOPs). Undefined: every
  // token.
  graph::Value rows_kept_by(size_t layer, size_t layers) const {
    return layer + 1 == layers ? logit_rows : graph::Value{};
  }
};

// Self-attention with RoPE over the static cache. x [tokens, hidden] (already normed, whole)
// -> [tokens, hidden], whole on every rank; with output_rows (i32 [count]) defined, only
// those rows go through o_proj: -> [count, hidden]. Every token's keys and values are
// written either way. sliding_window 0: the whole cache prefix is visible.
graph::Value self_attention(graph::Builder& builder, const AttentionWeights& weights, const io::ModelConfig& config,
                            const StepContext& step, LayerCache& cache, graph::Value x, int64_t sliding_window,
                            graph::Value output_rows = {});

// down(act(gate(x)) * up(x)). x [tokens, hidden] -> [tokens, hidden], whole on every rank
graph::Value gated_mlp(graph::Builder& builder, parallel::ProcessGroup& group, const GatedMlpWeights& weights,
                       graph::Value x, Activation activation);

}  // namespace shardlm::models
