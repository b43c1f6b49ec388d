// Every matmul table this CPU runs (portable, AVX2, AVX-512, AVX512-BF16, AMX), both entries, every
// weight dtype, against the scalar reference linear. Shapes cover each loop's tail:
// rows around the 4-row gemv and the 6- and 12-row micro-kernel tiles (12: the last
// tile full, which the packed input's last column must not overrun), 17, 32 and 64 (the
// AVX512-BF16 table's few-rows form: a lone row past its 4-row blocks, and its largest), in past the
// 256-element k block (and the portable table's 1024-element chunk), a multiple of 16
// and 32 or not (the bf16 gemvs read 32 or 16 at a time, then less), out past two
// 128-column blocks and not a multiple of 16. Tolerance: 2e-5 of the largest output
// (f32 sums in another order); 1e-4 for gemv over int8 and int4 weights, whose AVX2 and
// AVX-512 kernels round the activations to int16 per 32-element block (2^-16 of the block's
// largest value); 1e-2 for the AMX table's gemm over bf16, f16 and int8 weights and the
// AVX512-BF16 table's over bf16 weights, which round the activations to bf16 (2^-9 relative
// each; measured up to 2.4e-3); 3e-2 for the AVX512-BF16 table's gemm over int8 weights and
// gemv over int4 ones, which round them to int8 per 32-element block (1/254 of the block's
// largest; measured up to 1.0e-2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>

#include "backends/cpu/kernel_table.h"
#include "core/quantize.h"
#include "test_util.h"

namespace shardlm::backends::cpu {
namespace {

using testing::random_tensor;
using testing::relative_error;
using testing::to_doubles;

constexpr double tolerance = 2e-5, int8_gemv_tolerance = 1e-4, bf16_input_tolerance = 1e-2,
                 int8_input_tolerance = 3e-2;

Tensor random_weight(DType dtype, int64_t out_features, int64_t in, std::mt19937& random) {
  if (dtype == DType::i8) return quantize_int8(random_tensor({out_features, in}, DType::f32, random));
  if (dtype == DType::i4) return quantize_int4(random_tensor({out_features, in}, DType::f32, random));
  return random_tensor({out_features, in}, dtype, random);
}

struct Case {
  DType dtype;
  int64_t rows, in, out_features;
};

std::vector<Case> cases(DType dtype) {
  std::vector<Case> all;
  for (int64_t rows : {1, 2, 3, 4, 5, 7, 12, 13, 17, 32, 64, 100})
    for (int64_t in : {67, 88, 96, 544, 1056}) {  // 1056: two portable widening chunks
      if ((dtype == DType::i8 || dtype == DType::i4) && in % Tensor::quant_block) continue;
      // int4 runs the gemm loops the other types do and gemv tiles of its own: row counts
      // that reach each (gemv row groups of 1, 3 and 4 and a 4 + 1 split; gemm tiles), over
      // an odd number of blocks (its two-block steps and the one left) short and long.
      if (dtype == DType::i4 && ((rows != 1 && rows != 3 && rows != 4 && rows != 5 && rows != 13 && rows != 64) ||
                                 in == 544))
        continue;
      for (int64_t out_features : {45, 290}) all.push_back({dtype, rows, in, out_features});
    }
  return all;
}

// One test a weight dtype, so that CTest runs them side by side; each case's reference is
// computed once and every table checked against it.
class EveryTable : public ::testing::TestWithParam<DType> {};

TEST_P(EveryTable, MatchesTheReference) {
  std::mt19937 random(7);
  ASSERT_GE(available_cpu_kernels().size(), 1u);
  for (const Case& c : cases(GetParam())) {
    Tensor x = random_tensor({c.rows, c.in}, DType::f32, random);
    Tensor weight = random_weight(c.dtype, c.out_features, c.in, random);
    Tensor expected = Tensor::zeros({c.rows, c.out_features}, DType::f32);
    reference::linear(x, weight, Tensor(), expected);
    // Columns [3, out - 2) only: the kernels must honour the range and leave the rest.
    const int64_t begin = 3, end = c.out_features - 2;
    for (const CpuKernels* table : available_cpu_kernels())
      for (bool use_gemm : {false, true}) {
        if (!use_gemm && c.rows > gemv_max_rows) continue;
        Tensor actual = Tensor::zeros({c.rows, c.out_features}, DType::f32);
        std::vector<float> sentinel(static_cast<size_t>(actual.numel()), -12345.0f);
        std::copy(sentinel.begin(), sentinel.end(), actual.mutable_data<float>());
        std::vector<float> packed;
        if (use_gemm)
          table->gemm(gemm_input(*table, c.dtype, x.data<float>(), c.rows, c.in, packed), c.rows,
                      WeightView::of(weight), begin, end, actual.mutable_data<float>(), c.out_features);
        else
          table->gemv(gemv_input(*table, c.dtype, x.data<float>(), c.rows, c.in, packed), c.rows,
                      WeightView::of(weight), begin, end, actual.mutable_data<float>(), c.out_features);
        std::vector<double> got = to_doubles(actual), want = to_doubles(expected);
        std::vector<double> got_range, want_range;
        for (int64_t r = 0; r < c.rows; ++r)
          for (int64_t o = 0; o < c.out_features; ++o) {
            const size_t i = static_cast<size_t>(r * c.out_features + o);
            if (o >= begin && o < end) {
              got_range.push_back(got[i]);
              want_range.push_back(want[i]);
            } else {
              ASSERT_EQ(got[i], -12345.0) << "column " << o << " outside the range was written";
            }
          }
        const bool rounds = use_gemm && gemm_rounds_input_to_bf16(*table, c.dtype, c.in);
        const bool rounds_to_int8 = use_gemm ? gemm_rounds_input_to_int8(*table, c.dtype, c.in)
                                             : gemv_rounds_input_to_int8(*table, c.dtype, c.in);
        EXPECT_LT(relative_error(got_range, want_range),
                  rounds_to_int8 ? int8_input_tolerance
                  : rounds       ? bf16_input_tolerance
                  : !use_gemm && (c.dtype == DType::i8 || c.dtype == DType::i4) ? int8_gemv_tolerance
                                                      : tolerance)
            << table->isa << (use_gemm ? " gemm " : " gemv ") << dtype_name(c.dtype) << " rows " << c.rows
            << " in " << c.in << " out " << c.out_features;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(CpuKernels, EveryTable,
                         ::testing::Values(DType::f32, DType::bf16, DType::f16, DType::i8, DType::i4),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

// With activations that are bf16 values already, the rounding of the tables that round
// (AMX, AVX512-BF16) is exact, so only the sums' order is left: their tiles, pair
// panels, transposes and (AMX) the two bf16 terms of an f16 weight (exact) or an int8
// weight times its scale (within 2^-17) must then give the reference to the f32 tolerance.
TEST(CpuKernels, Bf16TablesAreExactForBf16Activations) {
  std::mt19937 random(11);
  int checked = 0;
  for (const CpuKernels* table : available_cpu_kernels())
    for (DType dtype : {DType::bf16, DType::f16, DType::i8})
      for (int64_t in : {160, 1056}) {
        if (!gemm_rounds_input_to_bf16(*table, dtype, in)) continue;
        const int64_t rows = 37, out_features = 150;
        Tensor x = random_tensor({rows, in}, DType::f32, random).to_dtype(DType::bf16).to_dtype(DType::f32);
        Tensor weight = random_weight(dtype, out_features, in, random);
        Tensor expected = Tensor::zeros({rows, out_features}, DType::f32), actual = expected.clone();
        reference::linear(x, weight, Tensor(), expected);
        std::vector<float> packed;
        table->gemm(gemm_input(*table, dtype, x.data<float>(), rows, in, packed), rows, WeightView::of(weight), 0,
                    out_features, actual.mutable_data<float>(), out_features);
        EXPECT_LT(relative_error(to_doubles(actual), to_doubles(expected)), tolerance)
            << table->isa << " " << dtype_name(dtype) << " in " << in;
        ++checked;
      }
  if (checked == 0) GTEST_SKIP() << "this CPU runs no table that rounds activations to bf16 (AMX, AVX512-BF16)";
}

// With activations that int8 blocks hold exactly (integers of [-127, 127] times a scale a
// block, each block's largest at +-127), the rounding of the tables that round to int8 is
// exact, so their quads, transposes, nibble splits, block starts, offsets and scales must
// give the reference to the f32 tolerance: the gemm over int8 weights, the gemv (1 to 4
// rows) over int4 ones.
Tensor int8_exact_activations(int64_t rows, int64_t in, std::mt19937& random) {
  std::uniform_int_distribution<int> level(-127, 127);
  std::uniform_real_distribution<float> scale(0.001f, 0.1f);
  std::vector<float> values(static_cast<size_t>(rows * in));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < in / Tensor::quant_block; ++b) {
      const float d = scale(random);
      for (int64_t k = 0; k < Tensor::quant_block; ++k)
        values[static_cast<size_t>(r * in + b * Tensor::quant_block + k)] =
            static_cast<float>(k == b % Tensor::quant_block ? (b % 2 ? 127 : -127) : level(random)) * d;
    }
  return Tensor::from_f32(values, {rows, in});
}

TEST(CpuKernels, Int8TablesAreExactForInt8Activations) {
  std::mt19937 random(13);
  int checked = 0;
  for (const CpuKernels* table : available_cpu_kernels())
    for (const auto& [dtype, rows] : {std::pair{DType::i8, int64_t{37}}, {DType::i4, int64_t{1}},
                                      {DType::i4, int64_t{4}}, {DType::i4, int64_t{37}}})
      for (int64_t in : {96, 1056}) {
        const bool gemm = rows > gemv_max_rows;
        if (!(gemm ? gemm_rounds_input_to_int8(*table, dtype, in) : gemv_rounds_input_to_int8(*table, dtype, in)))
          continue;
        const int64_t out_features = 150;
        Tensor x = int8_exact_activations(rows, in, random);
        Tensor weight = random_weight(dtype, out_features, in, random);
        Tensor expected = Tensor::zeros({rows, out_features}, DType::f32), actual = expected.clone();
        reference::linear(x, weight, Tensor(), expected);
        std::vector<float> packed;
        const auto entry = gemm ? table->gemm : table->gemv;
        entry((gemm ? gemm_input : gemv_input)(*table, dtype, x.data<float>(), rows, in, packed), rows,
              WeightView::of(weight), 0, out_features, actual.mutable_data<float>(), out_features);
        EXPECT_LT(relative_error(to_doubles(actual), to_doubles(expected)), tolerance)
            << table->isa << " " << dtype_name(dtype) << " rows " << rows << " in " << in;
        ++checked;
      }
  if (checked == 0) GTEST_SKIP() << "this CPU runs no table that rounds activations to int8 (AVX512-BF16 with VNNI)";
}

TEST(Quantize, Int8BlocksRoundTripWithinHalfAStep) {
  std::mt19937 random(3);
  Tensor weight = random_tensor({5, 64}, DType::f32, random);
  weight.mutable_data<float>()[7] = 0;
  for (int i = 32; i < 64; ++i) weight.mutable_data<float>()[i] = 0;  // an all-zero block: scale 0
  Tensor quantized = quantize_int8(weight);
  ASSERT_TRUE(quantized.quantized());
  EXPECT_EQ(quantized.block_scales().shape(), (Shape{5, 2}));
  for (int64_t i = 0; i < weight.numel(); ++i) {
    const float scale = reference::load_f32(quantized.block_scales(), i / 32);
    EXPECT_LE(std::abs(reference::load_f32(quantized, i) - weight.data<float>()[i]), 0.5f * scale + 1e-7f) << i;
  }
  EXPECT_EQ(reference::load_f32(quantized, 40), 0.0f);
}

// llama.cpp's Q4_0 rule (ggml quantize_row_q4_0_ref): d = the block's signed extreme / -8,
// q = min(15, trunc(x / d + 8.5)), value (q - 8) * d with d rounded to f16. Squared error
// of a weight under it.
double q4_0_squared_error(const Tensor& weight) {
  const float* w = weight.data<float>();
  double error = 0;
  for (int64_t b = 0; b < weight.numel() / 32; ++b) {
    float extreme = 0;
    for (int i = 0; i < 32; ++i)
      if (std::abs(w[b * 32 + i]) > std::abs(extreme)) extreme = w[b * 32 + i];
    const float d = extreme / -8, inverse = d ? 1 / d : 0, stored = f16_to_f32(f32_to_f16(d));
    for (int i = 0; i < 32; ++i) {
      const int q = std::min(15, static_cast<int>(w[b * 32 + i] * inverse + 8.5f));
      error += std::pow(w[b * 32 + i] - (q - 8) * stored, 2);
    }
  }
  return error;
}

// int4 against Q4_0 at the same size: values within a step of the weight (unless clamped),
// the layout as documented, and less squared error than Q4_0's rule
// on normal and on heavy-tailed weights.
TEST(Quantize, Int4IsAtLeastAsAccurateAsQ4_0) {
  std::mt19937 random(5);
  Tensor weight = random_tensor({64, 256}, DType::f32, random);
  std::student_t_distribution<float> heavy(3.0f);
  Tensor tails = Tensor::empty({64, 256}, DType::f32);
  for (int64_t i = 0; i < tails.numel(); ++i) tails.mutable_data<float>()[i] = 0.02f * heavy(random);
  for (int i = 0; i < 32; ++i) weight.mutable_data<float>()[i] = 0;  // an all-zero block
  for (const Tensor* w : {&weight, &tails}) {
    const Tensor quantized = quantize_int4(*w);
    ASSERT_EQ(quantized.dtype(), DType::i4);
    ASSERT_EQ(quantized.nbytes(), static_cast<size_t>(w->numel() / 2));
    EXPECT_EQ(quantized.block_scales().shape(), (Shape{64, 8}));
    double error = 0;
    for (int64_t i = 0; i < w->numel(); ++i) {
      const float scale = reference::load_f32(quantized.block_scales(), i / 32);
      const float value = reference::load_f32(quantized, i), original = w->data<float>()[i];
      error += std::pow(value - original, 2);
      const int q = int4_value(static_cast<const uint8_t*>(quantized.raw()) + (i / 256) * 128, i % 256);
      EXPECT_EQ(value, q * scale) << i;
      if (q > -8 && q < 7) {  // half a step of the rounding scale, which the refit moves a little
        EXPECT_LE(std::abs(value - original), std::abs(scale)) << i;
      }
    }
    const double q4_0 = q4_0_squared_error(*w);
    std::cout << (w == &weight ? "normal" : "heavy-tailed") << " weights: int4 squared error / Q4_0's "
              << error / q4_0 << "\n";
    EXPECT_LT(error, q4_0) << (w == &weight ? "normal" : "heavy-tailed");
  }
  EXPECT_EQ(reference::load_f32(quantize_int4(weight), 5), 0.0f);
  EXPECT_THROW(quantize_int4(random_tensor({4, 40}, DType::f32, random)), Error);
}

// Rows go to threads in runs of 64: 300 rows at three threads give uneven runs, and the
// bytes must be those of one thread. A non-finite value is still named, from any thread.
TEST(Quantize, ThreadsDoNotChangeTheResult) {
  std::mt19937 random(9);
  Tensor weight = random_tensor({300, 64}, DType::bf16, random);
  const auto same_bytes = [](const Tensor& a, const Tensor& b) {
    return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0 &&
           std::memcmp(a.block_scales().raw(), b.block_scales().raw(), a.block_scales().nbytes()) == 0;
  };
  EXPECT_TRUE(same_bytes(quantize_int4(weight, 1), quantize_int4(weight, 3)));
  EXPECT_TRUE(same_bytes(quantize_int8(weight, 1), quantize_int8(weight, 3)));
  Tensor broken = random_tensor({300, 64}, DType::f32, random);
  broken.mutable_data<float>()[250 * 64 + 7] = std::nanf("");
  EXPECT_NE(testing::error_of([&] { quantize_int4(broken, 3); }).find("row 250 holds a non-finite value"),
            std::string::npos);
}

TEST(Quantize, RejectsRowsThatAreNotWholeBlocks) {
  std::mt19937 random(3);
  EXPECT_THROW(quantize_int8(random_tensor({4, 40}, DType::f32, random)), Error);
  EXPECT_FALSE(quantizable(Shape{4, 40}));
  EXPECT_TRUE(quantizable(Shape{4, 64}));
}

}  // namespace
}  // namespace shardlm::backends::cpu
