#!/usr/bin/env bash
# Runs a test binary with the CPU kernel table ISA forced (SHARDLM_CPU_KERNELS), or
# reports a skip (77) where this CPU does not run that table.
# Usage: with_kernel_table.sh ISA SHARDLM TEST_BINARY [ARGS...]
set -uo pipefail
isa=$1
shardlm=$2
shift 2
tables=$("$shardlm" devices | sed -n 's/.*CPU kernels [a-z0-9_]* (of \(.*\)).*/\1/p')
if ! tr -d ' ' <<<"$tables" | tr ',' '\n' | grep -qx "$isa"; then
  echo "skipped: this CPU runs the kernel tables ${tables:-?}, not $isa"
  exit 77
fi
SHARDLM_CPU_KERNELS=$isa exec "$@"
