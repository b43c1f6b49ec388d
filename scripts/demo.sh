#!/usr/bin/env bash
# Sets up, builds, and generates a story with the built-in stories260K model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/bin/shardlm generate --prompt "Once upon a time" --max-new-tokens 200
