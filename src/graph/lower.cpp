#include "graph/lower.h"

#include <map>
#include <optional>

#include "backends/pjrt/lowering.h"

namespace shardlm::graph {
namespace {

namespace hlo = backends::stablehlo;

// A cache this step writes: its value before the write, the entries and positions.
struct PendingWrite {
  hlo::Value before, entries, positions;
  int32_t node = -1;
};

class Lowering {
 public:
  Lowering(const Graph& graph, backends::Backend& backend)
      : graph_(graph), backend_(backend), program_(backend.partitions()) {
    for (const Node& node : graph.nodes)
      if (node.kind == OpKind::attention) max_cache_len_ = std::max(max_cache_len_, graph.values[node.inputs[1]].shape[2]);
  }

  backends::ProgramSpec run(const std::vector<int32_t>& outputs, const std::string& key) {
    values_.resize(graph_.values.size());
    for (size_t n = 0; n < graph_.nodes.size(); ++n) lower(graph_.nodes[n]);
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
      spec_.results.push_back(spec_.parameters[parameter_index_.at(storage)]);
      results.push_back(updated);
    }
    std::vector<std::string> placements;
    for (const Tensor& result : spec_.results) placements.push_back(backend_.placement_attributes(result));
    spec_.text = program_.text(results, placements);
    spec_.key = key;
    return std::move(spec_);
  }

 private:
  // The parameter holding `tensor`'s memory (one per buffer), seen with the tensor's shape.
  hlo::Value bound(const Tensor& tensor) {
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

  hlo::Value value(int32_t index) {
    if (!values_[index]) {
      const ValueInfo& info = graph_.values[index];
      SHARDLM_CHECK(info.bound, "stablehlo lowering: value ", index, " is used before any op computes it");
      values_[index] = bound(info.tensor);
    }
    return *values_[index];
  }

  hlo::Weight weight(int32_t index) {
    hlo::Weight weight{.values = value(index)};
    const ValueInfo& info = graph_.values[index];
    if (info.bound && info.tensor.quantized()) weight.scales = bound(info.tensor.block_scales());
    return weight;
  }

  std::optional<hlo::Value> optional(int32_t index) {
    if (index < 0) return std::nullopt;
    return value(index);
  }

  hlo::RotaryTables tables(const backends::RotaryEmbedding& rotary) {
    auto found = rotary_.find(&rotary);
    if (found != rotary_.end()) return found->second;
    SHARDLM_CHECK(max_cache_len_ > 0, "stablehlo lowering: rope outside a graph with a KV cache");
    const auto [cos, sin] = hlo::rotary_tables(rotary, max_cache_len_);
    const hlo::RotaryTables lowered{bound(backend_.to_device(cos)), bound(backend_.to_device(sin))};
    return rotary_.emplace(&rotary, lowered).first->second;
  }

  void set(const Node& node, hlo::Value result) { values_[node.output] = result; }

  void cache_write(const Node& node) {
    const Tensor& cache = graph_.values[node.inputs[0]].tensor;
    const void* storage = backend_.stored_view(cache).storage;
    SHARDLM_CHECK(graph_.values[node.inputs[0]].bound && !pending_.count(storage),
                  "stablehlo lowering: a KV cache written twice in one step");
    const hlo::Value before = value(node.inputs[0]);
    const hlo::Value entries = value(node.inputs[1]), positions = value(node.inputs[2]);
    updated_caches_.emplace_back(storage, hlo::kv_cache_write(program_, before, entries, positions));
    pending_[storage] = {before, entries, positions};
    spec_.bounded.emplace_back(parameter_index_.at(backend_.stored_view(graph_.values[node.inputs[2]].tensor).storage),
                                cache.shape()[2]);
  }

  hlo::Value attend(const Node& node) {
    const void* keys = backend_.stored_view(graph_.values[node.inputs[1]].tensor).storage;
    const void* cached_values = backend_.stored_view(graph_.values[node.inputs[2]].tensor).storage;
    std::optional<hlo::StepEntries> step;
    hlo::Value k_cache = value(node.inputs[1]), v_cache = value(node.inputs[2]);
    if (pending_.count(keys) && pending_.count(cached_values)) {
      step = hlo::StepEntries{pending_[keys].entries, pending_[cached_values].entries};
      k_cache = pending_[keys].before;
      v_cache = pending_[cached_values].before;
    }
    return hlo::attention(program_, value(node.inputs[0]), k_cache, v_cache, step, value(node.inputs[3]), node.scale,
                          node.sliding_window);
  }

  void lower(const Node& node);

  const Graph& graph_;
  backends::Backend& backend_;
  hlo::Program program_;
  backends::ProgramSpec spec_;
  std::vector<std::optional<hlo::Value>> values_;
  std::vector<hlo::Value> parameters_;
  std::map<const void*, int> parameter_index_;
  std::map<const void*, PendingWrite> pending_;
  std::vector<std::pair<const void*, hlo::Value>> updated_caches_;
  std::map<const backends::RotaryEmbedding*, hlo::RotaryTables> rotary_;
  int64_t max_cache_len_ = 0;
};

void Lowering::lower(const Node& node) {
  hlo::Program& p = program_;
  const auto in = [&](size_t i) { return value(node.inputs[i]); };
  switch (node.kind) {
    case OpKind::embedding: return set(node, hlo::embedding(p, weight(node.inputs[0]), in(1), node.first_row));
    case OpKind::linear: return set(node, hlo::linear(p, in(0), weight(node.inputs[1]), optional(node.inputs[2])));
    case OpKind::rms_norm: return set(node, hlo::rms_norm(p, in(0), weight(node.inputs[1]), node.eps));
    case OpKind::reshape: {
      return set(node, p.reshape(in(0), graph_.values[node.output].shape.dims()));
    }
    case OpKind::rope: return set(node, hlo::rope(p, in(0), in(1), tables(*node.rotary), *node.rotary));
    case OpKind::kv_cache_write: return cache_write(node);
    case OpKind::attention: return set(node, attend(node));
    case OpKind::silu_mul: return set(node, hlo::silu_mul(p, in(0), in(1)));
    case OpKind::add: return set(node, p.add(in(0), in(1)));
    case OpKind::gather_rows: return set(node, hlo::gather_rows(p, in(0), in(1)));
    case OpKind::all_reduce:
    case OpKind::all_gather:
      SHARDLM_CHECK(node.group->size() == 1, "the pjrt backend runs tensor parallelism as one SPMD program, not "
                                             "through a process group: use one process");
      return set(node, in(0));
    case OpKind::slice_columns: {
      std::vector<hlo::Value> parts;
      for (size_t i = 0; i + 1 < node.sizes.size(); i += 2) parts.push_back(p.slice_last(in(0), node.sizes[i], node.sizes[i + 1]));
      return set(node, p.concatenate(parts, 1));
    }
    case OpKind::linear_residual:
      return set(node, p.add(hlo::linear(p, in(0), weight(node.inputs[1]), optional(node.inputs[2])), in(3)));
    case OpKind::gated_linear:
      return set(node, hlo::silu_mul(p, hlo::linear(p, in(0), weight(node.inputs[1]), optional(node.inputs[2])),
                                     hlo::linear(p, in(0), weight(node.inputs[3]), optional(node.inputs[4]))));
    case OpKind::rms_norm_linear:
      return set(node, hlo::linear(p, hlo::rms_norm(p, in(0), weight(node.inputs[1]), node.eps),
                                   weight(node.inputs[2]), optional(node.inputs[3])));
    case OpKind::top_k: {
      const std::vector<hlo::Value> best = hlo::top_k(p, in(0), node.sizes.at(0));
      values_[node.output] = best[0];
      values_[node.sibling_outputs.at(0)] = best[1];
      return;
    }
    case OpKind::sibling_linears:
      for (size_t i = 0; i <= node.sibling_outputs.size(); ++i) {
        const hlo::Value out = hlo::linear(p, in(0), weight(node.inputs[1 + 2 * i]), optional(node.inputs[2 + 2 * i]));
        values_[i == 0 ? node.output : node.sibling_outputs[i - 1]] = out;
      }
      return;
  }
}

}  // namespace

backends::ProgramSpec lower_to_stablehlo(const Graph& graph, const std::vector<int32_t>& outputs,
                                         backends::Backend& backend, const std::string& key) {
  return Lowering(graph, backend).run(outputs, key);
}

}  // namespace shardlm::graph
