#pragma once
// Element types, named as Hugging Face and safetensors name them.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <shardlm/export.h>

namespace shardlm {

// i4: signed 4-bit weight values, two a byte (core/quantize.h gives their layout); a
// tensor of them always carries block scales. q4_k, q6_k: weights as a GGUF file stores
// them, llama.cpp's Q4_K and Q6_K super-blocks of 256 values with their scales inside
// (core/ggml_blocks.h), a row a whole number of them.
enum class DType : uint8_t { f32, bf16, f16, i32, i64, i8, u8, i4, q4_k, q6_k };

// Bytes of one element; i4, q4_k and q6_k have no whole-byte size (an error): use dtype_bytes.
SHARDLM_API size_t dtype_size(DType dtype);
// Bytes of `count` elements (i4: two a byte, rounded up; q4_k, q6_k: `count` a multiple of 256).
SHARDLM_API size_t dtype_bytes(DType dtype, int64_t count);
// "float32", "bfloat16", ... (the torch_dtype spelling).
SHARDLM_API std::string_view dtype_name(DType dtype);
// Accepts torch spellings ("bfloat16", "torch.float16", "float") and short ones ("bf16", "f32").
// Throws shardlm::Error listing the accepted names.
SHARDLM_API DType parse_dtype(std::string_view name);
SHARDLM_API bool is_floating(DType dtype);
// q4_k or q6_k: super-blocks that carry their own scales.
SHARDLM_API bool is_ggml_blocks(DType dtype);

}  // namespace shardlm
