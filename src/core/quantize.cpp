#include "core/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace shardlm {

bool quantizable(const Shape& shape) {
  return shape.rank() == 2 && shape[1] > 0 && shape[1] % Tensor::quant_block == 0;
}

namespace {

// A floating [out, in] weight quantized by blocks into `values` ([out, in] of `dtype`) and
// f16 scales [out, in / 32]: each row is widened to f32 once, and quantize_block(r, b,
// block values [32], scale bits) fills block b of row r. Runs of rows go to the threads.
template <typename QuantizeBlock>
Tensor quantize_blocks(const Tensor& weight, DType dtype, int threads, QuantizeBlock quantize_block) {
  SHARDLM_CHECK(is_floating(weight.dtype()) && quantizable(weight.shape()), "cannot quantize ", weight.describe(),
                " to ", dtype_name(dtype), ": it needs a floating [out, in] weight with in a multiple of ",
                Tensor::quant_block);
  const int64_t rows = weight.shape()[0], in = weight.shape()[1], blocks = in / Tensor::quant_block;
  Tensor values = Tensor::empty(weight.shape(), dtype);       // [rows, in]
  Tensor scales = Tensor::empty({rows, blocks}, DType::f16);  // [rows, in / 32]
  auto* scale_bits = scales.mutable_data<uint16_t>();
  const size_t row_bytes = static_cast<size_t>(in) * dtype_size(weight.dtype());
  constexpr int64_t rows_a_task = 64;
  ThreadPool pool(threads);
  pool.run((rows + rows_a_task - 1) / rows_a_task, [&](int64_t task) {
    std::vector<float> row(static_cast<size_t>(in));
    for (int64_t r = task * rows_a_task; r < std::min(rows, (task + 1) * rows_a_task); ++r) {
      convert_to_f32(static_cast<const std::byte*>(weight.raw()) + r * row_bytes, weight.dtype(), row.data(),
                     row.size());
      for (int64_t b = 0; b < blocks; ++b) {
        const float* block = row.data() + b * Tensor::quant_block;
        for (int64_t i = 0; i < Tensor::quant_block; ++i)
          SHARDLM_CHECK(std::isfinite(block[i]), "cannot quantize ", weight.describe(), ": row ", r,
                        " holds a non-finite value");
        quantize_block(values, r, b, block, scale_bits[r * blocks + b]);
        SHARDLM_CHECK(std::isfinite(f16_to_f32(scale_bits[r * blocks + b])), "cannot quantize ", weight.describe(),
                      ": row ", r, " has values beyond float16's range for a block scale");
      }
    }
  });
  return values.with_block_scales(std::move(scales));
}

}  // namespace

Tensor quantize_int8(const Tensor& weight, int threads) {
  return quantize_blocks(weight, DType::i8, threads, [](const Tensor& values, int64_t r, int64_t b,
                                                        const float* block, uint16_t& bits) {
    float magnitude = 0;
    for (int64_t i = 0; i < Tensor::quant_block; ++i) magnitude = std::max(magnitude, std::abs(block[i]));
    bits = f32_to_f16(magnitude / 127.0f);
    const float scale = f16_to_f32(bits);  // quantize against the scale as stored
    const float inverse = scale > 0 && std::isfinite(scale) ? 1.0f / scale : 0.0f;
    int8_t* q = values.mutable_data<int8_t>() + r * values.shape()[1] + b * Tensor::quant_block;
    for (int64_t i = 0; i < Tensor::quant_block; ++i)
      q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(block[i] * inverse), -127.0f, 127.0f));
  });
}

namespace {

// One block's int4 values and f16 scale bits for `values` [32].
void quantize_int4_block(const float* values, uint8_t* nibbles, uint16_t* scale_bits) {
  constexpr int n = Tensor::quant_block;
  float extreme = 0;  // the value of largest magnitude, signed
  for (int i = 0; i < n; ++i)
    if (std::abs(values[i]) > std::abs(extreme)) extreme = values[i];
  int best_q[n] = {};
  double best_error = std::numeric_limits<double>::infinity();
  uint16_t best_bits = 0;
  for (int step = 0; step <= 8 && extreme != 0; ++step) {
    const float target = -8.0f + 0.25f * static_cast<float>(step);  // extreme maps to -8 .. -6
    int q[n];
    const float inverse = target / extreme;
    double qq = 0, vq = 0;
    for (int i = 0; i < n; ++i) {
      q[i] = static_cast<int>(std::clamp(std::nearbyint(values[i] * inverse), -8.0f, 7.0f));
      qq += q[i] * q[i];
      vq += static_cast<double>(values[i]) * q[i];
    }
    // Q4_0's own scale first (step 0: extreme / -8), then each refit to its values.
    for (const double scale : {static_cast<double>(extreme) / target, qq > 0 ? vq / qq : 0.0}) {
      const uint16_t bits = f32_to_f16(static_cast<float>(scale));
      const double stored = f16_to_f32(bits);
      if (!std::isfinite(stored)) continue;
      double error = 0;
      for (int i = 0; i < n; ++i) {
        const double difference = values[i] - stored * q[i];
        error += difference * difference;
      }
      if (error < best_error) {
        best_error = error;
        best_bits = bits;
        std::copy(q, q + n, best_q);
      }
    }
  }
  // No candidate's scale fits f16: the caller's range check then names the row.
  if (extreme != 0 && !std::isfinite(best_error)) best_bits = f32_to_f16(extreme / -8.0f);
  *scale_bits = best_bits;
  for (int j = 0; j < n / 2; ++j)
    nibbles[j] = static_cast<uint8_t>((best_q[j] + 8) | ((best_q[j + n / 2] + 8) << 4));
}

}  // namespace

Tensor quantize_int4(const Tensor& weight, int threads) {
  return quantize_blocks(weight, DType::i4, threads, [](const Tensor& values, int64_t r, int64_t b,
                                                        const float* block, uint16_t& bits) {
    auto* nibbles = static_cast<uint8_t*>(values.mutable_raw()) + (r * values.shape()[1] + b * Tensor::quant_block) / 2;
    quantize_int4_block(block, nibbles, &bits);
  });
}

}  // namespace shardlm
