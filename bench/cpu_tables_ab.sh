#!/usr/bin/env bash
# The CPU matmul kernel tables in turns on one machine and one build: for each table this
# CPU runs (SHARDLM_CPU_KERNELS: avx2, avx512, amx) and for bf16 and f16 weights, pp512 and
# tg128 (after a 64-token prompt) at two threads on the Qwen3-0.6B-shaped bench model, in
# two rounds so that a drifting VM shows in the pairs. Prints the UTC time before each run
# and one JSON object per run (`cpu_kernels` names the table).
#   bash bench/cpu_tables_ab.sh [work-dir] [repetitions]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/qwen3_shape_model.sh
tables=$("$shardlm" devices | sed -n 's/.*CPU kernels [a-z0-9_]* (of \(.*\))$/\1/p' | tr -d ',')
for round in 1 2; do
  for table in $tables; do
    [ "$table" = portable ] && continue
    for weights in "" "--dtype float16"; do
      date -u +%H:%M
      SHARDLM_CPU_KERNELS=$table "$shardlm" bench --model "$model" $weights --threads 2 -p 512 -n 128 \
        --tg-prompt 64 -r "$repetitions" --output json
    done
  done
done
