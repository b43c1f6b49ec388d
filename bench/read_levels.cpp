// One thread's read speed by the size of what it reads again and again: where the L2,
// the L3 share this VM grants and memory begin, and what one core alone can pull from
// each. Eight streams read side by side (the read probe's pattern), best of the repeats.
//   build/bench/read_levels [streams (8)]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

__attribute__((target("avx2"))) double best_gbs(const float* buffer, size_t floats, int streams) {
  const size_t per_stream = floats / static_cast<size_t>(streams) / 16 * 16;
  const size_t bytes = per_stream * static_cast<size_t>(streams) * sizeof(float);
  const int repeats = static_cast<int>(std::clamp<size_t>((size_t{2} << 30) / bytes, 3, 2000));
  __m256 sum = _mm256_setzero_ps();
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < per_stream; i += 16)
      for (int s = 0; s < streams; ++s) {
        const float* p = buffer + static_cast<size_t>(s) * per_stream + i;
        sum = _mm256_add_ps(sum, _mm256_add_ps(_mm256_load_ps(p), _mm256_load_ps(p + 8)));
      }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) best = std::max(best, static_cast<double>(bytes) / seconds / 1e9);  // the first warms the caches
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  volatile float sink = lanes[0];
  (void)sink;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int streams = argc > 1 ? std::atoi(argv[1]) : 8;
  if (streams < 1 || streams > 64 || !__builtin_cpu_supports("avx2")) {
    std::fprintf(stderr, "usage: read_levels [streams, 1 - 64] (needs AVX2)\n");
    return 2;
  }
  std::printf("one thread, %d streams; size, best GB/s\n", streams);
  for (size_t kb = 256; kb <= (size_t{1} << 20); kb *= 2) {
    std::vector<float> memory(kb * 1024 / sizeof(float) + 8, 1.0f);
    auto* aligned = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(memory.data()) + 31) / 32 * 32);
    std::printf("%8zu KB  %6.1f\n", kb, best_gbs(aligned, kb * 1024 / sizeof(float), streams));
  }
  return 0;
}
