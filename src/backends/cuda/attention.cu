// Causal attention over the static cache, in two forms.
// Decode (fewer than 16 query rows per sequence), flash-decoding: the cache length is cut
// into chunks, a block per (query row, head, chunk) keeps an online softmax over its
// chunk's keys, and a second kernel merges the chunks' partial results. The number of
// chunks depends only on shapes (a captured CUDA graph replays it every step); chunks
// past a query's position exit at once.
// Prefill, flash-attention tiling: a block per (16 consecutive query rows, head) walks
// the keys its rows see in tiles of 32 held in shared memory, so each key is read once
// per 16 queries; each warp keeps the online softmax of 4 rows. On CUDA cores, in f32.
#include <algorithm>
#include <cmath>

#include "backends/cuda/device_values.cuh"
#include "backends/cuda/kernels.h"

namespace shardlm::backends::cuda {
namespace {

constexpr int attention_warps = 4;
constexpr int keys_per_step = 4;  // keys a warp has in flight at once
constexpr int max_dims_per_lane = 8;  // head_dim <= 256
constexpr int64_t shortest_chunk = 64, most_splits = 256;

struct Split {
  int64_t splits, chunk;
};

// Chunks of 64 positions, or longer ones past 256 chunks: a long cache then launches
// (and merges) at most 256 partial results per query row and head.
Split split_for(const AttentionArguments& a) {
  const int64_t query_rows = a.batch * a.seq * a.heads;
  if (query_rows >= 1024) return {1, a.max_cache_len};
  const int64_t splits = std::min((a.max_cache_len + shortest_chunk - 1) / shortest_chunk, most_splits);
  return {splits, (a.max_cache_len + splits - 1) / splits};
}

template <typename Cache>
__device__ __forceinline__ float cache_value(const Cache* row, int64_t d) {
  if constexpr (sizeof(Cache) == 4) return row[d];
  else return __bfloat162float(row[d]);
}

constexpr int tile_queries = 16, tile_keys = 32, rows_per_warp = tile_queries / attention_warps;

// Shared memory of the prefill kernel: queries [16][head_dim], keys [32][head_dim + 1]
// (the pad puts lane j's key row on its own bank), values [32][head_dim].
size_t prefill_shared_bytes(int64_t head_dim) {
  return static_cast<size_t>(tile_queries * head_dim + tile_keys * (head_dim + 1) + tile_keys * head_dim) *
         sizeof(float);
}

template <typename Cache>
__global__ void __launch_bounds__(attention_warps * 32) attention_prefill_kernel(AttentionArguments a) {
  extern __shared__ float shared[];
  __shared__ int32_t row_position[tile_queries];
  const int64_t head_dim = a.head_dim;
  float* queries = shared;                                // [tile_queries, head_dim], pre-scaled
  float* keys = queries + tile_queries * head_dim;        // [tile_keys, head_dim + 1]
  float* values = keys + tile_keys * (head_dim + 1);      // [tile_keys, head_dim]
  const int64_t first_row = blockIdx.x * static_cast<int64_t>(tile_queries), head = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  for (int i = threadIdx.x; i < tile_queries; i += blockDim.x) {
    const int64_t s = first_row + i;
    row_position[i] = s < a.seq ? a.positions[b * a.seq + s] : -1;
  }
  for (int64_t index = threadIdx.x; index < tile_queries * head_dim; index += blockDim.x) {
    const int64_t s = first_row + index / head_dim;
    queries[index] =
        s < a.seq ? a.q[((b * a.seq + s) * a.heads + head) * head_dim + index % head_dim] * a.scale : 0.0f;
  }
  __syncthreads();

  // The keys any row of the tile sees: [tile_first, tile_end).
  int64_t end[rows_per_warp], first[rows_per_warp];
  int64_t tile_first = a.max_cache_len, tile_end = 0;
  for (int i = 0; i < tile_queries; ++i) {
    const int32_t position = row_position[i];
    const int64_t row_end = position < 0 ? 0 : min(static_cast<int64_t>(position) + 1, a.max_cache_len);
    const int64_t row_first = a.sliding_window > 0 ? max(int64_t{0}, row_end - a.sliding_window) : 0;
    if (row_end > row_first) tile_first = min(tile_first, row_first), tile_end = max(tile_end, row_end);
    if (i / rows_per_warp == warp) end[i % rows_per_warp] = row_end, first[i % rows_per_warp] = row_first;
  }

  const int64_t group = a.heads / a.kv_heads;
  const int64_t cache_base = (a.cache_rows[b] * a.kv_heads + head / group) * a.max_cache_len * head_dim;
  const Cache* key_cache = static_cast<const Cache*>(a.k_cache) + cache_base;
  const Cache* value_cache = static_cast<const Cache*>(a.v_cache) + cache_base;
  float running_max[rows_per_warp], running_sum[rows_per_warp] = {}, accumulator[rows_per_warp][max_dims_per_lane] = {};
#pragma unroll
  for (int r = 0; r < rows_per_warp; ++r) running_max[r] = -INFINITY;

  for (int64_t tile_start = tile_first; tile_start < tile_end; tile_start += tile_keys) {
    __syncthreads();  // the previous tile is consumed
    for (int64_t index = threadIdx.x; index < tile_keys * head_dim; index += blockDim.x) {
      const int64_t j = index / head_dim, d = index % head_dim, t = tile_start + j;
      const bool inside = t < tile_end;
      keys[j * (head_dim + 1) + d] = inside ? cache_value(key_cache + t * head_dim, d) : 0.0f;
      values[j * head_dim + d] = inside ? cache_value(value_cache + t * head_dim, d) : 0.0f;
    }
    __syncthreads();
    const int64_t t = tile_start + lane;  // this lane's key
#pragma unroll
    for (int r = 0; r < rows_per_warp; ++r) {
      const float* query = queries + (warp * rows_per_warp + r) * head_dim;
      float score = -INFINITY;
      if (t >= first[r] && t < end[r]) {
        float dot = 0;
        for (int64_t d = 0; d < head_dim; ++d) dot += query[d] * keys[lane * (head_dim + 1) + d];
        score = dot;
      }
      const float tile_max = warp_max(score);
      if (tile_max == -INFINITY) continue;  // no key of this tile is visible to this row (warp-uniform)
      const float new_max = fmaxf(running_max[r], tile_max);
      const float correction = expf(running_max[r] - new_max);
      const float weight = score == -INFINITY ? 0.0f : expf(score - new_max);
      running_sum[r] = running_sum[r] * correction + warp_sum(weight);
#pragma unroll
      for (int k = 0; k < max_dims_per_lane; ++k) accumulator[r][k] *= correction;
      for (int j = 0; j < tile_keys; ++j) {
        const float p = __shfl_sync(0xffffffffu, weight, j);
        if (p == 0.0f) continue;  // warp-uniform: every lane holds the same p
#pragma unroll
        for (int k = 0; k < max_dims_per_lane; ++k) {
          const int64_t d = lane + 32 * k;
          if (d < head_dim) accumulator[r][k] += p * values[j * head_dim + d];
        }
      }
      running_max[r] = new_max;
    }
  }

#pragma unroll
  for (int r = 0; r < rows_per_warp; ++r) {
    const int64_t s = first_row + warp * rows_per_warp + r;
    if (s >= a.seq) continue;
    float* result = a.out + ((b * a.seq + s) * a.heads + head) * head_dim;
#pragma unroll
    for (int k = 0; k < max_dims_per_lane; ++k) {
      const int64_t d = lane + 32 * k;
      // A padding row (nothing visible) gives zeros.
      if (d < head_dim) result[d] = running_sum[r] > 0 ? accumulator[r][k] / running_sum[r] : 0.0f;
    }
  }
}

template <typename Cache>
__global__ void __launch_bounds__(attention_warps * 32)
    attention_chunk_kernel(AttentionArguments a, int64_t chunk, float* partial) {
  __shared__ float warp_max_of[attention_warps], warp_sum_of[attention_warps];
  __shared__ float warp_accumulator[attention_warps][max_dims_per_lane * 32];
  const int64_t query = blockIdx.x, head = blockIdx.y, split = blockIdx.z;  // query = b * seq + s
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t b = query / a.seq, group = a.heads / a.kv_heads;
  const int32_t position = a.positions[query];
  const int64_t end = position < 0 ? 0 : min(static_cast<int64_t>(position) + 1, a.max_cache_len);
  const int64_t first = a.sliding_window > 0 ? max(int64_t{0}, end - a.sliding_window) : 0;
  const int64_t begin = max(first, split * chunk), stop = min(end, (split + 1) * chunk);

  float query_part[max_dims_per_lane];
#pragma unroll
  for (int i = 0; i < max_dims_per_lane; ++i) {
    const int64_t d = lane + 32 * i;
    query_part[i] = d < a.head_dim ? a.q[(query * a.heads + head) * a.head_dim + d] * a.scale : 0.0f;
  }
  const int64_t cache_base = (a.cache_rows[b] * a.kv_heads + head / group) * a.max_cache_len;  // row of [slots, .., max_cache_len, head_dim]
  const Cache* keys = static_cast<const Cache*>(a.k_cache) + cache_base * a.head_dim;
  const Cache* values = static_cast<const Cache*>(a.v_cache) + cache_base * a.head_dim;

  float running_max = -INFINITY, running_sum = 0, accumulator[max_dims_per_lane] = {};
  for (int64_t t0 = begin + warp * keys_per_step; t0 < stop; t0 += attention_warps * keys_per_step) {
    float score[keys_per_step];
#pragma unroll
    for (int u = 0; u < keys_per_step; ++u) {
      const int64_t t = t0 + u;
      float dot = 0;
      if (t < stop) {
#pragma unroll
        for (int i = 0; i < max_dims_per_lane; ++i) {
          const int64_t d = lane + 32 * i;
          if (d < a.head_dim) dot += query_part[i] * cache_value(keys + t * a.head_dim, d);
        }
      }
      score[u] = dot;
    }
    float step_max = running_max;
#pragma unroll
    for (int u = 0; u < keys_per_step; ++u) {
      score[u] = warp_sum(score[u]);
      if (t0 + u < stop) step_max = fmaxf(step_max, score[u]);
    }
    const float correction = expf(running_max - step_max);  // running_max = -inf: 0, nothing to rescale
    running_sum *= correction;
#pragma unroll
    for (int i = 0; i < max_dims_per_lane; ++i) accumulator[i] *= correction;
#pragma unroll
    for (int u = 0; u < keys_per_step; ++u) {
      const int64_t t = t0 + u;
      if (t >= stop) continue;
      const float weight = expf(score[u] - step_max);
      running_sum += weight;
#pragma unroll
      for (int i = 0; i < max_dims_per_lane; ++i) {
        const int64_t d = lane + 32 * i;
        if (d < a.head_dim) accumulator[i] += weight * cache_value(values + t * a.head_dim, d);
      }
    }
    running_max = step_max;
  }

  if (lane == 0) warp_max_of[warp] = running_max, warp_sum_of[warp] = running_sum;
#pragma unroll
  for (int i = 0; i < max_dims_per_lane; ++i) warp_accumulator[warp][lane + 32 * i] = accumulator[i];
  __syncthreads();
  float block_max = -INFINITY;
  for (int w = 0; w < attention_warps; ++w) block_max = fmaxf(block_max, warp_max_of[w]);
  float block_sum = 0;
  for (int w = 0; w < attention_warps; ++w)
    if (warp_max_of[w] != -INFINITY) block_sum += warp_sum_of[w] * expf(warp_max_of[w] - block_max);
  const int64_t row = query * a.heads + head;
  const int64_t splits = gridDim.z;
  float* result = splits == 1 ? a.out + row * a.head_dim : partial + (row * splits + split) * (a.head_dim + 2);
  for (int64_t d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
    float total = 0;
    for (int w = 0; w < attention_warps; ++w)
      if (warp_max_of[w] != -INFINITY) total += warp_accumulator[w][d] * expf(warp_max_of[w] - block_max);
    if (splits == 1) {
      result[d] = block_sum > 0 ? total / block_sum : 0.0f;  // a padding query (nothing visible) gives zeros
    } else {
      result[2 + d] = total;
    }
  }
  if (splits > 1 && threadIdx.x == 0) result[0] = block_max, result[1] = block_sum;
}

// A block per (query row, head): merges the chunks' (max, sum, unnormalized output).
__global__ void attention_merge_kernel(const float* partial, int64_t splits, int64_t head_dim, float* out) {
  const int64_t row = blockIdx.x;
  const float* parts = partial + row * splits * (head_dim + 2);
  float maximum = -INFINITY;
  for (int64_t s = 0; s < splits; ++s) maximum = fmaxf(maximum, parts[s * (head_dim + 2)]);
  float sum = 0;
  for (int64_t s = 0; s < splits; ++s) {
    const float part_max = parts[s * (head_dim + 2)];
    if (part_max != -INFINITY) sum += parts[s * (head_dim + 2) + 1] * expf(part_max - maximum);
  }
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float total = 0;
    for (int64_t s = 0; s < splits; ++s) {
      const float part_max = parts[s * (head_dim + 2)];
      if (part_max != -INFINITY) total += parts[s * (head_dim + 2) + 2 + d] * expf(part_max - maximum);
    }
    out[row * head_dim + d] = sum > 0 ? total / sum : 0.0f;
  }
}

}  // namespace

int64_t attention_scratch_floats(const AttentionArguments& a) {
  if (a.seq >= tile_queries) return 0;
  const Split split = split_for(a);
  return split.splits == 1 ? 0 : a.batch * a.seq * a.heads * split.splits * (a.head_dim + 2);
}

void launch_attention(const AttentionArguments& a, float* scratch, cudaStream_t stream) {
  if (a.batch * a.seq * a.heads == 0) return;
  if (a.seq >= tile_queries) {
    const dim3 grid(static_cast<unsigned>((a.seq + tile_queries - 1) / tile_queries), static_cast<unsigned>(a.heads),
                    static_cast<unsigned>(a.batch));
    const size_t bytes = prefill_shared_bytes(a.head_dim);
    // Beyond 48 KiB (head_dim over 128) a kernel must ask for its shared memory.
    if (a.cache_dtype == DType::bf16) {
      cudaFuncSetAttribute(attention_prefill_kernel<__nv_bfloat16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes));
      attention_prefill_kernel<__nv_bfloat16><<<grid, attention_warps * 32, bytes, stream>>>(a);
    } else {
      cudaFuncSetAttribute(attention_prefill_kernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes));
      attention_prefill_kernel<float><<<grid, attention_warps * 32, bytes, stream>>>(a);
    }
    return;
  }
  const Split split = split_for(a);
  // Query rows on x (up to 2^31 - 1), heads and chunks on y and z (up to 65,535).
  const dim3 grid(static_cast<unsigned>(a.batch * a.seq), static_cast<unsigned>(a.heads),
                  static_cast<unsigned>(split.splits));
  if (a.cache_dtype == DType::bf16) {
    attention_chunk_kernel<__nv_bfloat16><<<grid, attention_warps * 32, 0, stream>>>(a, split.chunk, scratch);
  } else {
    attention_chunk_kernel<float><<<grid, attention_warps * 32, 0, stream>>>(a, split.chunk, scratch);
  }
  if (split.splits > 1)
    attention_merge_kernel<<<static_cast<unsigned>(a.batch * a.seq * a.heads), 128, 0, stream>>>(
        scratch, split.splits, a.head_dim, a.out);
}

}  // namespace shardlm::backends::cuda
