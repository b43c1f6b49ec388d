#pragma once
// The row and elementwise kernels of every CPU kernel table (RowKernels in
// kernel_table.h): RMSNorm, rope's rotation, the gated MLP epilogues, add, scale and
// soft-capping. Written once for every vector width (native_vectors.h): each table's file
// includes this and is compiled for its instruction set, so the same loops run 4 (SSE2, or
// any target GCC's vectors lower), 8 (AVX2) or 16 (AVX-512) lanes wide. Internal linkage: the
// copies made under different flags must never be merged by the linker. The reference of
// each is reference_kernels.h's op of the same name; tests/backends checks every table's
// against it.

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernel_table.h"
#include "backends/cpu/native_vectors.h"
#include "backends/cpu/vector_math.h"

namespace shardlm::backends::cpu {
namespace {

namespace row_ops {

using native::f32xN, native::lanes, native::load, native::store;

inline f32xN splat(float value) { return f32xN{} + value; }
inline float sum_lanes(f32xN v) {
  float sum = 0;
  for (int64_t i = 0; i < lanes; ++i) sum += v[i];
  return sum;
}
inline f32xN multiply_add(f32xN a, f32xN b, f32xN c) { return fused_multiply_add(a, b, c); }

// tanh for every lane, within a few ulp of std::tanh: Eigen's rational approximation
// (a degree-13 odd polynomial over a degree-6 even one) on x clamped to +-7.9 (3e-7 short of
// +-1 there); +-1 from +-9 on, where tanh rounds to it in f32; x itself below 4e-4 in
// magnitude.
inline f32xN tanh_lanes(f32xN x) {
  using I = decltype(x < x);
  const I tiny = (x < 0.0004f) & (x > -0.0004f);
  const I saturated = (x >= 9.0f) | (x <= -9.0f);
  const f32xN clamped = x < -7.90531110763549805f ? splat(-7.90531110763549805f)
                        : x > 7.90531110763549805f ? splat(7.90531110763549805f)
                                                   : x;
  const f32xN square = clamped * clamped;
  f32xN p = splat(-2.76076847742355e-16f);
  p = multiply_add(p, square, splat(2.00018790482477e-13f));
  p = multiply_add(p, square, splat(-8.60467152213735e-11f));
  p = multiply_add(p, square, splat(5.12229709037114e-08f));
  p = multiply_add(p, square, splat(1.48572235717979e-05f));
  p = multiply_add(p, square, splat(6.37261928875436e-04f));
  p = multiply_add(p, square, splat(4.89352455891786e-03f));
  p = p * clamped;
  f32xN q = splat(1.19825839466702e-06f);
  q = multiply_add(q, square, splat(1.18534705686654e-04f));
  q = multiply_add(q, square, splat(2.26843463243900e-03f));
  q = multiply_add(q, square, splat(4.89352518554385e-03f));
  return tiny ? x : saturated ? (x > 0.0f ? splat(1.0f) : splat(-1.0f)) : p / q;
}

// Applies `lane_op` to every `lanes` elements of [0, count), then `scalar_op` to the rest.
template <typename LaneOp, typename ScalarOp>
inline void for_lanes(int64_t count, LaneOp lane_op, ScalarOp scalar_op) {
  int64_t i = 0;
  for (; i + lanes <= count; i += lanes) lane_op(i);
  for (; i < count; ++i) scalar_op(i);
}

// out = x / sqrt(mean(x^2) + eps) * weight, x and out [dim] (out may be x).
void rms_norm_row(const float* x, int64_t dim, const float* weight, float eps, float* out) {
  f32xN squares0{}, squares1{};
  int64_t i = 0;
  for (; i + 2 * lanes <= dim; i += 2 * lanes) {
    const f32xN a = load(x + i), b = load(x + i + lanes);
    squares0 = multiply_add(a, a, squares0);
    squares1 = multiply_add(b, b, squares1);
  }
  float sum = sum_lanes(squares0 + squares1);
  for (; i < dim; ++i) sum += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
  for_lanes(
      dim, [&](int64_t j) { store(out + j, load(x + j) * scale * load(weight + j)); },
      [&](int64_t j) { out[j] = x[j] * scale * weight[j]; });
}

// Pairs (i, i + half) of a head [2 half] turned by each pair's angle: cos, sin [half].
void rotate_half_pairs(float* head, const float* cos, const float* sin, int64_t half) {
  for_lanes(
      half,
      [&](int64_t i) {
        const f32xN a = load(head + i), b = load(head + half + i), c = load(cos + i), s = load(sin + i);
        store(head + i, a * c - b * s);
        store(head + half + i, b * c + a * s);
      },
      [&](int64_t i) {
        const float a = head[i], b = head[half + i];
        head[i] = a * cos[i] - b * sin[i];
        head[half + i] = b * cos[i] + a * sin[i];
      });
}

// inout[i] *= silu(gate[i]) = gate[i] / (1 + e^-gate[i]).
void silu_multiply(const float* gate, float* inout, int64_t count) {
  for_lanes(
      count,
      [&](int64_t i) {
        const f32xN g = load(gate + i);
        store(inout + i, load(inout + i) * (g / (1.0f + exp_lanes(-g))));
      },
      [&](int64_t i) { inout[i] *= gate[i] / (1.0f + std::exp(-gate[i])); });
}

// inout[i] *= gelu_tanh(gate[i]) = gate[i] / 2 (1 + tanh(sqrt(2 / pi) (gate[i] + 0.044715 gate[i]^3))).
void gelu_tanh_multiply(const float* gate, float* inout, int64_t count) {
  constexpr float root_two_over_pi = 0.7978845608028654f, cubic = 0.044715f;
  for_lanes(
      count,
      [&](int64_t i) {
        const f32xN g = load(gate + i);
        const f32xN inner = root_two_over_pi * (g + cubic * g * g * g);
        store(inout + i, load(inout + i) * (0.5f * g * (1.0f + tanh_lanes(inner))));
      },
      [&](int64_t i) {
        const float g = gate[i];
        inout[i] *= 0.5f * g * (1.0f + std::tanh(root_two_over_pi * (g + cubic * g * g * g)));
      });
}

void add(const float* a, const float* b, float* out, int64_t count) {
  for_lanes(
      count, [&](int64_t i) { store(out + i, load(a + i) + load(b + i)); }, [&](int64_t i) { out[i] = a[i] + b[i]; });
}

void scale(const float* x, float factor, float* out, int64_t count) {
  for_lanes(
      count, [&](int64_t i) { store(out + i, load(x + i) * factor); }, [&](int64_t i) { out[i] = x[i] * factor; });
}

// out = cap tanh(x / cap).
void softcap(const float* x, float cap, float* out, int64_t count) {
  for_lanes(
      count, [&](int64_t i) { store(out + i, cap * tanh_lanes(load(x + i) / cap)); },
      [&](int64_t i) { out[i] = cap * std::tanh(x[i] / cap); });
}

}  // namespace row_ops

// The entries for this file's table.
constexpr RowKernels row_kernels{.rms_norm_row = row_ops::rms_norm_row,
                                 .rotate_half_pairs = row_ops::rotate_half_pairs,
                                 .silu_multiply = row_ops::silu_multiply,
                                 .gelu_tanh_multiply = row_ops::gelu_tanh_multiply,
                                 .add = row_ops::add,
                                 .scale = row_ops::scale,
                                 .softcap = row_ops::softcap};

}  // namespace
}  // namespace shardlm::backends::cpu
