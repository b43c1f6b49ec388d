#include <cmath>

#include "backends/cpu/reference_kernels.h"

namespace shardlm::backends::reference {

void rope(const Tensor& x, const Tensor& positions, const RotaryEmbedding& rotary) {
  const int64_t tokens = x.shape()[0], heads = x.shape()[1], head_dim = x.shape()[2];
  const int64_t half = rotary.rotary_dim / 2;
  float* data = x.mutable_data<float>();
  const int32_t* position = positions.data<int32_t>();
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(position[t]) * rotary.inv_freq[i];
      const float cos_value = static_cast<float>(std::cos(angle)), sin_value = static_cast<float>(std::sin(angle));
      // The pair (first, second) rotates by `angle`.
      const int64_t first = rotary.interleaved ? 2 * i : i;
      const int64_t second = rotary.interleaved ? 2 * i + 1 : i + half;
      for (int64_t h = 0; h < heads; ++h) {
        float* head = data + (t * heads + h) * head_dim;
        const float a = head[first], b = head[second];
        head[first] = a * cos_value - b * sin_value;
        head[second] = b * cos_value + a * sin_value;
      }
    }
  }
}

}  // namespace shardlm::backends::reference
