#pragma once
// Kernels over the k-quant super-blocks a GGUF file stores (DType q4_k, q6_k; layouts in
// core/ggml_blocks.cpp, whose scalar decoders are the reference): decoding rows into f32
// (for gemm's panels) and gemv, which decodes each run of values in registers and meets
// the f32 activations there. Written once for every vector width: each matmul table's
// file includes this and is compiled for its instruction set, so the same loops run 4, 8
// or 16 lanes wide. Internal linkage: the copies made under different flags must never be
// merged by the linker.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernel_table.h"
#include "backends/cpu/native_vectors.h"
#include "core/dtype.h"

namespace shardlm::backends::cpu {
namespace {

namespace ggml_decode {

using native::f32xN, native::lanes, native::store;
using u8xN = uint8_t __attribute__((vector_size(lanes)));

inline u8xN load(const uint8_t* p) {
  u8xN v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
using i32xN = int32_t __attribute__((vector_size(lanes * 4)));
// Through int32: GCC converts uint8 lanes to float one at a time, int32 ones whole.
inline f32xN widen(u8xN v) { return __builtin_convertvector(__builtin_convertvector(v, i32xN), f32xN); }
inline float f16(const std::byte* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return f16_to_f32(bits);
}

inline f32xN load_floats(const float* p) { return native::load(p); }

// One Q4_K super-block (144 bytes): d and dmin, eight 6-bit (scale, min) pairs in 12
// bytes, then 32 bytes of codes per two 32-value sub-blocks (low nibbles the first, high
// nibbles the second); value = d * scale * code - dmin * min. use(k, values) receives its
// values [k, k + lanes) for every k.
template <typename Use>
inline void q4_k(const std::byte* block, Use use) {
  const float d = f16(block), dmin = f16(block + 2);
  const auto* packed = reinterpret_cast<const uint8_t*>(block + 4);
  const auto* codes = reinterpret_cast<const uint8_t*>(block + 16);
  float step[8], offset[8];
  for (int j = 0; j < 8; ++j) {
    const int scale = j < 4 ? packed[j] & 63 : (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4);
    const int minimum = j < 4 ? packed[j + 4] & 63 : (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
    step[j] = d * static_cast<float>(scale);
    offset[j] = dmin * static_cast<float>(minimum);
  }
  for (int pair = 0; pair < 4; ++pair)
    for (int i = 0; i < 32; i += lanes) {
      const u8xN c = load(codes + 32 * pair + i);
      use(64 * pair + i, widen(c & 0x0F) * step[2 * pair] - offset[2 * pair]);
      use(64 * pair + 32 + i, widen(c >> 4) * step[2 * pair + 1] - offset[2 * pair + 1]);
    }
}

// One Q6_K super-block (210 bytes): 128 bytes of low 4 bits, 64 of high 2 bits, 16 int8
// scales (one per 16 values), d. In each half of 128 values, byte l of the low and high
// runs carries values l, l + 32, l + 64 and l + 96; value = d * scale * (code - 32). use as
// for q4_k.
template <typename Use>
inline void q6_k(const std::byte* block, Use use) {
  const auto* low = reinterpret_cast<const uint8_t*>(block);
  const auto* high = reinterpret_cast<const uint8_t*>(block + 128);
  const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
  const float d = f16(block + 208);
  for (int half = 0; half < 2; ++half, low += 64, high += 32, scales += 8)
    for (int l = 0; l < 32; l += lanes) {
      const u8xN first = load(low + l), second = load(low + 32 + l), top = load(high + l);
      const u8xN codes[4] = {(first & 0x0F) | ((top & 3) << 4), (second & 0x0F) | (((top >> 2) & 3) << 4),
                             (first >> 4) | (((top >> 4) & 3) << 4), (second >> 4) | (((top >> 6) & 3) << 4)};
      // lanes <= 16: the run [l, l + lanes) lies in one 16-value sub-block.
      for (int k = 0; k < 4; ++k)
        use(128 * half + 32 * k + l, (widen(codes[k]) - 32.0f) * (d * static_cast<float>(scales[l / 16 + 2 * k])));
    }
}

// use(k, values) over a q4_k or q6_k row of `in` values.
template <typename Use>
inline void row_values(DType dtype, const std::byte* blocks, int64_t in, Use use) {
  for (int64_t b = 0; b < in / 256; ++b) {
    const auto at = [&](int64_t k, f32xN values) { use(b * 256 + k, values); };
    if (dtype == DType::q4_k) q4_k(blocks + b * 144, at);
    else q6_k(blocks + b * 210, at);
  }
}

// out[r * stride + o] = x[r] . row o, for R rows of x [R, in] and o in [o_begin, o_end).
template <int R>
void gemv_rows(const float* x, const WeightView& w, int64_t o_begin, int64_t o_end, float* out, int64_t stride) {
  const size_t row_bytes = dtype_bytes(w.dtype, w.in);
  for (int64_t o = o_begin; o < o_end; ++o) {
    f32xN sums[R] = {};
    row_values(w.dtype, static_cast<const std::byte*>(w.data) + static_cast<size_t>(o) * row_bytes, w.in,
               [&](int64_t k, f32xN values) {
                 for (int r = 0; r < R; ++r) sums[r] += load_floats(x + r * w.in + k) * values;
               });
    for (int r = 0; r < R; ++r) {
      float total = 0;
      for (int i = 0; i < lanes; ++i) total += sums[r][i];
      out[r * stride + o] = total;
    }
  }
}

}  // namespace ggml_decode

// Row values [0, in) of a q4_k or q6_k weight whose row starts at `blocks`, into out.
inline void decode_ggml_blocks(DType dtype, const std::byte* blocks, int64_t in, float* out) {
  ggml_decode::row_values(dtype, blocks, in,
                          [&](int64_t k, ggml_decode::f32xN values) { ggml_decode::store(out + k, values); });
}

// gemv over a q4_k or q6_k weight (CpuKernels::gemv_blocks): x f32 [rows, in] as it is.
inline void ggml_blocks_gemv(const float* x, int64_t rows, const WeightView& w, int64_t o_begin, int64_t o_end,
                             float* out, int64_t stride) {
  switch (rows) {
    case 1: return ggml_decode::gemv_rows<1>(x, w, o_begin, o_end, out, stride);
    case 2: return ggml_decode::gemv_rows<2>(x, w, o_begin, o_end, out, stride);
    case 3: return ggml_decode::gemv_rows<3>(x, w, o_begin, o_end, out, stride);
    default: return ggml_decode::gemv_rows<4>(x, w, o_begin, o_end, out, stride);
  }
}

}  // namespace
}  // namespace shardlm::backends::cpu
