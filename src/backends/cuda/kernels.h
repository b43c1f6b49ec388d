#pragma once
// Launchers of the CUDA kernels (the .cu files beside this one). They take raw device
// pointers and enqueue on `stream` without synchronizing; shapes are checked by
// cuda_backend.cpp before it calls them. Every launcher is capture-safe: no allocation,
// no host synchronization, so a CUDA graph can record it.

#include <cuda_runtime_api.h>

#include <cstdint>

#include <shardlm/dtype.h>

namespace shardlm::backends::cuda {

// Rotary tables travel by value in the kernel's parameters (no device buffer to keep), in
// double as on the host: position * inv_freq reaches ~1e5 rad.
constexpr int max_rotary_pairs = 256;
struct RopeParameters {
  double inv_freq[max_rotary_pairs];
  int rotary_pairs = 0;              // rotary_dim / 2
  bool interleaved = false;
};

// embedding.cu, elementwise ops -------------------------------------------------------------
// table [table_rows, hidden] holding ids first_row.. ; out f32 [tokens, hidden]; ids outside give zeros
void launch_embedding(const void* table, DType table_dtype, int64_t table_rows, int64_t hidden, const int32_t* ids,
                      int64_t tokens, int64_t first_row, float* out, cudaStream_t stream);
// x f32 [rows, dim] -> out [rows, dim] of out_dtype (f32, bf16 or f16): x * rsqrt(mean(x^2) + eps) * weight
void launch_rms_norm(const float* x, const void* weight, DType weight_dtype, float eps, int64_t rows, int64_t dim,
                     void* out, DType out_dtype, cudaStream_t stream);
// f32 [count] -> out_dtype [count], rounded to nearest even
void launch_convert(const float* x, int64_t count, void* out, DType out_dtype, cudaStream_t stream);
// In place. x f32 [tokens, heads, head_dim], positions i32 [tokens]
void launch_rope(float* x, const int32_t* positions, int64_t tokens, int64_t heads, int64_t head_dim,
                 const RopeParameters& rope, cudaStream_t stream);
// cache [slots, kv_heads, max_cache_len, head_dim] of cache_dtype; entries f32 [batch, seq, kv_heads, head_dim];
// positions i32 [batch, seq], negative = padding (skipped); cache_rows i32 [batch]. The generator
// keeps positions and rows inside the cache (a kernel cannot throw): one outside it is skipped too.
void launch_kv_cache_write(void* cache, DType cache_dtype, const float* entries, const int32_t* positions,
                           const int32_t* cache_rows, int64_t slots, int64_t batch, int64_t seq, int64_t kv_heads,
                           int64_t head_dim, int64_t max_cache_len, cudaStream_t stream);
void launch_silu_mul(const float* gate, const float* up, float* out, int64_t count, cudaStream_t stream);
void launch_add(const float* a, const float* b, float* out, int64_t count, cudaStream_t stream);
void launch_gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t count, cudaStream_t stream);
// out = x * factor
void launch_scale(const float* x, float factor, float* out, int64_t count, cudaStream_t stream);
// out = cap * tanh(x / cap)
void launch_softcap(const float* x, float cap, float* out, int64_t count, cudaStream_t stream);
// out[r, c] += bias[c] for out f32 [rows, columns], bias of bias_dtype [columns]
void launch_add_bias(float* out, const void* bias, DType bias_dtype, int64_t rows, int64_t columns,
                     cudaStream_t stream);
// out [count, dim] = x[indices[i]]
void launch_gather_rows(const float* x, int64_t dim, const int32_t* indices, int64_t count, float* out,
                        cudaStream_t stream);

// matmul.cu ---------------------------------------------------------------------------------
// Matrix-vector products for few rows (decode), reading each weight once for all rows.
constexpr int64_t max_gemv_rows = 8;
struct GemvArguments {
  const float* x = nullptr;  // [rows, in]
  int64_t rows = 0, in = 0, out_features = 0;
  DType weight_dtype = DType::bf16;
  const void* weight = nullptr;       // [out_features, in]
  const void* bias = nullptr;         // [out_features] of bias_dtype, or null
  DType bias_dtype = DType::f32;
  const void* up_weight = nullptr;    // gated: out = silu(x W^T + b) * (x U^T + c)
  const void* up_bias = nullptr;
  DType up_bias_dtype = DType::f32;
  const float* residual = nullptr;    // [rows, out_features]: added to the result
  const void* norm_weight = nullptr;  // [in]: x is rms-normalized first
  DType norm_dtype = DType::f32;
  float eps = 0;
  float* out = nullptr;  // [rows, out_features]
};
void launch_gemv(const GemvArguments& arguments, cudaStream_t stream);

// attention.cu ------------------------------------------------------------------------------
struct AttentionArguments {
  const float* q = nullptr;  // [batch, seq, heads, head_dim]
  const void* k_cache = nullptr;  // [slots, kv_heads, max_cache_len, head_dim]
  const void* v_cache = nullptr;
  DType cache_dtype = DType::bf16;
  const int32_t* positions = nullptr;  // [batch, seq]
  const int32_t* cache_rows = nullptr;  // [batch]: the cache row of each step row, in [0, slots)
  int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0, max_cache_len = 0;
  float scale = 1;
  int64_t sliding_window = 0;
  float* out = nullptr;  // [batch, seq, heads, head_dim]
};
// Floats of scratch launch_attention needs for these shapes (flash-decoding partial results).
int64_t attention_scratch_floats(const AttentionArguments& arguments);
void launch_attention(const AttentionArguments& arguments, float* scratch, cudaStream_t stream);

// sampling.cu -------------------------------------------------------------------------------
constexpr int64_t max_top_k = 64;
// The k largest logits of each row, descending; equal values in index order (torch.topk's
// stable order). logits f32 [rows, vocab] -> values f32 [rows, k], indices i32 [rows, k].
int64_t top_k_scratch_bytes(int64_t rows, int64_t vocab, int64_t k);
void launch_top_k(const float* logits, int64_t rows, int64_t vocab, int64_t k, float* values, int32_t* indices,
                  void* scratch, cudaStream_t stream);

}  // namespace shardlm::backends::cuda
