#pragma once
// A Backend executes ops on one device. The graph layer allocates every output
// and passes it in; kernels keep only scratch that grows on the first use of a size, so
// a warmed-up step allocates nothing. Activations are f32; weights may be f32, bf16 or
// f16 (int8 with block scales on the CPU) and are widened inside the kernels.

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/rotary.h"
#include "core/tensor.h"

namespace shardlm::backends {

// A backend's record of a fixed sequence of ops (a CUDA graph), kept by whoever runs it.
class Replay {
 public:
  virtual ~Replay() = default;
};

// One linear of a sibling_linears op; pointers, since the op's tensors stay where they are.
struct SiblingLinear {
  const Tensor* weight;  // [out_features, in]
  const Tensor* bias;    // [out_features] or undefined
  const Tensor* out;     // f32 [rows, out_features]
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;

  // Contents undefined: every op writes its whole output; caches are read only where written.
  virtual Tensor allocate(Shape shape, DType dtype) = 0;
  // The host tensor's data on this device: the tensor itself on the CPU, a copy elsewhere.
  virtual Tensor to_device(const Tensor& host) = 0;

  // table [vocab, hidden] (any float dtype) holding the rows of ids first_row..first_row + vocab - 1,
  // ids i32 [tokens] -> out f32 [tokens, hidden]; ids outside the table give zero rows (the
  // table is then one rank's vocabulary shard; callers check ids against the whole vocabulary).
  virtual void embedding(const Tensor& table, const Tensor& ids, int64_t first_row, const Tensor& out) = 0;
  // x f32 [rows, in], weight [out_features, in] (HF layout), bias [out_features] or undefined
  // -> out f32 [rows, out_features]
  virtual void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) = 0;
  // Fused forms that graph::compile substitutes; each equals the composition of the ops above.
  // out = linear(x, weight, bias) + residual (residual f32 [rows, out_features])
  virtual void linear_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                               const Tensor& out) = 0;
  // out = silu(linear(x, gate_weight, gate_bias)) * linear(x, up_weight, up_bias)
  virtual void gated_linear(const Tensor& x, const Tensor& gate_weight, const Tensor& gate_bias,
                            const Tensor& up_weight, const Tensor& up_bias, const Tensor& out) = 0;
  // out = linear(rms_norm(x, norm_weight, eps), weight, bias)
  virtual void rms_norm_linear(const Tensor& x, const Tensor& norm_weight, float eps, const Tensor& weight,
                               const Tensor& bias, const Tensor& out) = 0;
  // linear.out = linear(x, linear.weight, linear.bias) for each of `linears`: the linears of
  // one input (an attention's q, k and v) as one op, so that its threads stream one
  // weight after another without meeting at each one's end. This default runs them one by one.
  virtual void sibling_linears(const Tensor& x, std::span<const SiblingLinear> linears) {
    for (const SiblingLinear& l : linears) linear(x, *l.weight, *l.bias, *l.out);
  }

  // x f32 [rows, dim], weight [dim] -> out [rows, dim]; x * rsqrt(mean(x^2) + eps) * weight, in f32
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) = 0;
  // In place. x f32 [tokens, heads, head_dim], positions i32 [tokens]
  virtual void rope(const Tensor& x, const Tensor& positions, const RotaryEmbedding& rotary) = 0;
  // cache f32 or bf16 [batch, kv_heads, max_cache_len, head_dim]; entries f32 [batch, seq, kv_heads, head_dim],
  // rounded to the cache's dtype;
  // positions i32 [batch, seq]: entries[b, s] goes to cache[b, :, positions[b, s]].
  // A negative position marks padding (a static-shape step with fewer real tokens): skipped.
  virtual void kv_cache_write(const Tensor& cache, const Tensor& entries, const Tensor& positions) = 0;
  // Causal attention over the cache: the query at position p sees cache positions 0..p, or
  // with sliding_window W > 0 only p-W+1..p (transformers' sliding_attention layers).
  // q f32 [batch, seq, heads, head_dim]; k_cache, v_cache f32 or bf16 [batch, kv_heads, max_cache_len, head_dim];
  // positions i32 [batch, seq] -> out f32 [batch, seq, heads, head_dim].
  // Query head h reads KV head h / (heads / kv_heads), as transformers' repeat_kv does.
  // Padding queries (negative position) produce zeros.
  virtual void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
                         float scale, int64_t sliding_window, const Tensor& out) = 0;
  // out = silu(gate) * up, all f32 of one shape
  virtual void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  // out = a + b, f32 of one shape
  virtual void add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // rows of x f32 [rows, dim] picked by indices i32 [count] -> out [count, dim]
  virtual void gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) = 0;
  // destination[:, destination_column + j] = source[:, source_column + j] for j < width;
  // source, destination f32 [rows, *] with the same rows
  virtual void copy_columns(const Tensor& source, int64_t source_column, const Tensor& destination,
                            int64_t destination_column, int64_t width) = 0;
  // The k largest values of each row, descending, equal values in index order and NaN
  // above all (torch.topk): logits f32 [rows, vocab] -> values f32 [rows, k], indices i32
  // [rows, k] (index -1 past a row shorter than k). Sampling reads these k candidates
  // instead of moving the whole row off the device.
  virtual void top_k(const Tensor& logits, const Tensor& values, const Tensor& indices) = 0;
  // Largest k top_k takes on this backend.
  virtual int64_t max_top_k() const = 0;

  // Runs `ops`, a fixed sequence of this backend's ops on fixed tensors that will run again
  // (a compiled executable). A backend that can record it once and replay the record keeps
  // that in `replay` (CUDA graphs); the default runs the ops each time.
  virtual void run_replayable(std::unique_ptr<Replay>& replay, const std::function<void()>& ops) {
    (void)replay;
    ops();
  }

  // Copies between tensors of the same shape and dtype: on this device, to the host, from the host.
  virtual void copy(const Tensor& source, const Tensor& destination) = 0;
  virtual void copy_to_host(const Tensor& source, const Tensor& destination) = 0;
  virtual void copy_from_host(const Tensor& source, const Tensor& destination) = 0;
};

// The backends this build has, and which of them can run here.
struct BackendInfo {
  std::string name;
  bool available = false;
  int device_count = 0;
  std::string detail;  // why it is unavailable, or what the devices are
};
std::vector<BackendInfo> list_backends();

// "cpu", "cuda", "cuda:N" or "auto" (the best available; logs which it picked).
// `threads`: the CPU backend's thread pool size; <= 0 means one per hardware thread.
std::unique_ptr<Backend> create_backend(const std::string& device_map, int threads = 0);

}  // namespace shardlm::backends
