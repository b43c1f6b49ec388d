#pragma once
// graph::Builder is the only API model code uses to compute. A model's forward is
// written once against it, on symbolic Values with static shapes; the builder
// checks shapes as ops are recorded, by each op's shape rule (graph/ops.h). In eager mode it also runs each op at once
// (the reference path, `disable_compile`); in record mode it only records, and
// graph::compile turns the recording into an Executable.

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "parallel/sharding.h"

namespace shardlm::graph {

// A handle to one value of the graph being built.
struct Value {
  int32_t index = -1;
  bool defined() const { return index >= 0; }
};

enum class BuildMode { eager, record };

class Builder {
 public:
  Builder(backends::Backend& backend, BuildMode mode) : backend_(backend), mode_(mode) {}

  // Binds an existing tensor (step inputs, weights, cache): used in place, never copied.
  Value bind(const Tensor& tensor);
  const Shape& shape(Value value) const { return graph_.values.at(value.index).shape; }
  // Eager mode: the tensor behind a value, computed already.
  const Tensor& tensor(Value value) const;

  // table [vocab, hidden], ids i32 [tokens] -> [tokens, hidden]. A vocabulary shard holds
  // the rows of ids first_row..first_row + vocab - 1; other ids give zero rows.
  Value embedding(Value table, Value ids, int64_t first_row = 0);
  // x [rows, in], weight [out, in], optional bias [out] -> [rows, out]
  Value linear(Value x, Value weight, Value bias = {});
  // x [..., dim], weight [dim] -> [..., dim]
  Value rms_norm(Value x, Value weight, double eps);
  // The same elements seen with another shape.
  Value reshape(Value x, Shape shape);
  // x [tokens, heads, head_dim], positions i32 [tokens] -> x rotated
  Value rope(Value x, Value positions, const backends::RotaryEmbedding& rotary);
  // cache [slots, kv_heads, max_cache_len, head_dim] <- entries [batch, seq, kv_heads, head_dim]
  // into the cache rows cache_rows i32 [batch]
  void kv_cache_write(Value cache, Value entries, Value positions, Value cache_rows);
  // q [batch, seq, heads, head_dim] over the caches' rows cache_rows -> [batch, seq, heads, head_dim];
  // sliding_window 0: every earlier position is visible
  Value attention(Value q, Value k_cache, Value v_cache, Value positions, Value cache_rows, float scale,
                  int64_t sliding_window = 0);
  Value silu_mul(Value gate, Value up);
  // gelu_tanh(gate) * up: GeGLU with transformers' gelu_pytorch_tanh
  Value gelu_tanh_mul(Value gate, Value up);
  // x * factor
  Value scale(Value x, float factor);
  // cap * tanh(x / cap): Gemma's soft-capping of logits
  Value softcap(Value x, float cap);
  Value add(Value a, Value b);
  // x [rows, dim], indices i32 [count] -> [count, dim]
  Value gather_rows(Value x, Value indices);

  // logits f32 [rows, vocab] -> {values f32 [rows, k], indices i32 [rows, k]} (Backend::top_k)
  std::pair<Value, Value> top_k(Value logits, int64_t k);

  // Collectives over `group` (which must outlive the graph).
  // x f32 [rows, dim] -> the same values summed over every rank (in place).
  Value all_reduce(Value x, parallel::ProcessGroup& group);
  // x [rows, counts[rank]] -> [rows, sum(counts)], rank r's columns after rank r-1's.
  Value all_gather(Value x, parallel::ProcessGroup& group, std::vector<int64_t> counts);
  // x [rows, dim] -> [rows, segments.size()]: the columns of `segments`, in order.
  Value slice_columns(Value x, const parallel::Segments& segments);

  // Record mode: hands over the recording.
  Graph take_graph() { return std::move(graph_); }

 private:
  Value record(Node node);

  backends::Backend& backend_;
  BuildMode mode_;
  Graph graph_;
  std::vector<Tensor> eager_tensors_;  // eager mode: value index -> tensor, for execute_node
};

}  // namespace shardlm::graph
