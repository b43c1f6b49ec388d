#include "core/ggml_blocks.h"

#include <array>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "core/quantize.h"

namespace shardlm {
namespace {

constexpr std::array<GgmlTypeInfo, 34> known_types = {{
    {0, "F32", 1, 4, true},         {1, "F16", 1, 2, true},          {2, "Q4_0", 32, 18, true},
    {3, "Q4_1", 32, 20, false},     {6, "Q5_0", 32, 22, true},      {7, "Q5_1", 32, 24, false},
    {8, "Q8_0", 32, 34, true},      {9, "Q8_1", 32, 40, false},      {10, "Q2_K", 256, 84, false},
    {11, "Q3_K", 256, 110, false},  {12, "Q4_K", 256, 144, true},    {13, "Q5_K", 256, 176, false},
    {14, "Q6_K", 256, 210, true},   {15, "Q8_K", 256, 292, false},   {16, "IQ2_XXS", 256, 66, false},
    {17, "IQ2_XS", 256, 74, false}, {18, "IQ3_XXS", 256, 98, false}, {19, "IQ1_S", 256, 50, false},
    {20, "IQ4_NL", 32, 18, false},  {21, "IQ3_S", 256, 110, false},  {22, "IQ2_S", 256, 82, false},
    {23, "IQ4_XS", 256, 136, false}, {24, "I8", 1, 1, false},        {25, "I16", 1, 2, false},
    {26, "I32", 1, 4, false},       {27, "I64", 1, 8, false},        {28, "F64", 1, 8, false},
    {29, "IQ1_M", 256, 56, false},  {30, "BF16", 1, 2, true},        {34, "TQ1_0", 256, 54, false},
    {35, "TQ2_0", 256, 66, false},  {39, "MXFP4", 32, 17, false},    {40, "NVFP4", 64, 36, false},
    {41, "Q1_0", 128, 18, false},
}};

uint16_t read_u16(const std::byte* p) {
  uint16_t value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

// Q8_0: d (f16), 32 int8 codes; value = d * code.
void decode_q8_0(const std::byte* block, float* out) {
  const float d = f16_to_f32(read_u16(block));
  const auto* codes = reinterpret_cast<const int8_t*>(block + 2);
  for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(codes[i]);
}

// Q4_0: d (f16), 16 bytes of 4-bit codes; byte j holds value j (low nibble) and value
// j + 16 (high nibble); value = d * (code - 8).
void decode_q4_0(const std::byte* block, float* out) {
  const float d = f16_to_f32(read_u16(block));
  const auto* codes = reinterpret_cast<const uint8_t*>(block + 2);
  for (int j = 0; j < 16; ++j) {
    out[j] = d * static_cast<float>((codes[j] & 0x0F) - 8);
    out[j + 16] = d * static_cast<float>((codes[j] >> 4) - 8);
  }
}

// Q5_0: d (f16), 32 high bits (bit j of value j), 16 bytes of low 4-bit codes (byte j:
// value j low nibble, value j + 16 high nibble); value = d * (code - 16).
void decode_q5_0(const std::byte* block, float* out) {
  const float d = f16_to_f32(read_u16(block));
  uint32_t high;
  std::memcpy(&high, block + 2, sizeof high);
  const auto* codes = reinterpret_cast<const uint8_t*>(block + 6);
  for (int j = 0; j < 16; ++j) {
    const int low_code = (codes[j] & 0x0F) | static_cast<int>(((high >> j) << 4) & 0x10);
    const int high_code = (codes[j] >> 4) | static_cast<int>((high >> (j + 12)) & 0x10);
    out[j] = d * static_cast<float>(low_code - 16);
    out[j + 16] = d * static_cast<float>(high_code - 16);
  }
}

// The 6-bit scale and minimum of Q4_K's sub-block j (0..7), packed in 12 bytes.
void q4_k_scale_min(int j, const uint8_t* packed, int& scale, int& minimum) {
  if (j < 4) {
    scale = packed[j] & 63;
    minimum = packed[j + 4] & 63;
  } else {
    scale = (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4);
    minimum = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// Q4_K: d and dmin (f16), 12 bytes of eight 6-bit (scale, min) pairs, 128 bytes of 4-bit
// codes. Eight sub-blocks of 32; 32 code bytes carry two of them (low nibbles the first,
// high nibbles the second); value = d * scale * code - dmin * min.
void decode_q4_k(const std::byte* block, float* out) {
  const float d = f16_to_f32(read_u16(block));
  const float dmin = f16_to_f32(read_u16(block + 2));
  const auto* packed = reinterpret_cast<const uint8_t*>(block + 4);
  const auto* codes = reinterpret_cast<const uint8_t*>(block + 16);
  for (int pair = 0; pair < 4; ++pair) {
    for (int half = 0; half < 2; ++half) {
      int scale = 0, minimum = 0;
      q4_k_scale_min(2 * pair + half, packed, scale, minimum);
      const float step = d * static_cast<float>(scale), offset = dmin * static_cast<float>(minimum);
      for (int i = 0; i < 32; ++i) {
        const int code = half == 0 ? codes[32 * pair + i] & 0x0F : codes[32 * pair + i] >> 4;
        out[64 * pair + 32 * half + i] = step * static_cast<float>(code) - offset;
      }
    }
  }
}

// Q6_K: 128 bytes of low 4 bits, 64 bytes of high 2 bits, 16 int8 sub-block scales, d
// (f16). Two halves of 128 values; in each, position l (0..31) of its 64 low bytes and
// 32 high bytes yields values l, l + 32, l + 64, l + 96 (code - 32, each scaled by the
// scale of its 16-value sub-block, times d).
void decode_q6_k(const std::byte* block, float* out) {
  const auto* low = reinterpret_cast<const uint8_t*>(block);
  const auto* high = reinterpret_cast<const uint8_t*>(block + 128);
  const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
  const float d = f16_to_f32(read_u16(block + 208));
  for (int half = 0; half < 2; ++half, low += 64, high += 32, scales += 8, out += 128) {
    for (int l = 0; l < 32; ++l) {
      const int sub = l / 16;
      const int q1 = ((low[l] & 0x0F) | (((high[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((low[l + 32] & 0x0F) | (((high[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((low[l] >> 4) | (((high[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((low[l + 32] >> 4) | (((high[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * static_cast<float>(scales[sub]) * static_cast<float>(q1);
      out[l + 32] = d * static_cast<float>(scales[sub + 2]) * static_cast<float>(q2);
      out[l + 64] = d * static_cast<float>(scales[sub + 4]) * static_cast<float>(q3);
      out[l + 96] = d * static_cast<float>(scales[sub + 6]) * static_cast<float>(q4);
    }
  }
}

// Q8_0's and Q5_0's codes as int8 values and their scale bits.
void to_int8(GgmlType type, const std::byte* block, int8_t* codes, uint16_t* scale) {
  *scale = read_u16(block);
  if (type == GgmlType::q8_0) {
    std::memcpy(codes, block + 2, 32);
    return;
  }
  uint32_t high;
  std::memcpy(&high, block + 2, sizeof high);
  const auto* low = reinterpret_cast<const uint8_t*>(block + 6);
  for (int j = 0; j < 16; ++j) {
    codes[j] = static_cast<int8_t>(((low[j] & 0x0F) | (((high >> j) << 4) & 0x10)) - 16);
    codes[j + 16] = static_cast<int8_t>(((low[j] >> 4) | ((high >> (j + 12)) & 0x10)) - 16);
  }
}

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  for (const GgmlTypeInfo& info : known_types)
    if (info.id == id) return info;
  return std::nullopt;
}

std::string readable_ggml_types() { return "F32, F16, BF16, Q8_0, Q5_0, Q4_0, Q4_K, Q6_K"; }

void dequantize_ggml(GgmlType type, const std::byte* blocks, float* out, int64_t elements) {
  const std::optional<GgmlTypeInfo> info = ggml_type_info(static_cast<uint32_t>(type));
  SHARDLM_CHECK(info && info->readable, "dequantize_ggml: type ", static_cast<uint32_t>(type), " is not one of ",
                readable_ggml_types());
  SHARDLM_CHECK(elements % info->block_elements == 0, "dequantize_ggml: ", elements, " values are not whole ",
                info->name, " blocks of ", info->block_elements);
  const int64_t block_count = elements / info->block_elements;
  for (int64_t b = 0; b < block_count; ++b) {
    const std::byte* block = blocks + b * info->block_bytes;
    float* values = out + b * info->block_elements;
    switch (type) {
      case GgmlType::f32: std::memcpy(values, block, sizeof(float)); break;
      case GgmlType::f16: *values = f16_to_f32(read_u16(block)); break;
      case GgmlType::bf16: *values = bf16_to_f32(read_u16(block)); break;
      case GgmlType::q8_0: decode_q8_0(block, values); break;
      case GgmlType::q4_0: decode_q4_0(block, values); break;
      case GgmlType::q5_0: decode_q5_0(block, values); break;
      case GgmlType::q4_k: decode_q4_k(block, values); break;
      case GgmlType::q6_k: decode_q6_k(block, values); break;
    }
  }
}

DType ggml_weight_dtype(GgmlType type) {
  switch (type) {
    case GgmlType::f16: return DType::f16;
    case GgmlType::bf16: return DType::bf16;
    case GgmlType::q8_0:
    case GgmlType::q5_0: return DType::i8;
    case GgmlType::q4_0: return DType::i4;
    case GgmlType::q4_k: return DType::q4_k;
    case GgmlType::q6_k: return DType::q6_k;
    case GgmlType::f32: break;
  }
  return DType::f32;
}

Tensor ggml_weight(GgmlType type, std::shared_ptr<const void> owner, const std::byte* blocks, const Shape& shape) {
  const DType dtype = ggml_weight_dtype(type);
  if (dtype != DType::i8 && dtype != DType::i4) return Tensor::wrap(owner, blocks, shape, dtype, /*writable=*/false);
  const int64_t elements = shape.numel(), length = shape.rank() ? shape[shape.rank() - 1] : 1;
  SHARDLM_CHECK(shape.rank() == 2 && length % Tensor::quant_block == 0, "a ", ggml_type_info(uint32_t(type))->name,
                " weight must be [rows, whole blocks of 32], not ", shape.to_string());
  const int64_t block_count = elements / Tensor::quant_block;
  const int64_t block_bytes = ggml_type_info(static_cast<uint32_t>(type))->block_bytes;
  Tensor scales = Tensor::empty({shape[0], length / Tensor::quant_block}, DType::f16);
  auto* scale = scales.mutable_data<uint16_t>();
  if (dtype == DType::i4) {  // int4 keeps Q4_0's nibbles (core/quantize.h)
    Tensor values = Tensor::empty(shape, DType::i4);
    auto* nibbles = static_cast<std::byte*>(values.mutable_raw());
    for (int64_t b = 0; b < block_count; ++b) {
      scale[b] = read_u16(blocks + b * block_bytes);
      std::memcpy(nibbles + b * 16, blocks + b * block_bytes + 2, 16);
    }
    return values.with_block_scales(std::move(scales));
  }
  Tensor values = Tensor::empty(shape, DType::i8);
  auto* codes = values.mutable_data<int8_t>();
  for (int64_t b = 0; b < block_count; ++b) to_int8(type, blocks + b * block_bytes, codes + b * 32, scale + b);
  return values.with_block_scales(std::move(scales));
}

Tensor dequantize_weight(const Tensor& weight) {
  if (is_floating(weight.dtype())) return weight.to_dtype(DType::f32);
  Tensor out = Tensor::empty(weight.shape(), DType::f32);
  float* values = out.mutable_data<float>();
  const int64_t elements = weight.numel();
  if (is_ggml_blocks(weight.dtype())) {
    dequantize_ggml(weight.dtype() == DType::q4_k ? GgmlType::q4_k : GgmlType::q6_k,
                    static_cast<const std::byte*>(weight.raw()), values, elements);
    return out;
  }
  SHARDLM_CHECK(weight.quantized(), "cannot decode ", weight.describe(), ": not a float or block-quantized weight");
  const uint16_t* scales = weight.block_scales().data<uint16_t>();
  const auto* bytes = static_cast<const uint8_t*>(weight.raw());
  for (int64_t i = 0; i < elements; ++i) {  // rows are whole blocks: int4's index runs on across them
    const int code = weight.dtype() == DType::i8 ? static_cast<int8_t>(bytes[i]) : int4_value(bytes, i);
    values[i] = static_cast<float>(code) * f16_to_f32(scales[i / Tensor::quant_block]);
  }
  return out;
}

}  // namespace shardlm
