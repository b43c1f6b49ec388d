#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace shardlm {
namespace {

// Round-to-nearest-even done the slow way, in double, as an independent reference.
double round_to_grid(double value, int mantissa_bits, int min_exponent, double max_finite) {
  if (std::isnan(value) || std::isinf(value) || value == 0) return value;
  int exponent = std::ilogb(value);
  exponent = std::max(exponent, min_exponent);  // subnormals share the smallest exponent's ulp
  const double ulp = std::ldexp(1.0, exponent - mantissa_bits);
  const double scaled = value / ulp;
  double rounded = std::nearbyint(scaled);  // default rounding mode: nearest, ties to even
  double result = rounded * ulp;
  // Past the largest finite value by half an ulp or more: infinity.
  const double top_ulp = std::ldexp(1.0, std::ilogb(max_finite) - mantissa_bits);
  if (std::abs(value) >= max_finite + top_ulp / 2) return std::copysign(INFINITY, value);
  return result;
}

TEST(DType, Bf16RoundTripIsExactForEveryBitPattern) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    float value = bf16_to_f32(static_cast<uint16_t>(bits));
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(value))));
      continue;
    }
    EXPECT_EQ(f32_to_bf16(value), bits) << bits;
  }
}

// The bulk conversion runs eight at a time: bit for bit the scalar one, NaN payloads,
// infinities, subnormals and ties included, and in the tail past the last eight.
TEST(DType, BulkBf16ConversionMatchesTheScalarOne) {
  std::vector<float> values;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 65521) values.push_back(std::bit_cast<float>(uint32_t(bits)));
  for (uint32_t bits : {0x7f800000u, 0xff800000u, 0x7f800001u, 0xffc00000u, 0x7fffffffu, 0x00000001u, 0x80000001u,
                        0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f7f8000u})
    values.push_back(std::bit_cast<float>(bits));
  values.resize(values.size() / 8 * 8 + 5, 1.00390625f);  // a tie, in the scalar tail
  std::vector<uint16_t> bulk(values.size());
  convert_from_f32(values.data(), bulk.data(), DType::bf16, values.size());
  for (size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(bulk[i], f32_to_bf16(values[i])) << "bits " << std::bit_cast<uint32_t>(values[i]);
}

// The bulk widening, eight at a time too: every bf16 bit pattern, then three in the tail.
TEST(DType, BulkBf16WideningMatchesTheScalarOne) {
  std::vector<uint16_t> patterns(65536 + 3);
  for (size_t i = 0; i < patterns.size(); ++i) patterns[i] = static_cast<uint16_t>(i * 40503u);
  std::vector<float> bulk(patterns.size());
  convert_to_f32(patterns.data(), DType::bf16, bulk.data(), patterns.size());
  for (size_t i = 0; i < patterns.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(bulk[i]), std::bit_cast<uint32_t>(bf16_to_f32(patterns[i]))) << i;
}

TEST(DType, F16RoundTripIsExactForEveryBitPattern) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    float value = f16_to_f32(static_cast<uint16_t>(bits));
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(value))));
      continue;
    }
    EXPECT_EQ(f32_to_f16(value), bits) << bits;
  }
}

TEST(DType, F16DecodesKnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
}

TEST(DType, RoundsToNearestEvenLikeADoubleReference) {
  std::mt19937 random(7);
  std::uniform_int_distribution<uint32_t> bits_distribution;
  int checked = 0;
  for (int i = 0; i < 2'000'000; ++i) {
    float value = std::bit_cast<float>(bits_distribution(random));
    if (std::isnan(value)) continue;
    double expected_bf16 = round_to_grid(value, 7, -126, 3.3895313892515355e38);
    ASSERT_EQ(static_cast<double>(bf16_to_f32(f32_to_bf16(value))), expected_bf16) << value;
    if (std::abs(value) < 1e6 || std::isinf(value)) {
      double expected_f16 = round_to_grid(value, 10, -14, 65504.0);
      ASSERT_EQ(static_cast<double>(f16_to_f32(f32_to_f16(value))), expected_f16) << value;
    }
    ++checked;
  }
  EXPECT_GT(checked, 1'000'000);
}

TEST(DType, TiesGoToEven) {
  // 1 + 2^-8 lies exactly between two bf16 values; the even one is 1.0.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(f16_to_f32(f32_to_f16(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_EQ(f16_to_f32(f32_to_f16(65520.0f)), INFINITY);  // halfway to 2^16 rounds up to infinity
  EXPECT_EQ(f16_to_f32(f32_to_f16(65519.0f)), 65504.0f);
}

TEST(DType, ParsesTorchSpellings) {
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("torch.float16"), DType::f16);
  EXPECT_EQ(parse_dtype("f32"), DType::f32);
  EXPECT_THROW(parse_dtype("float8"), Error);
  try {
    parse_dtype("float8");
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("bfloat16"), std::string::npos);
  }
}

}  // namespace
}  // namespace shardlm
