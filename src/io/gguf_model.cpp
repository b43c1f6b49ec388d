#include "io/gguf_model.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace shardlm::io {
namespace {

struct Architecture {
  const char* gguf;        // general.architecture
  const char* class_name;  // transformers' architectures[0]
  bool permuted_qk;        // convert_hf_to_gguf.py permutes q/k rows (rope in interleaved pairs)
};
constexpr Architecture architectures[] = {
    {"llama", "LlamaForCausalLM", true},
    {"qwen2", "Qwen2ForCausalLM", false},
    {"qwen3", "Qwen3ForCausalLM", false},
};

const Architecture& architecture_of(const GgufFile& file) {
  const std::string name = file.get_string("general.architecture");
  for (const Architecture& architecture : architectures)
    if (name == architecture.gguf) return architecture;
  fail(file.source_name(), ": general.architecture '", name,
       "' is not one shardlm runs from GGUF (it runs llama, qwen2, qwen3)");
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
constexpr std::pair<const char*, const char*> model_tensors[] = {
    {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};

// transformers' name of GGUF tensor `name`, or "" for one no supported model reads.
std::string transformers_name(const std::string& name) {
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
  for (const auto& [gguf, hf] : layer_tensors)
    if (part == gguf) return "model.layers." + layer + "." + hf + suffix;
  return "";
}

// Undoes convert_hf_to_gguf.py's permute(): within each head of `heads`, stored row 2i + j
// is transformers' row j * half + i (half = rows per head / 2).
void unpermute_rows(Tensor& weight, int64_t heads, const std::string& where) {
  const int64_t rows = weight.shape()[0], columns = weight.shape().rank() == 2 ? weight.shape()[1] : 1;
  if (heads <= 0 || rows % (2 * heads) != 0)
    fail(where, ": ", rows, " rows do not split into ", heads, " heads of rope pairs");
  const int64_t per_head = rows / heads, half = per_head / 2;
  std::vector<float> stored(weight.data<float>(), weight.data<float>() + weight.numel());
  float* out = weight.mutable_data<float>();
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(out + (h * per_head + j * half + i) * columns, stored.data() + (h * per_head + 2 * i + j) * columns,
                    columns * sizeof(float));
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
      {"model_type", architecture.gguf},
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
  for (const char* token : {"bos", "eos"}) {
    const std::string key = str_cat("tokenizer.ggml.", token, "_token_id");
    if (file.contains(key)) config[str_cat(token, "_token_id")] = file.get_integer(key);
  }
  return config.dump(2);
}

namespace {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum TokenType : int64_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

// The pre-tokenizer regexes llama.cpp applies for tokenizer.ggml.pre, as the tokenizer.json
// files of those models write them.
const char* pre_tokenizer_regex(const std::string& pre) {
  if (pre == "qwen2")
    return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (pre == "llama-bpe")
    return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  return nullptr;
}

// Texts llama.cpp (0.5.0, llama-vocab.cpp) takes for end-of-generation, fill-in-the-middle
// and similar control tokens whatever type the file gives them: it makes them CONTROL, so
// they are matched in text as special tokens (Qwen's vocabulary lists "</s>" as normal).
constexpr const char* control_looking_texts[] = {
    "</s>", "<EOT>", "<MID>", "<PAD>", "<PRE>", "<REPO>", "<SUF>", "<end_of_turn>", "<end_of_utterance>", "<eos>",
    "<fim-middle>", "<fim-pad>", "<fim-prefix>", "<fim-repo>", "<fim-suffix>", "<fim_middle>", "<fim_pad>",
    "<fim_prefix>", "<fim_suffix>", "<reponame>", "<turn|>", "<|calls|>", "<|call|>", "<|code_middle|>",
    "<|code_prefix|>", "<|code_suffix|>", "<|end_of_text|>", "<|endoftext|>", "<|end|>", "<|eom_id|>", "<|eot_id|>",
    "<|file_sep|>", "<|fim_middle|>", "<|fim_pad|>", "<|fim_prefix|>", "<|fim_repo|>", "<|fim_suffix|>", "<|flush|>",
    "<|im_end|>", "<|middle|>", "<|prefix|>", "<|repo_name|>", "<|return|>", "<|suffix|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "<｜fim▁begin｜>",
    "<｜fim▁end｜>", "<｜fim▁hole｜>", "[EOS]", "[EOT]", "[PAD]", "[e~[",
    "_<EOT>", "▁<MID>", "▁<PRE>", "▁<SUF>"};
// And texts it always makes USER_DEFINED (gpt-oss's).
constexpr const char* user_defined_texts[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

int64_t llama_cpp_token_type(const std::string& text, int64_t stored) {
  for (const char* candidate : user_defined_texts)
    if (text == candidate) return user_defined;
  for (const char* candidate : control_looking_texts)
    if (text == candidate) return control;
  return stored;
}

std::string pre_of(const GgufFile& file) {
  return file.contains("tokenizer.ggml.pre") ? file.get_string("tokenizer.ggml.pre") : "default";
}

}  // namespace

std::string gguf_vocabulary_unread_reason(const GgufFile& file) {
  if (!file.contains("tokenizer.ggml.model") || file.get_string("tokenizer.ggml.model") == "none")
    return "it has no vocabulary (tokenizer.ggml.model is absent or \"none\")";
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model != "gpt2")
    return str_cat("its vocabulary is of kind '", model, "' (tokenizer.ggml.model), which shardlm does not read yet "
                   "(it reads 'gpt2': byte-level BPE)");
  if (!pre_tokenizer_regex(pre_of(file)))
    return str_cat("its pre-tokenizer '", pre_of(file), "' (tokenizer.ggml.pre) is not one shardlm knows yet "
                   "(it knows qwen2, llama-bpe)");
  return "";
}

std::map<std::string, std::string> gguf_tokenizer_files(const GgufFile& file) {
  if (!gguf_vocabulary_unread_reason(file).empty()) return {};
  const std::string pre = pre_of(file);
  const std::vector<std::string> tokens = file.get_strings("tokenizer.ggml.tokens");
  const std::vector<int64_t> types = file.contains("tokenizer.ggml.token_type")
                                         ? file.get_integers("tokenizer.ggml.token_type")
                                         : std::vector<int64_t>(tokens.size(), normal);
  if (types.size() != tokens.size())
    fail(file.source_name(), ": tokenizer.ggml.token_type has ", types.size(), " entries for ", tokens.size(),
         " tokens");
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    // As in llama.cpp, every token stays in the vocabulary (merges may make a control one);
    // control and user-defined ones are also matched whole in the text.
    const int64_t type = llama_cpp_token_type(tokens[id], types[id]);
    if (type == control || type == user_defined)
      added.push_back({{"id", id}, {"content", tokens[id]}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", type == control}});
    if (type != unused) vocab[tokens[id]] = id;
  }
  const bool add_bos = file.contains("tokenizer.ggml.add_bos_token") && file.get_bool("tokenizer.ggml.add_bos_token");
  nlohmann::json post_processor = nullptr;
  nlohmann::json config = {{"add_bos_token", add_bos}, {"add_eos_token", false}};
  const auto token_of = [&](const char* key) -> std::optional<std::string> {
    if (!file.contains(key)) return std::nullopt;
    const int64_t id = file.get_integer(key);
    if (id < 0 || id >= static_cast<int64_t>(tokens.size()))
      fail(file.source_name(), ": ", key, " is ", id, ", outside the ", tokens.size(), " tokens");
    return tokens[static_cast<size_t>(id)];
  };
  if (const auto bos = token_of("tokenizer.ggml.bos_token_id")) {
    config["bos_token"] = *bos;
    if (add_bos)
      post_processor = {{"type", "TemplateProcessing"},
                        {"single", {{{"SpecialToken", {{"id", *bos}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                        {"pair", {{{"SpecialToken", {{"id", *bos}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                  {{"SpecialToken", {{"id", *bos}, {"type_id", 1}}}},
                                  {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
                        {"special_tokens",
                         {{*bos, {{"id", *bos}, {"ids", {file.get_integer("tokenizer.ggml.bos_token_id")}},
                                  {"tokens", {*bos}}}}}}};
  }
  if (const auto eos = token_of("tokenizer.ggml.eos_token_id")) config["eos_token"] = *eos;
  if (const auto pad = token_of("tokenizer.ggml.padding_token_id")) config["pad_token"] = *pad;
  if (file.contains("tokenizer.chat_template")) config["chat_template"] = file.get_string("tokenizer.chat_template");
  const nlohmann::json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  const nlohmann::json split = {{"type", "Split"},
                                {"pattern", {{"Regex", pre_tokenizer_regex(pre)}}},
                                {"behavior", "Isolated"},
                                {"invert", false}};
  nlohmann::json model = {{"type", "BPE"},
                          {"dropout", nullptr},
                          {"unk_token", nullptr},
                          {"continuing_subword_prefix", ""},
                          {"end_of_word_suffix", ""},
                          {"fuse_unk", false},
                          {"byte_fallback", false},
                          // llama.cpp looks a whole pre-token up first for Llama 3, as its tokenizer.json says.
                          {"ignore_merges", pre == "llama-bpe"}};
  model["vocab"] = std::move(vocab);
  model["merges"] = file.contains("tokenizer.ggml.merges") ? file.get_strings("tokenizer.ggml.merges")
                                                           : std::vector<std::string>{};
  nlohmann::json tokenizer = {{"version", "1.0"}, {"normalizer", nullptr}, {"decoder", byte_level}};
  tokenizer["added_tokens"] = std::move(added);
  tokenizer["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}};
  tokenizer["post_processor"] = std::move(post_processor);
  tokenizer["model"] = std::move(model);
  return {{"tokenizer.json", tokenizer.dump()}, {"tokenizer_config.json", config.dump()}};
}

GgufWeights::GgufWeights(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {
  const Architecture& architecture = architecture_of(*file_);
  const std::string prefix = std::string(architecture.gguf) + ".";
  const int64_t heads = file_->get_integer(prefix + "attention.head_count");
  const int64_t kv_heads = file_->contains(prefix + "attention.head_count_kv")
                               ? file_->get_integer(prefix + "attention.head_count_kv")
                               : heads;
  for (const GgufTensorInfo& tensor : file_->tensors()) {
    const std::string name = transformers_name(tensor.name);
    if (name.empty()) continue;  // not a weight of these models: the loading report is about ours
    Source source{.gguf_name = tensor.name};
    if (architecture.permuted_qk && name.ends_with(".self_attn.q_proj.weight")) source.permuted_heads = heads;
    if (architecture.permuted_qk && name.ends_with(".self_attn.k_proj.weight")) source.permuted_heads = kv_heads;
    sources_.emplace(name, source);
    infos_.emplace(name, TensorInfo{.name = name, .dtype = DType::f32, .shape = tensor.shape()});
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
  Tensor weight = file_->dequantized(from.gguf_name);
  if (from.permuted_heads > 0)
    unpermute_rows(weight, from.permuted_heads, str_cat(file_->source_name(), ": tensor '", from.gguf_name, "'"));
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
