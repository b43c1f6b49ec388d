// Linear layers: each weight row is widened to f32 once and dotted with every input
// row while it is in cache; dots run on 8-lane vectors.
#include <cmath>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/reference_kernels.h"
#include "backends/cpu/simd.h"

namespace shardlm::backends::cpu {
namespace {

// Row `row` of an [out, in] weight as f32: the stored row itself, or widened into `buffer`.
const float* weight_row(const Tensor& weight, int64_t row, int64_t in, float* buffer) {
  if (weight.dtype() == DType::f32) return weight.data<float>() + row * in;
  convert_to_f32(static_cast<const std::byte*>(weight.raw()) + row * in * dtype_size(weight.dtype()), weight.dtype(),
                 buffer, static_cast<size_t>(in));
  return buffer;
}

float bias_at(const Tensor& bias, int64_t index) {
  return bias.defined() && bias.numel() ? reference::load_f32(bias, index) : 0.0f;
}

// Per-thread scratch that grows to the largest size seen, then stays: no allocation
// once a shape has run.
float* scratch(std::vector<float>& buffer, int64_t size) {
  if (buffer.size() < static_cast<size_t>(size)) buffer.resize(static_cast<size_t>(size));
  return buffer.data();
}

// out[r, o] = finish(r, o, x[r] . weight[o] + bias[o]) for every row r and output o.
template <typename Finish>
void linear_rows(const float* x, int64_t rows, int64_t in, const Tensor& weight, const Tensor& bias, Finish finish) {
  thread_local std::vector<float> row_buffer;
  float* buffer = scratch(row_buffer, in);
  const int64_t out_features = weight.shape()[0];
  for (int64_t o = 0; o < out_features; ++o) {
    const float* w = weight_row(weight, o, in, buffer);
    const float b = bias_at(bias, o);
    for (int64_t r = 0; r < rows; ++r) finish(r, o, dot(x + r * in, w, in) + b);
  }
}

}  // namespace

void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) {
  const int64_t out_features = weight.shape()[0];
  float* result = out.mutable_data<float>();
  linear_rows(x.data<float>(), x.shape()[0], x.shape()[1], weight, bias,
              [&](int64_t r, int64_t o, float value) { result[r * out_features + o] = value; });
}

void linear_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                     const Tensor& out) {
  const int64_t out_features = weight.shape()[0];
  const float* add = residual.data<float>();
  float* result = out.mutable_data<float>();
  linear_rows(x.data<float>(), x.shape()[0], x.shape()[1], weight, bias, [&](int64_t r, int64_t o, float value) {
    result[r * out_features + o] = add[r * out_features + o] + value;
  });
}

void gated_linear(const Tensor& x, const Tensor& gate_weight, const Tensor& gate_bias, const Tensor& up_weight,
                  const Tensor& up_bias, const Tensor& out) {
  thread_local std::vector<float> gate_buffer, up_buffer;
  const int64_t rows = x.shape()[0], in = x.shape()[1], out_features = gate_weight.shape()[0];
  float* gate_scratch = scratch(gate_buffer, in);
  float* up_scratch = scratch(up_buffer, in);
  float* result = out.mutable_data<float>();
  for (int64_t o = 0; o < out_features; ++o) {
    const float* gate_row = weight_row(gate_weight, o, in, gate_scratch);
    const float* up_row = weight_row(up_weight, o, in, up_scratch);
    const float gate_b = bias_at(gate_bias, o), up_b = bias_at(up_bias, o);
    for (int64_t r = 0; r < rows; ++r) {
      const float* input = x.data<float>() + r * in;
      const float gate = dot(input, gate_row, in) + gate_b;
      result[r * out_features + o] = gate / (1.0f + std::exp(-gate)) * (dot(input, up_row, in) + up_b);
    }
  }
}

void rms_norm_linear(const Tensor& x, const Tensor& norm_weight, float eps, const Tensor& weight, const Tensor& bias,
                     const Tensor& out) {
  thread_local std::vector<float> normed_buffer;
  const int64_t rows = x.shape()[0], in = x.shape()[1];
  float* normed = scratch(normed_buffer, rows * in);
  for (int64_t r = 0; r < rows; ++r) {
    const float* input = x.data<float>() + r * in;
    const float scale = 1.0f / std::sqrt(dot(input, input, in) / static_cast<float>(in) + eps);
    for (int64_t i = 0; i < in; ++i) normed[r * in + i] = input[i] * scale * reference::load_f32(norm_weight, i);
  }
  const int64_t out_features = weight.shape()[0];
  float* result = out.mutable_data<float>();
  linear_rows(normed, rows, in, weight, bias,
              [&](int64_t r, int64_t o, float value) { result[r * out_features + o] = value; });
}

}  // namespace shardlm::backends::cpu
