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

}  // namespace shardlm
