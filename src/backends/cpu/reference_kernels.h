#pragma once
// Scalar reference kernels: the plain, obviously-correct version of every op. The
// fused forms (linear_residual, gated_linear, rms_norm_linear) have no kernel of their
// own here: their reference is the composition of these ops.
// They stay in the tree forever: optimized kernels of every backend are tested
// against them (tests/backends). Shapes are as in backends/backend.h.

#include <cstdint>
#include <span>

#include "backends/rotary.h"
#include "core/tensor.h"

namespace shardlm::backends::reference {

void embedding(const Tensor& table, const Tensor& ids, int64_t first_row, const Tensor& out);
void copy_columns(const Tensor& source, int64_t source_column, const Tensor& destination, int64_t destination_column,
                  int64_t width);
void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out);
void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out);
void rope(const Tensor& x, const Tensor& positions, const RotaryEmbedding& rotary);
void kv_cache_write(const Tensor& cache, const Tensor& entries, const Tensor& positions, const Tensor& cache_rows);
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
               const Tensor& cache_rows, float scale, int64_t sliding_window, const Tensor& out);
void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
void scale(const Tensor& x, float factor, const Tensor& out);
void softcap(const Tensor& x, float cap, const Tensor& out);
void add(const Tensor& a, const Tensor& b, const Tensor& out);
// transformers' gelu_pytorch_tanh of one value
float gelu_tanh(float x);
void gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out);
void top_k(const Tensor& logits, const Tensor& values, const Tensor& indices);

// Host-side reductions over one row of logits (sampling uses them).
int64_t argmax(std::span<const float> row);  // ties go to the lowest index, as torch.argmax
void softmax(std::span<const float> row, std::span<float> out);
void log_softmax(std::span<const float> row, std::span<float> out);

// Element i of a float tensor of any floating dtype, as f32.
float load_f32(const Tensor& tensor, int64_t index);
// Row `row` of a q4_k or q6_k weight [rows, in] decoded by core's scalar decoders into out[in].
void decode_row(const Tensor& weight, int64_t row, float* out);

}  // namespace shardlm::backends::reference
