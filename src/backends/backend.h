#pragma once
// A Backend executes ops on one device. The graph layer allocates every output
// and passes it in; kernels keep only scratch that grows on the first use of a size, so
// a warmed-up step allocates nothing. Activations are f32; weights may be f32, bf16 or
// f16 (int8 with block scales on the CPU) and are widened inside the kernels.

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/rotary.h"
#include "core/tensor.h"

namespace shardlm::backends {

// A backend's record of a fixed sequence of ops (a CUDA graph), kept by whoever runs it.
class Replay {
 public:
  virtual ~Replay() = default;
};

// A whole graph of one shape lowered to one program (graph/lower.h), for a backend that
// compiles whole graphs (compiles_graphs()).
struct ProgramSpec {
  std::string text;                // the program (StableHLO for pjrt)
  std::vector<Tensor> parameters;  // this backend's tensors, in parameter order
  std::vector<Tensor> results;     // tensors that receive the results, in result order
  // donated[i]: the result that parameter i's memory becomes (its tensor is the same in
  // both lists: the KV cache updated in place), or -1.
  std::vector<int> donated;
  // (parameter, limit): every value of that i32 parameter must be < limit (cache positions;
  // a plugin would clamp an out-of-range write silently).
  std::vector<std::pair<int, int64_t>> bounded;
  // (parameter, slots): an i32 parameter of cache rows, checked as check_cache_rows does.
  std::vector<std::pair<int, int64_t>> cache_rows;
  std::string key;  // the compile key, for logs and the on-disk cache
};

// A compiled ProgramSpec: each run reads its parameters' current contents and writes its results.
class Program {
 public:
  virtual ~Program() = default;
  virtual void run() = 0;
};

// Programs a backend compiled (or loaded from its on-disk cache) in this process.
struct ProgramStats {
  int64_t compiled = 0, loaded_from_cache = 0;
  double compile_seconds = 0;
  // Donated parameters (the KV cache) the program consumed, its output taking their memory,
  // and those it left alone (so it wrote a copy): the second stays 0 when steps update in place.
  int64_t donations_taken = 0, donations_refused = 0;
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
  // The cache holds `slots` sequences; step row b reads and writes the cache row
  // cache_rows[b] (i32 [batch], each in [0, slots), no two rows of a step the same), so a
  // step may cover any subset of the cached sequences in any order (continuous batching).
  //
  // cache f32 or bf16 [slots, kv_heads, max_cache_len, head_dim]; entries f32 [batch, seq, kv_heads, head_dim],
  // rounded to the cache's dtype;
  // positions i32 [batch, seq]: entries[b, s] goes to cache[cache_rows[b], :, positions[b, s]].
  // A negative position marks padding (a static-shape step with fewer real tokens): skipped.
  virtual void kv_cache_write(const Tensor& cache, const Tensor& entries, const Tensor& positions,
                              const Tensor& cache_rows) = 0;
  // Causal attention over the cache: the query at position p sees cache positions 0..p of its
  // cache row, or with sliding_window W > 0 only p-W+1..p (transformers' sliding_attention layers).
  // q f32 [batch, seq, heads, head_dim]; k_cache, v_cache f32 or bf16 [slots, kv_heads, max_cache_len, head_dim];
  // positions i32 [batch, seq]; cache_rows i32 [batch] -> out f32 [batch, seq, heads, head_dim].
  // Query head h reads KV head h / (heads / kv_heads), as transformers' repeat_kv does.
  // Padding queries (negative position) produce zeros.
  virtual void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
                         const Tensor& cache_rows, float scale, int64_t sliding_window, const Tensor& out) = 0;
  // out = silu(gate) * up, all f32 of one shape
  virtual void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  // out = gelu_tanh(gate) * up, all f32 of one shape; gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  // (transformers' gelu_pytorch_tanh)
  virtual void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  // out = x * factor, f32 of one shape
  virtual void scale(const Tensor& x, float factor, const Tensor& out) = 0;
  // out = cap * tanh(x / cap), f32 of one shape
  virtual void softcap(const Tensor& x, float cap, const Tensor& out) = 0;
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

  // Whole-graph backends (pjrt): graph::compile lowers each graph into one ProgramSpec and
  // runs it as a unit; the op methods above then serve eager mode and tests. The default,
  // false, runs compiled graphs op by op.
  virtual bool compiles_graphs() const { return false; }
  virtual std::unique_ptr<Program> compile_program(const ProgramSpec& spec) {
    (void)spec;
    throw Error(name() + " runs graphs op by op: it compiles no whole programs");
  }
  virtual ProgramStats program_stats() const { return {}; }
  // Whether tensors on this device can be views into one allocation (view_bytes,
  // slice_rows); false where device memory is opaque buffers (PJRT).
  virtual bool supports_views() const { return true; }
  // The memory behind `tensor`: a view (reshape, slice_rows) is `tensor.numel()` elements
  // from element `offset` of a stored tensor of another shape.
  struct StoredView {
    const void* storage;
    Shape shape;
    int64_t offset = 0;
  };
  virtual StoredView stored_view(const Tensor& tensor) const { return {tensor.raw(), tensor.shape(), 0}; }
  // Tensor parallelism inside one program (pjrt's SPMD): the devices each program spans;
  // a tensor may be split along one dimension across them (split_dim), or whole on each
  // (-1). Elsewhere 1, and the split is ignored.
  virtual int partitions() const { return 1; }
  virtual Tensor to_device_split(const Tensor& host, int split_dim) {
    (void)split_dim;
    return to_device(host);
  }
  virtual Tensor allocate_split(Shape shape, DType dtype, int split_dim) {
    (void)split_dim;
    return allocate(std::move(shape), dtype);
  }
  // The program attributes that place `tensor` on the devices (an mhlo.sharding), or "".
  virtual std::string placement_attributes(const Tensor& tensor) const {
    (void)tensor;
    return "";
  }
  // What identifies this backend's compiled code beyond the device (plugin platform and
  // version), for compile keys.
  virtual std::string compiler_identity() const { return name(); }

  // Copies between tensors of the same shape and dtype: on this device, to the host, from the host.
  virtual void copy(const Tensor& source, const Tensor& destination) = 0;
  virtual void copy_to_host(const Tensor& source, const Tensor& destination) = 0;
  virtual void copy_from_host(const Tensor& source, const Tensor& destination) = 0;
};

// The backends this build has, and which of them can run here; pjrt reports `pjrt_plugin`
// when given, else the plugin found as --device pjrt finds it.
struct BackendInfo {
  std::string name;
  bool available = false;
  int device_count = 0;
  std::string detail;  // why it is unavailable, or what the devices are
};
std::vector<BackendInfo> list_backends(const std::string& pjrt_plugin = "");

struct BackendOptions {
  // The CPU backend's thread pool size; <= 0 means one per hardware thread.
  int threads = 0;
  // pjrt/tpu: the plugin library (else SHARDLM_PJRT_PLUGIN, then the usual places: pjrt/registry.h).
  std::string pjrt_plugin{};
  // pjrt/tpu: where compiled programs are kept across processes; empty: the default under
  // the user's cache directory; "none": no on-disk cache.
  std::string compile_cache_dir{};
  // pjrt/tpu: a topology to compile for without its devices (see PretrainedOptions).
  std::string pjrt_topology{};
  // pjrt/tpu: devices one program spans (tensor parallelism as one SPMD program).
  int partitions = 1;
};

// Host cache_rows i32 [batch] of a step over a cache of `slots` rows: each in [0, slots) and
// none twice (two step rows writing one cache row would race); `op` names the caller.
void check_cache_rows(const int32_t* cache_rows, int64_t batch, int64_t slots, const char* op);

// "cpu", "cuda", "cuda:N", "pjrt", "pjrt:N", "tpu", "tpu:N" or "auto" (the best available;
// logs which it picked and why).
std::unique_ptr<Backend> create_backend(const std::string& device_map, const BackendOptions& options = {});
inline std::unique_ptr<Backend> create_backend(const std::string& device_map, int threads) {
  return create_backend(device_map, BackendOptions{.threads = threads});
}

}  // namespace shardlm::backends
