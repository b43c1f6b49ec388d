// Every reference kernel against a float64 computation written independently here,
// on random inputs with odd sizes. Tolerances are relative to the largest output:
// f32 arithmetic over these sizes stays below 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>

#include "backends/cpu/reference_kernels.h"
#include "test_util.h"

namespace shardlm::backends {
namespace {

using testing::identity_rows;
using testing::random_tensor;
using testing::relative_error;
using testing::to_doubles;

constexpr double tolerance = 1e-5;

class ReferenceKernels : public ::testing::Test {
 protected:
  std::mt19937 random_{1234};
};

TEST_F(ReferenceKernels, LinearAllWeightTypes) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    const int64_t rows = 5, in = 37, out = 19;
    Tensor x = random_tensor({rows, in}, DType::f32, random_);
    Tensor w = random_tensor({out, in}, dtype, random_, 0.1f);
    Tensor bias = random_tensor({out}, dtype, random_);
    Tensor result = Tensor::zeros({rows, out}, DType::f32);
    reference::linear(x, w, bias, result);
    std::vector<double> xs = to_doubles(x), ws = to_doubles(w), bs = to_doubles(bias), expected(rows * out);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double sum = bs[o];
        for (int64_t i = 0; i < in; ++i) sum += xs[r * in + i] * ws[o * in + i];
        expected[r * out + o] = sum;
      }
    EXPECT_LT(relative_error(to_doubles(result), expected), tolerance) << dtype_name(dtype);
    reference::linear(x, w, Tensor(), result);  // no bias
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) expected[r * out + o] -= bs[o];
    EXPECT_LT(relative_error(to_doubles(result), expected), tolerance) << dtype_name(dtype);
  }
}

TEST_F(ReferenceKernels, RmsNorm) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    const int64_t rows = 7, dim = 33;
    const double eps = 1e-6;
    Tensor x = random_tensor({rows, dim}, DType::f32, random_);
    Tensor w = random_tensor({dim}, dtype, random_);
    Tensor result = Tensor::zeros({rows, dim}, DType::f32);
    reference::rms_norm(x, w, static_cast<float>(eps), result);
    std::vector<double> xs = to_doubles(x), ws = to_doubles(w), expected(rows * dim);
    for (int64_t r = 0; r < rows; ++r) {
      double mean_square = 0;
      for (int64_t j = 0; j < dim; ++j) mean_square += xs[r * dim + j] * xs[r * dim + j] / dim;
      for (int64_t j = 0; j < dim; ++j) expected[r * dim + j] = xs[r * dim + j] / std::sqrt(mean_square + eps) * ws[j];
    }
    EXPECT_LT(relative_error(to_doubles(result), expected), tolerance);
  }
}

TEST_F(ReferenceKernels, RopeHalfSplitAndInterleavedAndPartial) {
  const int64_t tokens = 5, heads = 3, head_dim = 12;
  for (bool interleaved : {false, true})
    for (int64_t rotary_dim : {int64_t{12}, int64_t{6}}) {
      RotaryEmbedding rotary{.rotary_dim = rotary_dim, .interleaved = interleaved};
      for (int64_t i = 0; i < rotary_dim / 2; ++i) rotary.inv_freq.push_back(std::pow(10000.0, -2.0 * i / rotary_dim));
      Tensor x = random_tensor({tokens, heads, head_dim}, DType::f32, random_);
      std::vector<double> original = to_doubles(x);
      std::vector<int32_t> position_values{0, 1, 7, 300, 4095};
      Tensor positions = Tensor::from_i32(position_values, {tokens});
      reference::rope(x, positions, rotary);
      std::vector<double> expected = original;
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t h = 0; h < heads; ++h) {
          double* head = expected.data() + (t * heads + h) * head_dim;
          const double* source = original.data() + (t * heads + h) * head_dim;
          for (int64_t i = 0; i < rotary_dim / 2; ++i) {
            // Written as a complex rotation, independently of the kernel's pairing code.
            int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + rotary_dim / 2;
            std::complex<double> z(source[a], source[b]);
            z *= std::polar(1.0, position_values[t] * rotary.inv_freq[i]);
            head[a] = z.real();
            head[b] = z.imag();
          }
        }
      EXPECT_LT(relative_error(to_doubles(x), expected), tolerance) << interleaved << " " << rotary_dim;
    }
}

TEST_F(ReferenceKernels, AttentionWithGqaOverTheCache) {
  const int64_t batch = 2, seq = 3, heads = 6, kv_heads = 2, head_dim = 5, max_cache_len = 11;
  Tensor q = random_tensor({batch, seq, heads, head_dim}, DType::f32, random_);
  Tensor k_cache = random_tensor({batch, kv_heads, max_cache_len, head_dim}, DType::f32, random_);
  Tensor v_cache = random_tensor({batch, kv_heads, max_cache_len, head_dim}, DType::f32, random_);
  // Row 0 is a prompt at 0..2; row 1 decodes at 6..8 over an existing prefix. Step row b
  // reads cache row 1 - b.
  Tensor positions = Tensor::from_i32(std::vector<int32_t>{0, 1, 2, 6, 7, 8}, {batch, seq});
  Tensor cache_rows = Tensor::from_i32(std::vector<int32_t>{1, 0}, {batch});
  const double scale = 1 / std::sqrt(5.0);
  std::vector<double> qs = to_doubles(q), ks = to_doubles(k_cache), vs = to_doubles(v_cache);
  for (int64_t sliding_window : {int64_t{0}, int64_t{4}}) {
    Tensor result = Tensor::zeros({batch, seq, heads, head_dim}, DType::f32);
    reference::attention(q, k_cache, v_cache, positions, cache_rows, static_cast<float>(scale), sliding_window, result);
    std::vector<double> expected(result.numel());
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seq; ++s)
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t kv = h / (heads / kv_heads), position = positions.data<int32_t>()[b * seq + s];
          const int64_t row = 1 - b;
          // Keys at positions p' with p - W < p' <= p are visible (all p' <= p without a window).
          auto visible = [&](int64_t t) { return t <= position && (sliding_window == 0 || t > position - sliding_window); };
          double total = 0;
          std::vector<double> weights(max_cache_len, 0.0);
          for (int64_t t = 0; t < max_cache_len; ++t) {
            if (!visible(t)) continue;
            double dot = 0;
            for (int64_t d = 0; d < head_dim; ++d)
              dot += qs[((b * seq + s) * heads + h) * head_dim + d] * ks[((row * kv_heads + kv) * max_cache_len + t) * head_dim + d];
            total += weights[t] = std::exp(dot * scale);
          }
          for (int64_t d = 0; d < head_dim; ++d) {
            double acc = 0;
            for (int64_t t = 0; t < max_cache_len; ++t)
              acc += weights[t] / total * vs[((row * kv_heads + kv) * max_cache_len + t) * head_dim + d];
            expected[((b * seq + s) * heads + h) * head_dim + d] = acc;
          }
        }
    EXPECT_LT(relative_error(to_doubles(result), expected), tolerance) << sliding_window;
  }
}

TEST_F(ReferenceKernels, KvCacheWritePlacesEntriesAtTheirPositions) {
  const int64_t batch = 2, seq = 2, kv_heads = 3, head_dim = 4, max_cache_len = 7;
  Tensor cache = Tensor::zeros({batch, kv_heads, max_cache_len, head_dim}, DType::f32);
  Tensor entries = random_tensor({batch, seq, kv_heads, head_dim}, DType::f32, random_);
  Tensor positions = Tensor::from_i32(std::vector<int32_t>{3, 4, 0, 6}, {batch, seq});
  reference::kv_cache_write(cache, entries, positions, identity_rows(batch));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s)
      for (int64_t h = 0; h < kv_heads; ++h)
        for (int64_t d = 0; d < head_dim; ++d)
          EXPECT_EQ(cache.data<float>()[((b * kv_heads + h) * max_cache_len + positions.data<int32_t>()[b * seq + s]) * head_dim + d],
                    entries.data<float>()[((b * seq + s) * kv_heads + h) * head_dim + d]);
  Tensor outside = Tensor::from_i32(std::vector<int32_t>{3, 7, 0, 1}, {batch, seq});
  EXPECT_THROW(reference::kv_cache_write(cache, entries, outside, identity_rows(batch)), Error);
}

// A step row's cache row outside the cache, or two step rows sharing one, is refused by
// name before anything is written.
TEST_F(ReferenceKernels, CacheRowsOutsideTheCacheOrSharedAreRefused) {
  Tensor cache = Tensor::zeros({2, 1, 4, 2}, DType::f32);  // [slots, kv_heads, max_cache_len, head_dim]
  Tensor entries = random_tensor({2, 1, 1, 2}, DType::f32, random_);
  Tensor positions = Tensor::from_i32(std::vector<int32_t>{0, 1}, {2, 1});
  for (const std::vector<int32_t>& rows : {std::vector<int32_t>{0, 2}, {1, 1}, {-1, 0}}) {
    try {
      reference::kv_cache_write(cache, entries, positions, Tensor::from_i32(rows, {2}));
      FAIL() << "cache rows " << rows[0] << ", " << rows[1] << " were accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("cache row"), std::string::npos) << error.what();
    }
  }
  EXPECT_EQ(cache.data<float>()[0], 0.0f);
}

TEST_F(ReferenceKernels, EmbeddingSiluMulAddGather) {
  Tensor table = random_tensor({13, 9}, DType::bf16, random_);
  Tensor ids = Tensor::from_i32(std::vector<int32_t>{12, 0, 5}, {3});
  Tensor embedded = Tensor::zeros({3, 9}, DType::f32);
  reference::embedding(table, ids, 0, embedded);
  std::vector<double> rows = to_doubles(table);
  for (int j = 0; j < 9; ++j) EXPECT_EQ(embedded.data<float>()[9 + j], rows[j]);
  // As the vocabulary shard of ids 5..17: id 0 gives zeros, id 12 row 7, id 5 row 0.
  reference::embedding(table, ids, 5, embedded);
  for (int j = 0; j < 9; ++j) {
    EXPECT_EQ(embedded.data<float>()[j], rows[7 * 9 + j]);
    EXPECT_EQ(embedded.data<float>()[9 + j], 0.0f);
    EXPECT_EQ(embedded.data<float>()[18 + j], rows[j]);
  }

  Tensor wide = Tensor::from_f32(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}, {2, 4});
  Tensor narrow = Tensor::zeros({2, 3}, DType::f32);
  reference::copy_columns(wide, 1, narrow, 1, 2);
  EXPECT_EQ(std::vector<float>(narrow.data<float>(), narrow.data<float>() + 6), (std::vector<float>{0, 1, 2, 0, 5, 6}));
  EXPECT_THROW(reference::copy_columns(wide, 3, narrow, 0, 2), Error);

  Tensor gate = random_tensor({3, 9}, DType::f32, random_), up = random_tensor({3, 9}, DType::f32, random_);
  Tensor result = Tensor::zeros({3, 9}, DType::f32);
  reference::silu_mul(gate, up, result);
  std::vector<double> g = to_doubles(gate), u = to_doubles(up), expected(27);
  for (int i = 0; i < 27; ++i) expected[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
  EXPECT_LT(relative_error(to_doubles(result), expected), tolerance);

  reference::add(gate, up, result);
  for (int i = 0; i < 27; ++i) expected[i] = g[i] + u[i];
  EXPECT_LT(relative_error(to_doubles(result), expected), tolerance);

  Tensor picked = Tensor::zeros({2, 9}, DType::f32);
  reference::gather_rows(gate, Tensor::from_i32(std::vector<int32_t>{2, 0}, {2}), picked);
  EXPECT_EQ(picked.data<float>()[0], gate.data<float>()[18]);
  EXPECT_EQ(picked.data<float>()[9], gate.data<float>()[0]);
}

// Values from torch 2.15 in float64: F.gelu(x, approximate="tanh") and 30 * tanh(x / 30).
TEST_F(ReferenceKernels, GeluTanhScaleSoftcap) {
  const std::vector<float> x{-5.0f, -3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 1.0f, 2.0f, 4.0f};
  const std::vector<double> gelu{-2.2917961972623857e-07, -0.0036373920817729943, -0.15880800939172324,
                                 -0.100324649298315,      0.0,                    0.34571400982514394,
                                 0.8411919906082768,      1.954597694087775,      3.9999297540518075};
  const Tensor gate = Tensor::from_f32(x, {3, 3});
  const Tensor twos = Tensor::from_f32(std::vector<float>(9, 2.0f), {3, 3});
  Tensor result = Tensor::zeros({3, 3}, DType::f32);
  reference::gelu_tanh_mul(gate, twos, result);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(result.data<float>()[i], 2 * gelu[i], 2e-6) << "x = " << x[i];

  reference::scale(gate, -0.5f, result);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(result.data<float>()[i], -0.5f * x[i]);

  const Tensor logits = Tensor::from_f32(std::vector<float>{-100.0f, -31.0f, 0.5f, 29.0f, 80.0f}, {5});
  const std::vector<double> capped{-29.92373902421512, -23.257253439518596, 0.49995370884715834, 22.417074638519228,
                                   29.71171482677043};
  Tensor capped_result = Tensor::zeros({5}, DType::f32);
  reference::softcap(logits, 30.0f, capped_result);
  for (size_t i = 0; i < capped.size(); ++i) EXPECT_NEAR(capped_result.data<float>()[i], capped[i], 1e-5);
}

TEST_F(ReferenceKernels, SoftmaxLogSoftmaxArgmax) {
  std::vector<float> logits{1.5f, -3.0f, 4.25f, 4.25f, 0.0f, -INFINITY, 2.0f};
  std::vector<float> probabilities(logits.size()), log_probabilities(logits.size());
  reference::softmax(logits, probabilities);
  reference::log_softmax(logits, log_probabilities);
  double total = 0;
  for (float v : logits) total += std::exp(static_cast<double>(v));
  for (size_t i = 0; i < logits.size(); ++i) {
    EXPECT_NEAR(probabilities[i], std::exp(static_cast<double>(logits[i])) / total, 1e-7);
    if (std::isfinite(logits[i])) {
      EXPECT_NEAR(log_probabilities[i], logits[i] - std::log(total), 1e-6);
    }
  }
  EXPECT_EQ(probabilities[5], 0.0f);
  EXPECT_EQ(reference::argmax(logits), 2);  // ties go to the lowest index
}

}  // namespace
}  // namespace shardlm::backends
