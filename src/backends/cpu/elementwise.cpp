// Row-wise and element-wise ops (simple loops GCC vectorizes; rms_norm's sum of squares
// on the 8-lane dot), split over the pool when large enough to pay for the hand-off.
#include <cmath>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/simd.h"
#include "core/dtype.h"

namespace shardlm::backends::cpu {
namespace {

// Below this many elements an op runs on the calling thread alone.
constexpr int64_t parallel_threshold = 1 << 15;

template <typename Task>
void for_row_ranges(ThreadPool& pool, int64_t rows, int64_t row_size, Task task) {
  const int64_t tasks = rows * row_size < parallel_threshold ? 1 : std::min<int64_t>(rows, 4 * pool.threads());
  pool.run(tasks, [&](int64_t i) { task(rows * i / tasks, rows * (i + 1) / tasks); });
}

}  // namespace

void rms_norm_rows(ThreadPool& pool, const float* x, int64_t rows, int64_t dim, const Tensor& weight, float eps,
                   float* out) {
  thread_local std::vector<float> widened;  // the norm weight as f32, widened once per call
  if (widened.size() < static_cast<size_t>(dim)) widened.resize(static_cast<size_t>(dim));
  convert_to_f32(weight.raw(), weight.dtype(), widened.data(), static_cast<size_t>(dim));
  const float* scale_by = widened.data();
  for_row_ranges(pool, rows, dim, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* input = x + r * dim;
      const float scale = 1.0f / std::sqrt(dot(input, input, dim) / static_cast<float>(dim) + eps);
      float* result = out + r * dim;
      for (int64_t j = 0; j < dim; ++j) result[j] = input[j] * scale * scale_by[j];
    }
  });
}

void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t dim = x.shape().back();
  rms_norm_rows(pool, x.data<float>(), x.numel() / dim, dim, weight, eps, out.mutable_data<float>());
}

// The reference's arithmetic (angles in double, rotations in f32), reordered: each
// token's cos/sin computed once into a row, then every head rotated along it, and
// tokens split over the pool.
void rope(ThreadPool& pool, const Tensor& x, const Tensor& positions, const RotaryEmbedding& rotary) {
  const int64_t tokens = x.shape()[0], heads = x.shape()[1], head_dim = x.shape()[2];
  const int64_t half = rotary.rotary_dim / 2;
  float* data = x.mutable_data<float>();
  const int32_t* position = positions.data<int32_t>();
  for_row_ranges(pool, tokens, heads * head_dim, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> cos_row, sin_row;  // [half], grown once
    if (cos_row.size() < static_cast<size_t>(half)) {
      cos_row.resize(static_cast<size_t>(half));
      sin_row.resize(static_cast<size_t>(half));
    }
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(position[t]) * rotary.inv_freq[i];
        cos_row[i] = static_cast<float>(std::cos(angle));
        sin_row[i] = static_cast<float>(std::sin(angle));
      }
      // Pair i is (i, i + half), or (2i, 2i + 1) when interleaved.
      const int64_t first_stride = rotary.interleaved ? 2 : 1, second_offset = rotary.interleaved ? 1 : half;
      for (int64_t h = 0; h < heads; ++h) {
        float* head = data + (t * heads + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          float& first = head[i * first_stride];
          float& second = head[i * first_stride + second_offset];
          const float a = first, b = second;
          first = a * cos_row[i] - b * sin_row[i];
          second = b * cos_row[i] + a * sin_row[i];
        }
      }
    }
  });
}

void silu_mul(ThreadPool& pool, const Tensor& gate, const Tensor& up, const Tensor& out) {
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* result = out.mutable_data<float>();
  for_row_ranges(pool, out.numel(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) result[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  });
}

void add(ThreadPool& pool, const Tensor& a, const Tensor& b, const Tensor& out) {
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  float* result = out.mutable_data<float>();
  for_row_ranges(pool, out.numel(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) result[i] = x[i] + y[i];
  });
}

}  // namespace shardlm::backends::cpu
