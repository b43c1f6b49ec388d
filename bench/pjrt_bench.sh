#!/usr/bin/env bash
# pp512 and tg128 of Qwen3-0.6B's shape (random float32 weights: XLA:CPU converts bf16
# weights to f32 on every batch-1 call) on the pjrt backend with the XLA:CPU plugin, in
# turns with --device cpu on the same model, one JSON line each (`shardlm bench`), plus
# the compile and compile-cache load times of the two programs a generation needs.
# Usage: bash bench/pjrt_bench.sh [work directory] [turns]   (docs/PERFORMANCE.md#pjrt)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/shardlm-bench}
turns=${2:-2}
shardlm=build/bin/shardlm
cmake --build build --target shardlm_cli >/dev/null
model="$work/qwen3-0.6b-f32"
mkdir -p "$work"
[ -f "$model/model.safetensors" ] ||
  "$shardlm" random-model --config bench/qwen3-0.6b-config.json --output "$model" --dtype float32 >&2
cache="$work/pjrt-compile-cache"
rm -rf "$cache"
echo "compile (nothing cached), then load from the compile cache:"
"$shardlm" compile --device pjrt --model "$model" --compile-cache "$cache" -b 1 -n 128
"$shardlm" compile --device pjrt --model "$model" --compile-cache "$cache" -b 1 -n 128
for turn in $(seq "$turns"); do
  for device in pjrt cpu; do
    echo "turn $turn, --device $device:"
    "$shardlm" bench --device "$device" --model "$model" --compile-cache "$cache" -p 512 -n 128 --tg-prompt 64 \
      -r 1 --output json
  done
done
