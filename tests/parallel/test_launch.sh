#!/usr/bin/env bash
# `shardlm launch` and plain mpirun end to end: rank 0 alone prints the text, which equals
# the single-process text; failures end every rank promptly with the message.
# Usage: test_launch.sh SHARDLM TEST_DATA_DIR
set -uo pipefail
shardlm=$1
data=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../checks.sh
source "$(dirname "$0")/../checks.sh"

prompt=(--prompt "Once upon a time" -n 24 --greedy)
"$shardlm" generate "${prompt[@]}" >"$work/alone.txt" 2>/dev/null
check "single-process generation prints text" test -s "$work/alone.txt"

"$shardlm" launch --nproc-per-node 2 -- shardlm generate --tp-size 2 --verbose "${prompt[@]}" \
  >"$work/launch.txt" 2>"$work/launch.err"
check "launch exits 0" test $? -eq 0
check "launch prints the single-process text exactly once" cmp -s "$work/alone.txt" "$work/launch.txt"
check "compile keys carry the tp rank and size" contains "$work/launch.err" "tp=0/2"

# A plain mpirun works too (Open MPI's flags for root given by environment).
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --bind-to none \
  "$shardlm" generate --tp-size 2 "${prompt[@]}" >"$work/mpirun.txt" 2>/dev/null
check "plain mpirun prints the same text" cmp -s "$work/alone.txt" "$work/mpirun.txt"

"$shardlm" launch --dry-run --nproc-per-node 4 --hosts a,b -- shardlm generate >"$work/dry.txt"
check "launch --dry-run spreads ranks over hosts" contains "$work/dry.txt" "-np 8 --host a:4,b:4"
check "... and has lost hosts noticed within seconds" contains "$work/dry.txt" "--mca oob_tcp_keepalive_time 5"

# Options taking lists stop at `--`, so the command keeps its own options.
printf 'node1 slots=4\n# a comment\n\nnode2\n' >"$work/hostfile"
SHARDLM_X=1 "$shardlm" launch --dry-run --hostfile "$work/hostfile" --network-interface eth1 --mca btl=tcp,self -- \
  shardlm generate --tp-size 2 -n 3 >"$work/dry2.txt"
check "launch --hostfile reads the hosts" contains "$work/dry2.txt" "-np 2 --host node1:1,node2:1"
check "... --network-interface picks the interface for both MPI and its daemons" \
  contains "$work/dry2.txt" "--mca btl_tcp_if_include eth1 --mca oob_tcp_if_include eth1"
check "... --mca passes a parameter" contains "$work/dry2.txt" "--mca btl tcp,self"
check "... SHARDLM_ variables reach every host" contains "$work/dry2.txt" "-x SHARDLM_X"
check "... and the command keeps its options" contains "$work/dry2.txt" "generate --tp-size 2 -n 3"
"$shardlm" launch --dry-run --mca btl -- shardlm generate >/dev/null 2>"$work/mca.err"
check "--mca without a value fails" contains "$work/mca.err" "--mca 'btl' is not KEY=VALUE"

"$shardlm" generate --tp-size 2 "${prompt[@]}" >"$work/mismatch.txt" 2>"$work/mismatch.err"
status=$?
check "tp_size without its processes fails" test $status -eq 1
check "... saying how to start them" contains "$work/mismatch.err" "tp_size is 2 but this job has 1 process"

# Each rank of a launch sees one GPU: the one of its local rank, as CUDA_VISIBLE_DEVICES listed them.
CUDA_VISIBLE_DEVICES=4,6 "$shardlm" launch --nproc-per-node 2 -- shardlm devices >"$work/devices.txt" 2>/dev/null
check "launch gives local rank 0 the first listed GPU" contains "$work/devices.txt" "CUDA_VISIBLE_DEVICES=4"
check "... and local rank 1 the second" contains "$work/devices.txt" "CUDA_VISIBLE_DEVICES=6"
check "... and neither sees both" not_contains "$work/devices.txt" "CUDA_VISIBLE_DEVICES=4,6"

# run_failing NAME SECONDS MESSAGE COMMAND...: COMMAND (a job that must fail) ends with a
# non-zero status within SECONDS, its errors holding MESSAGE, and no output.
run_failing() {
  local name=$1 limit=$2 message=$3 start status elapsed
  shift 3
  start=$(date +%s)
  "$@" >"$work/$name.out" 2>"$work/$name.err"
  status=$?
  elapsed=$(($(date +%s) - start))
  check "$name: the job fails" test $status -ne 0
  check "... saying '$message'" contains "$work/$name.err" "$message"
  check "... within $limit seconds ($elapsed s)" test "$elapsed" -le "$limit"
  check "... printing no output" test ! -s "$work/$name.out"
}

# Rank 1's host lacks the weights file: that rank's message, with its host.
mkdir -p "$work/rank0" "$work/rank1"
cp "$data"/fixtures/qwen3-tiny/* "$work/rank0/"
cp "$data"/fixtures/qwen3-tiny/config.json "$work/rank1/"
run_failing "a rank that cannot load" 10 "rank 1 ($(hostname)): " "$shardlm" launch --nproc-per-node 2 -- bash -c \
  "exec '$shardlm' generate --tp-size 2 -m '$work/rank'\$OMPI_COMM_WORLD_RANK --input-ids 1,2,3 -n 4 --output ids"

# A rank that stalls mid-generation: the other rank's collective watchdog ends the job.
SHARDLM_INJECT_FAULT=1:3:delay=120 run_failing "a stalled rank" 15 "MPI_Allreduce has waited 2 s for rank 1 (" \
  "$shardlm" launch --nproc-per-node 2 -- shardlm generate --tp-size 2 --collective-timeout 2 "${prompt[@]}" \
  --output json

SHARDLM_INJECT_FAULT=one:3:error "$shardlm" generate "${prompt[@]}" >/dev/null 2>"$work/inject.err"
check "a malformed SHARDLM_INJECT_FAULT is refused" contains "$work/inject.err" "is not RANK:STEP:error"
"$shardlm" generate "${prompt[@]}" --collective-timeout -1 >/dev/null 2>"$work/timeout.err"
check "a negative --collective-timeout is refused" test $? -ne 0

echo '{"model.layers.*.mlp.up_proj": "sideways"}' >"$work/plan.json"
"$shardlm" launch --nproc-per-node 2 -- shardlm generate --tp-size 2 --tp-plan "$work/plan.json" "${prompt[@]}" \
  >/dev/null 2>"$work/plan.err"
check "an unknown style fails" test $? -ne 0
check "... listing the valid styles" contains "$work/plan.err" "valid styles: colwise, rowwise"

echo '{"model.layers.*.mlp.upproj": "colwise"}' >"$work/typo.json"
"$shardlm" launch --nproc-per-node 2 -- shardlm generate --tp-size 2 --tp-plan "$work/typo.json" "${prompt[@]}" \
  >"$work/typo.txt" 2>"$work/typo.err"
check "a rule matching nothing is only a warning" cmp -s "$work/alone.txt" "$work/typo.txt"
check "... naming the rule" contains "$work/typo.err" "'model.layers.*.mlp.upproj' matches no weight"

echo "$failures failure(s)"
exit $((failures > 0))
