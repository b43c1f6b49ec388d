#pragma once
// The interface every architecture implements, and the registry that picks one
// from config.json's "architectures".

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/builder.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "models/kv_cache.h"
#include "parallel/sharding.h"

namespace shardlm::models {

struct LoadOptions {
  // Convert floating weights to this dtype while loading (a copy); unset keeps the
  // stored dtype.
  std::optional<DType> dtype{};
  // Copy weights that would stay memory-mapped (used as stored) into huge-page host
  // memory, releasing the file's pages as they are copied. Weights converted or
  // quantized at load are put in huge pages on the host either way.
  bool copy_mapped_weights = false;
  // Quantize every [out, in] weight whose rows are whole 32-element blocks to int8
  // with f16 block scales (core/quantize.h) while loading.
  bool quantize_int8 = false;
  // The same to int4, a block of 32 four-bit values with one f16 scale (core/quantize.h:
  // quantize_int4), on the CPU only.
  bool quantize_int4 = false;
  // Threads for the work done while loading (quantizing): the backend's.
  int threads = 1;
  // The KV cache's element type; unset: bfloat16 when the weights are 16-bit floats or
  // int8 (as transformers keeps the cache in the model's dtype), float32 otherwise.
  std::optional<DType> kv_cache_dtype{};
  // Where the weights live: each is copied to this backend's device as it loads (the CPU
  // backend keeps the host tensor, mapped or converted). Null: on the host.
  backends::Backend* device = nullptr;
  // A device whose programs span several devices (device->partitions() > 1, pjrt SPMD):
  // each whole weight is split across them as this plan (the architecture's default when
  // empty) says: colwise styles along the output features, rowwise along the input.
  parallel::TpPlan spmd_plan{};
};

struct ForwardInputs {
  Tensor input_ids;   // i32 [batch, seq]
  Tensor positions;   // i32 [batch, seq]: cache position of every token
  Tensor cache_rows;  // i32 [batch]: the cache row (sequence slot) each batch row reads and writes
  Tensor logit_rows;  // i32 [count]: rows of the flattened [batch * seq] tokens to compute logits for;
                      // undefined: every token
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  const io::ModelConfig& config() const { return config_; }

  // Records the forward pass; returns logits f32 [rows, vocab] (rows = logit_rows' count,
  // or batch * seq). Writes this step's keys and values into `cache` (of any batch: the
  // step's rows go to inputs.cache_rows).
  virtual graph::Value forward(graph::Builder& builder, const ForwardInputs& inputs, StaticCache& cache) const = 0;

  // [batch, this rank's KV heads, max_cache_len, head_dim] keys and values per layer.
  StaticCache allocate_cache(backends::Backend& backend, int64_t batch, int64_t max_cache_len) const;
  DType kv_cache_dtype() const { return kv_cache_dtype_; }
  void set_kv_cache_dtype(DType dtype);
  // Bytes of all weights as loaded (this rank's, under tensor parallelism).
  virtual size_t weight_bytes() const = 0;

  // The group this model's ranks compute in (a group of one without tensor parallelism).
  parallel::ProcessGroup& process_group() const { return *process_group_; }
  int tp_rank() const { return process_group_->rank(); }
  int tp_size() const { return process_group_->size(); }
  // Set once by create_causal_lm: the group, and the KV heads this rank caches per layer.
  void set_parallel_layout(std::shared_ptr<parallel::ProcessGroup> group, std::vector<int64_t> cache_kv_heads);

 protected:
  explicit CausalLM(io::ModelConfig config) : config_(std::move(config)) {}
  io::ModelConfig config_;
  DType kv_cache_dtype_ = DType::f32;

 private:
  std::shared_ptr<parallel::ProcessGroup> process_group_ = parallel::single_process_group();
  std::vector<int64_t> cache_kv_heads_;
};

// Builds the architecture named in config.architectures[0]; an unknown one is an
// error that lists the supported architectures. With a tensor-parallel group of more
// than one rank, loads this rank's shard under the architecture's default plan
// overridden by `tensor_parallel.plan` (a rule that matches no weight is warned about).
std::unique_ptr<CausalLM> create_causal_lm(const io::ModelConfig& config, const io::Checkpoint& checkpoint,
                                           const LoadOptions& options,
                                           const parallel::TensorParallel& tensor_parallel = {});
// The architecture's default tp_plan, in transformers' keys and styles.
parallel::TpPlan default_tp_plan(const io::ModelConfig& config);
std::vector<std::string> supported_architectures();
// The name and shape of every tensor the architecture loads, in load order (tied
// weights once): what a checkpoint for `config` must hold.
std::vector<std::pair<std::string, Shape>> required_weights(const io::ModelConfig& config);

}  // namespace shardlm::models
