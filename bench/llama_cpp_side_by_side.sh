#!/bin/bash
# llama.cpp's llama-bench and `shardlm bench` in turns on the same random-weight model of
# Qwen3-0.6B's shape, at two threads: pp512, and tg128 after a 64-token prompt (llama-bench
# -d 64; DEPTH below), for bf16, f16 and 8-bit weights (llama.cpp's Q8_0 against --quantize int8). On a
# VM whose speed drifts by the minute, only figures taken minutes apart compare.
#   bash bench/llama_cpp_side_by_side.sh LLAMA_BIN [WORK_DIR (/tmp/shardlm-bench)] [ROUNDS (2)] [DEPTH (64)]
# LLAMA_BIN holds llama-bench and llama-quantize, built by hand (docs/PERFORMANCE.md says
# how); bench/llama_cpp_gguf.py needs Python's gguf and numpy. Nothing here runs in CI.
# DEPTH (64): the prompt before tg128, for decode over a longer cache (e.g. 1024).
set -euo pipefail
llama_bin=${1:?usage: llama_cpp_side_by_side.sh LLAMA_BIN [WORK_DIR] [ROUNDS] [DEPTH]}
rounds=${3:-2}
depth=${4:-64}
[[ $depth =~ ^[1-9][0-9]*$ ]] || { echo "DEPTH must be a positive number of tokens, not '$depth'" >&2; exit 2; }
cd "$(dirname "$0")/.."
for tool in llama-bench llama-quantize; do
  [ -x "$llama_bin/$tool" ] || { echo "no $tool in $llama_bin" >&2; exit 2; }
done
source bench/qwen3_shape_model.sh "${2:-/tmp/shardlm-bench}" 3
gguf="$work/qwen3-0.6b"
# Each file is written under a temporary name first: an interrupted run leaves none half made.
if [ ! -f "$gguf-bf16.gguf" ]; then
  python3 bench/llama_cpp_gguf.py "$model" "$gguf-bf16.gguf.partial"
  mv "$gguf-bf16.gguf.partial" "$gguf-bf16.gguf"
fi
for type in f16 q8_0 q4_0 q4_k_m; do
  [ -f "$gguf-$type.gguf" ] && continue
  "$llama_bin/llama-quantize" "$gguf-bf16.gguf" "$gguf-$type.gguf.partial" "${type^^}" 2 >"$gguf-$type.log" 2>&1 ||
    { cat "$gguf-$type.log" >&2; exit 1; }
  mv "$gguf-$type.gguf.partial" "$gguf-$type.gguf"
done

# tok/s and its spread from llama-bench's JSON: "mean stddev".
llama() {
  local result
  result=$("$llama_bin/llama-bench" -m "$gguf-$1.gguf" -t 2 -r "$repetitions" -o json "${@:2}" 2>"$work/llama-bench.log") ||
    { echo "llama-bench failed on $gguf-$1.gguf ($*): see $work/llama-bench.log" >&2; exit 1; }
  python3 -c 'import json, sys; d = json.load(sys.stdin)[0]; print("%.2f %.2f" % (d["avg_ts"], d["stddev_ts"]))' <<<"$result"
}

echo "| time (UTC) | weights | llama.cpp pp512 | shardlm pp512 | ratio | llama.cpp tg128 @ $depth | shardlm tg128 @ $depth | ratio | shardlm pp % of its instruction's peak | shardlm tg % of roofline |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for round in $(seq "$rounds"); do
  for type in bf16 f16 q8_0 q4_0 q4_k_m; do
    case $type in
      bf16) options=() ;; f16) options=(--dtype float16) ;; q8_0) options=(--quantize int8) ;;
      q4_0 | q4_k_m) options=(--quantize int4) ;;  # shardlm's int4 against each of llama.cpp's 4-bit types
    esac
    read -r llama_pp llama_pp_spread < <(llama "$type" -p 512 -n 0)
    read -r llama_tg llama_tg_spread < <(llama "$type" -p 0 -n 128 -d "$depth")
    "$shardlm" bench --model "$model" "${options[@]}" --threads 2 -p 512 -n 128 --tg-prompt "$depth" -r "$repetitions" \
      --output json 2>/dev/null | grep '^{' | tail -1 |
      python3 -c '
import json, sys
d = json.load(sys.stdin)
when, kind, lp, lps, lt, lts = sys.argv[1:]
lp, lps, lt, lts = map(float, (lp, lps, lt, lts))
pp, pps, tg, tgs = d["pp_tok_s"], d["pp_tok_s_stddev"], d["tg_tok_s"], d["tg_tok_s_stddev"]
pp_share, peak = d["pp_percent_of_fma_peak"], d["fma_peak_gflops"]
unit = "G int8 ops/s" if "int8" in d.get("pp_peak_instruction", "") else "GFLOP/s"
tg_share, bandwidth = d["tg_percent_of_roofline"], d["read_bandwidth_gbs"]
print(f"| {when} | {kind} | {lp:.1f} ± {lps:.1f} | {pp:.1f} ± {pps:.1f} | {pp / lp:.2f} "
      f"| {lt:.2f} ± {lts:.2f} | {tg:.2f} ± {tgs:.2f} | {tg / lt:.2f} "
      f"| {pp_share:.1f} (of {peak:.0f} {unit}) | {tg_share:.1f} (of {bandwidth:.1f} GB/s) |")
' "$(date -u +%H:%M)" "$type" "$llama_pp" "$llama_pp_spread" "$llama_tg" "$llama_tg_spread"
  done
done
