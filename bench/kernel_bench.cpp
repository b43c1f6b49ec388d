// Google Benchmark micro-benchmarks of the CPU kernel families, one thread (decode
// attention also at two), on the Qwen3-0.6B shapes (hidden 1024, intermediate 3072,
// head_dim 128, 16/8 heads).
//   cmake --build build --target kernel_bench && build/bench/kernel_bench
// Counters: bytes_per_second (weights streamed, for gemv: the 128- and 256-row
// shapes, 256 KB, stay in L2, so they give a kernel's compute ceiling), FLOPS (gemm,
// attention). BM_FlashBlock runs each table's prefill attention kernel in one process.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <string_view>

#include "arena_copy.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/reference_kernels.h"
#include "core/quantize.h"

namespace shardlm::backends::cpu {
namespace {

Tensor random_matrix(int64_t rows, int64_t columns, DType dtype) {
  std::mt19937 random(5);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> values(static_cast<size_t>(rows * columns));
  for (float& v : values) v = normal(random);
  Tensor f32 = Tensor::from_f32(values, {rows, columns});
  if (dtype == DType::i8) return quantize_int8(f32);
  if (dtype == DType::i4) return quantize_int4(f32);
  return dtype == DType::f32 ? f32 : f32.to_dtype(dtype);
}

size_t weight_bytes(const Tensor& w) { return w.nbytes() + (w.quantized() ? w.block_scales().nbytes() : 0); }

// Decode: one input row through an [out, in] weight (down_proj's shape by default).
void BM_Gemv(benchmark::State& state, DType dtype) {
  const int64_t out = state.range(0), in = state.range(1);
  Tensor w = random_matrix(out, in, dtype), x = random_matrix(1, in, DType::f32);
  std::vector<float> y(static_cast<size_t>(out));
  const CpuKernels& kernels = cpu_kernels();
  std::vector<float> packed;
  for (auto _ : state) {
    kernels.gemv(gemv_input(kernels, dtype, x.data<float>(), 1, in, packed), 1, WeightView::of(w), 0, out, y.data(),
                 out);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * weight_bytes(w)));
  state.SetLabel(std::string(kernels.isa));
}

// Prefill, or a decode step of several sequences: `rows` input rows through an [out, in]
// weight (16 rows: the lm_head's shape, streamed from memory, and gate/up's, from L3).
void BM_Gemm(benchmark::State& state, DType dtype) {
  const int64_t rows = state.range(0), out = state.range(1), in = state.range(2);
  Tensor w = random_matrix(out, in, dtype), x = random_matrix(rows, in, DType::f32);
  std::vector<float> y(static_cast<size_t>(rows * out));
  const CpuKernels& kernels = cpu_kernels();
  std::vector<float> packed;
  for (auto _ : state) {
    kernels.gemm(gemm_input(kernels, dtype, x.data<float>(), rows, in, packed), rows, WeightView::of(w), 0, out, y.data(),
                 out);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * rows * out * in * state.iterations(), benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * weight_bytes(w)));
  state.SetLabel(std::string(kernels.isa));
}

// The whole linear op over 512 rows (q_proj's shape, bf16), without and with a bias (Qwen2
// and GLM-4 have q/k/v biases): the bias epilogue's cost is the difference.
void BM_LinearBias(benchmark::State& state) {
  const int64_t rows = 512, out = 2048, in = 1024;
  ThreadPool pool(1);
  Tensor w = random_matrix(out, in, DType::bf16), x = random_matrix(rows, in, DType::f32);
  Tensor bias = state.range(0) ? random_matrix(1, out, DType::bf16).reshape({out}) : Tensor();
  Tensor y = Tensor::zeros({rows, out}, DType::f32);
  for (auto _ : state) linear(pool, x, w, bias, y);
  state.counters["FLOPS"] = benchmark::Counter(2.0 * rows * out * in * state.iterations(), benchmark::Counter::kIsRate);
}

// Decode attention: one query position over `cached` positions, 16 heads over
// `kv_heads` KV heads, on `threads` threads (two with one KV head: the split over the
// cached positions), an f32 cache or (a fourth argument of 1) a bf16 one.
void BM_AttentionDecode(benchmark::State& state) {
  const int64_t cached = state.range(0), kv_heads = state.range(1), heads = 16, head_dim = 128;
  const DType cache_dtype = state.range(3) ? DType::bf16 : DType::f32;
  ThreadPool pool(static_cast<int>(state.range(2)));
  Tensor q = random_matrix(heads, head_dim, DType::f32).reshape({1, 1, heads, head_dim});
  Tensor k = random_matrix(kv_heads * cached, head_dim, cache_dtype).reshape({1, kv_heads, cached, head_dim});
  Tensor v = random_matrix(kv_heads * cached, head_dim, cache_dtype).reshape({1, kv_heads, cached, head_dim});
  const int32_t last = static_cast<int32_t>(cached - 1);
  Tensor positions = Tensor::from_i32(std::span(&last, 1), {1, 1});
  Tensor out = Tensor::zeros({1, 1, heads, head_dim}, DType::f32);
  const int32_t row = 0;
  Tensor cache_rows = Tensor::from_i32(std::span(&row, 1), {1});
  for (auto _ : state) attention(pool, q, k, v, positions, cache_rows, 0.088f, 0, out);
  state.counters["FLOPS"] =
      benchmark::Counter(4.0 * heads * cached * head_dim * state.iterations(), benchmark::Counter::kIsRate);
}

// Times step() with the caches cold, as a decode step meets its cache and weights (the
// step's other reads have streamed through the caches since): a 64 MB read, untimed,
// evicts them before each iteration.
template <typename Step>
void time_cold(benchmark::State& state, Step step) {
  std::vector<uint64_t> evict(size_t{8} << 20, 1);
  uint64_t sink = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < evict.size(); i += 8) sink += evict[i];
    const auto start = std::chrono::steady_clock::now();
    step();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  benchmark::DoNotOptimize(sink);
}

// Decode attention as a decode step meets it: every layer's cache read once, cold (the
// step's weights have streamed through the caches since), 28 layers of Qwen3-0.6B's
// shape (8 KV heads of 2 query heads each) in bf16 at max_cache_len 4096, `cached`
// positions visible, on `threads`.
void BM_AttentionDecodeCold(benchmark::State& state) {
  const int64_t cached = state.range(0), threads = state.range(1), layers = 28, kv_heads = 8, heads = 16,
                head_dim = 128, max_cache_len = 4096;
  ThreadPool pool(static_cast<int>(threads));
  Tensor q = random_matrix(heads, head_dim, DType::f32).reshape({1, 1, heads, head_dim});
  std::vector<Tensor> keys, values;
  for (int64_t l = 0; l < 2 * layers; ++l) {
    Tensor cache = Tensor::zeros({1, kv_heads, max_cache_len, head_dim}, DType::bf16);
    const Tensor filled = random_matrix(kv_heads * cached, head_dim, DType::bf16);
    for (int64_t h = 0; h < kv_heads; ++h)
      std::memcpy(static_cast<uint16_t*>(cache.mutable_raw()) + h * max_cache_len * head_dim,
                  static_cast<const uint16_t*>(filled.raw()) + h * cached * head_dim,
                  static_cast<size_t>(cached * head_dim) * 2);
    (l % 2 ? values : keys).push_back(cache);
  }
  const int32_t last = static_cast<int32_t>(cached - 1), row = 0;
  Tensor positions = Tensor::from_i32(std::span(&last, 1), {1, 1});
  Tensor cache_rows = Tensor::from_i32(std::span(&row, 1), {1});
  Tensor out = Tensor::zeros({1, 1, heads, head_dim}, DType::f32);
  time_cold(state, [&] {
    for (int64_t l = 0; l < layers; ++l) attention(pool, q, keys[l], values[l], positions, cache_rows, 0.088f, 0, out);
  });
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * layers * 2 * kv_heads * cached * head_dim * 2));
}

// A decode step's layer gemvs as it meets them: 28 int4 weights of one [out, in] shape in
// huge pages, each its own op from memory, on `threads`. Against one large shape, the
// cost an op carries beyond its bytes.
void BM_GemvOps(benchmark::State& state) {
  const int64_t out = state.range(0), in = state.range(1), threads = state.range(2), layers = 28;
  ThreadPool pool(static_cast<int>(threads));
  HostArena arena;
  std::vector<Tensor> weights;
  for (int64_t l = 0; l < layers; ++l) weights.push_back(in_arena(arena, random_matrix(out, in, DType::i4)));
  Tensor x = random_matrix(1, in, DType::f32), y = Tensor::zeros({1, out}, DType::f32);
  time_cold(state, [&] {
    for (int64_t l = 0; l < layers; ++l) linear(pool, x, weights[l], Tensor(), y);
  });
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * layers * weight_bytes(weights[0])));
}
BENCHMARK(BM_GemvOps)
    ->Args({1024, 3072, 1})
    ->Args({1024, 3072, 2})
    ->Args({3072, 1024, 2})
    ->Args({8192, 3072, 1})
    ->Args({8192, 3072, 2})
    ->UseManualTime();

// Prefill attention of a 512-token prompt over an f32 (argument 0) or bf16 (1) cache, one
// KV head of two query heads (Qwen3-0.6B's group), by the flash kernel of the table named
// `isa`, one thread: blocks of 24 positions (48 rows), as attention() makes them.
void BM_FlashBlock(benchmark::State& state, std::string_view isa) {
  const CpuKernels* table = nullptr;
  for (const CpuKernels* t : available_cpu_kernels())
    if (t->isa == isa) table = t;
  const int64_t prompt = 512, group = 2, head_dim = 128, block = 24;
  const FlashBlockKernel flash = table && table->flash_block ? table->flash_block(head_dim) : nullptr;
  if (!flash) return state.SkipWithError("no such table or kernel on this CPU");
  Tensor q = random_matrix(prompt * group, head_dim, DType::f32);  // [position, head, head_dim]
  const DType cache = state.range(0) ? DType::bf16 : DType::f32;
  Tensor k = random_matrix(prompt, head_dim, cache), v = random_matrix(prompt, head_dim, cache);
  Tensor out = Tensor::zeros({prompt * group, head_dim}, DType::f32);
  for (auto _ : state)
    for (int64_t p0 = 0; p0 < prompt; p0 += block) {
      const float* queries[block * group];
      float* outputs[block * group];
      int32_t positions[block * group];
      const int64_t rows = std::min(block, prompt - p0) * group;
      for (int64_t r = 0; r < rows; ++r) {
        queries[r] = q.data<float>() + (p0 * group + r) * head_dim;
        outputs[r] = out.mutable_data<float>() + (p0 * group + r) * head_dim;
        positions[r] = static_cast<int32_t>(p0 + r / group);
      }
      flash(queries, positions, rows, k.raw(), v.raw(), cache, head_dim, 0.088f, 0, outputs);
    }
  // Two products of 2 * head_dim FLOPs per (row, visible key).
  state.counters["FLOPS"] = benchmark::Counter(4.0 * group * head_dim * prompt * (prompt + 1) / 2 * state.iterations(),
                                               benchmark::Counter::kIsRate);
  state.SetLabel(std::string(isa));
}

void BM_RmsNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), dim = 1024;
  ThreadPool pool(1);
  Tensor x = random_matrix(rows, dim, DType::f32), weight = random_matrix(1, dim, DType::bf16).reshape({dim});
  Tensor out = Tensor::zeros({rows, dim}, DType::f32);
  for (auto _ : state) rms_norm(pool, x, weight, 1e-6f, out);
  state.SetBytesProcessed(state.iterations() * rows * dim * 8);
}

// q's rotation for `tokens` positions: 16 heads of 128, Qwen3's rope_theta.
void BM_Rope(benchmark::State& state) {
  const int64_t tokens = state.range(0), heads = 16, head_dim = 128;
  ThreadPool pool(1);
  RotaryEmbedding rotary{.rotary_dim = head_dim};
  for (int64_t i = 0; i < head_dim / 2; ++i) rotary.inv_freq.push_back(std::pow(1e6, -2.0 * i / head_dim));
  Tensor x = random_matrix(tokens * heads, head_dim, DType::f32).reshape({tokens, heads, head_dim});
  std::vector<int32_t> position_values(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) position_values[static_cast<size_t>(t)] = static_cast<int32_t>(100 + t);
  Tensor positions = Tensor::from_i32(position_values, {tokens});
  for (auto _ : state) rope(pool, x, positions, rotary);
  state.SetBytesProcessed(state.iterations() * tokens * heads * head_dim * 8);
}

// The gated MLP's silu(gate) * up over `rows` rows of intermediate 3072.
void BM_SiluMul(benchmark::State& state) {
  const int64_t rows = state.range(0), width = 3072;
  ThreadPool pool(1);
  Tensor gate = random_matrix(rows, width, DType::f32), up = random_matrix(rows, width, DType::f32);
  Tensor out = Tensor::zeros({rows, width}, DType::f32);
  for (auto _ : state) silu_mul(pool, gate, up, out);
  state.SetBytesProcessed(state.iterations() * rows * width * 12);
}

// Sampling's candidates from one logit row of Qwen3's vocabulary: k = 1 (greedy) and
// 51 (top_k 50, plus one to see ties), the scalar reference against the CPU kernel.
void BM_TopK(benchmark::State& state, bool reference_kernel) {
  const int64_t vocab = 151936, k = state.range(0);
  ThreadPool pool(1);
  Tensor logits = random_matrix(1, vocab, DType::f32);
  Tensor values = Tensor::zeros({1, k}, DType::f32), indices = Tensor::zeros({1, k}, DType::i32);
  for (auto _ : state) {
    if (reference_kernel) reference::top_k(logits, values, indices);
    else top_k(pool, logits, values, indices);
    benchmark::DoNotOptimize(indices.data<int32_t>());
  }
  state.SetBytesProcessed(state.iterations() * vocab * 4);
}

BENCHMARK_CAPTURE(BM_Gemv, f32, DType::f32)->Args({1024, 3072});
BENCHMARK_CAPTURE(BM_Gemv, bf16, DType::bf16)->Args({128, 1024})->Args({1024, 3072})->Args({151936, 1024});
BENCHMARK_CAPTURE(BM_Gemv, f16, DType::f16)->Args({1024, 3072});
BENCHMARK_CAPTURE(BM_Gemv, int8, DType::i8)->Args({256, 1024})->Args({1024, 3072})->Args({151936, 1024});
BENCHMARK_CAPTURE(BM_Gemv, int4, DType::i4)->Args({512, 1024})->Args({1024, 3072})->Args({151936, 1024});
BENCHMARK_CAPTURE(BM_Gemm, f32, DType::f32)->Args({512, 1024, 3072});
BENCHMARK_CAPTURE(BM_Gemm, bf16, DType::bf16)->Args({512, 1024, 3072})->Args({512, 3072, 1024})->Args({32, 3072, 1024})
    ->Args({16, 3072, 1024})->Args({16, 151936, 1024});
BENCHMARK_CAPTURE(BM_Gemm, f16, DType::f16)->Args({512, 1024, 3072});
BENCHMARK_CAPTURE(BM_Gemm, int8, DType::i8)->Args({512, 1024, 3072});
BENCHMARK(BM_LinearBias)->Arg(0)->Arg(1);
BENCHMARK(BM_AttentionDecode)
    ->Args({192, 8, 1, 0})
    ->Args({192, 8, 1, 1})
    ->Args({4096, 8, 1, 0})
    ->Args({4096, 8, 1, 1})
    ->Args({4096, 1, 1, 0})
    ->Args({4096, 1, 2, 0})
    ->UseRealTime();
BENCHMARK(BM_AttentionDecodeCold)->Args({192, 2})->Args({1024, 2})->Args({1024, 1})->UseManualTime();
BENCHMARK_CAPTURE(BM_FlashBlock, avx2, "avx2")->Arg(0)->Arg(1);
BENCHMARK_CAPTURE(BM_FlashBlock, avx512, "avx512")->Arg(0)->Arg(1);
BENCHMARK_CAPTURE(BM_FlashBlock, avx512_bf16, "avx512_bf16")->Arg(0)->Arg(1);
BENCHMARK(BM_RmsNorm)->Arg(1)->Arg(512);
BENCHMARK(BM_Rope)->Arg(1)->Arg(512);
BENCHMARK(BM_SiluMul)->Arg(1)->Arg(512);
BENCHMARK_CAPTURE(BM_TopK, reference, true)->Arg(1)->Arg(51);
BENCHMARK_CAPTURE(BM_TopK, cpu, false)->Arg(1)->Arg(51);

}  // namespace
}  // namespace shardlm::backends::cpu

BENCHMARK_MAIN();
