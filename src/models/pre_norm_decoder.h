#pragma once
// The pre-norm decoder stack every architecture here shares:
//   x = embed(ids)                                    (× sqrt(hidden_size) where scaled: Gemma)
//   each layer: x += [norm](attention(norm(x)))
//               x += [norm](mlp(norm(x)))
//   logits = lm_head(norm(x))                         (soft-capped where configured)
// where a bracketed norm is present only in "sandwich" layers (GLM-4, Gemma 3). An
// architecture file states what differs as a DecoderSpec: which weights exist and what they
// are called; everything else comes from config.json (io/config.h).

#include <optional>
#include <string>
#include <vector>

#include "models/blocks.h"
#include "models/causal_lm.h"

namespace shardlm::models {

struct DecoderSpec {
  AttentionOptions attention;
  bool mlp_bias = false;
  bool fused_gate_up = false;     // one gate_up_proj [2 * intermediate, hidden] (GLM-4)
  bool interleaved_rope = false;  // rotate pairs (2i, 2i + 1) instead of (i, i + rotary_dim / 2) (GLM-4)
  // Each layer's norms, by their names under model.layers.N: before attention and before the
  // MLP always; on each sublayer's output where named.
  std::string attention_norm = "input_layernorm";
  std::string attention_output_norm{};
  std::string mlp_norm = "post_attention_layernorm";
  std::string mlp_output_norm{};
  // Gemma: every norm scales by (1 + weight), and the embeddings by sqrt(hidden_size).
  bool norm_plus_one = false;
  bool scale_embeddings = false;
};

struct DecoderWeights {
  Embedding embed_tokens;  // [vocab, hidden]
  struct Layer {
    Tensor attention_norm;         // [hidden]
    Tensor attention_output_norm;  // [hidden] or undefined
    AttentionWeights self_attn;
    Tensor mlp_norm;               // [hidden]
    Tensor mlp_output_norm;        // [hidden] or undefined
    GatedMlpWeights mlp;
  };
  std::vector<Layer> layers;
  Tensor norm;     // [hidden]
  Linear lm_head;  // [vocab, hidden]; the embedding's tensor when tied
};

// Loads the decoder `spec` describes under the standard HF names (model.embed_tokens,
// model.layers.N.{norms, self_attn, mlp}, model.norm, lm_head) and builds it.
std::unique_ptr<CausalLM> create_decoder(const io::ModelConfig& config, WeightLoader& loader, const DecoderSpec& spec);

// model.embed_tokens.weight, split along the vocabulary as the plan says.
Embedding load_embed_tokens(WeightLoader& loader, const io::ModelConfig& config);
// lm_head.weight, or for tied models the embedding's weight. transformers ties whenever
// tie_word_embeddings is true, even if the file also holds an lm_head. Tied and split
// alike (embedding_rowwise with a colwise head, the default), both share one tensor.
Linear load_lm_head(WeightLoader& loader, const io::ModelConfig& config, const Embedding& embed_tokens);

class DecoderLM : public CausalLM {
 public:
  DecoderLM(io::ModelConfig config, const DecoderSpec& spec, DecoderWeights weights, size_t weight_bytes);
  graph::Value forward(graph::Builder& builder, const ForwardInputs& inputs, StaticCache& cache) const override;
  size_t weight_bytes() const override { return weight_bytes_; }

 private:
  graph::Value layer_forward(graph::Builder& builder, StepContext& step, size_t index, LayerCache& cache,
                             graph::Value x) const;

  DecoderWeights weights_;
  Activation activation_;
  std::optional<float> embedding_scale_;
  backends::RotaryEmbedding rotary_;                         // of every layer, or of the full-attention ones
  std::optional<backends::RotaryEmbedding> sliding_rotary_;  // of sliding-attention layers where it differs
  size_t weight_bytes_;
};

}  // namespace shardlm::models
