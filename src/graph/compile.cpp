#include "graph/compile.h"

#include "graph/lower.h"
#include "graph/op_profile.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace shardlm::graph {
namespace {

constexpr size_t alignment = 64;

int32_t root_of(const Graph& graph, int32_t value) {
  while (graph.values[value].alias_of >= 0) value = graph.values[value].alias_of;
  return value;
}

// Uses of each value's memory by ops that do work: reshapes pass their uses on to
// the viewed value. The graph output counts as one more use.
std::vector<int> count_uses(const Graph& graph, const std::vector<bool>& live, const std::vector<int32_t>& outputs) {
  std::vector<int> uses(graph.values.size(), 0);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (!live[n] || graph.nodes[n].kind == OpKind::reshape) continue;
    for (int32_t input : graph.nodes[n].inputs)
      if (input >= 0) ++uses[root_of(graph, input)];
  }
  for (int32_t output : outputs) ++uses[root_of(graph, output)];
  return uses;
}

// The live node producing `value` directly (not through a view), or -1.
int32_t producer_of(const std::vector<int32_t>& producer, int32_t value) { return value >= 0 ? producer[value] : -1; }

size_t fuse(Graph& graph, std::vector<bool>& live, const std::vector<int32_t>& output) {
  std::vector<int32_t> producer(graph.values.size(), -1);
  for (size_t n = 0; n < graph.nodes.size(); ++n)
    if (graph.nodes[n].output >= 0) producer[graph.nodes[n].output] = static_cast<int32_t>(n);
  size_t fused = 0;
  auto single_use_linear = [&](int32_t value, const std::vector<int>& uses) -> int32_t {
    int32_t node = producer_of(producer, value);
    if (node < 0 || !live[node] || graph.nodes[node].kind != OpKind::linear) return -1;
    return uses[value] == 1 ? node : -1;
  };

  std::vector<int> uses = count_uses(graph, live, output);
  for (Node& node : graph.nodes) {
    if (node.kind != OpKind::silu_mul) continue;
    int32_t gate = single_use_linear(node.inputs[0], uses), up = single_use_linear(node.inputs[1], uses);
    if (gate < 0 || up < 0 || graph.nodes[gate].inputs[0] != graph.nodes[up].inputs[0]) continue;
    const Node& g = graph.nodes[gate];
    const Node& u = graph.nodes[up];
    node = {.kind = OpKind::gated_linear,
            .inputs = {g.inputs[0], g.inputs[1], g.inputs[2], u.inputs[1], u.inputs[2]},
            .output = node.output};
    live[gate] = live[up] = false;
    ++fused;
  }

  uses = count_uses(graph, live, output);
  for (Node& node : graph.nodes) {
    if (node.kind != OpKind::add) continue;
    for (int side = 1; side >= 0; --side) {
      int32_t linear = single_use_linear(node.inputs[side], uses);
      if (linear < 0) continue;
      const Node& l = graph.nodes[linear];
      node = {.kind = OpKind::linear_residual,
              .inputs = {l.inputs[0], l.inputs[1], l.inputs[2], node.inputs[1 - side]},
              .output = node.output};
      live[linear] = false;
      ++fused;
      break;
    }
  }

  // Linears of one input (q, k and v; gate and up were taken above) become one node at
  // the first one's place: their weights and biases are bound, so ready there, and the
  // input is the same memory until an op writes it in place (an all_reduce).
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const auto plain_linear = [&](size_t m) {
      const Node& node = graph.nodes[m];
      return live[m] && node.kind == OpKind::linear && graph.values[node.inputs[1]].bound &&
             (node.inputs[2] < 0 || graph.values[node.inputs[2]].bound);
    };
    if (!plain_linear(n)) continue;
    Node& first = graph.nodes[n];
    std::vector<int32_t> siblings;
    const int32_t input_root = root_of(graph, first.inputs[0]);
    for (size_t m = n + 1; m < graph.nodes.size() && siblings.size() + 1 < max_sibling_linears; ++m) {
      const Node& node = graph.nodes[m];
      if (live[m] && (node.kind == OpKind::all_reduce || node.in_place) && root_of(graph, node.inputs[0]) == input_root)
        break;
      if (plain_linear(m) && node.inputs[0] == first.inputs[0]) siblings.push_back(static_cast<int32_t>(m));
    }
    if (siblings.empty()) continue;
    first.kind = OpKind::sibling_linears;
    for (int32_t m : siblings) {
      Node& sibling = graph.nodes[m];
      first.inputs.insert(first.inputs.end(), {sibling.inputs[1], sibling.inputs[2]});
      first.sibling_outputs.push_back(sibling.output);
      live[m] = false;
    }
    fused += siblings.size();
  }

  uses = count_uses(graph, live, output);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Node& node = graph.nodes[n];
    if (!live[n] || node.kind != OpKind::linear) continue;
    int32_t norm = producer_of(producer, node.inputs[0]);
    if (norm < 0 || !live[norm] || graph.nodes[norm].kind != OpKind::rms_norm || uses[node.inputs[0]] != 1) continue;
    const Node& r = graph.nodes[norm];
    node = {.kind = OpKind::rms_norm_linear,
            .inputs = {r.inputs[0], r.inputs[1], node.inputs[1], node.inputs[2]},
            .output = node.output,
            .eps = r.eps};
    live[norm] = false;
    ++fused;
  }

  uses = count_uses(graph, live, output);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Node& node = graph.nodes[n];
    if (!live[n] || node.kind != OpKind::rope) continue;
    int32_t root = root_of(graph, node.inputs[0]);
    if (graph.values[root].bound || uses[root] != 1) continue;
    node.in_place = true;
    graph.values[node.output].alias_of = node.inputs[0];
    ++fused;
  }
  return fused;
}

struct Allocation {
  size_t offset, size;
  int64_t last_use;
};

// First fit: the lowest offset where `size` bytes overlap no live allocation.
size_t place(const std::vector<Allocation>& active, size_t size) {
  std::vector<std::pair<size_t, size_t>> taken;
  for (const Allocation& a : active) taken.emplace_back(a.offset, a.offset + a.size);
  std::sort(taken.begin(), taken.end());
  size_t candidate = 0;
  for (const auto& [begin, end] : taken) {
    if (candidate + size <= begin) break;
    candidate = std::max(candidate, end);
  }
  return candidate;
}

}  // namespace

Executable compile(Graph graph, Value output, backends::Backend& backend, const CompileOptions& options) {
  return compile(std::move(graph), std::vector<Value>{output}, backend, options);
}

Executable compile(Graph graph, const std::vector<Value>& output_values, backends::Backend& backend,
                   const CompileOptions& options) {
  Executable executable;
  std::vector<int32_t> outputs;
  for (Value value : output_values) outputs.push_back(value.index);
  if (backend.compiles_graphs()) {
    backends::ProgramSpec spec = lower_to_stablehlo(graph, outputs, backend, options.key);
    executable.program_ = backend.compile_program(spec);
    executable.tensors_.resize(graph.values.size());
    for (size_t i = 0; i < outputs.size(); ++i) executable.tensors_[outputs[i]] = spec.results.at(i);
    executable.nodes_ = std::move(graph.nodes);
    return executable;
  }
  std::vector<bool> live(graph.nodes.size(), true);
  if (options.fuse) executable.fused_count_ = fuse(graph, live, outputs);

  // Liveness of each memory root, in node order.
  constexpr int64_t forever = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> last_use(graph.values.size(), -1);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (!live[n]) continue;
    for (int32_t input : graph.nodes[n].inputs)
      if (input >= 0) last_use[root_of(graph, input)] = static_cast<int64_t>(n);
  }
  for (int32_t output : outputs) last_use[root_of(graph, output)] = forever;

  std::vector<size_t> offset(graph.values.size(), 0);
  std::vector<Allocation> active;
  size_t arena_bytes = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (!live[n]) continue;
    std::erase_if(active, [&](const Allocation& a) { return a.last_use < static_cast<int64_t>(n); });
    for_each_output(graph.nodes[n], [&](int32_t value) {
      if (graph.values[value].alias_of >= 0) return;
      const size_t bytes = static_cast<size_t>(graph.values[value].shape.numel()) * dtype_size(graph.values[value].dtype);
      const size_t size = (bytes + alignment - 1) / alignment * alignment;
      offset[value] = place(active, size);
      active.push_back({offset[value], size, std::max<int64_t>(last_use[value], static_cast<int64_t>(n))});
      arena_bytes = std::max(arena_bytes, offset[value] + size);
    });
  }

  // Values that live nodes touch; outputs of fused-away nodes get no tensor.
  std::vector<bool> needed(graph.values.size(), false);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (!live[n]) continue;
    for (int32_t input : graph.nodes[n].inputs)
      if (input >= 0) needed[input] = true;
    for_each_output(graph.nodes[n], [&](int32_t value) { needed[value] = true; });
  }
  for (int32_t output : outputs) needed[output] = true;

  executable.arena_ = backend.allocate({static_cast<int64_t>(arena_bytes)}, DType::u8);
  executable.tensors_.resize(graph.values.size());
  for (size_t v = 0; v < graph.values.size(); ++v) {
    const ValueInfo& value = graph.values[v];
    if (!needed[v]) continue;
    if (value.bound) {
      executable.tensors_[v] = value.tensor;
      continue;
    }
    const int32_t root = root_of(graph, static_cast<int32_t>(v));
    if (graph.values[root].bound) continue;  // views of bound tensors were bound themselves
    executable.tensors_[v] = executable.arena_.view_bytes(offset[root], value.shape, value.dtype);
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n)
    if (live[n] && graph.nodes[n].kind != OpKind::reshape) executable.nodes_.push_back(graph.nodes[n]);
  return executable;
}

void Executable::run(backends::Backend& backend) const {
  if (program_) return program_->run();
  // Captures two references, which std::function holds without allocating: a warm step allocates nothing.
  backend.run_replayable(replay_, [&] {
    // Only the CPU runs each node to its end before the next: elsewhere a node's host time is its launch.
    OpProfile* const profile = backend.device().kind == DeviceKind::cpu ? OpProfile::active() : nullptr;
    for (const Node& node : nodes_) {
      if (!profile) {
        execute_node(backend, node, tensors_);
        continue;
      }
      const auto start = std::chrono::steady_clock::now();
      execute_node(backend, node, tensors_);
      profile->record(node.kind, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  });
}

}  // namespace shardlm::graph
