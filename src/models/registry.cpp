#include "models/registry.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <vector>

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
      {"Gemma3ForCausalLM", {create_gemma3, pre_norm_decoder_tp_plan}},
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

namespace {

// "a, b, c (and 7 more)": the first few of a long list, as one line.
std::string first_names(const std::vector<std::string>& names) {
  constexpr size_t shown = 8;
  std::string text;
  for (size_t i = 0; i < std::min(names.size(), shown); ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > shown) text += str_cat(" (and ", names.size() - shown, " more)");
  return text;
}

// As transformers' "missing keys", but an error: nothing here starts from random weights.
// Every missing tensor is listed at once, before any is read.
void check_no_weight_missing(const io::ModelConfig& config, const io::Checkpoint& checkpoint) {
  std::vector<std::string> missing;
  for (const auto& [name, shape] : required_weights(config))
    if (!checkpoint.contains(name)) missing.push_back(name);
  if (missing.empty()) return;
  fail("the checkpoint lacks ", missing.size(), " weight", missing.size() == 1 ? "" : "s", " that ",
       config.architectures.front(), " as ", config.source, " describes it needs: ", first_names(missing),
       ". The weights are incomplete (a shard missing?), or config.json does not describe them (e.g. "
       "attention_bias, tie_word_embeddings, num_hidden_layers)");
}

// As transformers' "unexpected keys": a warning, since the model runs without them.
void warn_of_unused_weights(const io::ModelConfig& config, const io::Checkpoint& checkpoint,
                            const std::set<std::string>& read) {
  std::vector<std::string> unused;
  for (const std::string& name : checkpoint.names()) {
    // Tied: the head is the embedding, whatever copy was saved. inv_freq: a buffer older
    // transformers saved, recomputed from config.json.
    const bool tolerated = (config.tie_word_embeddings && name == "lm_head.weight") ||
                           name.ends_with(".rotary_emb.inv_freq");
    if (!read.contains(name) && !tolerated) unused.push_back(name);
  }
  if (unused.empty()) return;
  log::warning(str_cat(unused.size(), " weight", unused.size() == 1 ? "" : "s", " of the checkpoint ",
                       unused.size() == 1 ? "is" : "are", " not used by ", config.architectures.front(), " as ",
                       config.source, " describes it: ", first_names(unused),
                       ". If the model should use them, config.json is wrong (e.g. attention_bias is false but "
                       "the checkpoint has q_proj.bias)"));
}

}  // namespace

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
  check_no_weight_missing(config, checkpoint);
  WeightLoader loader(checkpoint, load_options, config.source, sharding);
  std::unique_ptr<CausalLM> model = architecture.create(config, loader);
  if (sharding.group->rank() == 0) warn_of_unused_weights(config, checkpoint, loader.read_names());
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
