#!/usr/bin/env bash
# Tensor parallelism across two hosts: network namespaces joined by a veth pair
# (netns_hosts.sh), Open MPI over TCP alone (no shared memory), started with
# `shardlm launch --hosts`. Generations at tp 2 (one rank a host) and tp 4 (two a host)
# equal tp 1; each fault ends the whole job within 30 s naming the rank and its host,
# with a non-zero status, no process left on either host and no half-written output.
# Usage: test_multi_host.sh SHARDLM TEST_DATA_DIR   (exit 77: skipped, namespaces cannot be made)
set -uo pipefail
shardlm=$1
data=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
# shellcheck source=netns_hosts.sh
source "$here/netns_hosts.sh"
if ! netns_up "$work"; then
  echo "SKIPPED: two test hosts cannot be made here (the message above says why)"
  rm -rf "$work"
  exit 77
fi
trap 'netns_down; rm -rf "$work"' EXIT
# shellcheck source=../checks.sh
source "$here/../checks.sh"

launch() {  # launch NPROC_PER_NODE COMMAND...: from host node-a, over both hosts
  local nproc=$1
  shift
  on_host node-a "$shardlm" launch --hosts node-a,node-b --nproc-per-node "$nproc" --mca "btl=tcp,self" \
    --mca "plm_rsh_agent=$(netns_agent)" -- "$@"
}

# --- correctness: stories260K at tp 2 and 4, compiled and eager; each fixture at tp 4 -------
# What crossing hosts adds is the transport and two ranks a host, the same for every
# architecture; each one's split is checked at tp 2 and 4, both modes, within one host
# (tensor_parallel_N_ranks), so here a fixture crosses once. gemma3-tiny-bf16 is
# gemma3-tiny's weights rounded: across hosts it adds time, not a case.
models=(embedded:stories260K)
for dir in "$data"/fixtures/*/; do [[ $dir == */gemma3-tiny-bf16/ ]] || models+=("${dir%/}"); done
ids=(--input-ids 1,5,9,13,17,21,25,29 -n 12 --greedy --output ids)
for model in "${models[@]}"; do
  name=$(basename "$model")
  "$shardlm" generate -m "$model" "${ids[@]}" >"$work/$name.tp1" 2>"$work/$name.tp1.err"
  check "$name at tp 1 generates" test -s "$work/$name.tp1"
  for nproc in 1 2; do
    tp=$((2 * nproc))
    for mode in compiled eager; do
      [[ $model == embedded:* || ($tp == 4 && $mode == compiled) ]] || continue
      flags=()
      [ "$mode" = eager ] && flags=(--no-compile)
      out="$work/$name.tp$tp.$mode"
      launch "$nproc" shardlm generate -m "$model" --tp-size "$tp" "${flags[@]}" "${ids[@]}" >"$out" 2>"$out.err"
      check "$name at tp $tp across two hosts, $mode, equals tp 1 ($(tr -d '\n' <"$out"))" \
        cmp -s "$work/$name.tp1" "$out"
    done
  done
done

# --- faults ----------------------------------------------------------------------------
job=(shardlm generate --tp-size 2 --prompt "Once upon a time" -n 60 --greedy --output json)

wait_for_text() {  # FILE TEXT SECONDS
  local deadline=$((SECONDS + $3))
  until grep -qF -- "$2" "$1" 2>/dev/null; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.1
  done
}

rank_on_host_b() {  # the pid of the shardlm rank running on node-b
  local pid
  for pid in $(ip netns pids "${netns_names[1]}"); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = shardlm ] && echo "$pid" && return
  done
}

# Waits for the job started last (pid $job_pid) and checks how it ended: STATUS_FILE gets
# its status; prints the seconds from $fault_at to its end and to no process being left.
finish_job() {
  local name=$1 pattern=$2
  wait "$job_pid"
  local status=$? ended=$(date +%s.%N) clear_after=""
  for _ in $(seq 1 100); do
    if [ -z "$(netns_pids)" ]; then clear_after=$(date +%s.%N); break; fi
    sleep 0.1
  done
  local took failures_before=$failures
  took=$(echo "$ended - $fault_at" | bc)
  echo "$name: job ended $took s after the fault, status $status"
  check "$name ends the job with a non-zero status" test "$status" -ne 0
  check "$name ends the job within 30 s ($took s)" test "$(echo "$took <= 30" | bc)" -eq 1
  check "$name names the rank and its host" contains "$work/$name.err" "$pattern"
  check "$name leaves no shardlm or orted process on either host" test -n "$clear_after"
  check "$name leaves no half-written output" test ! -s "$work/$name.json"
  if [ "$failures" -ne "$failures_before" ]; then  # the job's own words, for whoever reads the log
    echo "--- $name: the job's stderr (last 40 lines) ---"
    tail -n 40 "$work/$name.err"
    echo "--- $name: its stdout (first 20 lines) ---"
    head -n 20 "$work/$name.json"
  fi
  netns_down_stragglers
}

netns_down_stragglers() {  # a failed check above must not spill into the next case
  local pid
  for pid in $(netns_pids); do kill -9 "$pid" 2>/dev/null; done
}

# A rank killed (SIGKILL) mid-generation: rank 1 stalls at step 4 so that it is surely
# mid-generation when the signal comes.
SHARDLM_INJECT_FAULT=1:4:delay=10 launch 1 "${job[@]}" >"$work/killed.json" 2>"$work/killed.err" &
job_pid=$!
check "killed: rank 1 reaches step 4" wait_for_text "$work/killed.err" "injected delay" 30
victim=$(rank_on_host_b)
fault_at=$(date +%s.%N)
kill -9 "$victim"
finish_job killed "process rank 1 with PID $victim on node node-b exited on signal 9"

# A rank that raises an error mid-generation.
fault_at=$(date +%s.%N)
SHARDLM_INJECT_FAULT=1:4:error launch 1 "${job[@]}" >"$work/error.json" 2>"$work/error.err" &
job_pid=$!
finish_job error "error on rank 1 (node-b) of 2: injected fault"

# The link between the hosts dropped mid-generation (and left down): the daemons' probes
# notice the silence and end the job.
SHARDLM_INJECT_FAULT=1:4:delay=2 launch 1 "${job[@]}" >"$work/link.json" 2>"$work/link.err" &
job_pid=$!
check "link: rank 1 reaches step 4" wait_for_text "$work/link.err" "injected delay" 30
fault_at=$(date +%s.%N)
netns_link down
finish_job link "lost contact with host node-b (rank 1)"
check "link: the link comes back up" netns_link up

# A host that stops mid-generation while the link stays up: the other rank's collective
# watchdog ends the job (a short --collective-timeout so the test waits 5 s, not 20).
fault_at=$(date +%s.%N)
SHARDLM_INJECT_FAULT=1:4:delay=120 launch 1 "${job[@]}" --collective-timeout 5 >"$work/stalled.json" \
  2>"$work/stalled.err" &
job_pid=$!
finish_job stalled "rank 0 (node-a) of 2: MPI_Allreduce has waited 5 s for rank 1 (node-b)"

# One host's checkpoint lacks a shard (each host reads the directory named after it).
python3 "$here/split_safetensors.py" "$data/fixtures/qwen3-tiny" "$work/ckpt-node-a"
cp -r "$work/ckpt-node-a" "$work/ckpt-node-b"
rm "$work/ckpt-node-b/model-00002-of-00002.safetensors"
fault_at=$(date +%s.%N)
launch 1 bash -c "exec '$shardlm' generate --tp-size 2 -m '$work/ckpt-'\$(hostname) --input-ids 1,2,3 -n 4 --output json" \
  >"$work/shard.json" 2>"$work/shard.err" &
job_pid=$!
finish_job shard "rank 1 (node-b): "
check "... and the missing shard" contains "$work/shard.err" "model-00002-of-00002.safetensors"

echo "$failures failure(s)"
exit $((failures > 0))
