#pragma once
// The recorded form of a forward pass: values with static shapes and the ops
// between them, in execution order. Builder records it; compile() plans and fuses
// it; execute_node() runs one op of it on a backend. What each op is (its shape rule,
// how it runs, its StableHLO) is its row of the op table, graph/ops.h.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/tensor.h"
#include "parallel/process_group.h"

namespace shardlm::graph {

enum class OpKind : uint8_t {
  embedding,       // (table, ids)
  linear,          // (x, weight[, bias])
  rms_norm,        // (x, weight)
  reshape,         // (x): a view, no work; sizes = the new dims
  rope,            // (x): a rotated copy, or in place when `in_place`
  kv_cache_write,  // (cache, entries, positions, cache_rows): no output value
  attention,       // (q, k_cache, v_cache, positions, cache_rows)
  silu_mul,        // (gate, up)
  gelu_tanh_mul,   // (gate, up)
  scale,           // (x): x * node.scale
  softcap,         // (x): node.scale * tanh(x / node.scale)
  add,             // (a, b)
  gather_rows,     // (x, indices)
  all_reduce,      // (x): summed across the process group, in place
  all_gather,      // (x): columns gathered from every rank of the process group
  slice_columns,   // (x): this rank's column ranges of a whole activation
  top_k,           // (logits): values, then sibling_outputs[0] the i32 indices; sizes = {k}
  // Fusions introduced by compile():
  linear_residual,  // (x, weight, bias|-1, residual)
  gated_linear,     // (x, gate_weight, gate_bias|-1, up_weight, up_bias|-1)
  rms_norm_linear,  // (x, norm_weight, weight, bias|-1)
  sibling_linears,  // (x, weight, bias|-1, weight, bias|-1, ...): output, then sibling_outputs, one per weight
};
constexpr size_t op_kind_count = static_cast<size_t>(OpKind::sibling_linears) + 1;

// The most linears compile() fuses into one sibling_linears node (execute_node passes
// them on in fixed arrays).
constexpr size_t max_sibling_linears = 4;

struct Node {
  OpKind kind;
  std::vector<int32_t> inputs;  // value indices; -1 for an absent optional input (a bias)
  int32_t output = -1;          // -1 for kv_cache_write
  std::vector<int32_t> sibling_outputs{};  // sibling_linears: the outputs of its second and later weights;
                                           // top_k: the indices
  float eps = 0;                // rms_norm, rms_norm_linear
  float scale = 0;              // attention, scale; softcap: the cap
  int64_t sliding_window = 0;   // attention
  const backends::RotaryEmbedding* rotary = nullptr;  // rope (owned by the model)
  bool in_place = false;        // rope: rotates its input's memory
  int64_t first_row = 0;        // embedding: the id of the table's first row (a vocabulary shard)
  std::vector<int64_t> sizes{};  // reshape: the new dims; all_gather: every rank's column count;
                                 // slice_columns: [begin, end) pairs; top_k: {k}
  parallel::ProcessGroup* group = nullptr;  // all_reduce, all_gather (owned by the model)
};

struct ValueInfo {
  Shape shape;
  DType dtype = DType::f32;
  // Bound values (weights, caches, step inputs) carry their tensor; op outputs get
  // theirs when executed (eager) or from the memory plan (compiled).
  bool bound = false;
  Tensor tensor{};
  int32_t alias_of = -1;  // reshape views, in-place ropes and all_reduces share this value's memory
};

struct Graph {
  std::vector<ValueInfo> values;
  std::vector<Node> nodes;
};

// Calls f(value) for each value `node` writes: its output, and a sibling_linears' others (top_k's indices).
template <typename F>
void for_each_output(const Node& node, F f) {
  if (node.output >= 0) f(node.output);
  for (int32_t value : node.sibling_outputs) f(value);
}

// Runs one node. `tensors[i]` is value i's tensor; outputs are preallocated.
void execute_node(backends::Backend& backend, const Node& node, const std::vector<Tensor>& tensors);

}  // namespace shardlm::graph
