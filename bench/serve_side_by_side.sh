#!/bin/bash
# `shardlm serve` against llama.cpp's llama-server: the same random-weight model of
# Qwen3-0.6B's shape (bf16 weights in both, the real Qwen3 tokenizer), the same number of
# slots, 2 threads each, under the same streaming load (bench/serve_load.py: 256-token
# prompts, 128 tokens out, concurrency 1, 4, 16, 64, the servers alternated), then the time
# to first token of a 1,000-token prompt cold and sharing its prefix. Nothing here runs in CI.
#   bash bench/serve_side_by_side.sh LLAMA_BIN [WORK_DIR (/tmp/shardlm-bench)] [SLOTS (16)] [CONCURRENCY]
# SHARDLM_SERVE_ARGS: more flags for shardlm serve (e.g. --prefill-chunk-size 128).
# LLAMA_BIN holds llama-server, built by hand as docs/PERFORMANCE.md says (with
# -DLLAMA_BUILD_SERVER=ON); bench/llama_cpp_gguf.py needs Python's gguf and numpy.
set -euo pipefail
llama_bin=${1:?usage: serve_side_by_side.sh LLAMA_BIN [WORK_DIR] [SLOTS] [CONCURRENCY]}
slots=${3:-16}
concurrency=${4:-1,4,16,64}
cd "$(dirname "$0")/.."
[ -x "$llama_bin/llama-server" ] || { echo "no llama-server in $llama_bin" >&2; exit 2; }
source bench/qwen3_shape_model.sh "${2:-/tmp/shardlm-bench}" 3
tokenizer_dir=build/tests/tokenizer/data/qwen3
[ -f "$tokenizer_dir/tokenizer.json" ] ||
  { echo "no $tokenizer_dir/tokenizer.json: build the tests (cmake --build build) to unpack it" >&2; exit 2; }

# The bench model beside the tokenizer (its weights linked, not copied).
served="$work/qwen3-0.6b-bf16-with-tokenizer"
mkdir -p "$served"
for file in "$model"/*; do ln -sf "$(realpath "$file")" "$served/"; done
cp "$tokenizer_dir/tokenizer.json" "$tokenizer_dir/tokenizer_config.json" "$served/"
gguf="$work/qwen3-0.6b-bf16-vocab.gguf"
if [ ! -f "$gguf" ]; then
  python3 bench/llama_cpp_gguf.py "$model" "$gguf.partial" "$tokenizer_dir/tokenizer.json"
  mv "$gguf.partial" "$gguf"
fi

# Positions per slot: a 1,000-token prompt and its answer fit.
len=1536
"$shardlm" serve --model "$served" --served-model-name bench --port 8100 --threads 2 --max-num-seqs "$slots" \
  --max-model-len "$len" ${SHARDLM_SERVE_ARGS:-} >"$work/shardlm-serve.out" 2>"$work/shardlm-serve.log" &
shardlm_pid=$!
"$llama_bin/llama-server" -m "$gguf" --port 8101 -t 2 -tb 2 -np "$slots" -c $((slots * len)) \
  >"$work/llama-server.log" 2>&1 &
llama_pid=$!
trap 'kill $shardlm_pid $llama_pid 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 600); do
  grep -q "listening on port" "$work/shardlm-serve.out" 2>/dev/null &&
    curl -sf http://127.0.0.1:8101/health >/dev/null 2>&1 && break
  kill -0 $shardlm_pid 2>/dev/null || { cat "$work/shardlm-serve.log" >&2; exit 1; }
  kill -0 $llama_pid 2>/dev/null || { cat "$work/llama-server.log" >&2; exit 1; }
  sleep 1
done
echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $slots slots each; $(date -u '+%F %H:%M UTC')"
grep -h "compiled .* step shapes\|serving with" "$work/shardlm-serve.log" | sed 's/^/shardlm: /'
python3 bench/serve_load.py --server shardlm=http://127.0.0.1:8100 --server llama.cpp=http://127.0.0.1:8101 \
  --concurrency "$concurrency" --json "$work/serve.json"
