#pragma once
// A writer of textual StableHLO: one `func.func public @main` whose body is a list of
// ops in MLIR's generic form ("stablehlo.add"(%a, %b) : (types) -> type), which every
// StableHLO version since 1.0 parses the same way. Values are SSA names with their
// tensor type; each helper checks shapes the way the op's verifier would, so a lowering
// bug is a shardlm error naming the op, not a plugin parse failure.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace shardlm::backends::stablehlo {

// A tensor type: dims and an MLIR element type ("f32", "bf16", "f16", "i32", "i8", "i1", ...).
struct Type {
  std::vector<int64_t> dims;
  std::string element = "f32";
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t numel() const;
  std::string str() const;  // "tensor<2x3xf32>"
  bool operator==(const Type&) const = default;
};
std::string element_of(DType dtype);
Type type_of(const Shape& shape, DType dtype);

struct Value {
  std::string name;  // "%7", "%arg0", "%5#1"
  Type type;
};

class Program;
// `numel(dims)` elements of x, from element `offset` of its row-major order, shaped `dims`
// (a view of a stored tensor).
Value view(Program& p, Value x, int64_t offset, const std::vector<int64_t>& dims);

class Program {
 public:
  explicit Program(int partitions = 1) : partitions_(partitions) {}
  // A parameter of @main; `attributes` is MLIR's argument dictionary body
  // ("tf.aliasing_output = 0 : i32") or empty.
  Value parameter(Type type, const std::string& attributes = "");
  // Adds one attribute ("tf.aliasing_output = 1 : i32") to parameter `index`.
  void add_parameter_attribute(size_t index, const std::string& attribute);
  // The whole module: @main returns `results` in order, each with its attributes (e.g. a
  // sharding; `result_attributes` may be shorter than `results`).
  std::string text(const std::vector<Value>& results, const std::vector<std::string>& result_attributes = {}) const;
  size_t parameter_count() const { return parameters_.size(); }

  // Any op in generic form with one result.
  Value op(const std::string& name, const std::vector<Value>& operands, Type result,
           const std::string& attributes = "");

  Value constant(double value, Type type);     // every element `value` (a splat)
  Value iota(Type type, int64_t dimension);    // index along `dimension`
  Value convert(Value x, const std::string& element);
  Value reshape(Value x, std::vector<int64_t> dims);
  Value transpose(Value x, const std::vector<int64_t>& permutation);
  // x's dim i becomes result dim mapping[i]; the rest broadcast.
  Value broadcast(Value x, std::vector<int64_t> dims, const std::vector<int64_t>& mapping);
  Value binary(const std::string& name, Value a, Value b);  // "add", "subtract", "multiply", ...
  Value unary(const std::string& name, Value x);            // "exponential", "rsqrt", "logistic", ...
  Value add(Value a, Value b) { return binary("add", a, b); }
  Value subtract(Value a, Value b) { return binary("subtract", a, b); }
  Value multiply(Value a, Value b) { return binary("multiply", a, b); }
  Value divide(Value a, Value b) { return binary("divide", a, b); }
  // An i1 tensor: a <direction> b, direction one of EQ, NE, LT, LE, GT, GE.
  Value compare(Value a, Value b, const std::string& direction);
  Value select(Value predicate, Value on_true, Value on_false);
  Value slice(Value x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit);
  // The last dimension's [begin, end).
  Value slice_last(Value x, int64_t begin, int64_t end);
  Value concatenate(const std::vector<Value>& parts, int64_t dimension);
  // Sum or maximum ("add" / "maximum") over `dimensions`, starting from `initial`.
  Value reduce(Value x, const std::vector<int64_t>& dimensions, const std::string& combiner, double initial);
  // dot_general with f32 results at the HIGHEST precision (no TF32 or bf16 passes).
  Value dot_general(Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch, const std::vector<int64_t>& rhs_batch,
                    const std::vector<int64_t>& lhs_contract, const std::vector<int64_t>& rhs_contract);
  // Rows of table [rows, width] at indices i32 [count] (clamped into range) -> [count, width].
  Value gather_rows(Value table, Value indices);
  // Sorts `keys` and `payload` (same shape) along `dimension` so that keys come NaN first,
  // then descending, equal keys in their original order; returns {keys, payload}.
  std::vector<Value> sort_descending(Value keys, Value payload, int64_t dimension);
  // The best key of each row of keys f32 [rows, n] by sort_descending's order, with its
  // payload i32 [rows, n]: one pass, no sort -> {keys [rows], payload [rows]}.
  std::vector<Value> best_of_rows(Value keys, Value payload);
  // Of x [S, H, L, D]: rows i32 [batch] of S, each from position `first` (an i32 scalar,
  // clamped so that the block fits) for `length` positions -> [batch, H, length, D].
  Value gather_blocks(Value x, Value rows, Value first, int64_t length);
  // x sliced to `sizes` from the runtime start `starts` (i32 scalars, one per dim; clamped
  // so that the slice fits, as stablehlo.dynamic_slice does).
  Value dynamic_slice(Value x, const std::vector<Value>& starts, const std::vector<int64_t>& sizes);
  // A loop over `state` (stablehlo.while): `condition` maps the state to an i1 scalar (go
  // on), `body` to the next state. Both add their ops to regions of their own; they may
  // read values defined before the loop.
  using Region = std::function<std::vector<Value>(Program&, const std::vector<Value>&)>;
  std::vector<Value> while_loop(const std::vector<Value>& state, const Region& condition, const Region& body);
  // operand [B, H, L, D] with updates [N, H, D] at (b, l) = indices i32 [N, 2]: an index
  // outside the operand drops its update (XLA's scatter semantics).
  Value scatter_rows(Value operand, Value indices, Value updates);

 private:
  std::string fresh();
  std::string emit(const std::string& name, const std::vector<Value>& operands, const std::vector<Type>& results,
                   const std::string& attributes, const std::string& region = "");

  std::vector<std::pair<Type, std::string>> parameters_;
  std::string body_;
  int64_t next_ = 0;
  int partitions_ = 1;
};

}  // namespace shardlm::backends::stablehlo
