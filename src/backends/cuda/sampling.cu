// The k largest logits of each row on the device, so that a decode step moves k values
// to the host instead of the whole vocabulary. Two passes: blocks find the top k of their
// part of a row, then a block per row picks the top k among the parts' candidates. Each
// pass selects k times "the largest element ordered after the last one picked", in the
// order (value descending, index ascending; NaN above every number, as torch.topk ranks
// it) so nothing needs marking. A row shorter than k pads with index -1.
#include <cmath>

#include "backends/cuda/device_values.cuh"
#include "backends/cuda/kernels.h"

namespace shardlm::backends::cuda {
namespace {

constexpr int top_k_threads = 256;
constexpr int64_t parts_per_row = 32;

struct Candidate {
  float value;
  int32_t index;  // -1: none
};

// a comes first in (NaN, then value descending; index ascending among equals) order;
// none comes last.
__device__ __forceinline__ bool precedes(Candidate a, Candidate b) {
  if (a.index < 0) return false;
  if (b.index < 0) return true;
  const bool a_nan = isnan(a.value), b_nan = isnan(b.value);
  if (a_nan != b_nan) return a_nan;
  if (a_nan || a.value == b.value) return a.index < b.index;
  return a.value > b.value;
}

__device__ Candidate block_first(Candidate mine) {
  __shared__ Candidate warp_best[top_k_threads / 32];
  for (int offset = 16; offset > 0; offset /= 2) {
    Candidate other{__shfl_xor_sync(0xffffffffu, mine.value, offset), __shfl_xor_sync(0xffffffffu, mine.index, offset)};
    if (precedes(other, mine)) mine = other;
  }
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = mine;
  __syncthreads();
  Candidate best{0, -1};
  for (int w = 0; w < top_k_threads / 32; ++w)
    if (precedes(warp_best[w], best)) best = warp_best[w];
  __syncthreads();  // warp_best is reused by the next call
  return best;
}

// Selects the first k of `count` candidates produced by `at(i)` into out_values/out_indices.
template <typename At>
__device__ void select_first_k(int64_t count, int64_t k, At at, float* out_values, int32_t* out_indices) {
  Candidate last{0, -1};
  bool started = false;
  for (int64_t j = 0; j < k; ++j) {
    Candidate mine{0, -1};
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const Candidate c = at(i);
      if (c.index < 0) continue;
      if (started && !precedes(last, c)) continue;  // already picked, or ordered before the last pick
      if (precedes(c, mine)) mine = c;
    }
    last = block_first(mine);
    started = true;
    if (threadIdx.x == 0) out_values[j] = last.index < 0 ? -INFINITY : last.value, out_indices[j] = last.index;
    if (last.index < 0) last = Candidate{-INFINITY, INT32_MAX};  // nothing left: later picks find none
  }
}

__global__ void top_k_parts_kernel(const float* logits, int64_t vocab, int64_t k, float* part_values,
                                   int32_t* part_indices) {
  const int64_t row = blockIdx.y, part = blockIdx.x;
  const int64_t part_length = (vocab + parts_per_row - 1) / parts_per_row;
  const int64_t begin = part * part_length, end = min(vocab, begin + part_length);
  const float* values = logits + row * vocab;
  const int64_t slot = (row * parts_per_row + part) * k;
  select_first_k(
      max(int64_t{0}, end - begin), k,
      [&](int64_t i) { return Candidate{values[begin + i], static_cast<int32_t>(begin + i)}; },
      part_values + slot, part_indices + slot);
}

__global__ void top_k_merge_kernel(const float* part_values, const int32_t* part_indices, int64_t k, float* values,
                                   int32_t* indices) {
  const int64_t row = blockIdx.x, first = row * parts_per_row * k;
  select_first_k(
      parts_per_row * k, k, [&](int64_t i) { return Candidate{part_values[first + i], part_indices[first + i]}; },
      values + row * k, indices + row * k);
}

}  // namespace

int64_t top_k_scratch_bytes(int64_t rows, int64_t, int64_t k) {
  return rows * parts_per_row * k * static_cast<int64_t>(sizeof(float) + sizeof(int32_t));
}

void launch_top_k(const float* logits, int64_t rows, int64_t vocab, int64_t k, float* values, int32_t* indices,
                  void* scratch, cudaStream_t stream) {
  if (rows == 0 || k == 0) return;
  auto* part_values = static_cast<float*>(scratch);
  auto* part_indices = reinterpret_cast<int32_t*>(part_values + rows * parts_per_row * k);
  top_k_parts_kernel<<<dim3(static_cast<unsigned>(parts_per_row), static_cast<unsigned>(rows)), top_k_threads, 0,
                       stream>>>(logits, vocab, k, part_values, part_indices);
  top_k_merge_kernel<<<static_cast<unsigned>(rows), top_k_threads, 0, stream>>>(part_values, part_indices, k, values,
                                                                               indices);
}

}  // namespace shardlm::backends::cuda
