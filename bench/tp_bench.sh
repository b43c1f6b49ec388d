#!/usr/bin/env bash
# Tensor parallelism on one host, the figures of docs/PERFORMANCE.md: decode (tg) of a
# random-weight model of Qwen3-0.6B's shape (bench/qwen3-0.6b-config.json, bfloat16),
# TP=1 with 2 threads against TP=2 with 1 thread per rank (same cores), with the
# all-reduce/all-gather time per token that TP=2 spends. Prints one JSON object per run.
#   bash bench/tp_bench.sh [work-dir] [repetitions]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/qwen3_shape_model.sh
limits=$(build/bench/roofline 2)
echo "$limits"
bandwidth=$(echo "$limits" | sed 's/.*"read_bandwidth_gbs": \([0-9.]*\).*/\1/')
common=(--model "$model" -p 0 -n 64 --tg-prompt 64 -r "$repetitions" --bandwidth-gbs "$bandwidth"
        --output json)
"$shardlm" bench "${common[@]}" --threads 2
"$shardlm" launch --nproc-per-node 2 -- shardlm bench "${common[@]}" --threads 1 --tp-size 2 2>/dev/null
