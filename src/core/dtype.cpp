#include "core/dtype.h"

#include <cstring>

#include "core/error.h"

namespace shardlm {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
    case DType::i64: return 8;
    case DType::i8: case DType::u8: return 1;
    case DType::i4: fail("int4 elements have no whole-byte size: two share a byte");
    case DType::q4_k:
    case DType::q6_k: fail(dtype_name(dtype), " elements have no whole-byte size: 256 share a block");
  }
  return 0;
}

size_t dtype_bytes(DType dtype, int64_t count) {
  if (dtype == DType::i4) return static_cast<size_t>(count + 1) / 2;
  if (is_ggml_blocks(dtype)) {
    SHARDLM_CHECK(count % 256 == 0, count, " ", dtype_name(dtype), " values are not whole blocks of 256");
    return static_cast<size_t>(count / 256) * (dtype == DType::q4_k ? 144 : 210);
  }
  return static_cast<size_t>(count) * dtype_size(dtype);
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float32";
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::i8: return "int8";
    case DType::u8: return "uint8";
    case DType::i4: return "int4";
    case DType::q4_k: return "Q4_K";
    case DType::q6_k: return "Q6_K";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  if (name == "float32" || name == "f32" || name == "float" || name == "fp32") return DType::f32;
  if (name == "bfloat16" || name == "bf16") return DType::bf16;
  if (name == "float16" || name == "f16" || name == "half" || name == "fp16") return DType::f16;
  if (name == "int32" || name == "i32") return DType::i32;
  if (name == "int64" || name == "i64") return DType::i64;
  if (name == "int8" || name == "i8") return DType::i8;
  if (name == "uint8" || name == "u8") return DType::u8;
  fail("unknown dtype '", name, "': use one of float32 (f32), bfloat16 (bf16), float16 (f16)");
}

bool is_floating(DType dtype) { return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16; }

bool is_ggml_blocks(DType dtype) { return dtype == DType::q4_k || dtype == DType::q6_k; }

float f16_to_f32(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Subnormal (or zero): value = mantissa * 2^-24, exact in f32.
    float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t f32_to_f16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  if (magnitude < 0x38800000u) {
    // Result is subnormal in f16 (|x| < 2^-14): round x * 2^24 to an integer, ties to even.
    // Adding 0.5f (= 2^-1) aligns the f16 subnormal ulp with the f32 ulp of the sum.
    float scaled = std::bit_cast<float>(magnitude) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(scaled) - std::bit_cast<uint32_t>(0.5f));
  }
  uint32_t rounding_bias = 0xfffu + ((magnitude >> 13) & 1u);
  return sign | static_cast<uint16_t>((magnitude - (112u << 23) + rounding_bias) >> 13);
}

namespace {

using u32x8 = uint32_t __attribute__((vector_size(32)));
using u16x8 = uint16_t __attribute__((vector_size(16)));

// f32_to_bf16 on eight values at once, bit for bit (the scalar loop does not vectorize:
// its NaN test is a branch).
void f32_to_bf16_8(const float* source, uint16_t* destination) {
  u32x8 bits;
  std::memcpy(&bits, source, sizeof bits);
  const u32x8 rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const u32x8 quiet_nan = (bits >> 16) | 0x40u;
  const u32x8 result = (bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded;
  const u16x8 narrowed = __builtin_convertvector(result, u16x8);
  std::memcpy(destination, &narrowed, sizeof narrowed);
}

// bf16_to_f32 on eight values at once (a loop of unknown length stays scalar at -O2).
void bf16_to_f32_8(const uint16_t* source, float* destination) {
  u16x8 bits;
  std::memcpy(&bits, source, sizeof bits);
  const u32x8 widened = __builtin_convertvector(bits, u32x8) << 16;
  std::memcpy(destination, &widened, sizeof widened);
}

}  // namespace

void convert_to_f32(const void* source, DType source_dtype, float* destination, size_t count) {
  switch (source_dtype) {
    case DType::f32:
      std::memcpy(destination, source, count * sizeof(float));
      return;
    case DType::bf16: {
      auto* in = static_cast<const uint16_t*>(source);
      size_t i = 0;
      for (; i + 8 <= count; i += 8) bf16_to_f32_8(in + i, destination + i);
      for (; i < count; ++i) destination[i] = bf16_to_f32(in[i]);
      return;
    }
    case DType::f16: {
      auto* in = static_cast<const uint16_t*>(source);
      for (size_t i = 0; i < count; ++i) destination[i] = f16_to_f32(in[i]);
      return;
    }
    default:
      fail("cannot convert ", dtype_name(source_dtype), " to float32");
  }
}

void convert_from_f32(const float* source, void* destination, DType destination_dtype, size_t count) {
  switch (destination_dtype) {
    case DType::f32:
      std::memcpy(destination, source, count * sizeof(float));
      return;
    case DType::bf16: {
      auto* out = static_cast<uint16_t*>(destination);
      size_t i = 0;
      for (; i + 8 <= count; i += 8) f32_to_bf16_8(source + i, out + i);
      for (; i < count; ++i) out[i] = f32_to_bf16(source[i]);
      return;
    }
    case DType::f16: {
      auto* out = static_cast<uint16_t*>(destination);
      for (size_t i = 0; i < count; ++i) out[i] = f32_to_f16(source[i]);
      return;
    }
    default:
      fail("cannot convert float32 to ", dtype_name(destination_dtype));
  }
}

}  // namespace shardlm
