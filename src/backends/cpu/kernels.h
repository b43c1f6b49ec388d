#pragma once
// The CPU backend's optimized kernels. Each has the semantics of the reference
// kernel of the same name (reference_kernels.h); tests/backends checks them against it.

#include "backends/rotary.h"
#include "core/tensor.h"

namespace shardlm::backends::cpu {

void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out);
void linear_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                     const Tensor& out);
void gated_linear(const Tensor& x, const Tensor& gate_weight, const Tensor& gate_bias, const Tensor& up_weight,
                  const Tensor& up_bias, const Tensor& out);
void rms_norm_linear(const Tensor& x, const Tensor& norm_weight, float eps, const Tensor& weight, const Tensor& bias,
                     const Tensor& out);
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions, float scale,
               int64_t sliding_window, const Tensor& out);

}  // namespace shardlm::backends::cpu
