#include "models/weights.h"

#include "core/quantize.h"
#include "io/model_files.h"

namespace shardlm::models {

Tensor WeightLoader::load_quantized(const std::string& name, Tensor values) const {
  const std::string scale_name = block_scale_name(name);
  if (!checkpoint_->contains(scale_name))
    fail("tensor '", name, "' is int8 but '", scale_name,
         "' (its block scales) is missing: only int8 checkpoints written by `shardlm quantize` can be loaded");
  Tensor scales = checkpoint_->tensor(scale_name);
  try {
    return values.with_block_scales(std::move(scales));
  } catch (const Error& error) {
    fail("tensor '", name, "': ", error.what());
  }
}

Tensor WeightLoader::require(const std::string& name, const Shape& expected) {
  if (!checkpoint_) {
    requested_.emplace_back(name, expected);
    return Tensor::empty(expected, *options_.dtype);
  }
  Tensor tensor = checkpoint_->tensor(name);
  if (tensor.shape() != expected)
    fail("tensor '", name, "' has shape ", tensor.shape().to_string(), " but ", config_source_, " implies ",
         expected.to_string(), ": config.json does not match the weights");
  if (tensor.dtype() == DType::i8) {
    tensor = load_quantized(name, std::move(tensor));
  } else {
    if (!is_floating(tensor.dtype()))
      fail("tensor '", name, "' is ", dtype_name(tensor.dtype()),
           "; weights must be float32, bfloat16, float16, or int8 with block scales");
    const Tensor stored = tensor;
    if (options_.dtype && *options_.dtype != tensor.dtype()) tensor = tensor.to_dtype(*options_.dtype);
    if (options_.quantize_int8 && quantizable(tensor.shape())) tensor = quantize_int8(tensor);
    if (tensor.raw() != stored.raw()) io::release_mapped_pages(stored.raw(), stored.nbytes());
  }
  if (!matrix_dtype_ && tensor.shape().rank() == 2) matrix_dtype_ = tensor.dtype();
  loaded_bytes_ += tensor.nbytes() + (tensor.quantized() ? tensor.block_scales().nbytes() : 0);
  return tensor;
}

}  // namespace shardlm::models
