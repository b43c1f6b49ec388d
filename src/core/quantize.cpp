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

// Rounds half to even as std::nearbyint does in the default rounding mode, for |x| < 2^22,
// without a library call: adding 1.5 * 2^23 leaves no fraction bits. Exact only if x * inverse
// is rounded before the add, hence -ffp-contract=off on this file (CMakeLists.txt).
float round_small(float x) {
  constexpr float shift = 12582912.0f;  // 1.5 * 2^23
  return (x + shift) - shift;
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
      q[i] = static_cast<int8_t>(std::clamp(round_small(block[i] * inverse), -127.0f, 127.0f));
  });
}

namespace {

// One block's int4 values and f16 scale bits for `values` [32]. Nine roundings (the extreme
// mapped to -8 .. -6), each scored at two scales (Q4_0's own, then the least-squares refit to its
// values): the one of least squared error wins, the first on a tie. The inner loops run across
// the roundings, padded to 12 so that they vectorize, while each rounding's sums still add their
// terms in order; one rounding at a time, the chains of dependent double adds were most of the
// quantizer's time.
void quantize_int4_block(const float* values, uint8_t* nibbles, uint16_t* scale_bits) {
  constexpr int n = Tensor::quant_block, steps = 9, lanes = 12;
  float extreme = 0;  // the value of largest magnitude, signed
  for (int i = 0; i < n; ++i)
    if (std::abs(values[i]) > std::abs(extreme)) extreme = values[i];
  std::fill_n(nibbles, n / 2, uint8_t{0x88});  // all zeros, unless a rounding below wins
  *scale_bits = 0;
  if (extreme == 0) return;
  float q[n][lanes];  // [32, step]: each value rounded at each step's scale
  for (int step = 0; step < lanes; ++step) {
    const float inverse = (-8.0f + 0.25f * static_cast<float>(step)) / extreme;
    for (int i = 0; i < n; ++i) q[i][step] = std::clamp(round_small(values[i] * inverse), -8.0f, 7.0f);
  }
  double qq[lanes] = {}, vq[lanes] = {};
  for (int i = 0; i < n; ++i)
    for (int step = 0; step < lanes; ++step) {
      qq[step] += static_cast<double>(q[i][step]) * q[i][step];
      vq[step] += static_cast<double>(values[i]) * q[i][step];
    }
  uint16_t bits[2][lanes];  // [Q4_0's scale or the refit, step]
  double stored[2][lanes];  // the scales as f16 holds them
  for (int step = 0; step < lanes; ++step) {
    const double q4_0 = static_cast<double>(extreme) / (-8.0f + 0.25f * static_cast<float>(step));
    const double refit = qq[step] > 0 ? vq[step] / qq[step] : 0.0;
    for (const int kind : {0, 1}) {
      bits[kind][step] = f32_to_f16(static_cast<float>(kind == 0 ? q4_0 : refit));
      stored[kind][step] = f16_to_f32(bits[kind][step]);
    }
  }
  double error[2][lanes] = {};
  for (int i = 0; i < n; ++i)
    for (int kind = 0; kind < 2; ++kind)
      for (int step = 0; step < lanes; ++step) {
        const double difference = values[i] - stored[kind][step] * q[i][step];
        error[kind][step] += difference * difference;
      }
  int best = -1;
  double best_error = std::numeric_limits<double>::infinity();
  for (int candidate = 0; candidate < 2 * steps; ++candidate) {
    const int step = candidate / 2, kind = candidate % 2;
    if (std::isfinite(stored[kind][step]) && error[kind][step] < best_error) {
      best = candidate;
      best_error = error[kind][step];
    }
  }
  if (best < 0) {  // no scale fits f16: the caller's range check names the row
    *scale_bits = f32_to_f16(extreme / -8.0f);
    return;
  }
  const int step = best / 2;
  *scale_bits = bits[best % 2][step];
  for (int j = 0; j < n / 2; ++j)
    nibbles[j] = static_cast<uint8_t>(static_cast<int>(q[j][step] + 8) | (static_cast<int>(q[j + n / 2][step] + 8) << 4));
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
