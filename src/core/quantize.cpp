#include "core/quantize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace shardlm {

bool quantizable(const Shape& shape) {
  return shape.rank() == 2 && shape[1] > 0 && shape[1] % Tensor::quant_block == 0;
}

Tensor quantize_int8(const Tensor& weight) {
  SHARDLM_CHECK(is_floating(weight.dtype()) && quantizable(weight.shape()), "cannot quantize ", weight.describe(),
                " to int8: it needs a floating [out, in] weight with in a multiple of ", Tensor::quant_block);
  const int64_t rows = weight.shape()[0], in = weight.shape()[1], blocks = in / Tensor::quant_block;
  Tensor values = Tensor::empty(weight.shape(), DType::i8);      // [rows, in]
  Tensor scales = Tensor::empty({rows, blocks}, DType::f16);     // [rows, in / 32]
  auto* q = values.mutable_data<int8_t>();
  auto* scale_bits = scales.mutable_data<uint16_t>();
  std::vector<float> row(static_cast<size_t>(in));
  const size_t row_bytes = static_cast<size_t>(in) * dtype_size(weight.dtype());
  for (int64_t r = 0; r < rows; ++r) {
    convert_to_f32(static_cast<const std::byte*>(weight.raw()) + r * row_bytes, weight.dtype(), row.data(),
                   row.size());
    for (int64_t b = 0; b < blocks; ++b) {
      const float* block = row.data() + b * Tensor::quant_block;
      float magnitude = 0;
      for (int64_t i = 0; i < Tensor::quant_block; ++i) magnitude = std::max(magnitude, std::abs(block[i]));
      SHARDLM_CHECK(std::isfinite(magnitude), "cannot quantize ", weight.describe(), ": row ", r,
                    " holds a non-finite value");
      const uint16_t bits = f32_to_f16(magnitude / 127.0f);
      const float scale = f16_to_f32(bits);  // quantize against the scale as stored
      SHARDLM_CHECK(std::isfinite(scale), "cannot quantize ", weight.describe(), ": row ", r,
                    " has values beyond float16's range for a block scale (", magnitude, ")");
      const float inverse = scale > 0 ? 1.0f / scale : 0.0f;
      scale_bits[r * blocks + b] = bits;
      for (int64_t i = 0; i < Tensor::quant_block; ++i)
        q[r * in + b * Tensor::quant_block + i] =
            static_cast<int8_t>(std::clamp(std::nearbyint(block[i] * inverse), -127.0f, 127.0f));
    }
  }
  return values.with_block_scales(std::move(scales));
}

}  // namespace shardlm
