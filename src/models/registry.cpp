#include "models/registry.h"

#include <functional>
#include <map>

namespace shardlm::models {
namespace {

using Factory = std::function<std::unique_ptr<CausalLM>(const io::ModelConfig&, WeightLoader&)>;

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> table = {
      {"LlamaForCausalLM", create_llama},
      {"Qwen3ForCausalLM", create_qwen3},
      {"Qwen2ForCausalLM", create_qwen2},
      {"Glm4ForCausalLM", create_glm4},
  };
  return table;
}

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : factories()) names.push_back(name);
  return names;
}

static const Factory& factory_for(const io::ModelConfig& config) {
  const std::string& architecture = config.architectures.front();
  auto found = factories().find(architecture);
  if (found == factories().end()) {
    std::string supported;
    for (const std::string& name : supported_architectures()) supported += (supported.empty() ? "" : ", ") + name;
    fail(config.source, ": architecture '", architecture, "' is not supported (supported: ", supported, ")");
  }
  return found->second;
}

std::unique_ptr<CausalLM> create_causal_lm(const io::ModelConfig& config, const io::Checkpoint& checkpoint,
                                           const LoadOptions& options) {
  WeightLoader loader(checkpoint, options, config.source);
  std::unique_ptr<CausalLM> model = factory_for(config)(config, loader);
  const bool float32_weights = loader.matrix_dtype().value_or(DType::f32) == DType::f32;
  model->set_kv_cache_dtype(options.kv_cache_dtype.value_or(float32_weights ? DType::f32 : DType::bf16));
  return model;
}

std::vector<std::pair<std::string, Shape>> required_weights(const io::ModelConfig& config) {
  WeightLoader recorder(DType::bf16, config.source);
  factory_for(config)(config, recorder);
  return recorder.requested();
}

}  // namespace shardlm::models
