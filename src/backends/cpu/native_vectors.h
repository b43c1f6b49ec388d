#pragma once
// The float vector of the instruction set a file is compiled for: 16 lanes under AVX-512,
// 8 under AVX, else 4 (SSE2, or whatever GCC's vectors lower to), for the kernels written
// once for every width (row_kernels.h, ggml_block_kernels.h). Internal linkage: each file
// compiled under other flags has its own, never merged by the linker.

#include <cstdint>
#include <cstring>

namespace shardlm::backends::cpu {
namespace {
namespace native {

#if defined(__AVX512F__)
constexpr int64_t lanes = 16;
#elif defined(__AVX__)
constexpr int64_t lanes = 8;
#else
constexpr int64_t lanes = 4;
#endif
using f32xN = float __attribute__((vector_size(lanes * 4)));

inline f32xN load(const float* p) {
  f32xN v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, f32xN v) { std::memcpy(p, &v, sizeof v); }

}  // namespace native
}  // namespace
}  // namespace shardlm::backends::cpu
