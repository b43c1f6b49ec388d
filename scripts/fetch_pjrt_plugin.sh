#!/usr/bin/env bash
# Fetches the XLA:CPU PJRT plugin, a test dependency (the pjrt backend's tests run on it;
# the demo and the library do not need it): from PyPI with its version and sha256 pinned,
# unzipped into the ignored .pjrt/ folder, where the build finds it
# (src/backends/CMakeLists.txt). Run by scripts/test.sh before scripts/setup.sh; without
# the plugin the pjrt tests skip, saying why. SHARDLM_SKIP_PJRT_PLUGIN=1 skips the fetch.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

pjrt_dir=.pjrt/xla_cpu
pjrt_wheel=lammps_jax_pjrt_cpu-0.11.2-py3-none-manylinux_2_27_x86_64.whl
pjrt_sha256=1319390d948b39f69f7dade496b7c385149d9ca6097a6b62114da113216d9ad1
if [ "${SHARDLM_SKIP_PJRT_PLUGIN:-0}" != 1 ] && [ ! -f "$pjrt_dir/pjrt_c_api_cpu_plugin.so" ]; then
  if ! python3 -m pip --version >/dev/null 2>&1; then
    sudo_prefix=()
    [ "$(id -u)" -eq 0 ] || sudo_prefix=(sudo)
    "${sudo_prefix[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_prefix[@]}" apt-get install -y -qq --no-install-recommends python3-pip >&2
  fi
  echo "shardlm setup: fetching the XLA:CPU PJRT plugin (lammps-jax-pjrt-cpu 0.11.2) into $pjrt_dir" >&2
  download=$(mktemp -d)
  printf 'lammps-jax-pjrt-cpu==0.11.2 --hash=sha256:%s\n' "$pjrt_sha256" >"$download/requirements.txt"
  if python3 -m pip download -q --no-deps --require-hashes --only-binary=:all: --platform manylinux_2_27_x86_64 \
       -r "$download/requirements.txt" -d "$download" >&2 &&
     echo "$pjrt_sha256  $download/$pjrt_wheel" | sha256sum -c --quiet - >&2; then
    mkdir -p "$pjrt_dir.partial"
    python3 -m zipfile -e "$download/$pjrt_wheel" "$pjrt_dir.partial"
    mv "$pjrt_dir.partial/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so" "$pjrt_dir.partial/"
    rm -rf "$pjrt_dir.partial/lammps_jax_pjrt_cpu" "$pjrt_dir.partial"/*.dist-info
    rm -rf "$pjrt_dir" && mv "$pjrt_dir.partial" "$pjrt_dir"
  else
    echo "shardlm setup: could not fetch the PJRT plugin: the pjrt tests will be skipped" >&2
  fi
  rm -rf "$download"
fi
