// Matrix-vector products for decode: few activation rows against a weight matrix read
// once. A warp per output feature walks its weight row in 16-byte loads (8 bf16/f16 or
// 4+4 f32) and keeps one accumulator per activation row; the fused forms (bias, gate
// and up, residual, rms_norm of the input) are done in the same pass. Many rows (prefill)
// go to cuBLASLt instead (cuda_backend.cpp).
#include "backends/cuda/device_values.cuh"
#include "backends/cuda/kernels.h"

namespace shardlm::backends::cuda {
namespace {

constexpr int warps_per_block = 8;
constexpr int gemv_threads = warps_per_block * 32;

template <typename Weight>
__device__ __forceinline__ void load8(const Weight* source, float (&values)[8]);

template <>
__device__ __forceinline__ void load8<float>(const float* source, float (&values)[8]) {
  const float4 low = reinterpret_cast<const float4*>(source)[0], high = reinterpret_cast<const float4*>(source)[1];
  values[0] = low.x, values[1] = low.y, values[2] = low.z, values[3] = low.w;
  values[4] = high.x, values[5] = high.y, values[6] = high.z, values[7] = high.w;
}

template <>
__device__ __forceinline__ void load8<__nv_bfloat16>(const __nv_bfloat16* source, float (&values)[8]) {
  const uint4 bits = *reinterpret_cast<const uint4*>(source);
  const uint32_t words[4] = {bits.x, bits.y, bits.z, bits.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    values[2 * i] = __uint_as_float(words[i] << 16);
    values[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

template <>
__device__ __forceinline__ void load8<__half>(const __half* source, float (&values)[8]) {
  const uint4 bits = *reinterpret_cast<const uint4*>(source);
  const __half2* pairs = reinterpret_cast<const __half2*>(&bits);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 pair = __half22float2(pairs[i]);
    values[2 * i] = pair.x, values[2 * i + 1] = pair.y;
  }
}

template <typename Weight>
__device__ __forceinline__ float load1(const Weight* source, int64_t index) {
  if constexpr (sizeof(Weight) == 4) return source[index];
  else if constexpr (std::is_same_v<Weight, __half>) return __half2float(source[index]);
  else return __bfloat162float(source[index]);
}

// Dot products of weight row `row` (and of the up weight's, when gated) with every
// activation row, reduced over the warp; the input's norm weight (when given) is folded
// into the activation as it is read. Vectorized when every row starts 16-byte aligned.
template <typename Weight>
__device__ void dot_rows(const GemvArguments& a, int64_t row, bool vectorized, float (&gate)[max_gemv_rows],
                         float (&up)[max_gemv_rows]) {
  const int lane = threadIdx.x % 32;
  const Weight* weight = static_cast<const Weight*>(a.weight) + row * a.in;
  const Weight* up_weight = a.up_weight ? static_cast<const Weight*>(a.up_weight) + row * a.in : nullptr;
  const int64_t vector_end = vectorized ? a.in / 8 * 8 : 0;
#pragma unroll 4
  for (int64_t k = lane * 8; k < vector_end; k += 32 * 8) {
    float w[8], u[8], x[8];
    load8(weight + k, w);
    if (up_weight) load8(up_weight + k, u);
    float norm[8];
    if (a.norm_weight) {
#pragma unroll
      for (int i = 0; i < 8; ++i) norm[i] = load_as_f32(a.norm_weight, a.norm_dtype, k + i);
    }
#pragma unroll
    for (int r = 0; r < max_gemv_rows; ++r) {
      if (r >= a.rows) break;
      load8(a.x + r * a.in + k, x);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float value = a.norm_weight ? x[i] * norm[i] : x[i];
        gate[r] += w[i] * value;
        if (up_weight) up[r] += u[i] * value;
      }
    }
  }
  for (int64_t k = vector_end + lane; k < a.in; k += 32) {
    const float w = load1(weight, k), u = up_weight ? load1(up_weight, k) : 0.0f;
    const float norm = a.norm_weight ? load_as_f32(a.norm_weight, a.norm_dtype, k) : 1.0f;
#pragma unroll
    for (int r = 0; r < max_gemv_rows; ++r) {  // constant indices keep gate/up in registers
      if (r >= a.rows) break;
      const float value = a.x[r * a.in + k] * norm;
      gate[r] += w * value;
      up[r] += u * value;
    }
  }
#pragma unroll
  for (int r = 0; r < max_gemv_rows; ++r) {
    gate[r] = warp_sum(gate[r]);
    if (up_weight) up[r] = warp_sum(up[r]);
  }
}

template <typename Weight>
__global__ void __launch_bounds__(gemv_threads) gemv_kernel(GemvArguments a, bool vectorized) {
  __shared__ float inverse_rms[max_gemv_rows];
  if (a.norm_weight) {  // every block forms the rows' norms itself: rows are few and short
    __shared__ float partial[warps_per_block];
    for (int r = 0; r < a.rows; ++r) {
      float sum = 0;
      for (int64_t k = threadIdx.x; k < a.in; k += gemv_threads) sum += a.x[r * a.in + k] * a.x[r * a.in + k];
      sum = warp_sum(sum);
      if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
      __syncthreads();
      if (threadIdx.x == 0) {
        float total = 0;
        for (int w = 0; w < warps_per_block; ++w) total += partial[w];
        inverse_rms[r] = 1.0f / sqrtf(total / static_cast<float>(a.in) + a.eps);
      }
      __syncthreads();
    }
  }
  const int64_t row = blockIdx.x * static_cast<int64_t>(warps_per_block) + threadIdx.x / 32;
  if (row >= a.out_features) return;
  float gate[max_gemv_rows] = {}, up[max_gemv_rows] = {};
  dot_rows<Weight>(a, row, vectorized, gate, up);
  if (threadIdx.x % 32 != 0) return;
  const float bias = a.bias ? load_as_f32(a.bias, a.bias_dtype, row) : 0.0f;
  const float up_bias = a.up_bias ? load_as_f32(a.up_bias, a.up_bias_dtype, row) : 0.0f;
#pragma unroll
  for (int r = 0; r < max_gemv_rows; ++r) {
    if (r >= a.rows) break;
    float value = gate[r] * (a.norm_weight ? inverse_rms[r] : 1.0f) + bias;
    if (a.up_weight) {
      const float up_value = up[r] * (a.norm_weight ? inverse_rms[r] : 1.0f) + up_bias;
      value = value / (1.0f + expf(-value)) * up_value;
    }
    if (a.residual) value += a.residual[r * a.out_features + row];
    a.out[r * a.out_features + row] = value;
  }
}

bool aligned16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace

void launch_gemv(const GemvArguments& a, cudaStream_t stream) {
  if (a.rows == 0 || a.out_features == 0) return;
  const bool vectorized = a.in % 8 == 0 && aligned16(a.x) && aligned16(a.weight) &&
                          (!a.up_weight || aligned16(a.up_weight));
  const unsigned blocks = blocks_for(a.out_features, warps_per_block);
  switch (a.weight_dtype) {
    case DType::bf16: gemv_kernel<__nv_bfloat16><<<blocks, gemv_threads, 0, stream>>>(a, vectorized); break;
    case DType::f16: gemv_kernel<__half><<<blocks, gemv_threads, 0, stream>>>(a, vectorized); break;
    default: gemv_kernel<float><<<blocks, gemv_threads, 0, stream>>>(a, vectorized); break;
  }
}

}  // namespace shardlm::backends::cuda
