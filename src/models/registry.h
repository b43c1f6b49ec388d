#pragma once
// Architecture factories. Adding an architecture: one file in src/models/ with a
// create_<name> function, declared here and listed in registry.cpp.

#include <memory>

#include "models/causal_lm.h"
#include "models/weights.h"

namespace shardlm::models {

std::unique_ptr<CausalLM> create_llama(const io::ModelConfig& config, WeightLoader& loader);
std::unique_ptr<CausalLM> create_qwen3(const io::ModelConfig& config, WeightLoader& loader);
std::unique_ptr<CausalLM> create_qwen2(const io::ModelConfig& config, WeightLoader& loader);
std::unique_ptr<CausalLM> create_glm4(const io::ModelConfig& config, WeightLoader& loader);
std::unique_ptr<CausalLM> create_gemma3(const io::ModelConfig& config, WeightLoader& loader);

// Default tensor-parallel plans (transformers' base_model_tp_plan with the "model." prefix).
parallel::TpPlan pre_norm_decoder_tp_plan();  // Llama, Qwen2, Qwen3, Gemma 3
parallel::TpPlan glm4_tp_plan();

}  // namespace shardlm::models
