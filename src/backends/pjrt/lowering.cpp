#include "backends/pjrt/lowering.h"

#include <cmath>
#include <limits>

namespace shardlm::backends::stablehlo {
namespace {

Type with_element(Type type, const std::string& element) {
  type.element = element;
  return type;
}

Value splat(Program& p, double value, const Type& type) { return p.constant(value, type); }

Value logical(Program& p, const char* name, Value a, Value b) { return p.op(name, {a, b}, a.type); }

// positions i32 [batch, seq] seen along `dims` of a [batch, seq, n] mask.
Value spread(Program& p, Value positions, int64_t n, const std::vector<int64_t>& mapping) {
  const int64_t batch = positions.type.dims[0], seq = positions.type.dims[1];
  return p.broadcast(positions, {batch, seq, n}, mapping);
}

// Keys visible to each query under the causal (and sliding-window) rule: key positions
// `key_positions` i32 [batch, seq, keys] against query positions `query_positions` of the same shape.
Value visible(Program& p, Value key_positions, Value query_positions, int64_t sliding_window) {
  Value mask = p.compare(key_positions, query_positions, "LE");
  if (sliding_window > 0) {
    const Value window = splat(p, static_cast<double>(sliding_window), query_positions.type);
    mask = logical(p, "and", mask, p.compare(key_positions, p.subtract(query_positions, window), "GT"));
  }
  return mask;
}

// The cache element type's rounding of f32 entries, back in f32: what attention reads
// once they are in the cache.
Value rounded_to(Program& p, Value entries, const std::string& element) {
  return p.convert(p.convert(entries, element), "f32");
}

}  // namespace

std::pair<Tensor, Tensor> rotary_tables(const RotaryEmbedding& rotary, int64_t positions) {
  const int64_t half = rotary.rotary_dim / 2;
  Tensor cos = Tensor::empty({positions, half}, DType::f32), sin = Tensor::empty({positions, half}, DType::f32);
  for (int64_t t = 0; t < positions; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * rotary.inv_freq[i];
      cos.mutable_data<float>()[t * half + i] = static_cast<float>(std::cos(angle));
      sin.mutable_data<float>()[t * half + i] = static_cast<float>(std::sin(angle));
    }
  return {cos, sin};
}

Value widen(Program& p, const Weight& weight) {
  const Value values = p.convert(weight.values, "f32");
  if (!weight.scales) return values;
  const int64_t out = values.type.dims[0], in = values.type.dims[1], blocks = weight.scales->type.dims[1];
  SHARDLM_CHECK(blocks * Tensor::quant_block == in, "stablehlo lowering: int8 weight ", values.type.str(),
                " with scales ", weight.scales->type.str());
  const Value blocked = p.reshape(values, {out, blocks, Tensor::quant_block});
  const Value scales = p.broadcast(p.convert(*weight.scales, "f32"), {out, blocks, Tensor::quant_block}, {0, 1});
  return p.reshape(p.multiply(blocked, scales), {out, in});
}

Value embedding(Program& p, const Weight& table, Value ids, int64_t first_row) {
  const int64_t tokens = ids.type.numel(), rows = table.values.type.dims[0], hidden = table.values.type.dims[1];
  const Value flat = p.reshape(ids, {tokens});
  const Value row = p.subtract(flat, splat(p, static_cast<double>(first_row), flat.type));
  const Value inside = logical(p, "and", p.compare(row, splat(p, 0, row.type), "GE"),
                               p.compare(row, splat(p, static_cast<double>(rows), row.type), "LT"));
  Weight gathered{.values = p.gather_rows(table.values, row)};
  if (table.scales) gathered.scales = p.gather_rows(*table.scales, row);
  const Value widened = widen(p, gathered);  // [tokens, hidden]
  return p.select(p.broadcast(inside, {tokens, hidden}, {0}), widened, splat(p, 0, widened.type));
}

Value linear(Program& p, Value x, const Weight& weight, const std::optional<Value>& bias) {
  Value out = p.dot_general(x, widen(p, weight), {}, {}, {1}, {1});  // [rows, out]
  if (bias) out = p.add(out, p.broadcast(p.convert(*bias, "f32"), out.type.dims, {1}));
  return out;
}

Value rms_norm(Program& p, Value x, const Weight& weight, float eps) {
  const int64_t last = x.type.rank() - 1, dim = x.type.dims[last];
  std::vector<int64_t> leading(x.type.dims.begin(), x.type.dims.end() - 1), leading_axes;
  for (int64_t i = 0; i < last; ++i) leading_axes.push_back(i);
  const Value sum_squares = p.reduce(p.multiply(x, x), {last}, "add", 0);
  const Value mean = p.divide(sum_squares, splat(p, static_cast<double>(dim), sum_squares.type));
  const Value scale = p.unary("rsqrt", p.add(mean, splat(p, eps, mean.type)));
  const Value normed = p.multiply(x, p.broadcast(scale, x.type.dims, leading_axes));
  return p.multiply(normed, p.broadcast(widen(p, weight), x.type.dims, {last}));
}

Value rope(Program& p, Value x, Value positions, const RotaryTables& tables, const RotaryEmbedding& rotary) {
  const int64_t tokens = x.type.dims[0], heads = x.type.dims[1], head_dim = x.type.dims[2];
  const int64_t half = rotary.rotary_dim / 2;
  const std::vector<int64_t> pair_shape{tokens, heads, half};
  const Value cos = p.broadcast(p.gather_rows(tables.cos, positions), pair_shape, {0, 2});
  const Value sin = p.broadcast(p.gather_rows(tables.sin, positions), pair_shape, {0, 2});
  Value first, second;  // the two members of each rotating pair, [tokens, heads, half]
  const Value rotating = p.slice_last(x, 0, rotary.rotary_dim);
  if (rotary.interleaved) {
    const Value pairs = p.reshape(rotating, {tokens, heads, half, 2});
    first = p.reshape(p.slice_last(pairs, 0, 1), pair_shape);
    second = p.reshape(p.slice_last(pairs, 1, 2), pair_shape);
  } else {
    first = p.slice_last(rotating, 0, half);
    second = p.slice_last(rotating, half, rotary.rotary_dim);
  }
  const Value new_first = p.subtract(p.multiply(first, cos), p.multiply(second, sin));
  const Value new_second = p.add(p.multiply(second, cos), p.multiply(first, sin));
  Value rotated;
  if (rotary.interleaved) {
    const std::vector<int64_t> column{tokens, heads, half, 1};
    rotated = p.reshape(p.concatenate({p.reshape(new_first, column), p.reshape(new_second, column)}, 3),
                        {tokens, heads, rotary.rotary_dim});
  } else {
    rotated = p.concatenate({new_first, new_second}, 2);
  }
  if (rotary.rotary_dim == head_dim) return rotated;
  return p.concatenate({rotated, p.slice_last(x, rotary.rotary_dim, head_dim)}, 2);
}

Value kv_cache_write(Program& p, Value cache, Value entries, Value positions, Value cache_rows) {
  const int64_t batch = entries.type.dims[0], seq = entries.type.dims[1], kv_heads = entries.type.dims[2];
  const int64_t head_dim = entries.type.dims[3], max_cache_len = cache.type.dims[2], rows = batch * seq;
  const Value updates = p.reshape(p.convert(entries, cache.type.element), {rows, kv_heads, head_dim});
  // Padding (a negative position) is sent past the end of the cache, where scatter drops it.
  const Value padding = p.compare(positions, splat(p, 0, positions.type), "LT");
  const Value slot = p.select(padding, splat(p, static_cast<double>(max_cache_len), positions.type), positions);
  const Value row = p.broadcast(cache_rows, positions.type.dims, {0});  // [batch, seq]
  const Value indices = p.concatenate({p.reshape(row, {rows, 1}), p.reshape(slot, {rows, 1})}, 1);  // [rows, 2]
  return p.scatter_rows(cache, indices, updates);
}

namespace {

// Online softmax over the keys of one block (flash attention's update): the running row
// maxima `max` and sums `sum` [batch, kv, group, seq] and the unnormalized output `acc`
// [batch, kv, group, seq, head_dim], updated with keys, values f32 [batch, kv, n, head_dim] under
// `shown` i1 [batch, seq, n].
struct Softmax {
  Value max, sum, acc;
};

Softmax absorb(Program& p, const Softmax& state, Value grouped, Value keys, Value values, Value shown, float scale) {
  const double inf = std::numeric_limits<double>::infinity();
  const Value scores = p.dot_general(grouped, keys, {0, 1}, {0, 1}, {4}, {3});  // [batch, kv, group, seq, n]
  const Value scaled = p.multiply(scores, splat(p, scale, scores.type));
  const Value masked = p.select(p.broadcast(shown, scores.type.dims, {0, 3, 4}), scaled, splat(p, -inf, scaled.type));
  const std::vector<int64_t> leading{0, 1, 2, 3};
  const Value max = p.binary("maximum", state.max, p.reduce(masked, {4}, "maximum", -inf));
  // A row that has seen no key yet keeps max -inf: exponents are taken from 0 instead.
  const Value unseen = p.compare(max, splat(p, -inf, max.type), "EQ");
  const Value base = p.select(unseen, splat(p, 0, max.type), max);
  const Value correction = p.unary("exponential", p.subtract(state.max, base));
  const Value weights = p.unary("exponential", p.subtract(masked, p.broadcast(base, scores.type.dims, leading)));
  const Value sum = p.add(p.multiply(state.sum, correction), p.reduce(weights, {4}, "add", 0));
  const Value block_out = p.dot_general(weights, values, {0, 1}, {0, 1}, {4}, {2});  // [batch, kv, group, seq, head_dim]
  const Value acc = p.add(p.multiply(state.acc, p.broadcast(correction, block_out.type.dims, leading)), block_out);
  return {max, sum, acc};
}

Value scalar_i32(Program& p, double value) { return splat(p, value, {{}, "i32"}); }

}  // namespace

Value attention(Program& p, Value q, Value k_cache, Value v_cache, const std::optional<StepEntries>& step,
                Value positions, Value cache_rows, float scale, int64_t sliding_window) {
  const int64_t batch = q.type.dims[0], seq = q.type.dims[1], heads = q.type.dims[2], head_dim = q.type.dims[3];
  const int64_t kv_heads = k_cache.type.dims[1], max_cache_len = k_cache.type.dims[2], group = heads / kv_heads;
  // Query head h reads KV head h / group: [batch, kv_heads, group, seq, head_dim].
  const Value grouped = p.transpose(p.reshape(q, {batch, seq, kv_heads, group, head_dim}), {0, 2, 3, 1, 4});
  const Type rows{{batch, kv_heads, group, seq}, "f32"};
  Softmax state{splat(p, -std::numeric_limits<double>::infinity(), rows), splat(p, 0, rows),
                splat(p, 0, {{batch, kv_heads, group, seq, head_dim}, "f32"})};

  // The cache in blocks, only as far as the furthest query reaches: a step's work follows
  // the tokens cached, not max_cache_len (a stablehlo.while with a runtime trip count).
  const int64_t block = std::min<int64_t>(max_cache_len, 256);
  const Value furthest = p.reduce(positions, {0, 1}, "maximum", -1);
  const Value blocks = p.divide(p.add(furthest, scalar_i32(p, static_cast<double>(block))),
                                scalar_i32(p, static_cast<double>(block)));
  const std::vector<Value> looped = p.while_loop(
      {scalar_i32(p, 0), state.max, state.sum, state.acc},
      [&](Program& r, const std::vector<Value>& v) { return std::vector{r.compare(v[0], blocks, "LT")}; },
      [&](Program& r, const std::vector<Value>& v) {
        const Value start = r.multiply(v[0], scalar_i32(r, static_cast<double>(block)));
        // The last block is moved back to fit the cache; keys before `start` were seen already.
        const Value first = r.binary("minimum", start, scalar_i32(r, static_cast<double>(max_cache_len - block)));
        const Value keys = r.convert(r.gather_blocks(k_cache, cache_rows, first, block), "f32");  // [batch, kv, block, hd]
        const Value values = r.convert(r.gather_blocks(v_cache, cache_rows, first, block), "f32");
        const Value query_at = spread(r, positions, block, {0, 1});  // [batch, seq, block]
        const Value key_at = r.add(r.iota(query_at.type, 2), r.broadcast(first, query_at.type.dims, {}));
        Value shown = logical(r, "and", visible(r, key_at, query_at, sliding_window),
                              r.compare(key_at, r.broadcast(start, query_at.type.dims, {}), "GE"));
        if (step) {  // slots this step rewrites hold stale entries: hidden
          const Value stale = r.reduce(r.compare(query_at, key_at, "EQ"), {1}, "or", 0);  // [batch, block]
          shown = logical(r, "and", shown, r.unary("not", r.broadcast(stale, query_at.type.dims, {0, 2})));
        }
        const Softmax next = absorb(r, {v[1], v[2], v[3]}, grouped, keys, values, shown, scale);
        return std::vector{r.add(v[0], scalar_i32(r, 1)), next.max, next.sum, next.acc};
      });
  state = {looped[1], looped[2], looped[3]};
  if (step) {  // this step's own entries, as the cache will hold them
    const auto as_cache = [&](Value entries) {  // [batch, seq, kv_heads, head_dim] -> [batch, kv_heads, seq, head_dim]
      return p.transpose(rounded_to(p, entries, k_cache.type.element), {0, 2, 1, 3});
    };
    const Value entry_at = spread(p, positions, seq, {0, 2}), query_sees = spread(p, positions, seq, {0, 1});
    const Value real = p.compare(entry_at, splat(p, 0, entry_at.type), "GE");
    const Value shown = logical(p, "and", real, visible(p, entry_at, query_sees, sliding_window));
    state = absorb(p, state, grouped, as_cache(step->keys), as_cache(step->values), shown, scale);
  }
  Value out = p.divide(state.acc, p.broadcast(state.sum, state.acc.type.dims, {0, 1, 2, 3}));
  out = p.reshape(p.transpose(out, {0, 3, 1, 2, 4}), {batch, seq, heads, head_dim});
  // Padding queries (negative position) see nothing: zeros, as the reference gives.
  const Value real_query = p.compare(positions, splat(p, 0, positions.type), "GE");
  return p.select(p.broadcast(real_query, out.type.dims, {0, 1}), out, splat(p, 0, out.type));
}

Value silu_mul(Program& p, Value gate, Value up) {
  return p.multiply(p.multiply(gate, p.unary("logistic", gate)), up);
}

Value gelu_tanh_mul(Program& p, Value gate, Value up) {
  const Value cubed = p.multiply(p.multiply(gate, gate), gate);
  const Value inner = p.multiply(splat(p, 0.7978845608028654, gate.type),
                                 p.add(gate, p.multiply(splat(p, 0.044715, gate.type), cubed)));
  const Value half_gate = p.multiply(splat(p, 0.5, gate.type), gate);
  const Value gelu = p.multiply(half_gate, p.add(splat(p, 1, gate.type), p.unary("tanh", inner)));
  return p.multiply(gelu, up);
}

Value scale(Program& p, Value x, double factor) { return p.multiply(x, splat(p, factor, x.type)); }

Value softcap(Program& p, Value x, double cap) {
  return p.multiply(splat(p, cap, x.type), p.unary("tanh", p.divide(x, splat(p, cap, x.type))));
}

Value gather_rows(Program& p, Value x, Value indices) { return p.gather_rows(x, indices); }

std::vector<Value> top_k(Program& p, Value logits, int64_t k) {
  const int64_t rows = logits.type.dims[0], vocab = logits.type.dims[1];
  const Value index = p.iota(with_element(logits.type, "i32"), 1);
  if (k == 1) {  // greedy decoding: one pass over each row instead of a sort
    const std::vector<Value> best = p.best_of_rows(logits, index);
    return {p.reshape(best[0], {rows, 1}), p.reshape(best[1], {rows, 1})};
  }
  const std::vector<Value> sorted = p.sort_descending(logits, index, 1);
  const int64_t kept = std::min(k, vocab);
  Value values = p.slice(sorted[0], {0, 0}, {rows, kept}), indices = p.slice(sorted[1], {0, 0}, {rows, kept});
  if (kept < k) {  // past a row shorter than k: -inf and index -1, as the reference
    const Type pad{{rows, k - kept}, "f32"};
    values = p.concatenate({values, splat(p, -std::numeric_limits<double>::infinity(), pad)}, 1);
    indices = p.concatenate({indices, splat(p, -1, with_element(pad, "i32"))}, 1);
  }
  return {values, indices};
}

}  // namespace shardlm::backends::stablehlo
