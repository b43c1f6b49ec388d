#include "graph/graph.h"

#include <array>
#include <span>

namespace shardlm::graph {

const char* op_name(OpKind kind) {
  switch (kind) {
    case OpKind::embedding: return "embedding";
    case OpKind::linear: return "linear";
    case OpKind::rms_norm: return "rms_norm";
    case OpKind::reshape: return "reshape";
    case OpKind::rope: return "rope";
    case OpKind::kv_cache_write: return "kv_cache_write";
    case OpKind::attention: return "attention";
    case OpKind::silu_mul: return "silu_mul";
    case OpKind::add: return "add";
    case OpKind::gather_rows: return "gather_rows";
    case OpKind::all_reduce: return "all_reduce";
    case OpKind::all_gather: return "all_gather";
    case OpKind::slice_columns: return "slice_columns";
    case OpKind::top_k: return "top_k";
    case OpKind::linear_residual: return "linear_residual";
    case OpKind::gated_linear: return "gated_linear";
    case OpKind::rms_norm_linear: return "rms_norm_linear";
    case OpKind::sibling_linears: return "sibling_linears";
  }
  return "?";
}

void execute_node(backends::Backend& backend, const Node& node, const std::vector<Tensor>& tensors) {
  static const Tensor absent;
  auto in = [&](size_t i) -> const Tensor& {
    return i < node.inputs.size() && node.inputs[i] >= 0 ? tensors[node.inputs[i]] : absent;
  };
  const Tensor& out = node.output >= 0 ? tensors[node.output] : absent;
  switch (node.kind) {
    case OpKind::embedding: return backend.embedding(in(0), in(1), node.first_row, out);
    case OpKind::linear: return backend.linear(in(0), in(1), in(2), out);
    case OpKind::rms_norm: return backend.rms_norm(in(0), in(1), node.eps, out);
    case OpKind::reshape: return;
    case OpKind::rope:
      if (!node.in_place) backend.copy(in(0), out);
      return backend.rope(out, in(1), *node.rotary);
    case OpKind::kv_cache_write: return backend.kv_cache_write(in(0), in(1), in(2));
    case OpKind::attention:
      return backend.attention(in(0), in(1), in(2), in(3), node.scale, node.sliding_window, out);
    case OpKind::silu_mul: return backend.silu_mul(in(0), in(1), out);
    case OpKind::add: return backend.add(in(0), in(1), out);
    case OpKind::gather_rows: return backend.gather_rows(in(0), in(1), out);
    case OpKind::all_reduce: return node.group->all_reduce_sum(out);
    case OpKind::all_gather: return node.group->all_gather_columns(in(0), out, node.sizes);
    case OpKind::slice_columns: {
      int64_t destination_column = 0;
      for (size_t i = 0; i + 1 < node.sizes.size(); i += 2) {
        const int64_t width = node.sizes[i + 1] - node.sizes[i];
        backend.copy_columns(in(0), node.sizes[i], out, destination_column, width);
        destination_column += width;
      }
      return;
    }
    case OpKind::top_k: return backend.top_k(in(0), out, tensors[node.sibling_outputs.at(0)]);
    case OpKind::linear_residual: return backend.linear_residual(in(0), in(1), in(2), in(3), out);
    case OpKind::gated_linear: return backend.gated_linear(in(0), in(1), in(2), in(3), in(4), out);
    case OpKind::rms_norm_linear: return backend.rms_norm_linear(in(0), in(1), node.eps, in(2), in(3), out);
    case OpKind::sibling_linears: {
      std::array<backends::SiblingLinear, max_sibling_linears> linears;
      const size_t count = node.sibling_outputs.size() + 1;
      for (size_t i = 0; i < count; ++i)
        linears[i] = {.weight = &in(1 + 2 * i),
                      .bias = &in(2 + 2 * i),
                      .out = &tensors[i == 0 ? node.output : node.sibling_outputs[i - 1]]};
      return backend.sibling_linears(in(0), std::span(linears).first(count));
    }
  }
}

}  // namespace shardlm::graph
