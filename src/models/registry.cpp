#include "models/registry.h"

#include <functional>
#include <map>

#include "core/logging.h"

namespace shardlm::models {
namespace {

struct Architecture {
  std::function<std::unique_ptr<CausalLM>(const io::ModelConfig&, WeightLoader&)> create;
  std::function<parallel::TpPlan()> tp_plan;
};

const std::map<std::string, Architecture>& architectures() {
  static const std::map<std::string, Architecture> table = {
      {"LlamaForCausalLM", {create_llama, pre_norm_decoder_tp_plan}},
      {"Qwen3ForCausalLM", {create_qwen3, pre_norm_decoder_tp_plan}},
      {"Qwen2ForCausalLM", {create_qwen2, pre_norm_decoder_tp_plan}},
      {"Glm4ForCausalLM", {create_glm4, glm4_tp_plan}},
  };
  return table;
}

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : architectures()) names.push_back(name);
  return names;
}

static const Architecture& architecture_for(const io::ModelConfig& config) {
  const std::string& architecture = config.architectures.front();
  auto found = architectures().find(architecture);
  if (found == architectures().end()) {
    std::string supported;
    for (const std::string& name : supported_architectures()) supported += (supported.empty() ? "" : ", ") + name;
    fail(config.source, ": architecture '", architecture, "' is not supported (supported: ", supported, ")");
  }
  return found->second;
}

parallel::TpPlan default_tp_plan(const io::ModelConfig& config) { return architecture_for(config).tp_plan(); }

std::unique_ptr<CausalLM> create_causal_lm(const io::ModelConfig& config, const io::Checkpoint& checkpoint,
                                           const LoadOptions& options, const parallel::TensorParallel& tensor_parallel) {
  const Architecture& architecture = architecture_for(config);
  parallel::TensorParallel sharding = tensor_parallel;
  if (!sharding.group) sharding.group = parallel::single_process_group();
  const bool distributed = sharding.group->size() > 1;
  if (distributed) sharding.plan = architecture.tp_plan().overridden_by(tensor_parallel.plan);
  LoadOptions load_options = options;
  if (options.device && options.device->partitions() > 1) {
    SHARDLM_CHECK(!distributed, "tensor parallelism is either one SPMD program over a device's partitions or one "
                                "process per rank, not both");
    load_options.spmd_plan = architecture.tp_plan().overridden_by(options.spmd_plan);
  }
  WeightLoader loader(checkpoint, load_options, config.source, sharding);
  std::unique_ptr<CausalLM> model = architecture.create(config, loader);
  if (distributed) {
    for (const std::string& rule : loader.tensor_parallel().plan.unmatched_rules())
      if (tensor_parallel.plan.rules().contains(rule))
        log::warning(str_cat("tp_plan rule '", rule, "' matches no weight of ", config.architectures.front(),
                          " (keys are module or parameter names such as model.layers.*.self_attn.q_proj)"));
  }
  model->set_parallel_layout(sharding.group, loader.cache_kv_heads());
  const bool float32_weights = loader.matrix_dtype().value_or(DType::f32) == DType::f32;
  model->set_kv_cache_dtype(options.kv_cache_dtype.value_or(float32_weights ? DType::f32 : DType::bf16));
  return model;
}

std::vector<std::pair<std::string, Shape>> required_weights(const io::ModelConfig& config) {
  WeightLoader recorder(DType::bf16, config.source);
  architecture_for(config).create(config, recorder);
  return recorder.requested();
}

}  // namespace shardlm::models
