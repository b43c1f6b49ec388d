#include "io/config.h"

#include "core/tensor.h"

#include <algorithm>
#include <cmath>
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
  bool head_dim_is_128 = false;  // Qwen3Config, Glm4Config; else hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 2048;
  double partial_rotary_factor = 1.0;
  bool attention_bias = false;
};

ClassDefaults defaults_for(const std::string& model_type) {
  if (model_type == "qwen3") return {.head_dim_is_128 = true, .max_position_embeddings = 32768};
  if (model_type == "qwen2") return {.max_position_embeddings = 32768, .attention_bias = true};
  if (model_type == "glm4")
    return {.head_dim_is_128 = true, .rms_norm_eps = 1.5625e-7, .max_position_embeddings = 32768,
            .partial_rotary_factor = 0.5, .attention_bias = true};
  return {};  // LlamaConfig
}

RopeConfig parse_rope(const Fields& top, const ClassDefaults& defaults) {
  RopeConfig rope;
  rope.partial_rotary_factor = top.number("partial_rotary_factor", defaults.partial_rotary_factor);
  rope.theta = top.number("rope_theta", rope.theta);
  // transformers v5 writes rope_parameters; older files write rope_scaling. Either may hold rope_theta.
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const json* section = top.find(key);
    if (!section) continue;
    if (!section->is_object()) fail(top.source(), ": '", key, "' must be an object or null");
    Fields fields(*section, str_cat(top.source(), " ", key));
    rope.theta = fields.number("rope_theta", rope.theta);
    rope.rope_type = fields.string("rope_type", fields.string("type", rope.rope_type));
    rope.factor = fields.number("factor", rope.factor);
    rope.low_freq_factor = fields.number("low_freq_factor", rope.low_freq_factor);
    rope.high_freq_factor = fields.number("high_freq_factor", rope.high_freq_factor);
    rope.original_max_position_embeddings =
        fields.optional_int("original_max_position_embeddings").value_or(rope.original_max_position_embeddings);
    rope.partial_rotary_factor = fields.number("partial_rotary_factor", rope.partial_rotary_factor);
  }
  if (rope.rope_type != "default" && rope.rope_type != "linear" && rope.rope_type != "llama3")
    fail(top.source(), ": rope_type '", rope.rope_type,
         "' is not supported (supported: default, linear, llama3)");
  if (rope.rope_type == "llama3" && rope.original_max_position_embeddings <= 0)
    fail(top.source(), ": rope_type llama3 needs original_max_position_embeddings");
  if (rope.rope_type != "default" && rope.factor <= 0)
    fail(top.source(), ": rope scaling 'factor' must be positive");
  if (!(rope.partial_rotary_factor > 0 && rope.partial_rotary_factor <= 1))
    fail(top.source(), ": partial_rotary_factor must be in (0, 1]");
  return rope;
}

void parse_layer_types(const Fields& fields, ModelConfig& config) {
  const bool qwen_rule = config.model_type == "qwen2" || config.model_type == "qwen3";
  // Qwen configs drop sliding_window unless use_sliding_window is set; others use it as given.
  const bool windowed = qwen_rule ? fields.boolean("use_sliding_window", false) : true;
  const std::optional<int64_t> window = windowed ? fields.optional_int("sliding_window") : std::nullopt;
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

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  json root = parse_object(json_text, source);
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

  config.vocab_size = fields.positive_int("vocab_size");
  config.hidden_size = fields.positive_int("hidden_size");
  config.intermediate_size = fields.positive_int("intermediate_size");
  config.num_hidden_layers = fields.positive_int("num_hidden_layers");
  config.num_attention_heads = fields.positive_int("num_attention_heads");
  config.num_key_value_heads = fields.optional_int("num_key_value_heads").value_or(config.num_attention_heads);
  if (config.num_key_value_heads <= 0 || config.num_attention_heads % config.num_key_value_heads != 0)
    fail(source, ": num_attention_heads (", config.num_attention_heads,
         ") must be a positive multiple of num_key_value_heads (", config.num_key_value_heads, ")");
  int64_t default_head_dim = defaults.head_dim_is_128 ? 128 : config.hidden_size / config.num_attention_heads;
  config.head_dim = fields.optional_int("head_dim").value_or(default_head_dim);
  if (config.head_dim <= 0 || config.head_dim % 2 != 0)
    fail(source, ": head_dim must be a positive even number, got ", config.head_dim);
  config.max_position_embeddings =
      fields.optional_int("max_position_embeddings").value_or(defaults.max_position_embeddings);
  if (config.max_position_embeddings <= 0) fail(source, ": max_position_embeddings must be positive");
  config.rms_norm_eps = fields.number("rms_norm_eps", defaults.rms_norm_eps);
  config.rope = parse_rope(fields, defaults);
  config.hidden_act = fields.string("hidden_act", "silu");
  config.tie_word_embeddings = fields.boolean("tie_word_embeddings", false);
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
  parse_layer_types(fields, config);
  if (const json* quantization = fields.find("quantization_config")) {
    const json* method = quantization->is_object() && quantization->contains("quant_method")
                             ? &(*quantization)["quant_method"] : nullptr;
    const json* block = quantization->is_object() && quantization->contains("block_size")
                            ? &(*quantization)["block_size"] : nullptr;
    if (!method || !method->is_string() || method->get<std::string>() != int8_quant_method)
      fail(source, ": quantization_config.quant_method ", method ? method->dump() : "(missing)",
           " is not supported: shardlm loads \"", int8_quant_method,
           "\" checkpoints (written by `shardlm quantize`); quantize the original float weights with "
           "--quantize int8 instead");
    if (!block || !block->is_number_integer() || block->get<int64_t>() != Tensor::quant_block)
      fail(source, ": quantization_config.block_size must be ", Tensor::quant_block);
    config.quant_method = int8_quant_method;
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
