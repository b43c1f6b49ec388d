#pragma once
// Every Backend op as StableHLO (backends/backend.h gives the shapes and the semantics;
// the scalar reference kernels in backends/cpu/reference_*.cpp are what these are tested
// against). Activations are f32; weights of any float dtype are widened in the program and
// int8 weights dequantized there, so the plugin holds them as stored.

#include <optional>
#include <utility>

#include "backends/pjrt/stablehlo.h"
#include "backends/rotary.h"

namespace shardlm::backends::stablehlo {

// A weight as the program sees it: the stored tensor, and for int8 its f16 block scales
// [out, in / Tensor::quant_block].
struct Weight {
  Value values;
  std::optional<Value> scales{};
};

// Rotary cos/sin tables [table_positions, rotary_dim / 2] f32, computed on the host in
// double (rotary.h) and passed in as parameters: positions up to 1e5 lose 1e-3 rad in f32.
struct RotaryTables {
  Value cos, sin;
};
// Host tables {cos, sin} f32 [positions, rotary_dim / 2] for positions 0..positions-1.
std::pair<Tensor, Tensor> rotary_tables(const RotaryEmbedding& rotary, int64_t positions);

// weight (any float dtype, or int8 with scales) -> f32 of the same shape
Value widen(Program& p, const Weight& weight);
// table [vocab, hidden], ids i32 [tokens] -> f32 [tokens, hidden]; ids outside
// first_row..first_row + vocab - 1 give zero rows
Value embedding(Program& p, const Weight& table, Value ids, int64_t first_row);
// x f32 [rows, in], weight [out, in], bias [out] -> f32 [rows, out]
Value linear(Program& p, Value x, const Weight& weight, const std::optional<Value>& bias);
// x f32 [rows, dim], weight [dim] -> f32 [rows, dim]
Value rms_norm(Program& p, Value x, const Weight& weight, float eps);
// x f32 [tokens, heads, head_dim], positions i32 [tokens] -> rotated x
Value rope(Program& p, Value x, Value positions, const RotaryTables& tables, const RotaryEmbedding& rotary);
// cache [slots, kv_heads, max_cache_len, head_dim] with entries f32 [batch, seq, kv_heads, head_dim] written at
// positions i32 [batch, seq] (negative: padding, skipped) of rows cache_rows i32 [batch] -> the updated cache
Value kv_cache_write(Program& p, Value cache, Value entries, Value positions, Value cache_rows);
// Causal attention (backend.h). q f32 [batch, seq, heads, head_dim] over rows cache_rows i32 [batch] of
// k_cache, v_cache [slots, kv_heads, max_cache_len, head_dim] as they were before this step, plus this step's
// entries f32 [batch, seq, kv_heads, head_dim] when given (the cache positions they overwrite are
// then hidden): the program reads the old cache while the in-place write of the new one
// follows it, so XLA need not copy the cache. -> f32 [batch, seq, heads, head_dim]
struct StepEntries {
  Value keys, values;
};
Value attention(Program& p, Value q, Value k_cache, Value v_cache, const std::optional<StepEntries>& step,
                Value positions, Value cache_rows, float scale, int64_t sliding_window);
// silu(gate) * up
Value silu_mul(Program& p, Value gate, Value up);
Value gelu_tanh_mul(Program& p, Value gate, Value up);
Value scale(Program& p, Value x, double factor);
Value softcap(Program& p, Value x, double cap);
// rows of x f32 [rows, dim] at indices i32 [count] -> [count, dim]
Value gather_rows(Program& p, Value x, Value indices);
// The k best values of each row of logits f32 [rows, vocab], descending, NaN first, ties in
// index order (torch.topk) -> {values f32 [rows, k], indices i32 [rows, k]}
std::vector<Value> top_k(Program& p, Value logits, int64_t k);

}  // namespace shardlm::backends::stablehlo
