#pragma once
// graph::compile: a recorded Graph -> an Executable for one backend.
//  1. Fusion: patterns the backend has fused kernels for are rewritten
//     (silu_mul of two linears -> gated_linear; linear feeding a residual add ->
//     linear_residual; a single-use rms_norm feeding a linear -> rms_norm_linear;
//     rope on a single-use projection rotates it in place).
//  2. Memory plan: every activation gets an offset in one arena, reused once the
//     value is dead (liveness by node order). Weights, caches and step inputs are
//     bound tensors outside the arena.
// A backend that compiles whole graphs (pjrt) gets neither: the graph is lowered to one
// program (graph/lower.h), which its compiler fuses and plans itself.
// Running an Executable only walks its node list: no allocation, no shape work. A backend
// that can record the walk (CUDA graphs) replays the record instead.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/graph.h"

namespace shardlm::graph {

struct CompileOptions {
  bool fuse = true;
  std::string key{};  // what the executable is for (the CompileKey), for a whole-graph backend's logs and cache
};

class Executable {
 public:
  void run(backends::Backend& backend) const;
  const Tensor& tensor(Value value) const { return tensors_.at(value.index); }
  size_t arena_bytes() const { return arena_.nbytes(); }
  size_t node_count() const { return nodes_.size(); }
  size_t fused_count() const { return fused_count_; }

 private:
  friend Executable compile(Graph graph, const std::vector<Value>& outputs, backends::Backend& backend,
                            const CompileOptions& options);
  std::vector<Node> nodes_;
  std::vector<Tensor> tensors_;  // value index -> bound tensor or a view into arena_
  Tensor arena_;
  size_t fused_count_ = 0;
  mutable std::unique_ptr<backends::Replay> replay_;  // the backend's record of the node walk
  std::unique_ptr<backends::Program> program_;        // a whole-graph backend's program, or null
};

// `outputs` stay live to the end (their tensors are read after run()).
Executable compile(Graph graph, const std::vector<Value>& outputs, backends::Backend& backend,
                   const CompileOptions& options);
Executable compile(Graph graph, Value output, backends::Backend& backend, const CompileOptions& options);

}  // namespace shardlm::graph
