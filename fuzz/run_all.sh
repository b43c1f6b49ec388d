#!/usr/bin/env bash
# Long fuzzing runs: every harness for SECONDS (default 600), JOBS at a time (default 2),
# from build-sanitize/ (scripts/sanitize.sh builds it). Corpora grow in
# build-sanitize/fuzz/long/<harness>/, findings land in build-sanitize/fuzz/long/findings/.
# Prints one markdown row per harness: executions, executions/s, coverage (covered
# edges of the instrumented total, libFuzzer's features), corpus size, findings.
#   bash fuzz/run_all.sh [SECONDS] [JOBS]
set -uo pipefail
cd "$(dirname "$0")/../build-sanitize/fuzz" || { echo "build build-sanitize first (scripts/sanitize.sh)" >&2; exit 1; }
seconds=${1:-600}
jobs=${2:-2}
harnesses=(safetensors encode tokenizer_json chat_template config decode safetensors_index cli request)
mkdir -p long/findings
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run() {
  local name=$1 extra=()
  [ "$name" = safetensors ] && extra=(-max_len=16384)
  mkdir -p "long/$name"
  ./fuzz_"$name" "${extra[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="long/findings/$name-" "long/$name" seeds/"$name" >"long/$name.log" 2>&1
}
for ((i = 0; i < ${#harnesses[@]}; i += jobs)); do
  for name in "${harnesses[@]:i:jobs}"; do run "$name" & done
  wait
done
echo "| harness | executions | exec/s | covered edges | features | corpus | findings |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for name in "${harnesses[@]}"; do
  log="long/$name.log"
  total=$(grep -a -m1 -o 'Loaded 1 modules *([0-9]* inline' "$log" | grep -o '[0-9]*' | tail -1)
  done_line=$(grep -a 'DONE' "$log" | tail -1)
  [ -n "$done_line" ] || done_line=$(grep -a -E '^#[0-9]+' "$log" | tail -1)
  cov=$(echo "$done_line" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$done_line" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
  corpus=$(echo "$done_line" | sed -n 's/.*corp: \([^ ]*\).*/\1/p')
  units=$(sed -n 's/stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/stat::average_exec_per_sec: *//p' "$log")
  findings=$(ls long/findings | grep -c "^$name-" || true)
  echo "| $name | $units | $rate | $cov of $total | $ft | $corpus | $findings |"
done
