#pragma once
// Helpers shared by the test suites.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/reference_kernels.h"
#include "core/error.h"
#include "core/tensor.h"

namespace shardlm::testing {

// The message of the `Exception` (a shardlm::Error by default) that `action` throws, or "(no error)".
template <typename Exception = Error, typename Action>
std::string error_of(Action action) {
  try {
    action();
  } catch (const Exception& error) {
    return error.what();
  }
  return "(no error)";
}

// SHARDLM_TEST_DATA_DIR in the environment overrides the build's path: test binaries run
// from a bundle on another machine (bench/device/check.sh) find the data there.
inline std::string data_path(const std::string& relative) {
  const char* moved = std::getenv("SHARDLM_TEST_DATA_DIR");
  return std::string(moved ? moved : SHARDLM_TEST_DATA_DIR) + "/" + relative;
}

// max|actual - expected| / max|expected|, the fixtures' tolerance measure.
inline double relative_error(const float* actual, const float* expected, size_t count) {
  double max_difference = 0, max_magnitude = 0;
  for (size_t i = 0; i < count; ++i) {
    max_difference = std::max(max_difference, std::abs(static_cast<double>(actual[i]) - expected[i]));
    max_magnitude = std::max(max_magnitude, std::abs(static_cast<double>(expected[i])));
  }
  return max_magnitude == 0 ? max_difference : max_difference / max_magnitude;
}

inline double relative_error(const std::vector<double>& actual, const std::vector<double>& expected) {
  double max_difference = 0, max_magnitude = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    max_difference = std::max(max_difference, std::abs(actual[i] - expected[i]));
    max_magnitude = std::max(max_magnitude, std::abs(expected[i]));
  }
  return max_magnitude == 0 ? max_difference : max_difference / max_magnitude;
}

// Values of any float tensor, widened to double.
inline std::vector<double> to_doubles(const Tensor& tensor) {
  std::vector<double> values(static_cast<size_t>(tensor.numel()));
  for (int64_t i = 0; i < tensor.numel(); ++i) values[i] = backends::reference::load_f32(tensor, i);
  return values;
}

inline Tensor random_tensor(Shape shape, DType dtype, std::mt19937& random, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(static_cast<size_t>(shape.numel()));
  for (float& v : values) v = normal(random);
  Tensor f32 = Tensor::from_f32(values, shape);
  return dtype == DType::f32 ? f32 : f32.to_dtype(dtype);
}

// i32 [batch] cache rows 0..batch-1: every step row in the cache row of its own index.
inline Tensor identity_rows(int64_t batch) {
  std::vector<int32_t> rows(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) rows[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  return Tensor::from_i32(rows, {batch});
}

}  // namespace shardlm::testing
