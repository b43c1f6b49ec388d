#pragma once
// Element types, named as Hugging Face and safetensors name them.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <shardlm/export.h>

namespace shardlm {

enum class DType : uint8_t { f32, bf16, f16, i32, i64, i8, u8 };

SHARDLM_API size_t dtype_size(DType dtype);
// "float32", "bfloat16", ... (the torch_dtype spelling).
SHARDLM_API std::string_view dtype_name(DType dtype);
// Accepts torch spellings ("bfloat16", "torch.float16", "float") and short ones ("bf16", "f32").
// Throws shardlm::Error listing the accepted names.
SHARDLM_API DType parse_dtype(std::string_view name);
SHARDLM_API bool is_floating(DType dtype);

}  // namespace shardlm
