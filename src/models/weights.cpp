#include "models/weights.h"

namespace shardlm::models {

Tensor WeightLoader::require(const std::string& name, const Shape& expected) {
  Tensor tensor = checkpoint_.tensor(name);
  if (tensor.shape() != expected)
    fail("tensor '", name, "' has shape ", tensor.shape().to_string(), " but ", config_source_, " implies ",
         expected.to_string(), ": config.json does not match the weights");
  if (!is_floating(tensor.dtype()))
    fail("tensor '", name, "' is ", dtype_name(tensor.dtype()), "; weights must be float32, bfloat16 or float16");
  if (options_.dtype && *options_.dtype != tensor.dtype()) tensor = tensor.to_dtype(*options_.dtype);
  loaded_bytes_ += tensor.nbytes();
  return tensor;
}

}  // namespace shardlm::models
