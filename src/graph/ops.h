#pragma once
// The op table: one row per OpKind, holding what the op is everywhere, so that adding an
// op is one row here plus the pieces it points at:
//   shape   checks the inputs and gives the outputs (Builder calls it as it records; its
//           typed constructor is the Builder method of the same name, builder.h)
//   execute runs it op by op: the Backend method it calls has the op's shapes and meaning in
//           backends/backend.h; its scalar reference is in backends/cpu/reference_*.cpp, the
//           fast CPU kernels in backends/cpu/, the CUDA kernels in backends/cuda/
//   lower   writes its StableHLO for a backend that compiles whole graphs (pjrt), from the
//           builders of backends/pjrt/lowering.h
// The kinds compile() fuses have no shape rule: they are made from nodes already checked.

#include <string>
#include <vector>

#include "graph/graph.h"

namespace shardlm::graph {

class GraphLowering;  // graph/lower.h

// One value an op writes: node.output first, then node.sibling_outputs in order.
struct OutputSpec {
  Shape shape;
  DType dtype = DType::f32;
};

// What a shape rule sees of the graph being built.
class ShapeContext {
 public:
  ShapeContext(const Graph& graph, const backends::Backend& backend) : graph_(graph), backend_(backend) {}
  const ValueInfo& input(const Node& node, size_t i) const { return graph_.values.at(node.inputs.at(i)); }
  const Shape& shape(const Node& node, size_t i) const { return input(node, i).shape; }
  const backends::Backend& backend() const { return backend_; }
  // A shape error names the op and points at the likely cause.
  [[noreturn]] void fail(const Node& node, const std::string& detail) const;

 private:
  const Graph& graph_;
  const backends::Backend& backend_;
};

// What an op run op by op sees: its node and every value's tensor.
class Operands {
 public:
  Operands(const Node& node, const std::vector<Tensor>& tensors) : node_(node), tensors_(tensors) {}
  const Node& node() const { return node_; }
  // Input i, or an empty tensor for an absent optional input (a bias).
  const Tensor& in(size_t i) const;
  // Output i: 0 is node.output, i > 0 is sibling_outputs[i - 1].
  const Tensor& out(size_t i = 0) const;

 private:
  const Node& node_;
  const std::vector<Tensor>& tensors_;
};

struct OpRow {
  OpKind kind;
  const char* name;
  bool aliases_input = false;  // its output is its first input's memory (a view, or summed in place)
  std::vector<OutputSpec> (*shape)(const ShapeContext&, const Node&) = nullptr;
  void (*execute)(backends::Backend&, const Operands&) = nullptr;
  void (*lower)(GraphLowering&, const Node&) = nullptr;
};

const OpRow& op_row(OpKind kind);
inline const char* op_name(OpKind kind) { return op_row(kind).name; }

}  // namespace shardlm::graph
