#pragma once
// config.json and generation_config.json, with transformers' field names and the
// defaults each transformers config class sets (they differ by model_type).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <shardlm/dtype.h>
#include <shardlm/generation_config.h>

#include "io/model_files.h"

namespace shardlm::io {

struct RopeConfig {
  std::string rope_type = "default";  // "default", "linear", "llama3"
  double theta = 10000.0;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  double partial_rotary_factor = 1.0;
};

struct ModelConfig {
  std::string source;  // path of config.json, for messages
  std::vector<std::string> architectures;
  std::string model_type;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  RopeConfig rope;  // of every layer, or of the full_attention layers where sliding_rope is set
  // The rope of sliding_attention layers where it differs (Gemma 3: rope_local_base_freq,
  // or rope_parameters keyed by layer type).
  std::optional<RopeConfig> sliding_rope{};
  // Attention scores are scaled by query_pre_attn_scalar^-0.5 (Gemma), else head_dim^-0.5.
  std::optional<double> query_pre_attn_scalar{};
  // logits = cap * tanh(logits / cap) where set (final_logit_softcapping).
  std::optional<double> final_logit_softcapping{};
  std::string hidden_act = "silu";  // hidden_act, or Gemma's hidden_activation
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  bool mlp_bias = false;
  std::optional<DType> torch_dtype{};
  std::optional<int64_t> bos_token_id{};
  std::vector<int64_t> eos_token_id;
  std::optional<int64_t> pad_token_id{};
  // Per layer: "full_attention" or "sliding_attention" (then only the last
  // sliding_window positions are visible). From config.json's layer_types, else
  // Qwen2/Qwen3's rule: sliding for layers >= max_window_layers when use_sliding_window.
  std::vector<std::string> layer_types;
  int64_t sliding_window = 0;  // 0 when no layer slides
  // quantization_config.quant_method: "shardlm_int8" or "shardlm_int4" (written by
  // `shardlm quantize`: int8 or int4 weights with "<name>_scale" f16 block scales), or empty.
  std::string quant_method;

  // The attention window of layer `layer` (0: unlimited).
  int64_t attention_window(int64_t layer) const {
    return layer_types[layer] == "sliding_attention" ? sliding_window : 0;
  }
};

inline constexpr const char* int8_quant_method = "shardlm_int8";
// int4 weights stored as uint8 [out, in / 2] (two values a byte) beside "<name>_scale".
inline constexpr const char* int4_quant_method = "shardlm_int4";

// Parses config.json text; `source` names the file in errors.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
ModelConfig load_model_config(const ModelFiles& files);

// generation_config.json; the model config's token ids fill what it lacks.
// Keys the file does not set stay unset (generate() falls back to transformers' defaults).
GenerationConfig load_generation_config(const ModelFiles& files, const ModelConfig& model);

}  // namespace shardlm::io
