#pragma once
// The physical limits a CPU kernel is measured against: how fast memory streams into
// the cores (decode reads every weight once per token) and how many multiply-adds the
// cores retire with the instruction the prefill kernel uses (f32 FMAs, bf16 or int8 dot
// products, or AMX tiles). `shardlm bench` and bench/roofline report
// kernel speed as a share of these, measured on the machine itself.

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace shardlm::backends::cpu {

// Single timed reads of a 1 GiB buffer (in huge pages where granted), for a caller that
// times them one at a time beside other work (`shardlm bench --paired-probe`). Owns the
// buffer, written once on construction, and its own threads.
class ReadProbe {
 public:
  // Forward streams a thread reads side by side in one pass: how many lines a core keeps
  // in flight depends on them and on how many cores share the memory, so the probe's
  // best figure comes from trying each.
  static constexpr int stream_counts[] = {4, 6, 8};

  explicit ReadProbe(int threads);
  // GB/s of one pass over the buffer, `streams` (one of stream_counts) a thread; 0 when
  // the CPU lacks AVX2.
  double pass_gbs(int streams);
  // The best of two passes at each stream count.
  double best_gbs();

 private:
  Tensor memory_;  // [1 << 28] f32: 1 GiB
  ThreadPool pool_;
};

// ReadProbe(threads).best_gbs(): a fresh 1 GiB buffer, faulted in, for one measurement.
double measure_read_bandwidth_gbs(int threads);
// GFLOP/s (2 per FMA) of the widest f32 FMAs this CPU runs (16 lanes where it has
// AVX-512, else 8) on `threads` threads: the machine's peak, whichever matmul table
// runs. 0 when the CPU lacks AVX2/FMA.
double measure_fma_peak_gflops(int threads);
// GFLOP/s (4 per bf16 pair) of VDPBF16PS, the AVX512-BF16 table's prefill instruction,
// on `threads` threads; 0 where the CPU lacks AVX512_BF16.
double measure_bf16_dot_peak_gflops(int threads);
// G ops/s (2 per byte product) of VPDPBUSD, the int8 prefill instruction of the AVX512-BF16
// table (avx512_vnni_gemm.h), on `threads` threads; 0 where the CPU lacks AVX512_VNNI.
double measure_int8_dot_peak_gops(int threads);
// GFLOP/s (2 per multiply-add; 16 x 16 x 32 of them an instruction) of TDPBF16PS on the AMX
// tiles, the AMX table's prefill instruction, on `threads` threads; 0 where the CPU or the
// OS gives no AMX-BF16.
double measure_amx_bf16_peak_gflops(int threads);

}  // namespace shardlm::backends::cpu
