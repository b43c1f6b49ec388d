#pragma once
// The two physical limits a CPU kernel is measured against: how fast memory streams
// into the cores (decode reads every weight once per token) and how many f32 FMAs the
// cores retire (prefill is matrix work). `shardlm bench` and bench/roofline report
// kernel speed as a share of these, measured on the machine itself.

namespace shardlm::backends::cpu {

// GB/s of reading a 1 GiB buffer (in huge pages where granted) with `threads` threads
// (best of a few passes).
double measure_read_bandwidth_gbs(int threads);
// GFLOP/s (2 per FMA) of 8-lane f32 FMAs on `threads` threads: the peak the AVX2 kernels
// can reach. 0 when the CPU lacks AVX2/FMA.
double measure_fma_peak_gflops(int threads);

}  // namespace shardlm::backends::cpu
