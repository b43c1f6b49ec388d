#include "io/gguf_model.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace shardlm::io {
namespace {

struct Architecture {
  const char* gguf;        // general.architecture
  const char* class_name;  // transformers' architectures[0]
  const char* model_type;  // transformers' model_type
  bool permuted_qk;        // convert_hf_to_gguf.py permutes q/k rows (rope in interleaved pairs)
  bool gemma;              // four norms a layer, stored as 1 + weight; what llama.cpp fixes for Gemma 3
};
constexpr Architecture architectures[] = {
    {"llama", "LlamaForCausalLM", "llama", true, false},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", false, false},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", false, false},
    {"gemma3", "Gemma3ForCausalLM", "gemma3_text", false, true},
};

const Architecture& architecture_of(const GgufFile& file) {
  const std::string name = file.get_string("general.architecture");
  for (const Architecture& architecture : architectures)
    if (name == architecture.gguf) return architecture;
  fail(file.source_name(), ": general.architecture '", name,
       "' is not one shardlm runs from GGUF (it runs llama, qwen2, qwen3, gemma3)");
}

// llama.cpp's per-layer tensor names (after "blk.N.") and transformers' (after "model.layers.N.").
constexpr std::pair<const char*, const char*> layer_tensors[] = {
    {"attn_norm", "input_layernorm"},        {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},          {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},     {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},     {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},           {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};
// Gemma's: its ffn_norm comes before the MLP, and two more norms follow the sublayers.
constexpr std::pair<const char*, const char*> gemma_layer_tensors[] = {
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
};
constexpr std::pair<const char*, const char*> model_tensors[] = {
    {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};

// transformers' name of GGUF tensor `name`, or "" for one no supported model reads.
std::string transformers_name(const std::string& name, const Architecture& architecture) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return "";
  const std::string stem = name.substr(0, dot), suffix = name.substr(dot);  // ".weight" / ".bias"
  for (const auto& [gguf, hf] : model_tensors)
    if (stem == gguf) return hf + suffix;
  if (!stem.starts_with("blk.")) return "";
  const size_t layer_end = stem.find('.', 4);
  if (layer_end == std::string::npos) return "";
  const std::string layer = stem.substr(4, layer_end - 4), part = stem.substr(layer_end + 1);
  if (layer.empty() || layer.find_first_not_of("0123456789") != std::string::npos) return "";
  if (architecture.gemma)
    for (const auto& [gguf, hf] : gemma_layer_tensors)
      if (part == gguf) return "model.layers." + layer + "." + hf + suffix;
  for (const auto& [gguf, hf] : layer_tensors)
    if (part == gguf) return "model.layers." + layer + "." + hf + suffix;
  return "";
}

// Undoes convert_hf_to_gguf.py's permute(): within each head of `heads`, stored row 2i + j
// is transformers' row j * half + i (half = rows per head / 2). Rows move whole (with their
// block scales), so this holds for every stored type. A new tensor.
Tensor unpermuted_rows(const Tensor& weight, int64_t heads, const std::string& where) {
  const int64_t rows = weight.shape()[0];
  if (heads <= 0 || rows % (2 * heads) != 0)
    fail(where, ": ", rows, " rows do not split into ", heads, " heads of rope pairs");
  const int64_t per_head = rows / heads, half = per_head / 2;
  const auto moved = [&](const Tensor& from) {
    Tensor to = Tensor::empty(from.shape(), from.dtype());
    const size_t row_bytes = from.nbytes() / static_cast<size_t>(rows);
    const auto* source = static_cast<const std::byte*>(from.raw());
    auto* target = static_cast<std::byte*>(to.mutable_raw());
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i)
        for (int64_t j = 0; j < 2; ++j)
          std::memcpy(target + (h * per_head + j * half + i) * row_bytes,
                      source + (h * per_head + 2 * i + j) * row_bytes, row_bytes);
    return to;
  };
  Tensor result = moved(weight);
  return weight.quantized() ? result.with_block_scales(moved(weight.block_scales())) : result;
}

// More layers than any model has: a block_count past it is a corrupt or hostile file.
constexpr int64_t max_layers = 4096;

// What llama.cpp (0.5.0, llama-model.cpp) fixes for gemma3 rather than reading from the file:
// every 6th layer global, the others sliding with rope base 10000, and attention scaled by
// key_length^-0.5, but for the 62-layer 27B by (hidden / heads)^-0.5 (transformers'
// query_pre_attn_scalar, 168 there).
void add_gemma_config(const GgufFile& file, nlohmann::json& config) {
  const int64_t layers = config["num_hidden_layers"].get<int64_t>();
  if (layers <= 0 || layers > max_layers)
    fail(file.source_name(), ": gemma3.block_count is ", layers, ": expected 1 to ", max_layers);
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < layers; ++i) types.push_back((i + 1) % 6 != 0 ? "sliding_attention" : "full_attention");
  config["layer_types"] = std::move(types);
  config["sliding_window"] = file.get_integer("gemma3.attention.sliding_window");
  config["rope_local_base_freq"] = 10000.0;
  config["query_pre_attn_scalar"] =
      layers == 62 ? config["hidden_size"].get<int64_t>() / config["num_attention_heads"].get<int64_t>()
                   : config["head_dim"].get<int64_t>();
  config["hidden_activation"] = "gelu_pytorch_tanh";
  config.erase("hidden_act");
  if (file.contains("gemma3.final_logit_softcapping"))
    config["final_logit_softcapping"] = file.get_number("gemma3.final_logit_softcapping");
}

}  // namespace

std::string gguf_config_json(const GgufFile& file) {
  const Architecture& architecture = architecture_of(file);
  const std::string prefix = std::string(architecture.gguf) + ".";
  const auto integer = [&](const std::string& key) { return file.get_integer(prefix + key); };
  const auto integer_or = [&](const std::string& key, int64_t fallback) {
    return file.contains(prefix + key) ? file.get_integer(prefix + key) : fallback;
  };
  if (file.contains_tensor("rope_freqs.weight"))
    fail(file.source_name(), ": rope frequencies stored as a tensor (rope_freqs.weight, Llama 3.1's scaling) are "
         "not read from GGUF yet");
  if (file.contains(prefix + "rope.scaling.type") && file.get_string(prefix + "rope.scaling.type") != "none")
    fail(file.source_name(), ": ", prefix, "rope.scaling.type '", file.get_string(prefix + "rope.scaling.type"),
         "' is not read from GGUF yet");
  const int64_t heads = integer("attention.head_count");
  const int64_t hidden = integer("embedding_length");
  if (heads <= 0 || hidden <= 0)
    fail(file.source_name(), ": ", prefix, "attention.head_count (", heads, ") and ", prefix, "embedding_length (",
         hidden, ") must be positive");
  // The vocabulary size: stated, else the embedding's rows, else the tokens listed.
  int64_t vocab_size = 0;
  if (file.contains(prefix + "vocab_size"))
    vocab_size = integer("vocab_size");
  else if (file.contains_tensor("token_embd.weight"))
    vocab_size = file.tensor_info("token_embd.weight").shape()[0];
  else if (file.contains("tokenizer.ggml.tokens"))
    vocab_size = static_cast<int64_t>(file.get_strings("tokenizer.ggml.tokens").size());
  else
    fail(file.source_name(), ": neither ", prefix, "vocab_size, token_embd.weight nor tokenizer.ggml.tokens gives ",
         "the vocabulary size");
  nlohmann::json config = {
      {"architectures", {architecture.class_name}},
      {"model_type", architecture.model_type},
      {"vocab_size", vocab_size},
      {"hidden_size", hidden},
      {"intermediate_size", integer("feed_forward_length")},
      {"num_hidden_layers", integer("block_count")},
      {"num_attention_heads", heads},
      {"num_key_value_heads", integer_or("attention.head_count_kv", heads)},
      {"head_dim", integer_or("attention.key_length", hidden / heads)},
      {"max_position_embeddings", integer("context_length")},
      {"rms_norm_eps", file.get_number(prefix + "attention.layer_norm_rms_epsilon")},
      {"rope_theta", file.contains(prefix + "rope.freq_base") ? file.get_number(prefix + "rope.freq_base") : 10000.0},
      {"hidden_act", "silu"},
      // Without an output tensor llama.cpp uses the embedding as the head.
      {"tie_word_embeddings", !file.contains_tensor("output.weight")},
      {"attention_bias", file.contains_tensor("blk.0.attn_q.bias")},
  };
  if (architecture.gemma) add_gemma_config(file, config);
  for (const char* token : {"bos", "eos"}) {
    const std::string key = str_cat("tokenizer.ggml.", token, "_token_id");
    if (file.contains(key)) config[str_cat(token, "_token_id")] = file.get_integer(key);
  }
  return config.dump(2);
}

GgufWeights::GgufWeights(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {
  const Architecture& architecture = architecture_of(*file_);
  const std::string prefix = std::string(architecture.gguf) + ".";
  const int64_t heads = file_->get_integer(prefix + "attention.head_count");
  const int64_t kv_heads = file_->contains(prefix + "attention.head_count_kv")
                               ? file_->get_integer(prefix + "attention.head_count_kv")
                               : heads;
  for (const GgufTensorInfo& tensor : file_->tensors()) {
    const std::string name = transformers_name(tensor.name, architecture);
    if (name.empty()) continue;  // not a weight of these models: the loading report is about ours
    Source source{.gguf_name = tensor.name};
    if (architecture.gemma && name.ends_with("norm.weight")) source.shift = -1.0f;
    if (architecture.permuted_qk && name.ends_with(".self_attn.q_proj.weight")) source.permuted_heads = heads;
    if (architecture.permuted_qk && name.ends_with(".self_attn.k_proj.weight")) source.permuted_heads = kv_heads;
    sources_.emplace(name, source);
    const DType dtype = source.shift != 0 ? DType::f32 : ggml_weight_dtype(static_cast<GgmlType>(tensor.type.id));
    infos_.emplace(name, TensorInfo{.name = name, .dtype = dtype, .shape = tensor.shape()});
  }
}

const GgufWeights::Source& GgufWeights::source(const std::string& name) const {
  const auto found = sources_.find(name);
  if (found == sources_.end())
    fail("tensor '", name, "' not found in ", file_->source_name(),
         ": the file does not match its architecture's metadata or is incomplete");
  return found->second;
}

Tensor GgufWeights::tensor(const std::string& name) const {
  const Source& from = source(name);
  Tensor weight = file_->weight(from.gguf_name);
  const std::span<const std::byte> stored = file_->tensor_bytes(from.gguf_name);
  if (from.permuted_heads > 0)
    weight = unpermuted_rows(weight, from.permuted_heads,
                             str_cat(file_->source_name(), ": tensor '", from.gguf_name, "'"));
  if (from.shift != 0) {
    weight = dequantize_weight(weight);
    float* values = weight.mutable_data<float>();
    for (int64_t i = 0; i < weight.numel(); ++i) values[i] += from.shift;
  }
  // A copy: the file's pages need not stay resident for it.
  if (weight.raw() != stored.data()) release_mapped_pages(stored.data(), stored.size());
  return weight;
}

const TensorInfo& GgufWeights::info(const std::string& name) const {
  source(name);
  return infos_.at(name);
}

std::vector<std::string> GgufWeights::names() const {
  std::vector<std::string> result;
  for (const auto& [name, source] : sources_) result.push_back(name);
  return result;
}

}  // namespace shardlm::io
