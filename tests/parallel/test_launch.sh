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

"$shardlm" generate --tp-size 2 "${prompt[@]}" >"$work/mismatch.txt" 2>"$work/mismatch.err"
status=$?
check "tp_size without its processes fails" test $status -eq 1
check "... saying how to start them" contains "$work/mismatch.err" "tp_size is 2 but this job has 1 process"

# Each rank of a launch sees one GPU: the one of its local rank, as CUDA_VISIBLE_DEVICES listed them.
CUDA_VISIBLE_DEVICES=4,6 "$shardlm" launch --nproc-per-node 2 -- shardlm devices >"$work/devices.txt" 2>/dev/null
check "launch gives local rank 0 the first listed GPU" contains "$work/devices.txt" "CUDA_VISIBLE_DEVICES=4"
check "... and local rank 1 the second" contains "$work/devices.txt" "CUDA_VISIBLE_DEVICES=6"
check "... and neither sees both" not_contains "$work/devices.txt" "CUDA_VISIBLE_DEVICES=4,6"

# Rank 1's host lacks the weights file.
mkdir -p "$work/rank0" "$work/rank1"
cp "$data"/fixtures/qwen3-tiny/* "$work/rank0/"
cp "$data"/fixtures/qwen3-tiny/config.json "$work/rank1/"
start=$(date +%s)
"$shardlm" launch --nproc-per-node 2 -- bash -c \
  "exec '$shardlm' generate --tp-size 2 -m '$work/rank'\$OMPI_COMM_WORLD_RANK --input-ids 1,2,3 -n 4 --output ids" \
  >"$work/broken.txt" 2>"$work/broken.err"
status=$?
elapsed=$(($(date +%s) - start))
check "a rank that cannot load fails the job" test $status -ne 0
check "... with that rank's message" contains "$work/broken.err" "rank 1: "
check "... within 10 seconds ($elapsed s)" test "$elapsed" -le 10
check "... printing no output" test ! -s "$work/broken.txt"

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
