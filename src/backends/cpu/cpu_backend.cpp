// The CPU backend: optimized kernels (kernels.h) where they exist, the scalar
// reference kernels elsewhere; tests/backends checks every entry against the reference.
#include "backends/cpu/cpu_backend.h"

#include <cstring>
#include <limits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/reference_kernels.h"

namespace shardlm::backends {
namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads) {}
  std::string name() const override { return "cpu"; }
  Device device() const override { return {DeviceKind::cpu, 0}; }
  Tensor allocate(Shape shape, DType dtype) override { return Tensor::empty(std::move(shape), dtype); }
  Tensor to_device(const Tensor& host) override { return host; }

  void embedding(const Tensor& table, const Tensor& ids, int64_t first_row, const Tensor& out) override {
    reference::embedding(table, ids, first_row, out);
  }
  void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) override {
    cpu::linear(pool_, x, weight, bias, out);
  }
  void linear_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                       const Tensor& out) override {
    cpu::linear_residual(pool_, x, weight, bias, residual, out);
  }
  void gated_linear(const Tensor& x, const Tensor& gate_weight, const Tensor& gate_bias, const Tensor& up_weight,
                    const Tensor& up_bias, const Tensor& out) override {
    cpu::gated_linear(pool_, x, gate_weight, gate_bias, up_weight, up_bias, out);
  }
  void rms_norm_linear(const Tensor& x, const Tensor& norm_weight, float eps, const Tensor& weight, const Tensor& bias,
                       const Tensor& out) override {
    cpu::rms_norm_linear(pool_, x, norm_weight, eps, weight, bias, out);
  }
  void sibling_linears(const Tensor& x, std::span<const SiblingLinear> linears) override {
    cpu::sibling_linears(pool_, x, linears);
  }
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override {
    cpu::rms_norm(pool_, x, weight, eps, out);
  }
  void rope(const Tensor& x, const Tensor& positions, const RotaryEmbedding& rotary) override {
    cpu::rope(pool_, x, positions, rotary);
  }
  void kv_cache_write(const Tensor& cache, const Tensor& entries, const Tensor& positions,
                      const Tensor& cache_rows) override {
    cpu::kv_cache_write(pool_, cache, entries, positions, cache_rows);
  }
  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
                 const Tensor& cache_rows, float scale, int64_t sliding_window, const Tensor& out) override {
    cpu::attention(pool_, q, k_cache, v_cache, positions, cache_rows, scale, sliding_window, out);
  }
  void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    cpu::silu_mul(pool_, gate, up, out);
  }
  void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    cpu::gelu_tanh_mul(pool_, gate, up, out);
  }
  void scale(const Tensor& x, float factor, const Tensor& out) override { cpu::scale(pool_, x, factor, out); }
  void softcap(const Tensor& x, float cap, const Tensor& out) override { cpu::softcap(pool_, x, cap, out); }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override { cpu::add(pool_, a, b, out); }
  void gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) override {
    reference::gather_rows(x, indices, out);
  }
  void copy_columns(const Tensor& source, int64_t source_column, const Tensor& destination,
                    int64_t destination_column, int64_t width) override {
    reference::copy_columns(source, source_column, destination, destination_column, width);
  }
  void top_k(const Tensor& logits, const Tensor& values, const Tensor& indices) override {
    cpu::top_k(pool_, logits, values, indices);
  }
  int64_t max_top_k() const override { return std::numeric_limits<int32_t>::max(); }
  void copy(const Tensor& source, const Tensor& destination) override {
    // Host and device tensors are the same memory on the CPU: nothing to move then.
    if (source.raw() != destination.raw()) std::memcpy(destination.mutable_raw(), source.raw(), source.nbytes());
  }
  void copy_to_host(const Tensor& source, const Tensor& destination) override { copy(source, destination); }
  void copy_from_host(const Tensor& source, const Tensor& destination) override { copy(source, destination); }

 private:
  ThreadPool pool_;
};

}  // namespace

std::unique_ptr<Backend> create_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

}  // namespace shardlm::backends
