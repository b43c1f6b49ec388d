#include "graph/lower.h"

#include <algorithm>

#include "graph/ops.h"

namespace shardlm::graph {

namespace hlo = backends::stablehlo;

GraphLowering::GraphLowering(const Graph& graph, backends::Backend& backend)
    : graph_(graph), backend_(backend), program_(backend.partitions()) {
  for (const Node& node : graph.nodes)
    if (node.kind == OpKind::attention) max_cache_len_ = std::max(max_cache_len_, graph.values[node.inputs[1]].shape[2]);
}

backends::ProgramSpec GraphLowering::run(const std::vector<int32_t>& outputs, const std::string& key) {
  values_.resize(graph_.values.size());
  for (const Node& node : graph_.nodes) op_row(node.kind).lower(*this, node);
  std::vector<hlo::Value> results;
  for (int32_t output : outputs) {
    results.push_back(value(output));
    spec_.results.push_back(backend_.allocate(graph_.values[output].shape, graph_.values[output].dtype));
  }
  spec_.donated.assign(spec_.parameters.size(), -1);
  for (const auto& [storage, updated] : updated_caches_) {
    const int parameter = parameter_index_.at(storage);
    program_.add_parameter_attribute(parameter, str_cat("tf.aliasing_output = ", results.size(), " : i32"));
    spec_.donated[parameter] = static_cast<int>(results.size());
    spec_.results.push_back(spec_.parameters[parameter]);
    results.push_back(updated);
  }
  std::vector<std::string> placements;
  for (const Tensor& result : spec_.results) placements.push_back(backend_.placement_attributes(result));
  spec_.text = program_.text(results, placements);
  spec_.key = key;
  return std::move(spec_);
}

// The parameter holding `tensor`'s memory (one per buffer), seen with the tensor's shape.
hlo::Value GraphLowering::bound(const Tensor& tensor) {
  const backends::Backend::StoredView stored = backend_.stored_view(tensor);
  auto found = parameter_index_.find(stored.storage);
  if (found == parameter_index_.end()) {
    parameters_.push_back(
        program_.parameter(hlo::type_of(stored.shape, tensor.dtype()), backend_.placement_attributes(tensor)));
    spec_.parameters.push_back(tensor);
    found = parameter_index_.emplace(stored.storage, static_cast<int>(parameters_.size()) - 1).first;
  }
  return hlo::view(program_, parameters_[found->second], stored.offset, tensor.shape().dims());
}

hlo::Value GraphLowering::value(int32_t index) {
  if (!values_[index]) {
    const ValueInfo& info = graph_.values[index];
    SHARDLM_CHECK(info.bound, "stablehlo lowering: value ", index, " is used before any op computes it");
    values_[index] = bound(info.tensor);
  }
  return *values_[index];
}

hlo::Weight GraphLowering::weight(const Node& node, size_t i) {
  hlo::Weight weight{.values = in(node, i)};
  const ValueInfo& info = graph_.values[node.inputs[i]];
  if (info.bound && info.tensor.quantized()) weight.scales = bound(info.tensor.block_scales());
  return weight;
}

std::optional<hlo::Value> GraphLowering::optional(const Node& node, size_t i) {
  if (i >= node.inputs.size() || node.inputs[i] < 0) return std::nullopt;
  return in(node, i);
}

void GraphLowering::set(const Node& node, size_t i, hlo::Value result) {
  values_[i == 0 ? node.output : node.sibling_outputs.at(i - 1)] = result;
}

hlo::RotaryTables GraphLowering::tables(const backends::RotaryEmbedding& rotary) {
  auto found = rotary_.find(&rotary);
  if (found != rotary_.end()) return found->second;
  SHARDLM_CHECK(max_cache_len_ > 0, "stablehlo lowering: rope outside a graph with a KV cache");
  const auto [cos, sin] = hlo::rotary_tables(rotary, max_cache_len_);
  const hlo::RotaryTables lowered{bound(backend_.to_device(cos)), bound(backend_.to_device(sin))};
  return rotary_.emplace(&rotary, lowered).first->second;
}

void GraphLowering::cache_write(const Node& node) {
  const Tensor& cache = graph_.values[node.inputs[0]].tensor;
  const void* storage = backend_.stored_view(cache).storage;
  SHARDLM_CHECK(graph_.values[node.inputs[0]].bound && !pending_.count(storage),
                "stablehlo lowering: a KV cache written twice in one step");
  const hlo::Value before = in(node, 0), entries = in(node, 1), positions = in(node, 2), rows = in(node, 3);
  updated_caches_.emplace_back(storage, hlo::kv_cache_write(program_, before, entries, positions, rows));
  pending_[storage] = {before, entries};
  // Every layer's write names the same positions and rows: each is checked once a run.
  const auto check_once = [](std::vector<std::pair<int, int64_t>>& checks, std::pair<int, int64_t> check) {
    if (std::find(checks.begin(), checks.end(), check) == checks.end()) checks.push_back(check);
  };
  const auto parameter = [&](int input) {
    return parameter_index_.at(backend_.stored_view(graph_.values[node.inputs[input]].tensor).storage);
  };
  check_once(spec_.bounded, {parameter(2), cache.shape()[2]});
  check_once(spec_.cache_rows, {parameter(3), cache.shape()[0]});
}

hlo::Value GraphLowering::attend(const Node& node) {
  const void* keys = backend_.stored_view(graph_.values[node.inputs[1]].tensor).storage;
  const void* cached_values = backend_.stored_view(graph_.values[node.inputs[2]].tensor).storage;
  std::optional<hlo::StepEntries> step;
  hlo::Value k_cache = in(node, 1), v_cache = in(node, 2);
  if (pending_.count(keys) && pending_.count(cached_values)) {
    step = hlo::StepEntries{pending_[keys].entries, pending_[cached_values].entries};
    k_cache = pending_[keys].before;
    v_cache = pending_[cached_values].before;
  }
  return hlo::attention(program_, in(node, 0), k_cache, v_cache, step, in(node, 3), in(node, 4), node.scale,
                        node.sliding_window);
}

backends::ProgramSpec lower_to_stablehlo(const Graph& graph, const std::vector<int32_t>& outputs,
                                         backends::Backend& backend, const std::string& key) {
  return GraphLowering(graph, backend).run(outputs, key);
}

}  // namespace shardlm::graph
