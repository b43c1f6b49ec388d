#!/usr/bin/env bash
# The CPU matrix of docs/performance-log/ in one run: a random-weight model of
# Qwen3-0.6B's shape (bench/qwen3-0.6b-config.json), pp512 and tg128 (after a 64-token
# prompt) for f32, bf16 (copied into huge pages, and kept memory-mapped), f16 and int8
# weights at 1 and 2 threads. `shardlm bench` probes the read bandwidth and FMA peak
# before and after each repetition and scores it against their mean, then (--paired-probe)
# runs tg once more with a probe pass after every decode step; bench/roofline's figure is
# printed first for reference. Prints one JSON object per line.
#   bash bench/cpu_matrix.sh [work-dir] [repetitions]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/qwen3_shape_model.sh
for threads in 1 2; do
  build/bench/roofline "$threads"
  for weights in "--dtype float32" "" "--mmap-weights" "--dtype float16" "--quantize int8"; do
    "$shardlm" bench --model "$model" $weights --threads "$threads" -p 512 -n 128 --tg-prompt 64 \
      -r "$repetitions" --paired-probe --output json
  done
done
