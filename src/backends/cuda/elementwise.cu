// Embedding, normalization, rotary embedding, cache writes and the elementwise ops.
// Memory-bound one-pass kernels: a thread per element (or per pair), a block per row
// where a row reduction is needed.
#include <cmath>

#include "backends/cuda/device_values.cuh"
#include "backends/cuda/kernels.h"

namespace shardlm::backends::cuda {
namespace {

constexpr int threads_per_block = 256;

__global__ void embedding_kernel(const void* table, DType table_dtype, int64_t table_rows, int64_t hidden,
                                 const int32_t* ids, int64_t tokens, int64_t first_row, float* out) {
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index >= tokens * hidden) return;
  const int64_t token = index / hidden, column = index % hidden;
  const int64_t row = static_cast<int64_t>(ids[token]) - first_row;
  out[index] = row >= 0 && row < table_rows ? load_as_f32(table, table_dtype, row * hidden + column) : 0.0f;
}

// A block per row: the sum of squares reduced over the block, then one scaled pass.
__global__ void rms_norm_kernel(const float* x, const void* weight, DType weight_dtype, float eps, int64_t dim,
                                void* out, DType out_dtype) {
  __shared__ float warp_sums[threads_per_block / 32];
  const float* row = x + blockIdx.x * dim;
  float sum = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += row[i] * row[i];
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < threads_per_block / 32; ++w) total += warp_sums[w];
  const float inverse_rms = 1.0f / sqrtf(total / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    store_from_f32(out, out_dtype, blockIdx.x * dim + i, row[i] * inverse_rms * load_as_f32(weight, weight_dtype, i));
}

__global__ void convert_kernel(const float* x, int64_t count, void* out, DType out_dtype) {
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index < count) store_from_f32(out, out_dtype, index, x[index]);
}

// A thread per (token, head, pair). The angle is formed in double, as the reference does:
// position * inv_freq reaches ~1e5 rad, where an f32 product would be off by ~1e-2 rad.
__global__ void rope_kernel(float* x, const int32_t* positions, int64_t tokens, int64_t heads, int64_t head_dim,
                            RopeParameters rope) {
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t pairs = rope.rotary_pairs;
  if (index >= tokens * heads * pairs) return;
  const int64_t pair = index % pairs, head_row = index / pairs, token = head_row / heads;
  double sine, cosine;
  sincos(static_cast<double>(positions[token]) * rope.inv_freq[pair], &sine, &cosine);
  const float cos_value = static_cast<float>(cosine), sin_value = static_cast<float>(sine);
  float* head = x + head_row * head_dim;
  const int64_t first = rope.interleaved ? 2 * pair : pair;
  const int64_t second = rope.interleaved ? 2 * pair + 1 : pair + pairs;
  const float a = head[first], b = head[second];
  head[first] = a * cos_value - b * sin_value;
  head[second] = b * cos_value + a * sin_value;
}

__global__ void kv_cache_write_kernel(void* cache, DType cache_dtype, const float* entries, const int32_t* positions,
                                      const int32_t* cache_rows, int64_t slots, int64_t seq, int64_t kv_heads, int64_t head_dim, int64_t max_cache_len,
                                      int64_t count) {
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index >= count) return;  // count = batch * seq * kv_heads * head_dim, in entries' order
  const int64_t d = index % head_dim, h = (index / head_dim) % kv_heads, token = index / (head_dim * kv_heads);
  const int32_t b = cache_rows[token / seq];
  const int32_t position = positions[token];
  if (position < 0 || position >= max_cache_len || b < 0 || b >= slots) return;
  store_from_f32(cache, cache_dtype, ((b * kv_heads + h) * max_cache_len + position) * head_dim + d, entries[index]);
}

__global__ void silu_mul_kernel(const float* gate, const float* up, float* out, int64_t count) {
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index >= count) return;
  const float g = gate[index];
  out[index] = g / (1.0f + expf(-g)) * up[index];
}

__global__ void gelu_tanh_mul_kernel(const float* gate, const float* up, float* out, int64_t count) {
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index >= count) return;
  const float g = gate[index];
  const float inner = 0.7978845608028654f * (g + 0.044715f * g * g * g);
  out[index] = 0.5f * g * (1.0f + tanhf(inner)) * up[index];
}

__global__ void scale_kernel(const float* x, float factor, float* out, int64_t count) {
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index < count) out[index] = x[index] * factor;
}

__global__ void softcap_kernel(const float* x, float cap, float* out, int64_t count) {
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index < count) out[index] = cap * tanhf(x[index] / cap);
}

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t count) {
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index < count) out[index] = a[index] + b[index];
}

__global__ void add_bias_kernel(float* out, const void* bias, DType bias_dtype, int64_t rows, int64_t columns) {
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index < rows * columns) out[index] += load_as_f32(bias, bias_dtype, index % columns);
}

__global__ void gather_rows_kernel(const float* x, int64_t dim, const int32_t* indices, int64_t count, float* out) {
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index < count * dim) out[index] = x[static_cast<int64_t>(indices[index / dim]) * dim + index % dim];
}

}  // namespace

void launch_embedding(const void* table, DType table_dtype, int64_t table_rows, int64_t hidden, const int32_t* ids,
                      int64_t tokens, int64_t first_row, float* out, cudaStream_t stream) {
  if (tokens * hidden == 0) return;
  embedding_kernel<<<blocks_for(tokens * hidden, threads_per_block), threads_per_block, 0, stream>>>(
      table, table_dtype, table_rows, hidden, ids, tokens, first_row, out);
}

void launch_rms_norm(const float* x, const void* weight, DType weight_dtype, float eps, int64_t rows, int64_t dim,
                     void* out, DType out_dtype, cudaStream_t stream) {
  if (rows == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(rows), threads_per_block, 0, stream>>>(x, weight, weight_dtype, eps, dim, out,
                                                                                  out_dtype);
}

void launch_convert(const float* x, int64_t count, void* out, DType out_dtype, cudaStream_t stream) {
  if (count == 0) return;
  convert_kernel<<<blocks_for(count, threads_per_block), threads_per_block, 0, stream>>>(x, count, out, out_dtype);
}

void launch_rope(float* x, const int32_t* positions, int64_t tokens, int64_t heads, int64_t head_dim,
                 const RopeParameters& rope, cudaStream_t stream) {
  const int64_t count = tokens * heads * rope.rotary_pairs;
  if (count == 0) return;
  rope_kernel<<<blocks_for(count, threads_per_block), threads_per_block, 0, stream>>>(x, positions, tokens, heads,
                                                                                      head_dim, rope);
}

void launch_kv_cache_write(void* cache, DType cache_dtype, const float* entries, const int32_t* positions,
                           const int32_t* cache_rows, int64_t slots, int64_t batch, int64_t seq, int64_t kv_heads,
                           int64_t head_dim, int64_t max_cache_len, cudaStream_t stream) {
  const int64_t count = batch * seq * kv_heads * head_dim;
  if (count == 0) return;
  kv_cache_write_kernel<<<blocks_for(count, threads_per_block), threads_per_block, 0, stream>>>(
      cache, cache_dtype, entries, positions, cache_rows, slots, seq, kv_heads, head_dim, max_cache_len, count);
}

void launch_silu_mul(const float* gate, const float* up, float* out, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  silu_mul_kernel<<<blocks_for(count, threads_per_block), threads_per_block, 0, stream>>>(gate, up, out, count);
}

void launch_gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  gelu_tanh_mul_kernel<<<blocks_for(count, threads_per_block), threads_per_block, 0, stream>>>(gate, up, out, count);
}

void launch_scale(const float* x, float factor, float* out, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  scale_kernel<<<blocks_for(count, threads_per_block), threads_per_block, 0, stream>>>(x, factor, out, count);
}

void launch_softcap(const float* x, float cap, float* out, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  softcap_kernel<<<blocks_for(count, threads_per_block), threads_per_block, 0, stream>>>(x, cap, out, count);
}

void launch_add(const float* a, const float* b, float* out, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  add_kernel<<<blocks_for(count, threads_per_block), threads_per_block, 0, stream>>>(a, b, out, count);
}

void launch_add_bias(float* out, const void* bias, DType bias_dtype, int64_t rows, int64_t columns,
                     cudaStream_t stream) {
  if (rows * columns == 0) return;
  add_bias_kernel<<<blocks_for(rows * columns, threads_per_block), threads_per_block, 0, stream>>>(
      out, bias, bias_dtype, rows, columns);
}

void launch_gather_rows(const float* x, int64_t dim, const int32_t* indices, int64_t count, float* out,
                        cudaStream_t stream) {
  if (count * dim == 0) return;
  gather_rows_kernel<<<blocks_for(count * dim, threads_per_block), threads_per_block, 0, stream>>>(x, dim, indices,
                                                                                                   count, out);
}

}  // namespace shardlm::backends::cuda
