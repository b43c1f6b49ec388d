#include <cmath>

#include "backends/cpu/reference_kernels.h"

namespace shardlm::backends::reference {
namespace {

float dot_row(const float* input, const Tensor& weight, int64_t row, int64_t in) {
  float sum = 0;
  for (int64_t i = 0; i < in; ++i) sum += input[i] * load_f32(weight, row * in + i);
  return sum;
}

float bias_at(const Tensor& bias, int64_t index) { return bias.defined() && bias.numel() ? load_f32(bias, index) : 0.0f; }

}  // namespace

void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) {
  const int64_t rows = x.shape()[0], in = x.shape()[1], out_features = weight.shape()[0];
  float* result = out.mutable_data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_features; ++o)
      result[r * out_features + o] = dot_row(x.data<float>() + r * in, weight, o, in) + bias_at(bias, o);
}

void linear_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                     const Tensor& out) {
  const int64_t rows = x.shape()[0], in = x.shape()[1], out_features = weight.shape()[0];
  float* result = out.mutable_data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_features; ++o)
      result[r * out_features + o] = residual.data<float>()[r * out_features + o] +
                                     (dot_row(x.data<float>() + r * in, weight, o, in) + bias_at(bias, o));
}

void gated_linear(const Tensor& x, const Tensor& gate_weight, const Tensor& gate_bias, const Tensor& up_weight,
                  const Tensor& up_bias, const Tensor& out) {
  const int64_t rows = x.shape()[0], in = x.shape()[1], out_features = gate_weight.shape()[0];
  float* result = out.mutable_data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_features; ++o) {
      const float gate = dot_row(x.data<float>() + r * in, gate_weight, o, in) + bias_at(gate_bias, o);
      const float up = dot_row(x.data<float>() + r * in, up_weight, o, in) + bias_at(up_bias, o);
      result[r * out_features + o] = gate / (1.0f + std::exp(-gate)) * up;
    }
}

void rms_norm_linear(const Tensor& x, const Tensor& norm_weight, float eps, const Tensor& weight, const Tensor& bias,
                     const Tensor& out) {
  const int64_t rows = x.shape()[0], in = x.shape()[1], out_features = weight.shape()[0];
  float* result = out.mutable_data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* input = x.data<float>() + r * in;
    float sum_squares = 0;
    for (int64_t i = 0; i < in; ++i) sum_squares += input[i] * input[i];
    const float scale = 1.0f / std::sqrt(sum_squares / static_cast<float>(in) + eps);
    for (int64_t o = 0; o < out_features; ++o) {
      float sum = 0;
      for (int64_t i = 0; i < in; ++i)
        sum += (input[i] * scale * load_f32(norm_weight, i)) * load_f32(weight, o * in + i);
      result[r * out_features + o] = sum + bias_at(bias, o);
    }
  }
}

}  // namespace shardlm::backends::reference
