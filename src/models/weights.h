#pragma once
// Reads named weights out of a checkpoint, checking each shape against what the
// config implies, and converting dtype only when asked to.

#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "models/causal_lm.h"

namespace shardlm::models {

class WeightLoader {
 public:
  WeightLoader(const io::Checkpoint& checkpoint, const LoadOptions& options, std::string config_source)
      : checkpoint_(&checkpoint), options_(options), config_source_(std::move(config_source)) {}
  // Reads nothing: records the name and shape of every tensor asked for and hands
  // back unbacked tensors of `dtype` (what an architecture needs, for writing models).
  WeightLoader(DType dtype, std::string config_source)
      : options_{.dtype = dtype}, config_source_(std::move(config_source)) {}

  // The tensor `name`, which must exist with shape `expected`. An int8 tensor with a
  // "<name>_scale" tensor beside it is loaded with its block scales.
  Tensor require(const std::string& name, const Shape& expected);
  bool contains(const std::string& name) const { return !checkpoint_ || checkpoint_->contains(name); }
  size_t loaded_bytes() const { return loaded_bytes_; }
  // The dtype of the first matrix loaded (after conversion or quantization).
  std::optional<DType> matrix_dtype() const { return matrix_dtype_; }
  const std::vector<std::pair<std::string, Shape>>& requested() const { return requested_; }

 private:
  Tensor load_quantized(const std::string& name, Tensor values) const;

  const io::Checkpoint* checkpoint_ = nullptr;
  LoadOptions options_;
  std::string config_source_;
  size_t loaded_bytes_ = 0;
  std::optional<DType> matrix_dtype_;
  std::vector<std::pair<std::string, Shape>> requested_;
};

// The scale tensor of an int8 weight in a checkpoint: "<weight name>_scale".
inline std::string block_scale_name(const std::string& weight_name) { return weight_name + "_scale"; }

}  // namespace shardlm::models
