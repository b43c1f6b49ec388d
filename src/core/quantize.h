#pragma once
// Weight-only int8 quantization with one f16 scale per block of Tensor::quant_block
// (32) consecutive elements of a row: the Q8_0 layout of llama.cpp, stored as two
// plain tensors (int8 values, f16 scales) so any safetensors reader can open it.

#include <string>

#include "core/tensor.h"

namespace shardlm {

// weight: a float tensor [out, in] with in % Tensor::quant_block == 0. Returns an i8
// [out, in] tensor carrying its f16 scales [out, in / quant_block]: per block,
// scale = max|w| / 127 rounded to f16, q = round(w / scale), as Q8_0 does. The rows are
// split over `threads` threads (0: one a hardware thread); the result does not depend on
// how many.
Tensor quantize_int8(const Tensor& weight, int threads = 1);

// weight: as for quantize_int8. Returns an i4 [out, in] tensor (16 bytes a block) carrying
// its f16 scales [out, in / quant_block]. Values q in [-8, 7] stand for q * scale; byte j of
// a block holds element j in its low nibble and element j + 16 in its high one, each as
// q + 8 (the layout of llama.cpp's Q4_0, whose scale sits between the blocks instead).
// Per block, the scale is the one of least squared error among candidates that map the
// largest magnitude to -8 .. -6 (Q4_0 takes -8 alone), each refitted by least squares to
// its rounded values: never less accurate than Q4_0's rule at the same 4.5 bits a weight.
// Threads as for quantize_int8.
Tensor quantize_int4(const Tensor& weight, int threads = 1);

// Under int4, the token embedding and the LM head (often one tensor) stay int8: every
// logit is a dot product with a row of the head, which 4-bit rows perturb more than any
// other matrix (llama.cpp's 4-bit types keep the output at 6 bits or more for the same
// reason). On the real Gemma 3 270M (whose embedding is 62% of its weights) perplexity
// goes from 21.7 with a 4-bit head to 19.9 (the float weights: 14.9).
inline bool keeps_eight_bits_under_int4(const std::string& name) {
  return name == "model.embed_tokens.weight" || name == "lm_head.weight";
}

// Element k of row `row` of an int4 weight, unscaled: an integer in [-8, 7].
inline int int4_value(const uint8_t* row, int64_t k) {
  const uint8_t byte = row[(k / 32) * 16 + (k % 16)];
  return ((k % 32) < 16 ? (byte & 0x0F) : (byte >> 4)) - 8;
}

// Whether a weight of this shape can be quantized by blocks.
bool quantizable(const Shape& shape);

}  // namespace shardlm
