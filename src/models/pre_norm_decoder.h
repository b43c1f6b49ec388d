#pragma once
// The pre-norm decoder stack that Llama, Qwen2 and Qwen3 share:
//   x = embed(ids)
//   each layer: x += attention(rms_norm(x)); x += mlp(rms_norm(x))
//   logits = lm_head(rms_norm(x))
// Architectures differ only in which weights exist (biases, q/k norms), which
// their own files decide when loading.

#include <vector>

#include "models/blocks.h"
#include "models/causal_lm.h"

namespace shardlm::models {

struct PreNormDecoderWeights {
  Embedding embed_tokens;  // [vocab, hidden]
  struct Layer {
    Tensor input_layernorm;           // [hidden]
    AttentionWeights self_attn;
    Tensor post_attention_layernorm;  // [hidden]
    GatedMlpWeights mlp;
  };
  std::vector<Layer> layers;
  Tensor norm;     // [hidden]
  Linear lm_head;  // [vocab, hidden]; the embedding's tensor when tied
};

// Loads the standard HF names (model.embed_tokens, model.layers.N.{input_layernorm,
// self_attn, post_attention_layernorm, mlp}, model.norm, lm_head).
PreNormDecoderWeights load_pre_norm_decoder(WeightLoader& loader, const io::ModelConfig& config,
                                            const AttentionOptions& attention, bool mlp_bias);

// model.embed_tokens.weight, split along the vocabulary as the plan says.
Embedding load_embed_tokens(WeightLoader& loader, const io::ModelConfig& config);
// lm_head.weight, or for tied models the embedding's weight. transformers ties whenever
// tie_word_embeddings is true, even if the file also holds an lm_head. Tied and split
// alike (embedding_rowwise with a colwise head, the default), both share one tensor.
Linear load_lm_head(WeightLoader& loader, const io::ModelConfig& config, const Embedding& embed_tokens);

class PreNormDecoderLM : public CausalLM {
 public:
  PreNormDecoderLM(io::ModelConfig config, PreNormDecoderWeights weights, size_t weight_bytes);
  graph::Value forward(graph::Builder& builder, const ForwardInputs& inputs, StaticCache& cache) const override;
  size_t weight_bytes() const override { return weight_bytes_; }

 private:
  PreNormDecoderWeights weights_;
  backends::RotaryEmbedding rotary_;
  size_t weight_bytes_;
};

// Sets up positions and the step context shared by every layer.
StepContext begin_step(graph::Builder& builder, const ForwardInputs& inputs, const backends::RotaryEmbedding& rotary,
                       parallel::ProcessGroup& group);
// The input ids' embeddings [tokens, hidden].
graph::Value embed_inputs(graph::Builder& builder, const StepContext& step, const ForwardInputs& inputs,
                          const Embedding& embed_tokens);
// Final norm and the LM head over hidden [rows, hidden], already only the rows logits are
// wanted for (StepContext::rows_kept_by): whole logits on every rank.
graph::Value finish_step(graph::Builder& builder, const StepContext& step, graph::Value hidden,
                         const Tensor& final_norm, const Linear& lm_head, double eps);

// Checks that the config asks for what these blocks compute.
void check_supported_activation(const io::ModelConfig& config);

}  // namespace shardlm::models
