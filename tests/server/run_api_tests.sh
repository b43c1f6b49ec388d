#!/usr/bin/env bash
# The OpenAI API tests (test_openai_api.py): the official `openai` client and plain HTTP
# against `shardlm serve` on 127.0.0.1. Makes, once, a venv with the pinned client
# (requirements.txt, hashes checked) and a random-weight Qwen3-shaped model with the real
# Qwen3 tokenizer and chat template. Exit 77 (skipped) only when PyPI cannot be reached.
# Usage: run_api_tests.sh SHARDLM_BIN BUILD_DIR [pytest args]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
shardlm=$(realpath "$1") build=$(cd "$2" && pwd)
shift 2
venv=$build/tests/server/venv
if [ ! -f "$venv/complete" ]; then
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >&2; then
    echo "run_api_tests: python3 -m venv failed (install python3-venv)" >&2
    exit 1
  fi
  if ! "$venv/bin/pip" install -q --no-deps --require-hashes -r "$here/requirements.txt" >&2; then
    echo "run_api_tests: SKIPPED: could not install the pinned test client from PyPI" >&2
    rm -rf "$venv"
    exit 77
  fi
  touch "$venv/complete"
fi
model=$build/tests/server/model
if [ ! -f "$model/tokenizer.json" ]; then
  rm -rf "$model"
  "$shardlm" random-model -c "$here/qwen3_serve_config.json" -o "$model.partial" --dtype bfloat16 --seed 7 >&2
  cp "$build/tests/tokenizer/data/qwen3/tokenizer.json" "$build/tests/tokenizer/data/qwen3/tokenizer_config.json" \
    "$model.partial/"
  mv "$model.partial" "$model"
fi
export SHARDLM_BIN=$shardlm SHARDLM_SERVE_MODEL=$model
export SHARDLM_CHAT_GOLDENS=$here/../data/chat_templates/goldens.json
cd "$here"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider test_openai_api.py "$@"
