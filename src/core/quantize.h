#pragma once
// Weight-only int8 quantization with one f16 scale per block of Tensor::quant_block
// (32) consecutive elements of a row: the Q8_0 layout of llama.cpp, stored as two
// plain tensors (int8 values, f16 scales) so any safetensors reader can open it.

#include "core/tensor.h"

namespace shardlm {

// weight: a float tensor [out, in] with in % Tensor::quant_block == 0. Returns an i8
// [out, in] tensor carrying its f16 scales [out, in / quant_block]: per block,
// scale = max|w| / 127 rounded to f16, q = round(w / scale), as Q8_0 does.
Tensor quantize_int8(const Tensor& weight);

// Whether a weight of this shape can be quantized by blocks.
bool quantizable(const Shape& shape);

}  // namespace shardlm
