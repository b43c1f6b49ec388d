#!/usr/bin/env bash
# Fetches the XLA:CPU PJRT plugin (a pinned test dependency), sets up, builds, and runs
# the whole test suite, then the same suite under ASan+UBSan
# with each fuzzer run briefly (scripts/sanitize.sh); ends with CTest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch_pjrt_plugin.sh
bash scripts/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
bash scripts/sanitize.sh
