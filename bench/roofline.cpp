// Prints the machine's memory read bandwidth and f32 FMA peak as one JSON object:
//   build/bench/roofline [threads]     (default: one per hardware thread)
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "backends/cpu/machine_limits.h"

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) {
    std::fprintf(stderr, "usage: roofline [threads > 0]\n");
    return 2;
  }
  const double bandwidth = shardlm::backends::cpu::measure_read_bandwidth_gbs(threads);
  const double peak = shardlm::backends::cpu::measure_fma_peak_gflops(threads);
  std::printf("{\"threads\": %d, \"read_bandwidth_gbs\": %.2f, \"fma_peak_gflops\": %.2f}\n", threads, bandwidth, peak);
  return 0;
}
