#!/usr/bin/env bash
# Tensor parallelism, the figures of docs/PERFORMANCE.md: decode (tg) of a random-weight
# model of Qwen3-0.6B's shape (bench/qwen3-0.6b-config.json, bfloat16) on this machine's
# two cores, in turns:
#   tp1        one process, 2 threads
#   tp2-shm    2 ranks on one host, 1 thread each, Open MPI over shared memory
#   tp2-tcp    2 ranks on two hosts (network namespaces joined by veth, as the multi-host
#              test makes them; needs root), Open MPI over TCP only
# with each run's communication time per token and collectives per step, and the cost of
# one collective alone over each transport (build/bench/collective_bench). Prints one
# JSON object per run, prefixed by its name.
#   bash bench/tp_bench.sh [work-dir] [repetitions] [turns]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/qwen3_shape_model.sh
cmake --build build --target collective_bench >/dev/null
collectives=$(realpath build/bench/collective_bench)
turns=${3:-2}
limits=$(build/bench/roofline 2)
echo "limits $limits"
bandwidth=$(echo "$limits" | sed 's/.*"read_bandwidth_gbs": \([0-9.]*\).*/\1/')
common=(--model "$(realpath "$model")" -p 0 -n 64 --tg-prompt 64 -r "$repetitions" --bandwidth-gbs "$bandwidth"
        --output json)
hosts_work=$(mktemp -d)
source tests/parallel/netns_hosts.sh
across_hosts=1
netns_up "$hosts_work" >&2 || across_hosts=0
trap 'netns_down; rm -rf "$hosts_work"' EXIT
binary=$(realpath "$shardlm")
across() {  # COMMAND...: 2 ranks, one on each test host, over TCP alone
  on_host node-a "$binary" launch --hosts node-a,node-b --mca btl=tcp,self --mca "plm_rsh_agent=$(netns_agent)" -- "$@"
}
for turn in $(seq 1 "$turns"); do
  echo "collectives-shm $("$shardlm" launch --nproc-per-node 2 -- "$collectives" 2>/dev/null)"
  [ "$across_hosts" = 1 ] && echo "collectives-tcp $(across "$collectives" 2>/dev/null)"
  echo "tp1 $("$shardlm" bench "${common[@]}" --threads 2)"
  echo "tp2-shm $("$shardlm" launch --nproc-per-node 2 -- shardlm bench "${common[@]}" --threads 1 --tp-size 2 \
    2>/dev/null)"
  if [ "$across_hosts" = 1 ]; then
    echo "tp2-tcp $(across shardlm bench "${common[@]}" --threads 1 --tp-size 2 2>/dev/null)"
  fi
done
