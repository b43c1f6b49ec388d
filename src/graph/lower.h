#pragma once
// A recorded Graph -> one StableHLO program (backends::ProgramSpec) for a backend that
// compiles whole graphs (pjrt). Each node is lowered by the op's case in Lowering::lower
// (lower.cpp) through backends/pjrt/lowering.h. Bound tensors become parameters
// (one per device buffer, however many views of it the graph binds); a KV cache the
// graph writes is donated and comes back as a result aliased to it, so every step
// updates it in place; the graph's outputs are the first results.

#include "backends/backend.h"
#include "backends/pjrt/stablehlo.h"
#include "graph/graph.h"

namespace shardlm::graph {

backends::ProgramSpec lower_to_stablehlo(const Graph& graph, const std::vector<int32_t>& outputs,
                                         backends::Backend& backend, const std::string& key);

}  // namespace shardlm::graph
