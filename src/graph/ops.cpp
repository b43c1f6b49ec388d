#include "graph/ops.h"

#include <array>
#include <span>

#include "graph/lower.h"

namespace shardlm::graph {
namespace {

namespace hlo = backends::stablehlo;
using backends::Backend;
using Outputs = std::vector<OutputSpec>;

// The linears of the fused kinds: input x, then (weight, bias|-1) pairs from input `first`.
hlo::Value lower_linear(GraphLowering& l, const Node& node, hlo::Value x, size_t first) {
  return hlo::linear(l.program(), x, l.weight(node, first), l.optional(node, first + 1));
}

// A collective over a group of one is its input; a compiled program splits over devices as
// one SPMD program instead (backends/pjrt), never through a process group.
void lower_collective(GraphLowering& l, const Node& node) {
  SHARDLM_CHECK(node.group->size() == 1, "the pjrt backend runs tensor parallelism as one SPMD program, not "
                                         "through a process group: use one process");
  l.set(node, l.in(node, 0));
}

// Two inputs of one shape -> that shape.
Outputs elementwise_shape(const ShapeContext& c, const Node& n) {
  if (c.shape(n, 0) != c.shape(n, 1)) c.fail(n, c.shape(n, 0).to_string() + " vs " + c.shape(n, 1).to_string());
  return {{c.shape(n, 0)}};
}

constexpr OpRow rows[] = {
    {.kind = OpKind::embedding,
     .name = "embedding",
     // table [vocab, hidden], ids i32 [tokens] -> [tokens, hidden]
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs {
       const Shape& table = c.shape(n, 0);
       if (table.rank() != 2) c.fail(n, "table must be [vocab, hidden], got " + table.to_string());
       if (c.input(n, 1).dtype != DType::i32) c.fail(n, "ids must be int32");
       return {{{c.shape(n, 1).numel(), table[1]}}};
     },
     .execute = [](Backend& b, const Operands& o) { b.embedding(o.in(0), o.in(1), o.node().first_row, o.out()); },
     .lower = [](GraphLowering& l, const Node& n) {
       l.set(n, hlo::embedding(l.program(), l.weight(n, 0), l.in(n, 1), n.first_row));
     }},
    {.kind = OpKind::linear,
     .name = "linear",
     // x [rows, in], weight [out, in], bias [out] | absent -> [rows, out]
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs {
       const Shape& x = c.shape(n, 0);
       const Shape& w = c.shape(n, 1);
       if (x.rank() != 2 || w.rank() != 2 || x[1] != w[1])
         c.fail(n, "input " + x.to_string() + " does not match weight [out, in] " + w.to_string());
       if (n.inputs[2] >= 0 && c.shape(n, 2) != Shape{w[0]})
         c.fail(n, "bias " + c.shape(n, 2).to_string() + " does not match weight " + w.to_string());
       return {{{x[0], w[0]}}};
     },
     .execute = [](Backend& b, const Operands& o) { b.linear(o.in(0), o.in(1), o.in(2), o.out()); },
     .lower = [](GraphLowering& l, const Node& n) { l.set(n, lower_linear(l, n, l.in(n, 0), 1)); }},
    {.kind = OpKind::rms_norm,
     .name = "rms_norm",
     // x [..., dim], weight [dim] -> [..., dim]
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs {
       if (c.shape(n, 1) != Shape{c.shape(n, 0).back()})
         c.fail(n, "weight " + c.shape(n, 1).to_string() + " does not match input " + c.shape(n, 0).to_string());
       return {{c.shape(n, 0)}};
     },
     .execute = [](Backend& b, const Operands& o) { b.rms_norm(o.in(0), o.in(1), o.node().eps, o.out()); },
     .lower = [](GraphLowering& l, const Node& n) {
       l.set(n, hlo::rms_norm(l.program(), l.in(n, 0), l.weight(n, 1), n.eps));
     }},
    {.kind = OpKind::reshape,
     .name = "reshape",
     .aliases_input = true,
     // x -> the same elements as [sizes...]
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs {
       const Shape to(n.sizes);
       if (to.numel() != c.shape(n, 0).numel()) c.fail(n, c.shape(n, 0).to_string() + " to " + to.to_string());
       return {{to}};
     },
     .execute = [](Backend&, const Operands&) {},
     .lower = [](GraphLowering& l, const Node& n) { l.set(n, l.program().reshape(l.in(n, 0), n.sizes)); }},
    {.kind = OpKind::rope,
     .name = "rope",
     // x [tokens, heads, head_dim], positions i32 [tokens] -> x rotated
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs {
       const Shape& x = c.shape(n, 0);
       const backends::RotaryEmbedding& rotary = *n.rotary;
       if (x.rank() != 3 || c.shape(n, 1).numel() != x[0] || rotary.rotary_dim > x[2] ||
           static_cast<int64_t>(rotary.inv_freq.size()) * 2 != rotary.rotary_dim)
         c.fail(n, "input " + x.to_string() + " with rotary_dim " + std::to_string(rotary.rotary_dim));
       return {{x}};
     },
     .execute = [](Backend& b, const Operands& o) {
       if (!o.node().in_place) b.copy(o.in(0), o.out());
       b.rope(o.out(), o.in(1), *o.node().rotary);
     },
     .lower = [](GraphLowering& l, const Node& n) {
       l.set(n, hlo::rope(l.program(), l.in(n, 0), l.in(n, 1), l.tables(*n.rotary), *n.rotary));
     }},
    {.kind = OpKind::kv_cache_write,
     .name = "kv_cache_write",
     // cache [slots, kv_heads, max_cache_len, head_dim] <- entries [batch, seq, kv_heads, head_dim]
     // at positions i32 [batch, seq] of rows cache_rows i32 [batch]; no output value
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs {
       const Shape& cache = c.shape(n, 0);
       const Shape& e = c.shape(n, 1);
       if (cache.rank() != 4 || e.rank() != 4 || cache[1] != e[2] || cache[3] != e[3] ||
           c.shape(n, 2) != Shape{e[0], e[1]} || c.shape(n, 3) != Shape{e[0]})
         c.fail(n, "entries " + e.to_string() + " do not fit cache " + cache.to_string());
       return {};
     },
     .execute = [](Backend& b, const Operands& o) { b.kv_cache_write(o.in(0), o.in(1), o.in(2), o.in(3)); },
     .lower = [](GraphLowering& l, const Node& n) { l.cache_write(n); }},
    {.kind = OpKind::attention,
     .name = "attention",
     // q [batch, seq, heads, head_dim], k_cache = v_cache [slots, kv_heads, max_cache_len, head_dim],
     // positions i32 [batch, seq], cache_rows i32 [batch] -> [batch, seq, heads, head_dim]
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs {
       const Shape& q = c.shape(n, 0);
       const Shape& k = c.shape(n, 1);
       if (q.rank() != 4 || k.rank() != 4 || c.shape(n, 2) != k || k[3] != q[3] || q[2] % k[1] != 0 ||
           c.shape(n, 3) != Shape{q[0], q[1]} || c.shape(n, 4) != Shape{q[0]})
         c.fail(n, "query " + q.to_string() + " does not fit cache " + k.to_string());
       return {{q}};
     },
     .execute = [](Backend& b, const Operands& o) {
       b.attention(o.in(0), o.in(1), o.in(2), o.in(3), o.in(4), o.node().scale, o.node().sliding_window, o.out());
     },
     .lower = [](GraphLowering& l, const Node& n) { l.set(n, l.attend(n)); }},
    {.kind = OpKind::silu_mul,
     .name = "silu_mul",
     // gate, up [rows, dim] -> silu(gate) * up
     .shape = elementwise_shape,
     .execute = [](Backend& b, const Operands& o) { b.silu_mul(o.in(0), o.in(1), o.out()); },
     .lower = [](GraphLowering& l, const Node& n) { l.set(n, hlo::silu_mul(l.program(), l.in(n, 0), l.in(n, 1))); }},
    {.kind = OpKind::gelu_tanh_mul,
     .name = "gelu_tanh_mul",
     // gate, up [rows, dim] -> gelu_tanh(gate) * up
     .shape = elementwise_shape,
     .execute = [](Backend& b, const Operands& o) { b.gelu_tanh_mul(o.in(0), o.in(1), o.out()); },
     .lower = [](GraphLowering& l, const Node& n) {
       l.set(n, hlo::gelu_tanh_mul(l.program(), l.in(n, 0), l.in(n, 1)));
     }},
    {.kind = OpKind::scale,
     .name = "scale",
     // x -> x * node.scale, same shape
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs { return {{c.shape(n, 0)}}; },
     .execute = [](Backend& b, const Operands& o) { b.scale(o.in(0), o.node().scale, o.out()); },
     .lower = [](GraphLowering& l, const Node& n) { l.set(n, hlo::scale(l.program(), l.in(n, 0), n.scale)); }},
    {.kind = OpKind::softcap,
     .name = "softcap",
     // x -> node.scale * tanh(x / node.scale), same shape
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs { return {{c.shape(n, 0)}}; },
     .execute = [](Backend& b, const Operands& o) { b.softcap(o.in(0), o.node().scale, o.out()); },
     .lower = [](GraphLowering& l, const Node& n) { l.set(n, hlo::softcap(l.program(), l.in(n, 0), n.scale)); }},
    {.kind = OpKind::add,
     .name = "add",
     // a, b of one shape -> a + b
     .shape = elementwise_shape,
     .execute = [](Backend& b, const Operands& o) { b.add(o.in(0), o.in(1), o.out()); },
     .lower = [](GraphLowering& l, const Node& n) { l.set(n, l.program().add(l.in(n, 0), l.in(n, 1))); }},
    {.kind = OpKind::gather_rows,
     .name = "gather_rows",
     // x [rows, dim], indices i32 [count] -> [count, dim]
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs {
       if (c.shape(n, 0).rank() != 2) c.fail(n, "input must be [rows, dim]");
       return {{{c.shape(n, 1).numel(), c.shape(n, 0)[1]}}};
     },
     .execute = [](Backend& b, const Operands& o) { b.gather_rows(o.in(0), o.in(1), o.out()); },
     .lower = [](GraphLowering& l, const Node& n) {
       l.set(n, hlo::gather_rows(l.program(), l.in(n, 0), l.in(n, 1)));
     }},
    {.kind = OpKind::all_reduce,
     .name = "all_reduce",
     .aliases_input = true,
     // x f32 [rows, dim] -> summed over every rank of node.group, in place
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs {
       if (c.input(n, 0).bound) c.fail(n, "cannot sum a bound tensor in place");
       return {{c.shape(n, 0)}};
     },
     .execute = [](Backend&, const Operands& o) { o.node().group->all_reduce_sum(o.out()); },
     .lower = lower_collective},
    {.kind = OpKind::all_gather,
     .name = "all_gather",
     // x [rows, sizes[rank]] -> [rows, sum(sizes)], rank r's columns after rank r-1's
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs {
       const Shape& x = c.shape(n, 0);
       if (x.rank() != 2 || static_cast<int>(n.sizes.size()) != n.group->size() || n.sizes[n.group->rank()] != x[1])
         c.fail(n, "input " + x.to_string() + " is not this rank's share of the gathered columns");
       int64_t total = 0;
       for (int64_t count : n.sizes) total += count;
       return {{{x[0], total}}};
     },
     .execute = [](Backend&, const Operands& o) {
       o.node().group->all_gather_columns(o.in(0), o.out(), o.node().sizes);
     },
     .lower = lower_collective},
    {.kind = OpKind::slice_columns,
     .name = "slice_columns",
     // x [rows, dim] -> [rows, total width]: the columns of each [begin, end) pair of sizes, in order
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs {
       const Shape& x = c.shape(n, 0);
       int64_t width = 0;
       for (size_t i = 0; i + 1 < n.sizes.size(); i += 2) {
         const int64_t begin = n.sizes[i], end = n.sizes[i + 1];
         if (x.rank() != 2 || begin < 0 || end <= begin || end > x[1])
           c.fail(n, str_cat("columns [", begin, ", ", end, ") of ", x.to_string()));
         width += end - begin;
       }
       return {{{x[0], width}}};
     },
     .execute = [](Backend& b, const Operands& o) {
       const std::vector<int64_t>& bounds = o.node().sizes;
       int64_t destination_column = 0;
       for (size_t i = 0; i + 1 < bounds.size(); i += 2) {
         b.copy_columns(o.in(0), bounds[i], o.out(), destination_column, bounds[i + 1] - bounds[i]);
         destination_column += bounds[i + 1] - bounds[i];
       }
     },
     .lower = [](GraphLowering& l, const Node& n) {
       std::vector<hlo::Value> parts;
       for (size_t i = 0; i + 1 < n.sizes.size(); i += 2)
         parts.push_back(l.program().slice_last(l.in(n, 0), n.sizes[i], n.sizes[i + 1]));
       l.set(n, l.program().concatenate(parts, 1));
     }},
    {.kind = OpKind::top_k,
     .name = "top_k",
     // logits f32 [rows, vocab] -> values f32 [rows, k], then indices i32 [rows, k]; k = sizes[0]
     .shape = [](const ShapeContext& c, const Node& n) -> Outputs {
       const Shape& logits = c.shape(n, 0);
       const int64_t k = n.sizes.at(0), most = c.backend().max_top_k();
       if (logits.rank() != 2 || k <= 0 || k > most)
         c.fail(n, str_cat("k ", k, " of ", logits.to_string(), " (at most ", most, ")"));
       return {{{logits[0], k}}, {{logits[0], k}, DType::i32}};
     },
     .execute = [](Backend& b, const Operands& o) { b.top_k(o.in(0), o.out(0), o.out(1)); },
     .lower = [](GraphLowering& l, const Node& n) {
       const std::vector<hlo::Value> best = hlo::top_k(l.program(), l.in(n, 0), n.sizes.at(0));
       l.set(n, 0, best[0]);
       l.set(n, 1, best[1]);
     }},
    // Fusions compile() makes; each is the composition backend.h defines it as.
    {.kind = OpKind::linear_residual,
     .name = "linear_residual",
     // (x, weight, bias|-1, residual) -> linear + residual
     .execute = [](Backend& b, const Operands& o) { b.linear_residual(o.in(0), o.in(1), o.in(2), o.in(3), o.out()); },
     .lower = [](GraphLowering& l, const Node& n) {
       l.set(n, l.program().add(lower_linear(l, n, l.in(n, 0), 1), l.in(n, 3)));
     }},
    {.kind = OpKind::gated_linear,
     .name = "gated_linear",
     // (x, gate_weight, gate_bias|-1, up_weight, up_bias|-1) -> silu(x gate) * (x up)
     .execute = [](Backend& b, const Operands& o) {
       b.gated_linear(o.in(0), o.in(1), o.in(2), o.in(3), o.in(4), o.out());
     },
     .lower = [](GraphLowering& l, const Node& n) {
       const hlo::Value x = l.in(n, 0);
       l.set(n, hlo::silu_mul(l.program(), lower_linear(l, n, x, 1), lower_linear(l, n, x, 3)));
     }},
    {.kind = OpKind::rms_norm_linear,
     .name = "rms_norm_linear",
     // (x, norm_weight, weight, bias|-1) -> linear(rms_norm(x))
     .execute = [](Backend& b, const Operands& o) {
       b.rms_norm_linear(o.in(0), o.in(1), o.node().eps, o.in(2), o.in(3), o.out());
     },
     .lower = [](GraphLowering& l, const Node& n) {
       l.set(n, lower_linear(l, n, hlo::rms_norm(l.program(), l.in(n, 0), l.weight(n, 1), n.eps), 2));
     }},
    {.kind = OpKind::sibling_linears,
     .name = "sibling_linears",
     // (x, weight, bias|-1, weight, bias|-1, ...) -> one linear of x per weight: output, then sibling_outputs
     .execute = [](Backend& b, const Operands& o) {
       std::array<backends::SiblingLinear, max_sibling_linears> linears;
       const size_t count = o.node().sibling_outputs.size() + 1;
       for (size_t i = 0; i < count; ++i)
         linears[i] = {.weight = &o.in(1 + 2 * i), .bias = &o.in(2 + 2 * i), .out = &o.out(i)};
       b.sibling_linears(o.in(0), std::span(linears).first(count));
     },
     .lower = [](GraphLowering& l, const Node& n) {
       const hlo::Value x = l.in(n, 0);
       for (size_t i = 0; i <= n.sibling_outputs.size(); ++i) l.set(n, i, lower_linear(l, n, x, 1 + 2 * i));
     }},
};

// The table is indexed by kind: a row out of order, or a kind without a row, fails the build.
constexpr bool rows_in_kind_order() {
  for (size_t i = 0; i < std::size(rows); ++i)
    if (static_cast<size_t>(rows[i].kind) != i || !rows[i].execute || !rows[i].lower) return false;
  return std::size(rows) == op_kind_count;
}
static_assert(rows_in_kind_order(), "graph/ops.cpp: one row per OpKind, in the enum's order, each with execute and lower");

}  // namespace

const OpRow& op_row(OpKind kind) { return rows[static_cast<size_t>(kind)]; }

void ShapeContext::fail(const Node& node, const std::string& detail) const {
  shardlm::fail("graph: ", op_name(node.kind), ": ", detail,
                " (a model/config mismatch: check config.json against the checkpoint)");
}

const Tensor& Operands::in(size_t i) const {
  static const Tensor absent;
  return i < node_.inputs.size() && node_.inputs[i] >= 0 ? tensors_[node_.inputs[i]] : absent;
}

const Tensor& Operands::out(size_t i) const {
  return tensors_[i == 0 ? node_.output : node_.sibling_outputs.at(i - 1)];
}

void execute_node(Backend& backend, const Node& node, const std::vector<Tensor>& tensors) {
  op_row(node.kind).execute(backend, Operands(node, tensors));
}

}  // namespace shardlm::graph
