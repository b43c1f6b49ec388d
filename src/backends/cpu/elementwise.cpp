// Row-wise and element-wise ops: the pool splits them (when large enough to pay for the
// hand-off), the kernel table's row kernels (row_kernels.h) run each piece.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernel_table.h"
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
  const auto norm_row = cpu_kernels().rows.rms_norm_row;
  for_row_ranges(pool, rows, dim, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) norm_row(x + r * dim, dim, scale_by, eps, out + r * dim);
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
  const auto rotate = cpu_kernels().rows.rotate_half_pairs;
  for_row_ranges(pool, tokens, heads * head_dim, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* cos_row = table.cos.data() + t * half;
      const float* sin_row = table.sin.data() + t * half;
      for (int64_t h = 0; h < heads; ++h) {
        float* head = data + (t * heads + h) * head_dim;
        if (!rotary.interleaved) {
          rotate(head, cos_row, sin_row, half);
          continue;
        }
        for (int64_t i = 0; i < half; ++i) {  // pairs (2i, 2i + 1): GLM-4's, a few heads' worth
          const float a = head[2 * i], b = head[2 * i + 1];
          head[2 * i] = a * cos_row[i] - b * sin_row[i];
          head[2 * i + 1] = b * cos_row[i] + a * sin_row[i];
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

namespace {

// out = multiply(gate, up): up is copied to out, then multiplied in place by the
// activation of gate (a RowKernels epilogue) piece by piece.
void gated_product(ThreadPool& pool, const Tensor& gate, const Tensor& up, const Tensor& out,
                   void (*multiply)(const float* gate, float* inout, int64_t count)) {
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* result = out.mutable_data<float>();
  for_row_ranges(pool, out.numel(), 1, [&](int64_t begin, int64_t end) {
    if (result != g) {
      if (result != u) std::copy(u + begin, u + end, result + begin);
      multiply(g + begin, result + begin, end - begin);
      return;
    }
    // out is gate itself: each piece of gate is set aside before up lands on it.
    constexpr int64_t piece = 1024;
    float gate_piece[piece];
    for (int64_t i = begin; i < end; i += piece) {
      const int64_t count = std::min(piece, end - i);
      std::copy(g + i, g + i + count, gate_piece);
      std::copy(u + i, u + i + count, result + i);
      multiply(gate_piece, result + i, count);
    }
  });
}

}  // namespace

void silu_mul(ThreadPool& pool, const Tensor& gate, const Tensor& up, const Tensor& out) {
  gated_product(pool, gate, up, out, cpu_kernels().rows.silu_multiply);
}

void gelu_tanh_mul(ThreadPool& pool, const Tensor& gate, const Tensor& up, const Tensor& out) {
  gated_product(pool, gate, up, out, cpu_kernels().rows.gelu_tanh_multiply);
}

void scale(ThreadPool& pool, const Tensor& x, float factor, const Tensor& out) {
  const float* in = x.data<float>();
  float* result = out.mutable_data<float>();
  const auto scale_by = cpu_kernels().rows.scale;
  for_row_ranges(pool, out.numel(), 1,
                 [&](int64_t begin, int64_t end) { scale_by(in + begin, factor, result + begin, end - begin); });
}

void softcap(ThreadPool& pool, const Tensor& x, float cap, const Tensor& out) {
  const float* in = x.data<float>();
  float* result = out.mutable_data<float>();
  const auto cap_at = cpu_kernels().rows.softcap;
  for_row_ranges(pool, out.numel(), 1,
                 [&](int64_t begin, int64_t end) { cap_at(in + begin, cap, result + begin, end - begin); });
}

void add(ThreadPool& pool, const Tensor& a, const Tensor& b, const Tensor& out) {
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  float* result = out.mutable_data<float>();
  const auto sum = cpu_kernels().rows.add;
  for_row_ranges(pool, out.numel(), 1,
                 [&](int64_t begin, int64_t end) { sum(x + begin, y + begin, result + begin, end - begin); });
}

}  // namespace shardlm::backends::cpu
