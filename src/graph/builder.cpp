#include "graph/builder.h"

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

Value Builder::record(Node node, Shape output_shape) {
  if (node.kind != OpKind::kv_cache_write) {
    ValueInfo output{.shape = std::move(output_shape)};
    if (node.kind == OpKind::reshape || node.kind == OpKind::all_reduce) output.alias_of = node.inputs[0];
    graph_.values.push_back(std::move(output));
    node.output = static_cast<int32_t>(graph_.values.size() - 1);
  }
  if (mode_ == BuildMode::eager) {
    std::vector<Tensor>& scratch = eager_tensors_;
    ValueInfo* out = node.output >= 0 ? &graph_.values[node.output] : nullptr;
    if (out && (node.kind == OpKind::reshape || node.kind == OpKind::all_reduce)) {
      out->tensor = graph_.values[node.inputs[0]].tensor.reshape(out->shape);
    } else if (out) {
      out->tensor = backend_.allocate(out->shape, DType::f32);
    }
    scratch.resize(graph_.values.size());
    for (int32_t input : node.inputs)
      if (input >= 0) scratch[input] = graph_.values[input].tensor;
    if (out) scratch[node.output] = out->tensor;
    for (int32_t value : node.sibling_outputs) {
      ValueInfo& sibling = graph_.values[value];
      scratch[value] = sibling.tensor = backend_.allocate(sibling.shape, sibling.dtype);
    }
    execute_node(backend_, node, scratch);
  }
  graph_.nodes.push_back(std::move(node));
  return {graph_.nodes.back().output};
}

void Builder::shape_error(const char* op, const std::string& detail) const {
  fail("graph: ", op, ": ", detail, " (a model/config mismatch: check config.json against the checkpoint)");
}

Value Builder::embedding(Value table, Value ids, int64_t first_row) {
  const Shape& table_shape = shape(table);
  if (table_shape.rank() != 2) shape_error("embedding", "table must be [vocab, hidden], got " + table_shape.to_string());
  if (graph_.values[ids.index].dtype != DType::i32) shape_error("embedding", "ids must be int32");
  return record({.kind = OpKind::embedding, .inputs = {table.index, ids.index}, .first_row = first_row},
                {shape(ids).numel(), table_shape[1]});
}

Value Builder::linear(Value x, Value weight, Value bias) {
  const Shape& x_shape = shape(x);
  const Shape& w_shape = shape(weight);
  if (x_shape.rank() != 2 || w_shape.rank() != 2 || x_shape[1] != w_shape[1])
    shape_error("linear", "input " + x_shape.to_string() + " does not match weight [out, in] " + w_shape.to_string());
  if (bias.defined() && shape(bias) != Shape{w_shape[0]})
    shape_error("linear", "bias " + shape(bias).to_string() + " does not match weight " + w_shape.to_string());
  return record({.kind = OpKind::linear, .inputs = {x.index, weight.index, bias.index}}, {x_shape[0], w_shape[0]});
}

Value Builder::rms_norm(Value x, Value weight, double eps) {
  if (shape(weight) != Shape{shape(x).back()})
    shape_error("rms_norm", "weight " + shape(weight).to_string() + " does not match input " + shape(x).to_string());
  return record({.kind = OpKind::rms_norm, .inputs = {x.index, weight.index}, .eps = static_cast<float>(eps)},
                shape(x));
}

Value Builder::reshape(Value x, Shape new_shape) {
  if (new_shape.numel() != shape(x).numel())
    shape_error("reshape", shape(x).to_string() + " to " + new_shape.to_string());
  if (graph_.values[x.index].bound) return bind(graph_.values[x.index].tensor.reshape(std::move(new_shape)));
  return record({.kind = OpKind::reshape, .inputs = {x.index}}, std::move(new_shape));
}

Value Builder::rope(Value x, Value positions, const backends::RotaryEmbedding& rotary) {
  const Shape& x_shape = shape(x);
  if (x_shape.rank() != 3 || shape(positions).numel() != x_shape[0] || rotary.rotary_dim > x_shape[2] ||
      static_cast<int64_t>(rotary.inv_freq.size()) * 2 != rotary.rotary_dim)
    shape_error("rope", "input " + x_shape.to_string() + " with rotary_dim " + std::to_string(rotary.rotary_dim));
  return record({.kind = OpKind::rope, .inputs = {x.index, positions.index}, .rotary = &rotary}, x_shape);
}

void Builder::kv_cache_write(Value cache, Value entries, Value positions) {
  const Shape& c = shape(cache);
  const Shape& e = shape(entries);
  if (c.rank() != 4 || e.rank() != 4 || c[0] != e[0] || c[1] != e[2] || c[3] != e[3] ||
      shape(positions) != Shape{e[0], e[1]})
    shape_error("kv_cache_write", "entries " + e.to_string() + " do not fit cache " + c.to_string());
  record({.kind = OpKind::kv_cache_write, .inputs = {cache.index, entries.index, positions.index}}, {});
}

Value Builder::attention(Value q, Value k_cache, Value v_cache, Value positions, float scale,
                         int64_t sliding_window) {
  const Shape& q_shape = shape(q);
  const Shape& k = shape(k_cache);
  if (q_shape.rank() != 4 || k.rank() != 4 || shape(v_cache) != k || k[0] != q_shape[0] || k[3] != q_shape[3] ||
      q_shape[2] % k[1] != 0 || shape(positions) != Shape{q_shape[0], q_shape[1]})
    shape_error("attention", "query " + q_shape.to_string() + " does not fit cache " + k.to_string());
  return record({.kind = OpKind::attention,
                 .inputs = {q.index, k_cache.index, v_cache.index, positions.index},
                 .scale = scale,
                 .sliding_window = sliding_window},
                q_shape);
}

Value Builder::silu_mul(Value gate, Value up) {
  if (shape(gate) != shape(up)) shape_error("silu_mul", shape(gate).to_string() + " vs " + shape(up).to_string());
  return record({.kind = OpKind::silu_mul, .inputs = {gate.index, up.index}}, shape(gate));
}

Value Builder::add(Value a, Value b) {
  if (shape(a) != shape(b)) shape_error("add", shape(a).to_string() + " vs " + shape(b).to_string());
  return record({.kind = OpKind::add, .inputs = {a.index, b.index}}, shape(a));
}

Value Builder::gather_rows(Value x, Value indices) {
  if (shape(x).rank() != 2) shape_error("gather_rows", "input must be [rows, dim]");
  return record({.kind = OpKind::gather_rows, .inputs = {x.index, indices.index}}, {shape(indices).numel(), shape(x)[1]});
}

std::pair<Value, Value> Builder::top_k(Value logits, int64_t k) {
  const Shape& shape = this->shape(logits);
  if (shape.rank() != 2 || k <= 0 || k > backend_.max_top_k())
    shape_error("top_k", str_cat("k ", k, " of ", shape.to_string(), " (at most ", backend_.max_top_k(), ")"));
  const Shape best{shape[0], k};
  graph_.values.push_back({.shape = best, .dtype = DType::i32});
  const int32_t indices = static_cast<int32_t>(graph_.values.size() - 1);
  Value values = record({.kind = OpKind::top_k, .inputs = {logits.index}, .sibling_outputs = {indices}, .sizes = {k}},
                        best);
  return {values, {indices}};
}

Value Builder::all_reduce(Value x, parallel::ProcessGroup& group) {
  if (graph_.values[x.index].bound) shape_error("all_reduce", "cannot sum a bound tensor in place");
  return record({.kind = OpKind::all_reduce, .inputs = {x.index}, .group = &group}, shape(x));
}

Value Builder::all_gather(Value x, parallel::ProcessGroup& group, std::vector<int64_t> counts) {
  const Shape& x_shape = shape(x);
  if (x_shape.rank() != 2 || static_cast<int>(counts.size()) != group.size() || counts[group.rank()] != x_shape[1])
    shape_error("all_gather", "input " + x_shape.to_string() + " is not this rank's share of the gathered columns");
  int64_t total = 0;
  for (int64_t count : counts) total += count;
  return record({.kind = OpKind::all_gather, .inputs = {x.index}, .sizes = std::move(counts), .group = &group},
                {x_shape[0], total});
}

Value Builder::slice_columns(Value x, const parallel::Segments& segments) {
  const Shape& x_shape = shape(x);
  std::vector<int64_t> bounds;
  for (const auto& [begin, end] : segments.ranges) {
    if (x_shape.rank() != 2 || begin < 0 || end <= begin || end > x_shape[1])
      shape_error("slice_columns", "columns [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " +
                                       x_shape.to_string());
    bounds.insert(bounds.end(), {begin, end});
  }
  return record({.kind = OpKind::slice_columns, .inputs = {x.index}, .sizes = std::move(bounds)},
                {x_shape[0], segments.size()});
}

}  // namespace shardlm::graph
