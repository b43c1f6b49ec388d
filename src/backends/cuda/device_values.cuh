#pragma once
// Loads and stores of the element types the kernels read and write, as f32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include <shardlm/dtype.h>

namespace shardlm::backends::cuda {

__device__ __forceinline__ float load_as_f32(const void* data, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[index]);
    case DType::f16: return __half2float(static_cast<const __half*>(data)[index]);
    default: return static_cast<const float*>(data)[index];
  }
}

__device__ __forceinline__ void store_from_f32(void* data, DType dtype, int64_t index, float value) {
  switch (dtype) {
    case DType::bf16: static_cast<__nv_bfloat16*>(data)[index] = __float2bfloat16_rn(value); break;
    case DType::f16: static_cast<__half*>(data)[index] = __float2half_rn(value); break;
    default: static_cast<float*>(data)[index] = value;
  }
}

__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

inline unsigned blocks_for(int64_t count, int threads) { return static_cast<unsigned>((count + threads - 1) / threads); }

}  // namespace shardlm::backends::cuda
