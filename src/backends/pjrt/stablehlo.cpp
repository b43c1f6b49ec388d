#include "backends/pjrt/stablehlo.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

namespace shardlm::backends::stablehlo {
namespace {

std::string i64_array(const std::vector<int64_t>& values) {
  std::string text = "array<i64";
  for (size_t i = 0; i < values.size(); ++i) text += str_cat(i ? ", " : ": ", values[i]);
  return text + ">";
}

std::string list(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += str_cat(i ? ", " : "", values[i]);
  return text + "]";
}

// MLIR wants a decimal point in float literals, and infinities as bit patterns.
std::string float_literal(double value, const std::string& element) {
  if (std::isinf(value)) {
    const bool negative = value < 0;
    if (element == "f32") return negative ? "0xFF800000" : "0x7F800000";
    if (element == "bf16") return negative ? "0xFF80" : "0x7F80";
    if (element == "f16") return negative ? "0xFC00" : "0x7C00";
    fail("stablehlo: no infinity literal for ", element);
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.9e", value);
  return text;
}

bool is_float(const std::string& element) { return element == "f32" || element == "bf16" || element == "f16"; }

[[noreturn]] void mismatch(const char* op, const Type& a, const Type& b) {
  fail("stablehlo lowering: ", op, " of ", a.str(), " and ", b.str());
}

}  // namespace

int64_t Type::numel() const { return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>()); }

std::string Type::str() const {
  std::string text = "tensor<";
  for (int64_t d : dims) text += str_cat(d, "x");
  return text + element + ">";
}

std::string element_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::i8: return "i8";
    case DType::u8: return "ui8";
    case DType::i4:
    case DType::q4_k:
    case DType::q6_k: break;  // the weight loader keeps these on the CPU (GGUF blocks decoded elsewhere)
  }
  fail("stablehlo: no element type for dtype ", dtype_name(dtype));
}

Type type_of(const Shape& shape, DType dtype) {
  return {shape.dims(), element_of(dtype)};
}

Value view(Program& p, Value x, int64_t offset, const std::vector<int64_t>& dims) {
  const Type type{dims, x.type.element};
  if (offset == 0 && type.numel() == x.type.numel()) return p.reshape(x, dims);
  SHARDLM_CHECK(offset >= 0 && offset + type.numel() <= x.type.numel(), "stablehlo lowering: a view of ",
                type.str(), " at element ", offset, " does not fit ", x.type.str());
  const Value flat = p.reshape(x, {x.type.numel()});
  return p.reshape(p.slice(flat, {offset}, {offset + type.numel()}), dims);
}

std::string Program::fresh() { return str_cat("%", next_++); }

Value Program::parameter(Type type, const std::string& attributes) {
  Value value{str_cat("%arg", parameters_.size()), type};
  parameters_.emplace_back(std::move(type), attributes);
  return value;
}

std::string Program::emit(const std::string& name, const std::vector<Value>& operands,
                          const std::vector<Type>& results, const std::string& attributes, const std::string& region) {
  const std::string result = fresh();
  std::string line = "    " + result;
  if (results.size() > 1) line += str_cat(":", results.size());
  line += " = \"stablehlo." + name + "\"(";
  for (size_t i = 0; i < operands.size(); ++i) line += (i ? ", " : "") + operands[i].name;
  line += ")";
  if (!region.empty()) line += " (" + region + ")";
  if (!attributes.empty()) line += " {" + attributes + "}";
  line += " : (";
  for (size_t i = 0; i < operands.size(); ++i) line += (i ? ", " : "") + operands[i].type.str();
  line += ") -> ";
  if (results.size() == 1) {
    line += results[0].str();
  } else {
    line += "(";
    for (size_t i = 0; i < results.size(); ++i) line += (i ? ", " : "") + results[i].str();
    line += ")";
  }
  body_ += line + "\n";
  return result;
}

Value Program::op(const std::string& name, const std::vector<Value>& operands, Type result,
                  const std::string& attributes) {
  return {emit(name, operands, {result}, attributes), result};
}

Value Program::constant(double value, Type type) {
  const std::string literal = is_float(type.element) ? float_literal(value, type.element)
                              : type.element == "i1" ? (value != 0 ? "true" : "false")
                                                     : str_cat(static_cast<int64_t>(value));
  return op("constant", {}, type, "value = dense<" + literal + "> : " + type.str());
}

Value Program::iota(Type type, int64_t dimension) {
  return op("iota", {}, type, str_cat("iota_dimension = ", dimension, " : i64"));
}

Value Program::convert(Value x, const std::string& element) {
  if (x.type.element == element) return x;
  Type type = x.type;
  type.element = element;
  return op("convert", {x}, type);
}

Value Program::reshape(Value x, std::vector<int64_t> dims) {
  Type type{std::move(dims), x.type.element};
  if (type.numel() != x.type.numel()) mismatch("reshape", x.type, type);
  if (type == x.type) return x;
  return op("reshape", {x}, type);
}

Value Program::transpose(Value x, const std::vector<int64_t>& permutation) {
  Type type{{}, x.type.element};
  for (int64_t axis : permutation) type.dims.push_back(x.type.dims.at(axis));
  return op("transpose", {x}, type, "permutation = " + i64_array(permutation));
}

Value Program::broadcast(Value x, std::vector<int64_t> dims, const std::vector<int64_t>& mapping) {
  Type type{std::move(dims), x.type.element};
  if (static_cast<int64_t>(mapping.size()) != x.type.rank()) mismatch("broadcast_in_dim", x.type, type);
  if (type == x.type) return x;
  return op("broadcast_in_dim", {x}, type, "broadcast_dimensions = " + i64_array(mapping));
}

Value Program::binary(const std::string& name, Value a, Value b) {
  if (a.type != b.type) mismatch(name.c_str(), a.type, b.type);
  return op(name, {a, b}, a.type);
}

Value Program::unary(const std::string& name, Value x) { return op(name, {x}, x.type); }

Value Program::compare(Value a, Value b, const std::string& direction) {
  if (a.type != b.type) mismatch("compare", a.type, b.type);
  const std::string kind = is_float(a.type.element) ? "FLOAT" : "SIGNED";
  return op("compare", {a, b}, {a.type.dims, "i1"},
            "comparison_direction = #stablehlo<comparison_direction " + direction +
                ">, compare_type = #stablehlo<comparison_type " + kind + ">");
}

Value Program::select(Value predicate, Value on_true, Value on_false) {
  if (on_true.type != on_false.type || predicate.type.dims != on_true.type.dims)
    mismatch("select", on_true.type, on_false.type);
  return op("select", {predicate, on_true, on_false}, on_true.type);
}

Value Program::slice(Value x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit) {
  Type type{{}, x.type.element};
  for (size_t i = 0; i < start.size(); ++i) {
    if (start[i] < 0 || limit[i] > x.type.dims.at(i) || limit[i] < start[i]) mismatch("slice", x.type, x.type);
    type.dims.push_back(limit[i] - start[i]);
  }
  if (type == x.type) return x;
  return op("slice", {x}, type,
            "start_indices = " + i64_array(start) + ", limit_indices = " + i64_array(limit) +
                ", strides = " + i64_array(std::vector<int64_t>(start.size(), 1)));
}

Value Program::slice_last(Value x, int64_t begin, int64_t end) {
  std::vector<int64_t> start(x.type.dims.size(), 0), limit = x.type.dims;
  start.back() = begin;
  limit.back() = end;
  return slice(x, start, limit);
}

Value Program::concatenate(const std::vector<Value>& parts, int64_t dimension) {
  if (parts.size() == 1) return parts[0];
  Type type = parts.at(0).type;
  type.dims.at(dimension) = 0;
  for (const Value& part : parts) type.dims[dimension] += part.type.dims.at(dimension);
  return op("concatenate", parts, type, str_cat("dimension = ", dimension, " : i64"));
}

Value Program::reduce(Value x, const std::vector<int64_t>& dimensions, const std::string& combiner, double initial) {
  const Type scalar{{}, x.type.element};
  const Value init = constant(initial, scalar);
  Type type{{}, x.type.element};
  for (int64_t i = 0; i < x.type.rank(); ++i)
    if (std::find(dimensions.begin(), dimensions.end(), i) == dimensions.end()) type.dims.push_back(x.type.dims[i]);
  const std::string a = fresh(), b = fresh(), combined = fresh();
  const std::string s = scalar.str();
  const std::string region = "{\n    ^bb0(" + a + ": " + s + ", " + b + ": " + s + "):\n      " + combined +
                             " = \"stablehlo." + combiner + "\"(" + a + ", " + b + ") : (" + s + ", " + s + ") -> " +
                             s + "\n      \"stablehlo.return\"(" + combined + ") : (" + s + ") -> ()\n    }";
  return {emit("reduce", {x, init}, {type}, "dimensions = " + i64_array(dimensions), region), type};
}

Value Program::dot_general(Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch,
                           const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                           const std::vector<int64_t>& rhs_contract) {
  // Result dims: batch, then lhs free, then rhs free (dot_general's order).
  const auto free_dims = [](const Value& v, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract) {
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < v.type.rank(); ++i)
      if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
          std::find(contract.begin(), contract.end(), i) == contract.end())
        dims.push_back(v.type.dims[i]);
    return dims;
  };
  for (size_t i = 0; i < lhs_contract.size(); ++i)
    if (lhs.type.dims.at(lhs_contract[i]) != rhs.type.dims.at(rhs_contract[i])) mismatch("dot_general", lhs.type, rhs.type);
  Type type{{}, "f32"};
  for (int64_t axis : lhs_batch) type.dims.push_back(lhs.type.dims.at(axis));
  for (int64_t d : free_dims(lhs, lhs_batch, lhs_contract)) type.dims.push_back(d);
  for (int64_t d : free_dims(rhs, rhs_batch, rhs_contract)) type.dims.push_back(d);
  return op("dot_general", {lhs, rhs}, type,
            "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " + list(lhs_batch) +
                ", rhs_batching_dimensions = " + list(rhs_batch) + ", lhs_contracting_dimensions = " +
                list(lhs_contract) + ", rhs_contracting_dimensions = " + list(rhs_contract) +
                ">, precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]");
}

Value Program::gather_rows(Value table, Value indices) {
  const int64_t count = indices.type.numel(), width = table.type.dims.at(1);
  const Value index_matrix = reshape(indices, {count, 1});
  return op("gather", {table, index_matrix}, {{count, width}, table.type.element},
            "dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], "
            "start_index_map = [0], index_vector_dim = 1>, slice_sizes = " +
                i64_array({1, width}) + ", indices_are_sorted = false");
}

Value Program::gather_blocks(Value x, Value rows, Value first, int64_t length) {
  const int64_t batch = rows.type.numel(), heads = x.type.dims.at(1), dim = x.type.dims.at(3);
  const Value starts = concatenate({reshape(rows, {batch, 1}), broadcast(first, {batch, 1}, {})}, 1);  // [batch, 2]
  return op("gather", {x, starts}, {{batch, heads, length, dim}, x.type.element},
            "dimension_numbers = #stablehlo.gather<offset_dims = [1, 2, 3], collapsed_slice_dims = [0], "
            "start_index_map = [0, 2], index_vector_dim = 1>, slice_sizes = " +
                i64_array({1, heads, length, dim}) + ", indices_are_sorted = false");
}

std::vector<Value> Program::sort_descending(Value keys, Value payload, int64_t dimension) {
  const Type key{{}, keys.type.element}, index{{}, payload.type.element};
  const std::string a = fresh(), b = fresh(), c = fresh(), d = fresh();
  const std::string a_nan = fresh(), b_nan = fresh(), b_not_nan = fresh(), nan_first = fresh(), greater = fresh(),
                    result = fresh();
  const std::string k = key.str(), i = index.str(), p = "tensor<i1>";
  const auto cmp = [&](const std::string& out, const std::string& x, const std::string& y, const char* direction) {
    return "      " + out + " = \"stablehlo.compare\"(" + x + ", " + y +
           ") {comparison_direction = #stablehlo<comparison_direction " + direction +
           ">, compare_type = #stablehlo<comparison_type FLOAT>} : (" + k + ", " + k + ") -> " + p + "\n";
  };
  const auto logical = [&](const std::string& out, const char* name, const std::string& x, const std::string& y) {
    return "      " + out + " = \"stablehlo." + name + "\"(" + x + ", " + y + ") : (" + p + ", " + p + ") -> " + p +
           "\n";
  };
  // a before b: a is NaN and b is not, or a > b; ties keep their order (a stable sort).
  std::string region = "{\n    ^bb0(" + a + ": " + k + ", " + b + ": " + k + ", " + c + ": " + i + ", " + d + ": " + i +
                       "):\n";
  region += cmp(a_nan, a, a, "NE") + cmp(b_nan, b, b, "NE");
  region += "      " + b_not_nan + " = \"stablehlo.not\"(" + b_nan + ") : (" + p + ") -> " + p + "\n";
  region += logical(nan_first, "and", a_nan, b_not_nan) + cmp(greater, a, b, "GT");
  region += logical(result, "or", nan_first, greater);
  region += "      \"stablehlo.return\"(" + result + ") : (" + p + ") -> ()\n    }";
  const std::string name =
      emit("sort", {keys, payload}, {keys.type, payload.type},
           str_cat("dimension = ", dimension, " : i64, is_stable = true"), region);
  return {{name + "#0", keys.type}, {name + "#1", payload.type}};
}

std::vector<Value> Program::best_of_rows(Value keys, Value payload) {
  const Type key{{}, keys.type.element}, index{{}, payload.type.element};
  const Value key_init = constant(-std::numeric_limits<double>::infinity(), key);
  const Value index_init = constant(std::numeric_limits<int32_t>::max(), index);
  const std::string a = fresh(), ia = fresh(), b = fresh(), ib = fresh();
  const std::string k = key.str(), i = index.str(), p = "tensor<i1>";
  std::string region = "{\n    ^bb0(" + a + ": " + k + ", " + ia + ": " + i + ", " + b + ": " + k + ", " + ib + ": " + i +
                       "):\n";
  const auto line = [&](const std::string& out, const std::string& op, const std::vector<std::string>& args,
                        const std::vector<std::string>& types, const std::string& result, const std::string& attrs = "") {
    std::string text = "      " + out + " = \"stablehlo." + op + "\"(";
    for (size_t n = 0; n < args.size(); ++n) text += (n ? ", " : "") + args[n];
    text += ")" + (attrs.empty() ? "" : " {" + attrs + "}") + " : (";
    for (size_t n = 0; n < types.size(); ++n) text += (n ? ", " : "") + types[n];
    return text + ") -> " + result + "\n";
  };
  const auto cmp = [&](const std::string& out, const std::string& x, const std::string& y, const char* direction,
                       const std::string& type, const char* kind) {
    return line(out, "compare", {x, y}, {type, type}, p,
                str_cat("comparison_direction = #stablehlo<comparison_direction ", direction,
                        ">, compare_type = #stablehlo<comparison_type ", kind, ">"));
  };
  // a wins: a NaN over a number, a larger number, or the same rank and a lower index.
  const std::string a_nan = fresh(), b_nan = fresh(), nan_over = fresh(), not_b_nan = fresh(), greater = fresh(),
                    equal = fresh(), both_nan = fresh(), tie = fresh(), lower = fresh(), tie_lower = fresh(),
                    above = fresh(), wins = fresh(), best_key = fresh(), best_index = fresh();
  region += cmp(a_nan, a, a, "NE", k, "FLOAT") + cmp(b_nan, b, b, "NE", k, "FLOAT");
  region += line(not_b_nan, "not", {b_nan}, {p}, p) + line(nan_over, "and", {a_nan, not_b_nan}, {p, p}, p);
  region += cmp(greater, a, b, "GT", k, "FLOAT") + cmp(equal, a, b, "EQ", k, "FLOAT");
  region += line(both_nan, "and", {a_nan, b_nan}, {p, p}, p) + line(tie, "or", {equal, both_nan}, {p, p}, p);
  region += cmp(lower, ia, ib, "LT", i, "SIGNED") + line(tie_lower, "and", {tie, lower}, {p, p}, p);
  region += line(above, "or", {nan_over, greater}, {p, p}, p) + line(wins, "or", {above, tie_lower}, {p, p}, p);
  region += line(best_key, "select", {wins, a, b}, {p, k, k}, k) + line(best_index, "select", {wins, ia, ib}, {p, i, i}, i);
  region += "      \"stablehlo.return\"(" + best_key + ", " + best_index + ") : (" + k + ", " + i + ") -> ()\n    }";
  const Type values{{keys.type.dims[0]}, keys.type.element}, indices{{keys.type.dims[0]}, payload.type.element};
  const std::string name = emit("reduce", {keys, payload, key_init, index_init}, {values, indices},
                                "dimensions = array<i64: 1>", region);
  return {{name + "#0", values}, {name + "#1", indices}};
}

Value Program::dynamic_slice(Value x, const std::vector<Value>& starts, const std::vector<int64_t>& sizes) {
  std::vector<Value> operands{x};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return op("dynamic_slice", operands, {sizes, x.type.element}, "slice_sizes = " + i64_array(sizes));
}

std::vector<Value> Program::while_loop(const std::vector<Value>& state, const Region& condition, const Region& body) {
  std::vector<Type> types;
  for (const Value& value : state) types.push_back(value.type);
  const auto region = [&](const Region& build) {
    std::vector<Value> arguments;
    std::string text = "{\n    ^bb0(";
    for (size_t i = 0; i < types.size(); ++i) {
      arguments.push_back({fresh(), types[i]});
      text += (i ? ", " : "") + arguments.back().name + ": " + types[i].str();
    }
    text += "):\n";
    std::string outer;
    std::swap(outer, body_);
    const std::vector<Value> results = build(*this, arguments);
    std::swap(outer, body_);
    text += outer + "      \"stablehlo.return\"(";
    for (size_t i = 0; i < results.size(); ++i) text += (i ? ", " : "") + results[i].name;
    text += ") : (";
    for (size_t i = 0; i < results.size(); ++i) text += (i ? ", " : "") + results[i].type.str();
    return text + ") -> ()\n    }";
  };
  const std::string regions = region(condition) + ", " + region(body);
  const std::string name = emit("while", state, types, "", regions);
  if (state.size() == 1) return {{name, types[0]}};
  std::vector<Value> results;
  for (size_t i = 0; i < types.size(); ++i) results.push_back({str_cat(name, "#", i), types[i]});
  return results;
}

Value Program::scatter_rows(Value operand, Value indices, Value updates) {
  const Type element{{}, operand.type.element};
  const std::string old_value = fresh(), new_value = fresh(), e = element.str();
  const std::string region = "{\n    ^bb0(" + old_value + ": " + e + ", " + new_value + ": " + e +
                             "):\n      \"stablehlo.return\"(" + new_value + ") : (" + e + ") -> ()\n    }";
  return {emit("scatter", {operand, indices, updates}, {operand.type},
               "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1, 2], inserted_window_dims = "
               "[0, 2], scatter_dims_to_operand_dims = [0, 2], index_vector_dim = 1>, indices_are_sorted = false, "
               "unique_indices = false",
               region),
          operand.type};
}

void Program::add_parameter_attribute(size_t index, const std::string& attribute) {
  std::string& attributes = parameters_.at(index).second;
  attributes += (attributes.empty() ? "" : ", ") + attribute;
}

std::string Program::text(const std::vector<Value>& results, const std::vector<std::string>& result_attributes) const {
  std::string text = str_cat("module @shardlm attributes {mhlo.num_partitions = ", partitions_,
                             " : i32, mhlo.num_replicas = 1 : i32} {\n");
  text += "  func.func public @main(";
  for (size_t i = 0; i < parameters_.size(); ++i) {
    text += str_cat(i ? ", " : "", "%arg", i, ": ", parameters_[i].first.str());
    if (!parameters_[i].second.empty()) text += " {" + parameters_[i].second + "}";
  }
  text += ") -> (";
  for (size_t i = 0; i < results.size(); ++i) {
    text += (i ? ", " : "") + results[i].type.str();
    if (i < result_attributes.size() && !result_attributes[i].empty()) text += " {" + result_attributes[i] + "}";
  }
  text += ") {\n" + body_ + "    \"func.return\"(";
  for (size_t i = 0; i < results.size(); ++i) text += (i ? ", " : "") + results[i].name;
  text += ") : (";
  for (size_t i = 0; i < results.size(); ++i) text += (i ? ", " : "") + results[i].type.str();
  text += ") -> ()\n  }\n}\n";
  return text;
}

}  // namespace shardlm::backends::stablehlo
