#!/usr/bin/env bash
# The CPU figures of docs/PERFORMANCE.md in one run: a random-weight model of
# Qwen3-0.6B's shape (bench/qwen3-0.6b-config.json), pp512 and tg128 (after a 64-token
# prompt) for f32, bf16, f16 and int8 weights at 1 and 2 threads, each against the
# roofline measured at the start of the same run. Prints one JSON object per line.
#   bash bench/cpu_matrix.sh [work-dir] [repetitions]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/qwen3_shape_model.sh
for threads in 1 2; do
  limits=$(build/bench/roofline "$threads")
  echo "$limits"
  bandwidth=$(echo "$limits" | sed 's/.*"read_bandwidth_gbs": \([0-9.]*\).*/\1/')
  peak=$(echo "$limits" | sed 's/.*"fma_peak_gflops": \([0-9.]*\).*/\1/')
  for weights in "--dtype float32" "--dtype bfloat16" "--dtype float16" "--quantize int8"; do
    "$shardlm" bench --model "$model" $weights --threads "$threads" -p 512 -n 128 --tg-prompt 64 \
      -r "$repetitions" --bandwidth-gbs "$bandwidth" --fma-peak-gflops "$peak" --output json
  done
done
