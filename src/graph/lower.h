#pragma once
// A recorded Graph -> one StableHLO program (backends::ProgramSpec) for a backend that
// compiles whole graphs (pjrt). Each node is lowered by its op's row (graph/ops.cpp)
// through backends/pjrt/lowering.h. Bound tensors become parameters (one per device
// buffer, however many views of it the graph binds); a KV cache the graph writes is
// donated and comes back as a result aliased to it, so every step updates it in place;
// the graph's outputs are the first results.

#include <map>
#include <optional>

#include "backends/backend.h"
#include "backends/pjrt/lowering.h"
#include "backends/pjrt/stablehlo.h"
#include "graph/graph.h"

namespace shardlm::graph {

backends::ProgramSpec lower_to_stablehlo(const Graph& graph, const std::vector<int32_t>& outputs,
                                         backends::Backend& backend, const std::string& key);

// The state of one lowering, as an op's lower function (graph/ops.cpp) sees it.
class GraphLowering {
 public:
  GraphLowering(const Graph& graph, backends::Backend& backend);
  backends::ProgramSpec run(const std::vector<int32_t>& outputs, const std::string& key);

  backends::stablehlo::Program& program() { return program_; }
  const Graph& graph() const { return graph_; }
  // Input i of `node` as the program sees it (a parameter for a bound tensor).
  backends::stablehlo::Value in(const Node& node, size_t i) { return value(node.inputs.at(i)); }
  // Input i as a weight: with its block scales when int8.
  backends::stablehlo::Weight weight(const Node& node, size_t i);
  // Input i, or nothing for an absent optional input (a bias).
  std::optional<backends::stablehlo::Value> optional(const Node& node, size_t i);
  // Output i of `node`: 0 is node.output, i > 0 is sibling_outputs[i - 1].
  void set(const Node& node, size_t i, backends::stablehlo::Value result);
  void set(const Node& node, backends::stablehlo::Value result) { set(node, 0, result); }
  // The cos/sin tables of `rotary` over every cache position, passed in once per program.
  backends::stablehlo::RotaryTables tables(const backends::RotaryEmbedding& rotary);
  // kv_cache_write: the cache is donated and its updated value becomes a result.
  void cache_write(const Node& node);
  // attention, reading the caches as they were before this step's writes plus the entries.
  backends::stablehlo::Value attend(const Node& node);

 private:
  // A cache this step writes: its value before the write, and the entries written.
  struct PendingWrite {
    backends::stablehlo::Value before, entries;
  };
  backends::stablehlo::Value bound(const Tensor& tensor);
  backends::stablehlo::Value value(int32_t index);

  const Graph& graph_;
  backends::Backend& backend_;
  backends::stablehlo::Program program_;
  backends::ProgramSpec spec_;
  std::vector<std::optional<backends::stablehlo::Value>> values_;
  std::vector<backends::stablehlo::Value> parameters_;
  std::map<const void*, int> parameter_index_;
  std::map<const void*, PendingWrite> pending_;
  std::vector<std::pair<const void*, backends::stablehlo::Value>> updated_caches_;
  std::map<const backends::RotaryEmbedding*, backends::stablehlo::RotaryTables> rotary_;
  int64_t max_cache_len_ = 0;
};

}  // namespace shardlm::graph
