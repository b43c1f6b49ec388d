#pragma once
// Reads named weights out of a checkpoint, checking each shape against what the
// config implies, and converting dtype only when asked to.

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "models/causal_lm.h"
#include "parallel/sharding.h"

namespace shardlm::models {

class WeightLoader {
 public:
  // `tensor_parallel`: this process's rank and plan; without a group every weight loads whole.
  WeightLoader(const io::Checkpoint& checkpoint, const LoadOptions& options, std::string config_source,
               parallel::TensorParallel tensor_parallel = {})
      : checkpoint_(&checkpoint),
        options_(options),
        config_source_(std::move(config_source)),
        tensor_parallel_(std::move(tensor_parallel)) {}
  // Reads nothing: records the name and shape of every tensor asked for and hands
  // back unbacked tensors of `dtype` (what an architecture needs, for writing models).
  WeightLoader(DType dtype, std::string config_source)
      : options_{.dtype = dtype}, config_source_(std::move(config_source)) {}

  // The tensor `name`, which must exist with shape `expected`, whole on every rank. An int8
  // tensor with a "<name>_scale" tensor beside it is loaded with its block scales.
  Tensor require(const std::string& name, const Shape& expected);
  // The tensor `name` (whole, as require) plus `offset`, as f32 whatever the checkpoint's or
  // the load's dtype: Gemma's norms scale by (1 + weight) computed in f32. A copy, made once.
  Tensor require_plus(const std::string& name, const Shape& expected, float offset);
  // Rows `rows` and columns `columns` (null: all) of tensor `name`, whose whole shape must be
  // `expected`: a view of the mapped file for one range of rows, else a copy of just the part.
  Tensor require_part(const std::string& name, const Shape& expected, const parallel::Segments* rows,
                      const parallel::Segments* columns);

  // The plan's style for parameter `name`; replicate without tensor parallelism or a rule.
  parallel::ShardStyle style_for(const std::string& name) const;
  int tp_rank() const { return tensor_parallel_.rank(); }
  int tp_size() const { return tensor_parallel_.size(); }
  const parallel::TensorParallel& tensor_parallel() const { return tensor_parallel_; }
  // KV heads this rank caches for each attention layer, in load order.
  void add_cache_layer(int64_t kv_heads) { cache_kv_heads_.push_back(kv_heads); }
  const std::vector<int64_t>& cache_kv_heads() const { return cache_kv_heads_; }
  bool contains(const std::string& name) const { return !checkpoint_ || checkpoint_->contains(name); }
  size_t loaded_bytes() const { return loaded_bytes_; }
  // The dtype of the first matrix loaded (after conversion or quantization).
  std::optional<DType> matrix_dtype() const { return matrix_dtype_; }
  const std::vector<std::pair<std::string, Shape>>& requested() const { return requested_; }
  // Every checkpoint tensor read so far (int8 block scales included).
  const std::set<std::string>& read_names() const { return read_; }

 private:
  Tensor load_quantized(const std::string& name, Tensor values, const parallel::Segments* rows,
                        const parallel::Segments* columns) const;
  // Converts or quantizes a stored tensor (or part of one) as the options ask; counts its bytes.
  Tensor finish_loading(Tensor tensor, const std::string& name);
  // Puts a loaded tensor where it lives (huge pages, the device); counts its bytes.
  Tensor place(Tensor tensor, const std::string& name);
  // The dimension an SPMD device splits weight `name` along (-1: whole on every device).
  int spmd_split_dim(const std::string& name, const Tensor& tensor) const;
  // A host weight (and its block scales) moved into huge-page memory: carved out of
  // arena_, or left where it is when it already has a large mapping of its own.
  Tensor in_huge_pages(const Tensor& tensor);

  const io::Checkpoint* checkpoint_ = nullptr;
  LoadOptions options_;
  std::string config_source_;
  size_t loaded_bytes_ = 0;
  std::optional<DType> matrix_dtype_;
  std::vector<std::pair<std::string, Shape>> requested_;
  std::set<std::string> read_;
  parallel::TensorParallel tensor_parallel_;
  std::vector<int64_t> cache_kv_heads_;
  HostArena arena_;
};

// The scale tensor of an int8 weight in a checkpoint: "<weight name>_scale".
inline std::string block_scale_name(const std::string& weight_name) { return weight_name + "_scale"; }

}  // namespace shardlm::models
