// Prints the machine's memory read bandwidth and the peak of each matrix instruction the
// CPU kernels run (machine_limits.h) as one JSON object; a peak is 0 where the CPU lacks
// its instruction:
//   build/bench/roofline [threads]     (default: one per hardware thread)
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "backends/cpu/machine_limits.h"

int main(int argc, char** argv) {
  namespace cpu = shardlm::backends::cpu;
  const int threads = argc > 1 ? std::atoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) {
    std::fprintf(stderr, "usage: roofline [threads > 0]\n");
    return 2;
  }
  std::printf("{\"threads\": %d, \"read_bandwidth_gbs\": %.2f, \"fma_peak_gflops\": %.2f, "
              "\"bf16_dot_peak_gflops\": %.2f, \"int8_dot_peak_gops\": %.2f, \"amx_bf16_peak_gflops\": %.2f}\n",
              threads, cpu::measure_read_bandwidth_gbs(threads), cpu::measure_fma_peak_gflops(threads),
              cpu::measure_bf16_dot_peak_gflops(threads), cpu::measure_int8_dot_peak_gops(threads),
              cpu::measure_amx_bf16_peak_gflops(threads));
  return 0;
}
