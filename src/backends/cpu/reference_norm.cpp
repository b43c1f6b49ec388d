#include <cmath>

#include "backends/cpu/reference_kernels.h"

namespace shardlm::backends::reference {

void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t dim = x.shape().back(), rows = x.numel() / dim;
  const float* input = x.data<float>();
  float* result = out.mutable_data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float sum_squares = 0;
    for (int64_t j = 0; j < dim; ++j) sum_squares += input[r * dim + j] * input[r * dim + j];
    const float scale = 1.0f / std::sqrt(sum_squares / static_cast<float>(dim) + eps);
    for (int64_t j = 0; j < dim; ++j) result[r * dim + j] = input[r * dim + j] * scale * load_f32(weight, j);
  }
}

}  // namespace shardlm::backends::reference
