#include <cmath>
#include <vector>

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
  if (is_ggml_blocks(weight.dtype())) {
    std::vector<float> decoded(static_cast<size_t>(in));
    for (int64_t o = 0; o < out_features; ++o) {
      decode_row(weight, o, decoded.data());
      for (int64_t r = 0; r < rows; ++r) {
        float sum = 0;
        for (int64_t i = 0; i < in; ++i) sum += x.data<float>()[r * in + i] * decoded[static_cast<size_t>(i)];
        result[r * out_features + o] = sum + bias_at(bias, o);
      }
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_features; ++o)
      result[r * out_features + o] = dot_row(x.data<float>() + r * in, weight, o, in) + bias_at(bias, o);
}

}  // namespace shardlm::backends::reference
