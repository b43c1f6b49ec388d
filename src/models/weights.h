#pragma once
// Reads named weights out of a checkpoint, checking each shape against what the
// config implies, and converting dtype only when asked to.

#include <string>

#include "io/safetensors.h"
#include "models/causal_lm.h"

namespace shardlm::models {

class WeightLoader {
 public:
  WeightLoader(const io::Checkpoint& checkpoint, const LoadOptions& options, std::string config_source)
      : checkpoint_(checkpoint), options_(options), config_source_(std::move(config_source)) {}

  // The tensor `name`, which must exist with shape `expected`.
  Tensor require(const std::string& name, const Shape& expected);
  bool contains(const std::string& name) const { return checkpoint_.contains(name); }
  size_t loaded_bytes() const { return loaded_bytes_; }

 private:
  const io::Checkpoint& checkpoint_;
  const LoadOptions& options_;
  std::string config_source_;
  size_t loaded_bytes_ = 0;
};

}  // namespace shardlm::models
