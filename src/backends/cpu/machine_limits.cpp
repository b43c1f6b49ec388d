// Compiled for the baseline x86-64 like the rest of the library, so that a CPU without
// AVX2 can run every function it calls here; the functions that use wider vectors ask
// for them by target attribute, and each measurement checks the CPU before it calls one.
#include "backends/cpu/machine_limits.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>

#include "backends/cpu/avx512_vnni_gemm.h"
#include "backends/cpu/kernel_table.h"
#include "core/error.h"

namespace shardlm::backends::cpu {
namespace {

bool has_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Sums `floats` floats from `base` (a multiple of Streams x 1024) as `Streams` parts
// read side by side, 4 KB of each at a time, on hardware prefetch alone.
template <size_t Streams>
__attribute__((target("avx2"))) float sum_streams(const float* base, size_t floats) {
  constexpr size_t chunk = 1024;
  const size_t per_stream = floats / Streams;
  __m256 sums[Streams];
#pragma GCC unroll 16
  for (size_t s = 0; s < Streams; ++s) sums[s] = _mm256_setzero_ps();
  for (size_t c = 0; c < per_stream; c += chunk)
    for (size_t i = c; i < c + chunk; i += 16)
#pragma GCC unroll 16
      for (size_t s = 0; s < Streams; ++s) {
        const float* p = base + s * per_stream + i;
        sums[s] = _mm256_add_ps(sums[s], _mm256_add_ps(_mm256_load_ps(p), _mm256_load_ps(p + 8)));
      }
#pragma GCC unroll 16
  for (size_t s = 1; s < Streams; ++s) sums[0] = _mm256_add_ps(sums[0], sums[s]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sums[0]);
  return lanes[0];
}

}  // namespace

ReadProbe::ReadProbe(int threads)
    // In huge pages where the system grants them, as large weights are (Tensor::empty):
    // the probe measures the best the memory system does, not the TLB's cost.
    : memory_(Tensor::empty({int64_t{1} << 28}, DType::f32)), pool_(threads) {
  std::memset(memory_.mutable_raw(), 1, memory_.nbytes());  // fault every page in before timing
}

double ReadProbe::pass_gbs(int streams) {
  SHARDLM_CHECK(streams == 4 || streams == 6 || streams == 8, "a read probe pass takes 4, 6 or 8 streams, not ",
                streams);
  if (!has_avx2_fma()) return 0;
  const float* const buffer = memory_.data<float>();
  const int64_t tasks = pool_.threads();
  // Whole 4 KB chunks for 4, 6 and 8 streams alike: a multiple of 24 x 1024 floats.
  constexpr size_t unit = 24 * 1024;
  const size_t floats_per_task = static_cast<size_t>(memory_.numel()) / static_cast<size_t>(tasks) / unit * unit;
  volatile float sink = 0;
  const auto start = std::chrono::steady_clock::now();
  pool_.run(tasks, [&](int64_t task) {
    const float* base = buffer + static_cast<size_t>(task) * floats_per_task;
    const float sum = streams == 4   ? sum_streams<4>(base, floats_per_task)
                      : streams == 6 ? sum_streams<6>(base, floats_per_task)
                                     : sum_streams<8>(base, floats_per_task);
    sink = sink + sum;
  });
  const double read = static_cast<double>(floats_per_task * sizeof(float)) * static_cast<double>(tasks);
  return read / seconds_since(start) / 1e9;
}

double ReadProbe::best_gbs() {
  double best = 0;
  // On the 2-core Zen 3 VM six streams read ~1.5x four at one thread, about the same at
  // two; one stream, or software prefetch on top, reads less.
  for (size_t pass = 0; pass < 2 * std::size(stream_counts); ++pass)
    best = std::max(best, pass_gbs(stream_counts[pass % std::size(stream_counts)]));
  return best;
}

double measure_read_bandwidth_gbs(int threads) { return has_avx2_fma() ? ReadProbe(threads).best_gbs() : 0; }

namespace {

// Independent FMA chains enough to cover latency x ports on the cores seen (4 x 2).
constexpr int64_t fma_iterations = 20'000'000;
constexpr int fma_chains = 12;

// fma_chains chains of fma_iterations 8-lane FMAs; returns a lane so none is dropped.
__attribute__((target("avx2,fma"))) float run_fma_chains_avx2() {
  __m256 acc[fma_chains];
#pragma GCC unroll 16
  for (int c = 0; c < fma_chains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 multiplier = _mm256_set1_ps(0.999999f), addend = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < fma_iterations; ++i)
#pragma GCC unroll 16
    for (int c = 0; c < fma_chains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], multiplier, addend);
  __m256 total = acc[0];
  for (int c = 1; c < fma_chains; ++c) total = _mm256_add_ps(total, acc[c]);
  return _mm256_cvtss_f32(total);
}

// The same on 16 lanes.
__attribute__((target("avx512f"))) float run_fma_chains_avx512() {
  __m512 acc[fma_chains];
#pragma GCC unroll 16
  for (int c = 0; c < fma_chains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 multiplier = _mm512_set1_ps(0.999999f), addend = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < fma_iterations; ++i)
#pragma GCC unroll 16
    for (int c = 0; c < fma_chains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], multiplier, addend);
  __m512 total = acc[0];
  for (int c = 1; c < fma_chains; ++c) total = _mm512_add_ps(total, acc[c]);
  return _mm512_cvtss_f32(total);
}

// Independent chains of VDPBF16PS: each instruction 16 lanes x 2 products x 2 FLOPs.
__attribute__((target("avx512f,avx512bf16"))) float run_bf16_dot_chains() {
  __m512 acc[fma_chains];
#pragma GCC unroll 16
  for (int c = 0; c < fma_chains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.999f), _mm512_set1_ps(1e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(0.5f));
  for (int64_t i = 0; i < fma_iterations; ++i)
#pragma GCC unroll 16
    for (int c = 0; c < fma_chains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  __m512 total = acc[0];
  for (int c = 1; c < fma_chains; ++c) total = _mm512_add_ps(total, acc[c]);
  return _mm512_cvtss_f32(total);
}

// Independent chains of VPDPBUSD: each instruction 16 lanes x 4 byte products x 2 ops.
__attribute__((target("avx512f,avx512vnni"))) float run_int8_dot_chains() {
  __m512i acc[fma_chains];
#pragma GCC unroll 16
  for (int c = 0; c < fma_chains; ++c) acc[c] = _mm512_set1_epi32(c);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < fma_iterations; ++i)
#pragma GCC unroll 16
    for (int c = 0; c < fma_chains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
  __m512i total = acc[0];
  for (int c = 1; c < fma_chains; ++c) total = _mm512_add_epi32(total, acc[c]);
  return static_cast<float>(_mm512_cvtsi512_si32(total));
}

// The best of three passes of `chains` on every thread of a pool of `threads`, in
// GFLOP/s, where one call does `flops_per_call` FLOPs.
template <typename Chains>
double best_gflops(int threads, double flops_per_call, Chains chains) {
  ThreadPool pool(threads);
  volatile float sink = 0;
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    pool.run(pool.threads(), [&](int64_t) { sink = sink + chains(); });
    best = std::max(best, flops_per_call * pool.threads() / seconds_since(start) / 1e9);
  }
  return best;
}

}  // namespace

double measure_bf16_dot_peak_gflops(int threads) {
  if (avx512_bf16_cpu_kernels() == nullptr) return 0;
  return best_gflops(threads, 2.0 * 2 * 16 * fma_chains * static_cast<double>(fma_iterations), run_bf16_dot_chains);
}

double measure_int8_dot_peak_gops(int threads) {
  if (!avx512_vnni::cpu_runs_vnni()) return 0;
  return best_gflops(threads, 2.0 * 4 * 16 * fma_chains * static_cast<double>(fma_iterations), run_int8_dot_chains);
}

double measure_amx_bf16_peak_gflops(int threads) {
  if (amx_cpu_kernels() == nullptr) return 0;
  // Four instructions an iteration, each 16 cycles at best on Sapphire Rapids: a pass
  // of ~0.1 s there, as the vector probes'.
  constexpr int64_t iterations = 5'000'000;
  return best_gflops(threads, 2.0 * 16 * 16 * 32 * 4 * static_cast<double>(iterations),
                     [] { return run_amx_bf16_tile_chains(iterations); });
}

double measure_fma_peak_gflops(int threads) {
  if (!has_avx2_fma()) return 0;
  const bool wide = cpu_has_avx512();
  return best_gflops(threads, 2.0 * (wide ? 16 : 8) * fma_chains * static_cast<double>(fma_iterations),
                     [wide] { return wide ? run_fma_chains_avx512() : run_fma_chains_avx2(); });
}

}  // namespace shardlm::backends::cpu
