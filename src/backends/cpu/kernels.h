#pragma once
// The CPU backend's optimized kernels. Each has the semantics of the reference
// kernel of the same name (reference_kernels.h); tests/backends checks them against it.
// Each spreads its work over `pool`.

#include <span>

#include "core/thread_pool.h"
#include "backends/backend.h"
#include "backends/rotary.h"
#include "core/tensor.h"

namespace shardlm::backends::cpu {

void linear(ThreadPool& pool, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out);
void linear_residual(ThreadPool& pool, const Tensor& x, const Tensor& weight, const Tensor& bias,
                     const Tensor& residual, const Tensor& out);
void gated_linear(ThreadPool& pool, const Tensor& x, const Tensor& gate_weight, const Tensor& gate_bias,
                  const Tensor& up_weight, const Tensor& up_bias, const Tensor& out);
void rms_norm_linear(ThreadPool& pool, const Tensor& x, const Tensor& norm_weight, float eps, const Tensor& weight,
                     const Tensor& bias, const Tensor& out);
// Every one of `linears` in one pass over the pool.
void sibling_linears(ThreadPool& pool, const Tensor& x, std::span<const SiblingLinear> linears);
void attention(ThreadPool& pool, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const Tensor& positions, const Tensor& cache_rows, float scale, int64_t sliding_window,
               const Tensor& out);

// x f32 [rows, dim] -> out [rows, dim]; out may be x
void rms_norm_rows(ThreadPool& pool, const float* x, int64_t rows, int64_t dim, const Tensor& weight, float eps,
                   float* out);
void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& weight, float eps, const Tensor& out);
// x f32 [tokens, heads, head_dim], rotated in place by each token's position [tokens].
void rope(ThreadPool& pool, const Tensor& x, const Tensor& positions, const RotaryEmbedding& rotary);
// entries f32 [batch, seq, kv_heads, head_dim] into cache [slots, kv_heads, max_cache_len,
// head_dim] at each row's position [batch, seq] of cache row cache_rows [batch]; negative
// positions are padding.
void kv_cache_write(ThreadPool& pool, const Tensor& cache, const Tensor& entries, const Tensor& positions,
                    const Tensor& cache_rows);
void silu_mul(ThreadPool& pool, const Tensor& gate, const Tensor& up, const Tensor& out);
void add(ThreadPool& pool, const Tensor& a, const Tensor& b, const Tensor& out);
void gelu_tanh_mul(ThreadPool& pool, const Tensor& gate, const Tensor& up, const Tensor& out);
void scale(ThreadPool& pool, const Tensor& x, float factor, const Tensor& out);
void softcap(ThreadPool& pool, const Tensor& x, float cap, const Tensor& out);
// logits f32 [rows, vocab] -> the k best of each row, best first: values f32 [rows, k],
// indices i32 [rows, k] (-inf / -1 past the end of a row shorter than k).
void top_k(ThreadPool& pool, const Tensor& logits, const Tensor& values, const Tensor& indices);

}  // namespace shardlm::backends::cpu
