#include "backends/cpu/reference_kernels.h"

namespace shardlm::backends::reference {

void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) {
  const int64_t rows = x.shape()[0], in = x.shape()[1], out_features = weight.shape()[0];
  const float* input = x.data<float>();
  float* result = out.mutable_data<float>();
  for (int64_t o = 0; o < out_features; ++o) {
    const float bias_value = bias.defined() && bias.numel() ? load_f32(bias, o) : 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      float sum = 0;
      for (int64_t i = 0; i < in; ++i) sum += input[r * in + i] * load_f32(weight, o * in + i);
      result[r * out_features + o] = sum + bias_value;
    }
  }
}

}  // namespace shardlm::backends::reference
