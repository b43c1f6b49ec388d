#include "graph/builder.h"

#include "graph/ops.h"

namespace shardlm::graph {

Value Builder::bind(const Tensor& tensor) {
  graph_.values.push_back({.shape = tensor.shape(), .dtype = tensor.dtype(), .bound = true, .tensor = tensor});
  return {static_cast<int32_t>(graph_.values.size() - 1)};
}

const Tensor& Builder::tensor(Value value) const {
  SHARDLM_CHECK(mode_ == BuildMode::eager || graph_.values.at(value.index).bound,
                "graph: a recorded value has no tensor until the graph is compiled and run");
  return graph_.values.at(value.index).tensor;
}

// The op's shape rule (graph/ops.cpp) checks the inputs and gives the outputs.
Value Builder::record(Node node) {
  const OpRow& row = op_row(node.kind);
  const std::vector<OutputSpec> outputs = row.shape(ShapeContext(graph_, backend_), node);
  for (size_t i = 0; i < outputs.size(); ++i) {
    ValueInfo output{.shape = outputs[i].shape, .dtype = outputs[i].dtype};
    if (row.aliases_input) output.alias_of = node.inputs[0];
    graph_.values.push_back(std::move(output));
    const int32_t index = static_cast<int32_t>(graph_.values.size() - 1);
    if (i == 0) node.output = index;
    else node.sibling_outputs.push_back(index);
  }
  if (mode_ == BuildMode::eager) {
    std::vector<Tensor>& scratch = eager_tensors_;
    scratch.resize(graph_.values.size());
    for (int32_t input : node.inputs)
      if (input >= 0) scratch[input] = graph_.values[input].tensor;
    for_each_output(node, [&](int32_t value) {
      ValueInfo& info = graph_.values[value];
      info.tensor = info.alias_of >= 0 ? graph_.values[info.alias_of].tensor.reshape(info.shape)
                                       : backend_.allocate(info.shape, info.dtype);
      scratch[value] = info.tensor;
    });
    execute_node(backend_, node, scratch);
  }
  graph_.nodes.push_back(std::move(node));
  return {graph_.nodes.back().output};
}

Value Builder::embedding(Value table, Value ids, int64_t first_row) {
  return record({.kind = OpKind::embedding, .inputs = {table.index, ids.index}, .first_row = first_row});
}

Value Builder::linear(Value x, Value weight, Value bias) {
  return record({.kind = OpKind::linear, .inputs = {x.index, weight.index, bias.index}});
}

Value Builder::rms_norm(Value x, Value weight, double eps) {
  return record({.kind = OpKind::rms_norm, .inputs = {x.index, weight.index}, .eps = static_cast<float>(eps)});
}

Value Builder::reshape(Value x, Shape new_shape) {
  const ValueInfo& input = graph_.values.at(x.index);
  if (input.bound && new_shape.numel() == input.shape.numel()) return bind(input.tensor.reshape(std::move(new_shape)));
  return record({.kind = OpKind::reshape, .inputs = {x.index}, .sizes = new_shape.dims()});
}

Value Builder::rope(Value x, Value positions, const backends::RotaryEmbedding& rotary) {
  return record({.kind = OpKind::rope, .inputs = {x.index, positions.index}, .rotary = &rotary});
}

void Builder::kv_cache_write(Value cache, Value entries, Value positions, Value cache_rows) {
  record({.kind = OpKind::kv_cache_write, .inputs = {cache.index, entries.index, positions.index, cache_rows.index}});
}

Value Builder::attention(Value q, Value k_cache, Value v_cache, Value positions, Value cache_rows, float scale,
                         int64_t sliding_window) {
  return record({.kind = OpKind::attention,
                 .inputs = {q.index, k_cache.index, v_cache.index, positions.index, cache_rows.index},
                 .scale = scale,
                 .sliding_window = sliding_window});
}

Value Builder::silu_mul(Value gate, Value up) {
  return record({.kind = OpKind::silu_mul, .inputs = {gate.index, up.index}});
}

Value Builder::gelu_tanh_mul(Value gate, Value up) {
  return record({.kind = OpKind::gelu_tanh_mul, .inputs = {gate.index, up.index}});
}

Value Builder::scale(Value x, float factor) {
  return record({.kind = OpKind::scale, .inputs = {x.index}, .scale = factor});
}

Value Builder::softcap(Value x, float cap) {
  SHARDLM_CHECK(cap > 0, "softcap: the cap must be positive, got ", cap);
  return record({.kind = OpKind::softcap, .inputs = {x.index}, .scale = cap});
}

Value Builder::add(Value a, Value b) { return record({.kind = OpKind::add, .inputs = {a.index, b.index}}); }

Value Builder::gather_rows(Value x, Value indices) {
  return record({.kind = OpKind::gather_rows, .inputs = {x.index, indices.index}});
}

std::pair<Value, Value> Builder::top_k(Value logits, int64_t k) {
  const Value values = record({.kind = OpKind::top_k, .inputs = {logits.index}, .sizes = {k}});
  return {values, {graph_.nodes.back().sibling_outputs.at(0)}};
}

Value Builder::all_reduce(Value x, parallel::ProcessGroup& group) {
  return record({.kind = OpKind::all_reduce, .inputs = {x.index}, .group = &group});
}

Value Builder::all_gather(Value x, parallel::ProcessGroup& group, std::vector<int64_t> counts) {
  return record({.kind = OpKind::all_gather, .inputs = {x.index}, .sizes = std::move(counts), .group = &group});
}

Value Builder::slice_columns(Value x, const parallel::Segments& segments) {
  std::vector<int64_t> bounds;
  for (const auto& [begin, end] : segments.ranges) bounds.insert(bounds.end(), {begin, end});
  return record({.kind = OpKind::slice_columns, .inputs = {x.index}, .sizes = std::move(bounds)});
}

}  // namespace shardlm::graph
