#pragma once
// Random weights for any config.json an architecture here accepts: for benchmarks
// and tests at real model shapes without downloading a checkpoint.

#include <cstdint>
#include <map>
#include <string>

#include "io/config.h"
#include "models/causal_lm.h"

namespace shardlm::models {

// Every tensor required_weights(config) names, of `dtype`: norm weights 1, biases 0,
// matrices uniform with transformers' initializer_range (0.02) standard deviation.
// The same seed gives the same weights.
std::map<std::string, Tensor> random_weights(const io::ModelConfig& config, DType dtype, uint64_t seed);

}  // namespace shardlm::models
