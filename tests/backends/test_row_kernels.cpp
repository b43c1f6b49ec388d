// Every kernel table's row and elementwise kernels (RowKernels, row_kernels.h at 4, 8 or 16
// lanes) against the scalar reference ops. Lengths cover each width's vector loop and its
// tail (1 to 3 past a multiple of 4, 8 and 16, and shorter than one vector); values span
// tanh's and e^x's ranges: near zero (tanh's x-itself branch), moderate, and far past
// the clamps (+-100). Tolerance: 1e-6 of the largest expected value (sums in another order;
// a polynomial tanh and e^x within a few ulp).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/kernel_table.h"
#include "backends/cpu/reference_kernels.h"
#include "test_util.h"

namespace shardlm::backends::cpu {
namespace {

using testing::relative_error;

constexpr double row_tolerance = 1e-6;
constexpr int64_t lengths[] = {1, 3, 4, 7, 8, 15, 16, 17, 35, 64, 131, 1029};

// count values: normal with the given spread, then a few at the edges of every range.
std::vector<float> values(int64_t count, float spread, std::mt19937& random) {
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = normal(random);
  const float edges[] = {0.0f, 1e-5f, -3e-4f, 100.0f, -100.0f, 9.0f, -7.5f, 0.5f};
  for (size_t i = 0; i < std::size(edges) && i < v.size(); ++i) v[v.size() - 1 - 2 * i % v.size()] = edges[i];
  return v;
}

Tensor tensor_of(const std::vector<float>& v) { return Tensor::from_f32(v, {static_cast<int64_t>(v.size())}); }

template <typename Check>
void for_every_table(Check check) {
  ASSERT_GE(available_cpu_kernels().size(), 1u);
  for (const CpuKernels* table : available_cpu_kernels()) {
    SCOPED_TRACE(std::string(table->isa));
    check(table->rows);
  }
}

void expect_close(const std::vector<float>& got, const Tensor& want, const char* op, int64_t count) {
  EXPECT_LT(relative_error(got.data(), want.data<float>(), got.size()), row_tolerance) << op << " over " << count;
}

TEST(RowKernels, RmsNormMatchesTheReference) {
  std::mt19937 random(1);
  for_every_table([&](const RowKernels& rows) {
    for (int64_t dim : lengths) {
      const std::vector<float> x = values(dim, 2.0f, random), weight = values(dim, 1.0f, random);
      Tensor want = Tensor::zeros({1, dim}, DType::f32);
      reference::rms_norm(tensor_of(x).reshape({1, dim}), tensor_of(weight), 1e-6f, want);
      std::vector<float> got(x.size());
      rows.rms_norm_row(x.data(), dim, weight.data(), 1e-6f, got.data());
      expect_close(got, want, "rms_norm_row", dim);
      std::vector<float> in_place = x;  // out may be x
      rows.rms_norm_row(in_place.data(), dim, weight.data(), 1e-6f, in_place.data());
      EXPECT_EQ(in_place, got);
    }
  });
}

TEST(RowKernels, RotateHalfPairsMatchesTheReferenceRope) {
  std::mt19937 random(2);
  for_every_table([&](const RowKernels& rows) {
    for (int64_t half : lengths) {
      RotaryEmbedding rotary{.rotary_dim = 2 * half};
      for (int64_t i = 0; i < half; ++i) rotary.inv_freq.push_back(std::pow(10000.0, -static_cast<double>(i) / half));
      const int32_t position = 1234;
      std::vector<float> cos(static_cast<size_t>(half)), sin(static_cast<size_t>(half));
      for (int64_t i = 0; i < half; ++i) {
        cos[static_cast<size_t>(i)] = static_cast<float>(std::cos(position * rotary.inv_freq[static_cast<size_t>(i)]));
        sin[static_cast<size_t>(i)] = static_cast<float>(std::sin(position * rotary.inv_freq[static_cast<size_t>(i)]));
      }
      std::vector<float> head = values(2 * half, 1.0f, random);
      Tensor want = tensor_of(head).reshape({1, 1, 2 * half});
      reference::rope(want, Tensor::from_i32(std::vector<int32_t>{position}, {1}), rotary);
      rows.rotate_half_pairs(head.data(), cos.data(), sin.data(), half);
      expect_close(head, want, "rotate_half_pairs", half);
    }
  });
}

// The ops of (a, b) -> out, each beside its reference.
TEST(RowKernels, ElementwiseOpsMatchTheReference) {
  std::mt19937 random(3);
  for_every_table([&](const RowKernels& rows) {
    for (int64_t count : lengths) {
      const std::vector<float> a = values(count, 3.0f, random), b = values(count, 1.0f, random);
      Tensor want = Tensor::zeros({count}, DType::f32);
      std::vector<float> got = b;
      reference::silu_mul(tensor_of(a), tensor_of(b), want);
      rows.silu_multiply(a.data(), got.data(), count);
      expect_close(got, want, "silu_multiply", count);
      got = b;
      reference::gelu_tanh_mul(tensor_of(a), tensor_of(b), want);
      rows.gelu_tanh_multiply(a.data(), got.data(), count);
      expect_close(got, want, "gelu_tanh_multiply", count);
      reference::add(tensor_of(a), tensor_of(b), want);
      rows.add(a.data(), b.data(), got.data(), count);
      expect_close(got, want, "add", count);
      reference::scale(tensor_of(a), 0.125f, want);
      rows.scale(a.data(), 0.125f, got.data(), count);
      expect_close(got, want, "scale", count);
      for (float cap : {3.0f, 30.0f}) {
        reference::softcap(tensor_of(a), cap, want);
        rows.softcap(a.data(), cap, got.data(), count);
        expect_close(got, want, "softcap", count);
      }
    }
  });
}

}  // namespace
}  // namespace shardlm::backends::cpu
