// Row-wise and element-wise ops (simple loops GCC vectorizes; rms_norm's sum of squares
// on the 8-lane dot), split over the pool when large enough to pay for the hand-off.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul_kernels.h"
#include "backends/cpu/simd.h"
#include "core/dtype.h"
#include "core/error.h"

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
      int64_t j = 0;
      for (; j + 8 <= dim; j += 8) store8(result + j, load8(input + j) * scale * load8(scale_by + j));
      for (; j < dim; ++j) result[j] = input[j] * scale * scale_by[j];
    }
  });
}

void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t dim = x.shape().back();
  rms_norm_rows(pool, x.data<float>(), x.numel() / dim, dim, weight, eps, out.mutable_data<float>());
}

namespace {

// Each token's cos/sin rows [tokens][rotary_dim / 2], angles in double as the reference
// computes them. Every layer rotates q and k at the same positions, so the last table is
// kept and reused while the positions and frequencies stay the same: one table per
// forward pass rather than two per layer.
struct RotaryTable {
  std::vector<int32_t> positions;
  std::vector<double> inv_freq;
  std::vector<float> cos, sin;  // [tokens, half]
};

const RotaryTable& rotary_table(ThreadPool& pool, const int32_t* position, int64_t tokens,
                                const RotaryEmbedding& rotary) {
  thread_local RotaryTable kept;  // the calling thread's; grows to the largest prompt, then stays
  RotaryTable& table = kept;      // named so, the pool's workers below fill this thread's table, not theirs
  const int64_t half = rotary.rotary_dim / 2;
  if (table.inv_freq == rotary.inv_freq && table.positions.size() == static_cast<size_t>(tokens) &&
      std::equal(position, position + tokens, table.positions.begin()))
    return table;
  table.positions.assign(position, position + tokens);
  table.inv_freq = rotary.inv_freq;
  table.cos.resize(static_cast<size_t>(tokens * half));
  table.sin.resize(static_cast<size_t>(tokens * half));
  for_row_ranges(pool, tokens, half, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(position[t]) * rotary.inv_freq[i];
        table.cos[t * half + i] = static_cast<float>(std::cos(angle));
        table.sin[t * half + i] = static_cast<float>(std::sin(angle));
      }
  });
  return table;
}

}  // namespace

// The reference's arithmetic (angles in double, rotations in f32), reordered: cos/sin
// from rotary_table, every head of a token rotated along its row, tokens split over
// the pool.
void rope(ThreadPool& pool, const Tensor& x, const Tensor& positions, const RotaryEmbedding& rotary) {
  const int64_t tokens = x.shape()[0], heads = x.shape()[1], head_dim = x.shape()[2];
  const int64_t half = rotary.rotary_dim / 2;
  float* data = x.mutable_data<float>();
  const RotaryTable& table = rotary_table(pool, positions.data<int32_t>(), tokens, rotary);
  // Pair i is (i, i + half), or (2i, 2i + 1) when interleaved.
  const int64_t first_stride = rotary.interleaved ? 2 : 1, second_offset = rotary.interleaved ? 1 : half;
  for_row_ranges(pool, tokens, heads * head_dim, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* cos_row = table.cos.data() + t * half;
      const float* sin_row = table.sin.data() + t * half;
      for (int64_t h = 0; h < heads; ++h) {
        float* head = data + (t * heads + h) * head_dim;
        int64_t i = 0;
        if (!rotary.interleaved)  // pairs (i, i + half): eight of them a vector
          for (; i + 8 <= half; i += 8) {
            const f32x8 a = load8(head + i), b = load8(head + half + i);
            const f32x8 cos = load8(cos_row + i), sin = load8(sin_row + i);
            store8(head + i, a * cos - b * sin);
            store8(head + half + i, b * cos + a * sin);
          }
        for (; i < half; ++i) {
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

void kv_cache_write(ThreadPool& pool, const Tensor& cache, const Tensor& entries, const Tensor& positions,
                    const Tensor& cache_rows) {
  const int64_t batch = entries.shape()[0], seq = entries.shape()[1], kv_heads = entries.shape()[2];
  const int64_t head_dim = entries.shape()[3], max_cache_len = cache.shape()[2];
  const int32_t* position = positions.data<int32_t>();
  const int32_t* row_of = cache_rows.data<int32_t>();
  check_cache_rows(row_of, batch, cache.shape()[0], "kv_cache_write");
  // Every position is checked before any is written: a bad one leaves the cache as it was.
  for (int64_t i = 0; i < batch * seq; ++i)
    SHARDLM_CHECK(position[i] < max_cache_len, "position ", position[i], " is outside the KV cache (max_cache_len ",
                  max_cache_len, ")");
  const int64_t element = static_cast<int64_t>(dtype_size(cache.dtype()));
  auto* destination = static_cast<std::byte*>(cache.mutable_raw());  // [slots, kv_heads, max_cache_len, head_dim]
  const float* source = entries.data<float>();                       // [batch, seq, kv_heads, head_dim]
  for_row_ranges(pool, batch * seq, kv_heads * head_dim, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {  // row = b * seq + s
      if (position[row] < 0) continue;             // padding
      const int64_t b = row_of[row / seq];
      for (int64_t h = 0; h < kv_heads; ++h)
        convert_from_f32(source + (row * kv_heads + h) * head_dim,
                         destination + ((b * kv_heads + h) * max_cache_len + position[row]) * head_dim * element,
                         cache.dtype(), static_cast<size_t>(head_dim));
    }
  });
}

void silu_mul(ThreadPool& pool, const Tensor& gate, const Tensor& up, const Tensor& out) {
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* result = out.mutable_data<float>();
  // The gated MLP's epilogue kernel (vector e^x), in place on a copy of up.
  const auto silu_multiply = matmul_kernels().silu_multiply;
  for_row_ranges(pool, out.numel(), 1, [&](int64_t begin, int64_t end) {
    if (result != g) {
      if (result != u) std::copy(u + begin, u + end, result + begin);
      silu_multiply(g + begin, result + begin, end - begin);
      return;
    }
    // out is gate itself: each piece of gate is set aside before up lands on it.
    constexpr int64_t piece = 1024;
    float gate_piece[piece];
    for (int64_t i = begin; i < end; i += piece) {
      const int64_t count = std::min(piece, end - i);
      std::copy(g + i, g + i + count, gate_piece);
      std::copy(u + i, u + i + count, result + i);
      silu_multiply(gate_piece, result + i, count);
    }
  });
}

void gelu_tanh_mul(ThreadPool& pool, const Tensor& gate, const Tensor& up, const Tensor& out) {
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* result = out.mutable_data<float>();
  for_row_ranges(pool, out.numel(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) result[i] = reference::gelu_tanh(g[i]) * u[i];
  });
}

void scale(ThreadPool& pool, const Tensor& x, float factor, const Tensor& out) {
  const float* in = x.data<float>();
  float* result = out.mutable_data<float>();
  for_row_ranges(pool, out.numel(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) result[i] = in[i] * factor;
  });
}

void softcap(ThreadPool& pool, const Tensor& x, float cap, const Tensor& out) {
  const float* in = x.data<float>();
  float* result = out.mutable_data<float>();
  for_row_ranges(pool, out.numel(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) result[i] = cap * std::tanh(in[i] / cap);
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
