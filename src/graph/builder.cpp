#include "graph/builder.h"

namespace shardlm::graph {

Value Builder::bind(const Tensor& tensor) {
  tensors_.push_back(tensor);
  return {static_cast<int32_t>(tensors_.size() - 1)};
}

Value Builder::output(Shape shape) { return bind(backend_.allocate(std::move(shape), DType::f32)); }

void Builder::shape_error(const char* op, const std::string& detail) const {
  fail("graph: ", op, ": ", detail, " (a model/config mismatch: check config.json against the checkpoint)");
}

Value Builder::embedding(Value table, Value ids) {
  const Shape& table_shape = shape(table);
  if (table_shape.rank() != 2) shape_error("embedding", "table must be [vocab, hidden], got " + table_shape.to_string());
  if (tensor(ids).dtype() != DType::i32) shape_error("embedding", "ids must be int32");
  Value out = output({shape(ids).numel(), table_shape[1]});
  backend_.embedding(tensor(table), tensor(ids), tensor(out));
  return out;
}

Value Builder::linear(Value x, Value weight, Value bias) {
  const Shape& x_shape = shape(x);
  const Shape& w_shape = shape(weight);
  if (x_shape.rank() != 2 || w_shape.rank() != 2 || x_shape[1] != w_shape[1])
    shape_error("linear", "input " + x_shape.to_string() + " does not match weight [out, in] " + w_shape.to_string());
  if (bias.defined() && shape(bias) != Shape{w_shape[0]})
    shape_error("linear", "bias " + shape(bias).to_string() + " does not match weight " + w_shape.to_string());
  Value out = output({x_shape[0], w_shape[0]});
  backend_.linear(tensor(x), tensor(weight), bias.defined() ? tensor(bias) : Tensor(), tensor(out));
  return out;
}

Value Builder::rms_norm(Value x, Value weight, double eps) {
  if (shape(weight) != Shape{shape(x).back()})
    shape_error("rms_norm", "weight " + shape(weight).to_string() + " does not match input " + shape(x).to_string());
  Value out = output(shape(x));
  backend_.rms_norm(tensor(x), tensor(weight), static_cast<float>(eps), tensor(out));
  return out;
}

Value Builder::reshape(Value x, Shape new_shape) { return bind(tensor(x).reshape(std::move(new_shape))); }

Value Builder::rope(Value x, Value positions, const backends::RotaryEmbedding& rotary) {
  const Shape& x_shape = shape(x);
  if (x_shape.rank() != 3 || shape(positions).numel() != x_shape[0] || rotary.rotary_dim > x_shape[2] ||
      static_cast<int64_t>(rotary.inv_freq.size()) * 2 != rotary.rotary_dim)
    shape_error("rope", "input " + x_shape.to_string() + " with rotary_dim " + std::to_string(rotary.rotary_dim));
  Value out = bind(tensor(x).clone());
  backend_.rope(tensor(out), tensor(positions), rotary);
  return out;
}

void Builder::kv_cache_write(Value cache, Value entries, Value positions) {
  const Shape& c = shape(cache);
  const Shape& e = shape(entries);
  if (c.rank() != 4 || e.rank() != 4 || c[0] != e[0] || c[1] != e[2] || c[3] != e[3] ||
      shape(positions) != Shape{e[0], e[1]})
    shape_error("kv_cache_write", "entries " + e.to_string() + " do not fit cache " + c.to_string());
  backend_.kv_cache_write(tensor(cache), tensor(entries), tensor(positions));
}

Value Builder::attention(Value q, Value k_cache, Value v_cache, Value positions, float scale,
                         int64_t sliding_window) {
  const Shape& q_shape = shape(q);
  const Shape& k = shape(k_cache);
  if (q_shape.rank() != 4 || k.rank() != 4 || shape(v_cache) != k || k[0] != q_shape[0] || k[3] != q_shape[3] ||
      q_shape[2] % k[1] != 0 || shape(positions) != Shape{q_shape[0], q_shape[1]})
    shape_error("attention", "query " + q_shape.to_string() + " does not fit cache " + k.to_string());
  Value out = output(q_shape);
  backend_.attention(tensor(q), tensor(k_cache), tensor(v_cache), tensor(positions), scale, sliding_window,
                     tensor(out));
  return out;
}

Value Builder::silu_mul(Value gate, Value up) {
  if (shape(gate) != shape(up)) shape_error("silu_mul", shape(gate).to_string() + " vs " + shape(up).to_string());
  Value out = output(shape(gate));
  backend_.silu_mul(tensor(gate), tensor(up), tensor(out));
  return out;
}

Value Builder::add(Value a, Value b) {
  if (shape(a) != shape(b)) shape_error("add", shape(a).to_string() + " vs " + shape(b).to_string());
  Value out = output(shape(a));
  backend_.add(tensor(a), tensor(b), tensor(out));
  return out;
}

Value Builder::gather_rows(Value x, Value indices) {
  if (shape(x).rank() != 2) shape_error("gather_rows", "input must be [rows, dim]");
  Value out = output({shape(indices).numel(), shape(x)[1]});
  backend_.gather_rows(tensor(x), tensor(indices), tensor(out));
  return out;
}

}  // namespace shardlm::graph
