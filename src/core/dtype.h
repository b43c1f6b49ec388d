#pragma once
// Bit-exact conversions between f32 and the 16-bit float formats.
// f16/bf16 -> f32 is exact; f32 -> f16/bf16 rounds to nearest, ties to even, as torch does.

#include <shardlm/dtype.h>

#include <bit>
#include <cstdint>

namespace shardlm {

inline float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

inline uint16_t f32_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

// Converts `count` elements from `source` (of `source_dtype`) to f32.
void convert_to_f32(const void* source, DType source_dtype, float* destination, size_t count);
// Converts `count` f32 values to `destination_dtype` (a floating type).
void convert_from_f32(const float* source, void* destination, DType destination_dtype, size_t count);

}  // namespace shardlm
