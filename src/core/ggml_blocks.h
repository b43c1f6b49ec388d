#pragma once
// The weight types of GGUF files (ggml's type ids) and the scalar reference decoders of
// the ones shardlm reads: F32, F16, BF16, Q8_0, Q5_0, Q4_0 and the k-quants Q4_K and Q6_K
// (a Q4_K_M file holds Q4_K and Q6_K, and Q5_0 or Q8_0 where rows are not whole 256-blocks). A quantized type stores a row as blocks of `block_elements` values
// in `block_bytes` bytes, each block with its own float16 scale(s); a row's length is a
// whole number of blocks. Layouts as llama.cpp's ggml-common.h defines them.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"

namespace shardlm {

enum class GgmlType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q5_0 = 6,
  q8_0 = 8,
  q4_k = 12,
  q6_k = 14,
  bf16 = 30,
};

struct GgmlTypeInfo {
  uint32_t id = 0;
  const char* name = "";  // as llama.cpp names it: "Q4_K"
  int64_t block_elements = 1;
  int64_t block_bytes = 0;
  bool readable = false;  // one of the types above, which shardlm decodes
};

// Every type id ggml has defined (so that a file of a type shardlm cannot read is refused
// by its name, with its size known); nullopt for an id ggml never had.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
// "F32, F16, BF16, Q8_0, Q5_0, Q4_0, Q4_K, Q6_K": the readable types, for messages.
std::string readable_ggml_types();

// Decodes `elements` values (a whole number of blocks) stored as `type` into f32.
// The scalar reference: every faster decoder is checked against it.
void dequantize_ggml(GgmlType type, const std::byte* blocks, float* out, int64_t elements);

// A weight [rows, row length] stored as `type`, as the CPU kernels read it, every value
// the same number the file's blocks stand for: F32, F16, BF16, Q4_K and Q6_K are `blocks`
// themselves (a view of them, kept alive by `owner`; q4_k, q6_k tensors for the k-quants);
// Q8_0 and Q5_0 become int8 and Q4_0 int4 values with their f16 scales beside them (a copy:
// the same codes and scale bits, the scale moved out of each block; Q5_0's 5-bit codes in
// 8 bits). The k-quants' own scales are 6- and 8-bit factors of a super-block's, which no
// f16 scale per 32 values reproduces.
Tensor ggml_weight(GgmlType type, std::shared_ptr<const void> owner, const std::byte* blocks, const Shape& shape);
// The dtype ggml_weight gives a tensor stored as `type`.
DType ggml_weight_dtype(GgmlType type);

// `weight` (float, int8 or int4 with block scales, q4_k or q6_k) decoded to a new f32 tensor.
Tensor dequantize_weight(const Tensor& weight);

}  // namespace shardlm
