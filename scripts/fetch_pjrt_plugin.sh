#!/usr/bin/env bash
# Fetches the PJRT plugins the tests use (test dependencies: the demo and the library do
# not need them) from PyPI, each with its version and sha256 pinned, unzipped into the
# ignored .pjrt/ folder:
# - .pjrt/xla_cpu: XLA's CPU plugin (lammps-jax-pjrt-cpu), on which every pjrt test runs
#   and which the build makes the default --device pjrt plugin (src/backends/CMakeLists.txt);
# - .pjrt/libtpu: libtpu, for the test that compiles for a TPU topology without a TPU.
# Run by scripts/test.sh before scripts/setup.sh; a test whose plugin is absent skips,
# saying why. SHARDLM_SKIP_PJRT_PLUGIN=1 skips the fetch.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ "${SHARDLM_SKIP_PJRT_PLUGIN:-0}" != 1 ] || exit 0

# fetch NAME REQUIREMENT WHEEL SHA256 PLATFORM MEMBER DIRECTORY: the wheel's MEMBER as
# DIRECTORY/<its file name>, unless already there.
fetch() {
  local name=$1 requirement=$2 wheel=$3 sha256=$4 platform=$5 member=$6 directory=$7
  [ ! -f "$directory/$(basename "$member")" ] || return 0
  if ! python3 -m pip --version >/dev/null 2>&1; then
    local sudo_prefix=()
    [ "$(id -u)" -eq 0 ] || sudo_prefix=(sudo)
    "${sudo_prefix[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_prefix[@]}" apt-get install -y -qq --no-install-recommends python3-pip >&2
  fi
  echo "shardlm setup: fetching $name ($requirement) into $directory" >&2
  local download
  download=$(mktemp -d)
  printf '%s --hash=sha256:%s\n' "$requirement" "$sha256" >"$download/requirements.txt"
  if python3 -m pip download -q --no-deps --require-hashes --only-binary=:all: --platform "$platform" \
       --python-version 3.11 --implementation cp -r "$download/requirements.txt" -d "$download" >&2 &&
     echo "$sha256  $download/$wheel" | sha256sum -c --quiet - >&2; then
    rm -rf "$directory.partial" && mkdir -p "$directory.partial"
    python3 -m zipfile -e "$download/$wheel" "$download/unzipped"
    mv "$download/unzipped/$member" "$directory.partial/"
    rm -rf "$directory" && mv "$directory.partial" "$directory"
  else
    echo "shardlm setup: could not fetch $name: the tests that need it will be skipped" >&2
  fi
  rm -rf "$download"
}

fetch "the XLA:CPU PJRT plugin" lammps-jax-pjrt-cpu==0.11.2 \
  lammps_jax_pjrt_cpu-0.11.2-py3-none-manylinux_2_27_x86_64.whl \
  1319390d948b39f69f7dade496b7c385149d9ca6097a6b62114da113216d9ad1 manylinux_2_27_x86_64 \
  lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so .pjrt/xla_cpu
fetch "libtpu (the TPU PJRT plugin, for compiling without a TPU)" libtpu==0.0.52 \
  libtpu-0.0.52-cp311-cp311-manylinux_2_31_x86_64.whl \
  f5e2e596eaea9357fbb5a6755a7a9007c6ab75bfde4a55191b03eff402971140 manylinux_2_31_x86_64 \
  libtpu/libtpu.so .pjrt/libtpu
