#include "models/random_weights.h"

#include <cmath>
#include <vector>

#include "core/dtype.h"

namespace shardlm::models {
namespace {

// splitmix64: fast, and the same stream on every platform (std::*_distribution is not).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float symmetric() { return static_cast<float>(static_cast<double>(next() >> 11) * 0x1.0p-52 - 1.0); }
};

bool is_norm(const std::string& name) { return name.find("norm") != std::string::npos; }

}  // namespace

std::map<std::string, Tensor> random_weights(const io::ModelConfig& config, DType dtype, uint64_t seed) {
  constexpr float standard_deviation = 0.02f;
  const float half_width = standard_deviation * std::sqrt(3.0f);  // uniform [-a, a] has std a / sqrt(3)
  SplitMix64 random{seed};
  std::map<std::string, Tensor> tensors;
  std::vector<float> row;
  for (const auto& [name, shape] : required_weights(config)) {
    Tensor tensor = Tensor::empty(shape, dtype);
    const int64_t width = shape.back(), rows = shape.numel() / width;
    row.resize(static_cast<size_t>(width));
    const size_t row_bytes = static_cast<size_t>(width) * dtype_size(dtype);
    for (int64_t r = 0; r < rows; ++r) {
      for (float& value : row)
        value = shape.rank() == 1 ? (is_norm(name) ? 1.0f : 0.0f) : half_width * random.symmetric();
      convert_from_f32(row.data(), static_cast<std::byte*>(tensor.mutable_raw()) + r * row_bytes, dtype, row.size());
    }
    tensors.emplace(name, std::move(tensor));
  }
  return tensors;
}

}  // namespace shardlm::models
