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

}  // namespace shardlm::models
