#include "io/config.h"

#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace shardlm::io {
namespace {

using nlohmann::json;

// Reads typed keys from one JSON object, naming the file and key in every error.
class Fields {
 public:
  Fields(const json& object, std::string source) : object_(object), source_(std::move(source)) {}

  const json* find(const std::string& key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t required_int(const std::string& key) const {
    const json* value = find(key);
    if (!value) fail(source_, ": required key '", key, "' is missing");
    return as_int(*value, key);
  }
  int64_t positive_int(const std::string& key) const {
    int64_t value = required_int(key);
    if (value <= 0) fail(source_, ": '", key, "' must be positive, got ", value);
    return value;
  }
  std::optional<int64_t> optional_int(const std::string& key) const {
    const json* value = find(key);
    return value ? std::optional(as_int(*value, key)) : std::nullopt;
  }
  double number(const std::string& key, double fallback) const {
    const json* value = find(key);
    if (!value) return fallback;
    if (!value->is_number()) fail(source_, ": '", key, "' must be a number, got ", value->dump());
    return value->get<double>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    const json* value = find(key);
    if (!value) return fallback;
    if (!value->is_boolean()) fail(source_, ": '", key, "' must be true or false, got ", value->dump());
    return value->get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    const json* value = find(key);
    if (!value) return fallback;
    if (!value->is_string()) fail(source_, ": '", key, "' must be a string, got ", value->dump());
    return value->get<std::string>();
  }
  // An id or a list of ids (eos_token_id is either in real configs).
  std::vector<int64_t> int_list(const std::string& key) const {
    const json* value = find(key);
    if (!value) return {};
    if (!value->is_array()) return {as_int(*value, key)};
    std::vector<int64_t> ids;
    for (const json& item : *value) ids.push_back(as_int(item, key));
    return ids;
  }
  const std::string& source() const { return source_; }

 private:
  int64_t as_int(const json& value, const std::string& key) const {
    if (value.is_number_integer()) return value.get<int64_t>();
    if (value.is_number_float()) {
      const double number = value.get<double>();
      // Whole numbers written as floats (1e4) are accepted; the range check keeps the cast defined.
      if (std::abs(number) < 9.0e18 && number == std::floor(number)) return static_cast<int64_t>(number);
    }
    fail(source_, ": '", key, "' must be an integer, got ", value.dump());
  }

  const json& object_;
  std::string source_;
};

json parse_object(const std::string& text, const std::string& source) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) fail(source, ": not valid JSON");
  if (!value.is_object()) fail(source, ": expected a JSON object at the top level");
  return value;
}

// transformers' per-class defaults for keys that real checkpoints omit.
struct ClassDefaults {
  int64_t head_dim = 0;  // 0: hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 2048;
  double partial_rotary_factor = 1.0;
  bool attention_bias = false;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  std::string hidden_act = "silu";
  bool gemma = false;  // Gemma3TextConfig: local rope base, window pattern, query_pre_attn_scalar
  // Shape keys the class defaults (Gemma3TextConfig's: a multimodal Gemma 3's text_config
  // states only what differs); elsewhere they are required.
  std::map<std::string, int64_t> shapes{};
};

ClassDefaults defaults_for(const std::string& model_type) {
  if (model_type == "qwen3") return {.head_dim = 128, .max_position_embeddings = 32768};
  if (model_type == "qwen2") return {.max_position_embeddings = 32768, .attention_bias = true};
  if (model_type == "glm4")
    return {.head_dim = 128, .rms_norm_eps = 1.5625e-7, .max_position_embeddings = 32768,
            .partial_rotary_factor = 0.5, .attention_bias = true};
  if (model_type == "gemma3_text")
    return {.head_dim = 256, .max_position_embeddings = 131072, .rope_theta = 1e6, .tie_word_embeddings = true,
            .hidden_act = "gelu_pytorch_tanh", .gemma = true,
            .shapes = {{"vocab_size", 262208}, {"hidden_size", 2304}, {"intermediate_size", 9216},
                       {"num_hidden_layers", 26}, {"num_attention_heads", 8}, {"num_key_value_heads", 4}}};
  return {};  // LlamaConfig
}

// One rope_scaling / rope_parameters object over `rope`.
void read_rope_section(const json& section, const std::string& source, RopeConfig& rope) {
  if (!section.is_object()) fail(source, " must be an object or null");
  Fields fields(section, source);
  rope.theta = fields.number("rope_theta", rope.theta);
  rope.rope_type = fields.string("rope_type", fields.string("type", rope.rope_type));
  rope.factor = fields.number("factor", rope.factor);
  rope.low_freq_factor = fields.number("low_freq_factor", rope.low_freq_factor);
  rope.high_freq_factor = fields.number("high_freq_factor", rope.high_freq_factor);
  rope.original_max_position_embeddings =
      fields.optional_int("original_max_position_embeddings").value_or(rope.original_max_position_embeddings);
  rope.partial_rotary_factor = fields.number("partial_rotary_factor", rope.partial_rotary_factor);
}

void check_rope(const RopeConfig& rope, const std::string& source) {
  if (rope.rope_type != "default" && rope.rope_type != "linear" && rope.rope_type != "llama3")
    fail(source, ": rope_type '", rope.rope_type, "' is not supported (supported: default, linear, llama3)");
  if (rope.rope_type == "llama3" && rope.original_max_position_embeddings <= 0)
    fail(source, ": rope_type llama3 needs original_max_position_embeddings");
  if (rope.rope_type != "default" && rope.factor <= 0) fail(source, ": rope scaling 'factor' must be positive");
  if (!(rope.partial_rotary_factor > 0 && rope.partial_rotary_factor <= 1))
    fail(source, ": partial_rotary_factor must be in (0, 1]");
  if (!(rope.theta > 0)) fail(source, ": rope_theta must be positive");
}

// Sets config.rope, and config.sliding_rope where sliding layers rotate differently.
// transformers v5 writes rope_parameters, keyed by layer type where the types differ
// (Gemma 3); older files write rope_scaling (of the full-attention layers) and, for Gemma 3,
// rope_local_base_freq. Any of them may hold rope_theta.
void parse_rope(const Fields& top, const ClassDefaults& defaults, ModelConfig& config) {
  RopeConfig rope;
  rope.partial_rotary_factor = top.number("partial_rotary_factor", defaults.partial_rotary_factor);
  rope.theta = top.number("rope_theta", defaults.rope_theta);
  std::optional<RopeConfig> sliding;
  if (defaults.gemma) {
    sliding = RopeConfig{.theta = top.number("rope_local_base_freq", 10000.0),
                         .partial_rotary_factor = rope.partial_rotary_factor};
  }
  if (const json* scaling = top.find("rope_scaling")) read_rope_section(*scaling, top.source() + " rope_scaling", rope);
  if (const json* parameters = top.find("rope_parameters")) {
    // Flat, its values are numbers and names; keyed by layer type, objects.
    const bool by_layer_type = parameters->is_object() &&
                               std::any_of(parameters->begin(), parameters->end(),
                                           [](const json& value) { return value.is_object(); });
    if (!by_layer_type) {
      read_rope_section(*parameters, top.source() + " rope_parameters", rope);
    } else {
      for (const auto& [type, section] : parameters->items()) {
        const std::string source = str_cat(top.source(), " rope_parameters.", type);
        if (type == "full_attention") {
          read_rope_section(section, source, rope);
        } else if (type == "sliding_attention") {
          if (!sliding) sliding = RopeConfig{.theta = rope.theta, .partial_rotary_factor = rope.partial_rotary_factor};
          read_rope_section(section, source, *sliding);
        } else {
          fail(source, ": unknown layer type (rope_parameters keyed by layer type take full_attention and "
                       "sliding_attention)");
        }
      }
    }
  }
  check_rope(rope, top.source());
  if (sliding) check_rope(*sliding, top.source() + " (sliding_attention layers)");
  config.rope = rope;
  config.sliding_rope = sliding;
}

void parse_layer_types(const Fields& fields, const ClassDefaults& defaults, ModelConfig& config) {
  const bool qwen_rule = config.model_type == "qwen2" || config.model_type == "qwen3";
  // Qwen configs drop sliding_window unless use_sliding_window is set; others use it as given.
  const bool windowed = qwen_rule ? fields.boolean("use_sliding_window", false) : true;
  std::optional<int64_t> window = windowed ? fields.optional_int("sliding_window") : std::nullopt;
  if (defaults.gemma && !fields.find("sliding_window")) window = 4096;
  if (window && *window <= 0) fail(fields.source(), ": sliding_window must be positive, got ", *window);
  if (const json* types = fields.find("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != config.num_hidden_layers)
      fail(fields.source(), ": 'layer_types' must list one entry per layer (", config.num_hidden_layers, ")");
    for (const json& type : *types) {
      if (!type.is_string() || (type != "full_attention" && type != "sliding_attention"))
        fail(fields.source(), ": layer_types entry ", type.dump(),
             " is not supported (supported: full_attention, sliding_attention)");
      config.layer_types.push_back(type.get<std::string>());
    }
  } else if (defaults.gemma) {
    // Gemma3TextConfig: every sliding_window_pattern-th layer attends globally.
    const int64_t pattern = fields.optional_int("sliding_window_pattern").value_or(6);
    if (pattern <= 0) fail(fields.source(), ": sliding_window_pattern must be positive, got ", pattern);
    for (int64_t i = 0; i < config.num_hidden_layers; ++i)
      config.layer_types.push_back((i + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
  } else {
    const int64_t max_window_layers = fields.optional_int("max_window_layers").value_or(28);  // Qwen2/Qwen3Config
    for (int64_t i = 0; i < config.num_hidden_layers; ++i)
      config.layer_types.push_back(window && qwen_rule && i >= max_window_layers ? "sliding_attention"
                                                                                 : "full_attention");
  }
  const bool any_sliding =
      std::find(config.layer_types.begin(), config.layer_types.end(), "sliding_attention") != config.layer_types.end();
  if (any_sliding && !window)
    fail(fields.source(), ": layer_types has sliding_attention layers but no positive sliding_window");
  config.sliding_window = any_sliding ? *window : 0;
}

// query_pre_attn_scalar and soft-capping, which Gemma configs set.
void parse_gemma_fields(const Fields& fields, const ClassDefaults& defaults, ModelConfig& config) {
  if (fields.find("query_pre_attn_scalar") || defaults.gemma) {
    config.query_pre_attn_scalar = fields.number("query_pre_attn_scalar", 256);
    if (!(*config.query_pre_attn_scalar > 0))
      fail(fields.source(), ": query_pre_attn_scalar must be positive, got ", *config.query_pre_attn_scalar);
  }
  if (fields.find("final_logit_softcapping")) {
    config.final_logit_softcapping = fields.number("final_logit_softcapping", 0);
    if (!(*config.final_logit_softcapping > 0))
      fail(fields.source(), ": final_logit_softcapping must be positive or null, got ",
           *config.final_logit_softcapping);
  }
  if (fields.find("attn_logit_softcapping"))
    fail(fields.source(), ": attn_logit_softcapping is not supported (the attention kernels do not cap scores): "
                          "Gemma 3 checkpoints set it to null; Gemma 2's cannot run here yet");
  if (fields.boolean("use_bidirectional_attention", false))
    fail(fields.source(), ": use_bidirectional_attention is not supported: a causal LM attends causally");
}

// A multimodal Gemma 3 config (model_type "gemma3", Gemma3ForConditionalGeneration): its
// text_config is the text model's, run as Gemma3ForCausalLM; the token ids of the top level
// fill what it lacks.
json text_model_of_multimodal(const json& root, const std::string& source) {
  const auto text_config = root.find("text_config");
  if (text_config == root.end() || !text_config->is_object())
    fail(source, ": a gemma3 (multimodal) config needs a 'text_config' object: shardlm runs its text model");
  json text = *text_config;
  text["architectures"] = json::array({"Gemma3ForCausalLM"});
  if (!text.contains("model_type")) text["model_type"] = "gemma3_text";
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings", "dtype", "torch_dtype",
                          "quantization_config"})
    if (root.contains(key) && (!text.contains(key) || text[key].is_null())) text[key] = root[key];
  return text;
}

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  json root = parse_object(json_text, source);
  if (const auto type = root.find("model_type"); type != root.end() && *type == "gemma3")
    root = text_model_of_multimodal(root, source);
  Fields fields(root, source);
  ModelConfig config;
  config.source = source;
  if (const json* architectures = fields.find("architectures")) {
    if (!architectures->is_array()) fail(source, ": 'architectures' must be a list of class names");
    for (const json& name : *architectures) {
      if (!name.is_string()) fail(source, ": 'architectures' must hold strings");
      config.architectures.push_back(name.get<std::string>());
    }
  }
  if (config.architectures.empty())
    fail(source, ": 'architectures' is missing or empty; it names the model class, e.g. [\"LlamaForCausalLM\"]");
  config.model_type = fields.string("model_type", "");
  ClassDefaults defaults = defaults_for(config.model_type);

  const auto shape = [&](const std::string& key) {
    const auto fallback = defaults.shapes.find(key);
    return fields.find(key) || fallback == defaults.shapes.end() ? fields.positive_int(key) : fallback->second;
  };
  config.vocab_size = shape("vocab_size");
  config.hidden_size = shape("hidden_size");
  config.intermediate_size = shape("intermediate_size");
  config.num_hidden_layers = shape("num_hidden_layers");
  if (config.num_hidden_layers > 4096)
    fail(source, ": num_hidden_layers is ", config.num_hidden_layers, ", more than any model has (4096)");
  config.num_attention_heads = shape("num_attention_heads");
  config.num_key_value_heads = fields.optional_int("num_key_value_heads")
                                   .value_or(defaults.shapes.contains("num_key_value_heads")
                                                 ? defaults.shapes.at("num_key_value_heads")
                                                 : config.num_attention_heads);
  if (config.num_key_value_heads <= 0 || config.num_attention_heads % config.num_key_value_heads != 0)
    fail(source, ": num_attention_heads (", config.num_attention_heads,
         ") must be a positive multiple of num_key_value_heads (", config.num_key_value_heads, ")");
  const int64_t default_head_dim = defaults.head_dim ? defaults.head_dim : config.hidden_size / config.num_attention_heads;
  config.head_dim = fields.optional_int("head_dim").value_or(default_head_dim);
  if (config.head_dim <= 0 || config.head_dim % 2 != 0)
    fail(source, ": head_dim must be a positive even number, got ", config.head_dim);
  config.max_position_embeddings =
      fields.optional_int("max_position_embeddings").value_or(defaults.max_position_embeddings);
  if (config.max_position_embeddings <= 0) fail(source, ": max_position_embeddings must be positive");
  config.rms_norm_eps = fields.number("rms_norm_eps", defaults.rms_norm_eps);
  parse_rope(fields, defaults, config);
  config.hidden_act = fields.string("hidden_activation", fields.string("hidden_act", defaults.hidden_act));
  config.tie_word_embeddings = fields.boolean("tie_word_embeddings", defaults.tie_word_embeddings);
  parse_gemma_fields(fields, defaults, config);
  config.attention_bias = fields.boolean("attention_bias", defaults.attention_bias);
  config.mlp_bias = fields.boolean("mlp_bias", false);
  std::string dtype_text = fields.string("dtype", fields.string("torch_dtype", ""));
  if (!dtype_text.empty()) {
    try {
      config.torch_dtype = parse_dtype(dtype_text);
    } catch (const Error& error) {
      fail(source, ": 'torch_dtype': ", error.what());
    }
  }
  config.bos_token_id = fields.optional_int("bos_token_id");
  config.eos_token_id = fields.int_list("eos_token_id");
  config.pad_token_id = fields.optional_int("pad_token_id");
  parse_layer_types(fields, defaults, config);
  if (const json* quantization = fields.find("quantization_config")) {
    const json* method = quantization->is_object() && quantization->contains("quant_method")
                             ? &(*quantization)["quant_method"] : nullptr;
    const json* block = quantization->is_object() && quantization->contains("block_size")
                            ? &(*quantization)["block_size"] : nullptr;
    const bool ours = method && method->is_string() &&
                      (*method == int8_quant_method || *method == int4_quant_method);
    if (!ours)
      fail(source, ": quantization_config.quant_method ", method ? method->dump() : "(missing)",
           " is not supported: shardlm loads \"", int8_quant_method, "\" and \"", int4_quant_method,
           "\" checkpoints (written by `shardlm quantize`); quantize the original float weights with "
           "--quantize int8 or int4 instead");
    if (!block || !block->is_number_integer() || block->get<int64_t>() != Tensor::quant_block)
      fail(source, ": quantization_config.block_size must be ", Tensor::quant_block);
    config.quant_method = method->get<std::string>();
  }
  return config;
}

ModelConfig load_model_config(const ModelFiles& files) {
  return parse_model_config(files.read_text("config.json"), files.path_of("config.json"));
}

GenerationConfig load_generation_config(const ModelFiles& files, const ModelConfig& model) {
  GenerationConfig config;
  config.bos_token_id = model.bos_token_id;
  if (!model.eos_token_id.empty()) config.eos_token_id = model.eos_token_id;
  config.pad_token_id = model.pad_token_id;
  if (!files.exists("generation_config.json")) return config;
  std::string source = files.path_of("generation_config.json");
  json root = parse_object(files.read_text("generation_config.json"), source);
  Fields fields(root, source);
  if (fields.find("do_sample")) config.do_sample = fields.boolean("do_sample", false);
  if (auto value = fields.optional_int("max_new_tokens")) config.max_new_tokens = value;
  if (auto value = fields.optional_int("max_length")) config.max_length = value;
  if (fields.find("temperature")) config.temperature = static_cast<float>(fields.number("temperature", 1));
  if (auto value = fields.optional_int("top_k")) config.top_k = value;
  if (fields.find("top_p")) config.top_p = static_cast<float>(fields.number("top_p", 1));
  if (fields.find("min_p")) config.min_p = static_cast<float>(fields.number("min_p", 0));
  if (fields.find("repetition_penalty"))
    config.repetition_penalty = static_cast<float>(fields.number("repetition_penalty", 1));
  if (fields.find("eos_token_id")) config.eos_token_id = fields.int_list("eos_token_id");
  if (auto value = fields.optional_int("pad_token_id")) config.pad_token_id = value;
  if (auto value = fields.optional_int("bos_token_id")) config.bos_token_id = value;
  return config;
}

}  // namespace shardlm::io
