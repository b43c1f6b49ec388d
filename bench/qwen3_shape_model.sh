# Sourced by the bench scripts: builds the CLI and the roofline probe, and writes (once) a
# random-weight bfloat16 model of Qwen3-0.6B's shape (bench/qwen3-0.6b-config.json).
# Sets: work (the directory, $1 or /tmp/shardlm-bench), repetitions ($2 or 3), shardlm,
# and model (the checkpoint directory).
work=${1:-/tmp/shardlm-bench}
repetitions=${2:-3}
shardlm=build/bin/shardlm
cmake --build build --target shardlm_cli roofline >/dev/null
mkdir -p "$work"
model="$work/qwen3-0.6b-bf16"
[ -f "$model/model.safetensors" ] ||
  "$shardlm" random-model --config bench/qwen3-0.6b-config.json --output "$model" --dtype bf16 >&2
