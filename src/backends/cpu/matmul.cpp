// Linear layers and their fused forms: the output columns are split into tasks for
// the thread pool; each task runs the best matmul kernel (kernel_table.h) on its
// columns and then its epilogue (bias, residual, silu·mul) on the same columns while
// they are still in cache.
#include <algorithm>
#include <array>
#include <span>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/simd.h"
#include "core/dtype.h"

namespace shardlm::backends::cpu {
namespace {

// Per-thread scratch that grows to the largest size seen, then stays: no allocation
// once a shape has run.
float* scratch(std::vector<float>& buffer, int64_t size) {
  if (buffer.size() < static_cast<size_t>(size)) buffer.resize(static_cast<size_t>(size));
  return buffer.data();
}

// gemv's column ranges, largest first: each (what is left) / (2 x threads), a multiple
// of 16 and at least 1/256 of the whole, so that the threads take long ranges while
// there is much to do and finish on short ones. Eight equal ranges left a thread idle
// for up to a range's time at the end of an op whenever the other ran slower (on a VM,
// a stolen or throttled core): the lm_head took 1 - 11% longer, in-process A/B. The
// shortest at 1/256 rather than 1/64 (16 rows of q/k/v rather than 64, 16 rows of gate
// and up rather than 48): int8 decode at two threads on a Sapphire Rapids VM 86.6 - 88.7%
// -> 87.6 - 90.4% of the roofline, bf16 95.5 - 95.7% -> 96.2 - 96.7% (alternating runs;
// 1/128 read as 1/256 did). On Zen 3 a 16-row shortest range was within the noise.
struct GemvRanges {
  static constexpr int64_t granule = 16, most = 256;
  std::array<int64_t, most + 1> bounds{};  // range i is [bounds[i], bounds[i + 1])
  int64_t count = 0;

  GemvRanges(int64_t out_features, int64_t threads) {
    const int64_t shortest = (out_features + most * granule - 1) / (most * granule) * granule;
    for (int64_t begin = 0; begin < out_features; ++count) {
      const int64_t share = (out_features - begin) / (2 * threads);
      bounds[static_cast<size_t>(count)] = begin;
      begin = std::min(out_features, begin + std::max(shortest, (share + granule - 1) / granule * granule));
    }
    bounds[static_cast<size_t>(count)] = out_features;
  }
};

// Splits the output columns of `count` weights (usually one; sibling_linears' several,
// their columns taken end to end), weight i having out_features(i), into tasks for the
// pool: task(i, begin, end) for columns [begin, end) of weight i. gemv's GemvRanges span
// all the columns, a range that crosses from one weight into the next run as two calls;
// gemm's are one per column block of each weight, the unit it packs anyway, so the
// threads finish within a block's time of each other.
template <typename OutFeatures, typename Task>
void for_column_ranges(ThreadPool& pool, int64_t rows, size_t count, OutFeatures out_features, Task task) {
  if (rows <= gemv_max_rows) {
    int64_t columns = 0;
    for (size_t i = 0; i < count; ++i) columns += out_features(i);
    const GemvRanges ranges(columns, pool.threads());
    pool.run(ranges.count, [&](int64_t r) {
      int64_t begin = ranges.bounds[static_cast<size_t>(r)];
      const int64_t end = ranges.bounds[static_cast<size_t>(r + 1)];
      int64_t first_column = 0;  // of weight i
      for (size_t i = 0; i < count && begin < end; first_column += out_features(i++)) {
        const int64_t stop = std::min(end, first_column + out_features(i));
        if (begin >= stop) continue;
        task(i, begin - first_column, stop - first_column);
        begin = stop;
      }
    });
    return;
  }
  const int64_t width = cpu_kernels().gemm_column_block;
  const auto blocks_of = [&](size_t i) { return (out_features(i) + width - 1) / width; };
  int64_t blocks = 0;
  for (size_t i = 0; i < count; ++i) blocks += blocks_of(i);
  pool.run(blocks, [&](int64_t block) {
    size_t i = 0;
    for (; block >= blocks_of(i); ++i) block -= blocks_of(i);
    task(i, block * width, std::min(out_features(i), (block + 1) * width));
  });
}

// for_column_ranges over one weight of out_features columns: task(begin, end).
template <typename Task>
void for_column_ranges(ThreadPool& pool, int64_t rows, int64_t out_features, Task task) {
  for_column_ranges(pool, rows, 1, [&](size_t) { return out_features; },
                    [&](size_t, int64_t begin, int64_t end) { task(begin, end); });
}

// x [rows, in] as the kernels read it, for a weight of `dtype`: gemm's packed copy
// (packed by the pool) or gemv's where the table packs its input for this dtype, else x
// itself. Packed once per op, into `buffer` (per-thread scratch), for every column
// task to read.
const float* kernel_input(ThreadPool& pool, const float* x, int64_t rows, int64_t in, DType dtype,
                          std::vector<float>& buffer) {
  const CpuKernels& kernels = cpu_kernels();
  if (rows <= gemv_max_rows) {
    const int64_t floats = gemv_input_floats(kernels, dtype, rows, in);
    if (floats == 0) return x;
    float* packed = scratch(buffer, floats);
    kernels.pack_gemv_input(x, rows, in, dtype, packed);
    return packed;
  }
  if (!kernels.pack_input) return x;
  float* packed = scratch(buffer, packed_input_floats(kernels, rows, in));
  const int64_t tiles = input_tiles(kernels, rows), per_task = std::max<int64_t>(1, tiles / (4 * pool.threads()));
  pool.run((tiles + per_task - 1) / per_task, [&](int64_t task) {
    kernels.pack_input(x, rows, in, dtype, task * per_task, std::min(tiles, (task + 1) * per_task), packed);
  });
  return packed;
}

// out[r, o] = x[r] . weight[o] for o in [begin, end); input as kernel_input gave it.
void products(const float* input, int64_t rows, const WeightView& weight, int64_t begin, int64_t end, float* out,
              int64_t stride) {
  const CpuKernels& kernels = cpu_kernels();
  if (is_ggml_blocks(weight.dtype)) return ggml_block_products(kernels, input, rows, weight, begin, end, out, stride);
  (rows <= gemv_max_rows ? kernels.gemv : kernels.gemm)(input, rows, weight, begin, end, out, stride);
}

// out[r, 0..count) += addend[r * addend_stride + 0..count) for r < rows, eight columns
// a vector (loops of unknown length stay scalar at -O2); addend_stride 0 adds one row to all.
void add_to_rows(const float* addend, int64_t addend_stride, int64_t rows, int64_t count, float* out,
                 int64_t stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* source = addend + r * addend_stride;
    float* target = out + r * stride;
    int64_t o = 0;
    for (; o + 8 <= count; o += 8) store8(target + o, load8(target + o) + load8(source + o));
    for (; o < count; ++o) target[o] += source[o];
  }
}

void add_bias(const Tensor& bias, int64_t rows, int64_t begin, int64_t end, float* out, int64_t stride) {
  if (!bias.defined() || bias.numel() == 0) return;
  thread_local std::vector<float> bias_buffer;  // this task's columns of the bias, as f32
  float* columns = scratch(bias_buffer, end - begin);
  convert_to_f32(static_cast<const std::byte*>(bias.raw()) + begin * static_cast<int64_t>(dtype_size(bias.dtype())),
                 bias.dtype(), columns, static_cast<size_t>(end - begin));
  add_to_rows(columns, 0, rows, end - begin, out + begin, stride);
}

void linear_of(ThreadPool& pool, const float* x, int64_t rows, const Tensor& weight, const Tensor& bias,
               const float* residual, float* out) {
  const WeightView view = WeightView::of(weight);
  const int64_t out_features = weight.shape()[0];
  thread_local std::vector<float> packed_buffer;
  const float* input = kernel_input(pool, x, rows, view.in, kernel_dtype(view.dtype), packed_buffer);
  for_column_ranges(pool, rows, out_features, [&](int64_t begin, int64_t end) {
    products(input, rows, view, begin, end, out, out_features);
    add_bias(bias, rows, begin, end, out, out_features);
    if (residual) add_to_rows(residual + begin, out_features, rows, end - begin, out + begin, out_features);
  });
}

}  // namespace

void ggml_block_products(const CpuKernels& kernels, const float* x, int64_t rows, const WeightView& weight,
                         int64_t o_begin, int64_t o_end, float* out, int64_t out_stride) {
  const CpuKernels& portable = portable_cpu_kernels();
  if (rows <= gemv_max_rows)
    return (kernels.gemv_blocks ? kernels.gemv_blocks : portable.gemv_blocks)(x, rows, weight, o_begin, o_end, out,
                                                                              out_stride);
  const int64_t run = kernels.gemm_column_block;
  const auto decode = kernels.decode_blocks ? kernels.decode_blocks : portable.decode_blocks;
  thread_local std::vector<float> panel_buffer;
  float* panel = scratch(panel_buffer, run * weight.in);  // [run, in]
  const size_t row_bytes = dtype_bytes(weight.dtype, weight.in);
  const auto* blocks = static_cast<const std::byte*>(weight.data);
  const WeightView decoded{panel, DType::f32, weight.in};
  for (int64_t o = o_begin; o < o_end; o += run) {
    const int64_t count = std::min(run, o_end - o);
    for (int64_t c = 0; c < count; ++c)
      decode(weight.dtype, blocks + static_cast<size_t>(o + c) * row_bytes, weight.in, panel + c * weight.in);
    kernels.gemm(x, rows, decoded, 0, count, out + o, out_stride);
  }
}

void linear(ThreadPool& pool, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) {
  linear_of(pool, x.data<float>(), x.shape()[0], weight, bias, nullptr, out.mutable_data<float>());
}

void linear_residual(ThreadPool& pool, const Tensor& x, const Tensor& weight, const Tensor& bias,
                     const Tensor& residual, const Tensor& out) {
  linear_of(pool, x.data<float>(), x.shape()[0], weight, bias, residual.data<float>(), out.mutable_data<float>());
}

void gated_linear(ThreadPool& pool, const Tensor& x, const Tensor& gate_weight, const Tensor& gate_bias,
                  const Tensor& up_weight, const Tensor& up_bias, const Tensor& out) {
  thread_local std::vector<float> gate_buffer, gate_input_buffer, up_input_buffer;
  const int64_t rows = x.shape()[0], out_features = gate_weight.shape()[0];
  float* gate = scratch(gate_buffer, rows * out_features);  // [rows, out_features]
  float* result = out.mutable_data<float>();
  const WeightView gate_view = WeightView::of(gate_weight), up_view = WeightView::of(up_weight);
  const DType gate_dtype = kernel_dtype(gate_view.dtype), up_dtype = kernel_dtype(up_view.dtype);
  const float* gate_input = kernel_input(pool, x.data<float>(), rows, gate_view.in, gate_dtype, gate_input_buffer);
  const float* up_input = gate_dtype == up_dtype
                              ? gate_input
                              : kernel_input(pool, x.data<float>(), rows, up_view.in, up_dtype, up_input_buffer);
  for_column_ranges(pool, rows, out_features, [&](int64_t begin, int64_t end) {
    products(gate_input, rows, gate_view, begin, end, gate, out_features);
    products(up_input, rows, up_view, begin, end, result, out_features);
    add_bias(gate_bias, rows, begin, end, gate, out_features);
    add_bias(up_bias, rows, begin, end, result, out_features);
    for (int64_t r = 0; r < rows; ++r)
      cpu_kernels().rows.silu_multiply(gate + r * out_features + begin, result + r * out_features + begin, end - begin);
  });
}

void sibling_linears(ThreadPool& pool, const Tensor& x, std::span<const SiblingLinear> linears) {
  const DType dtype = linears[0].weight->dtype();
  if (!std::all_of(linears.begin(), linears.end(), [&](const SiblingLinear& l) { return l.weight->dtype() == dtype; })) {
    // Each would want its own packed input: nothing to gain from one op.
    for (const SiblingLinear& l : linears) linear(pool, x, *l.weight, *l.bias, *l.out);
    return;
  }
  const int64_t rows = x.shape()[0];
  thread_local std::vector<float> packed_buffer;
  const float* input = kernel_input(pool, x.data<float>(), rows, x.shape()[1], kernel_dtype(dtype), packed_buffer);
  const auto out_features = [&](size_t i) { return linears[i].weight->shape()[0]; };
  for_column_ranges(pool, rows, linears.size(), out_features, [&](size_t i, int64_t begin, int64_t end) {
    float* out = linears[i].out->mutable_data<float>();
    products(input, rows, WeightView::of(*linears[i].weight), begin, end, out, out_features(i));
    add_bias(*linears[i].bias, rows, begin, end, out, out_features(i));
  });
}

void rms_norm_linear(ThreadPool& pool, const Tensor& x, const Tensor& norm_weight, float eps, const Tensor& weight,
                     const Tensor& bias, const Tensor& out) {
  thread_local std::vector<float> normed_buffer;
  const int64_t rows = x.shape()[0], in = x.shape()[1];
  float* normed = scratch(normed_buffer, rows * in);  // [rows, in]
  rms_norm_rows(pool, x.data<float>(), rows, in, norm_weight, eps, normed);
  linear_of(pool, normed, rows, weight, bias, nullptr, out.mutable_data<float>());
}

}  // namespace shardlm::backends::cpu
