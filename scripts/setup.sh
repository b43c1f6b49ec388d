#!/usr/bin/env bash
# Installs what shardlm needs from Debian 12's packages (only what is missing) and
# builds it into build/. Sourced by scripts/demo.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(g++ cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev libpcre2-dev
          libutf8proc-dev libgtest-dev libgmock-dev libbenchmark-dev xz-utils
          libcurl4-openssl-dev libssl-dev libcpp-httplib-dev openmpi-bin libopenmpi-dev
          clang-14 libclang-rt-14-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "shardlm setup: installing ${missing[*]}" >&2
  sudo_prefix=()
  [ "$(id -u)" -eq 0 ] || sudo_prefix=(sudo)
  "${sudo_prefix[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_prefix[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# The CUDA toolkit is not a Debian package here; where it is installed (nvcc under
# /usr/local/cuda) the CUDA backend is built too, else the build is CPU-only.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

# The XLA:CPU PJRT plugin (a test dependency: the pjrt backend's tests run on it), from
# PyPI with its version and sha256 pinned, unzipped into the ignored .pjrt/ folder; the
# build finds it there (src/backends/CMakeLists.txt). Without it the pjrt tests skip.
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

jobs=$(nproc)
# -g1: line tables for backtraces, without the full debug info that costs a fifth of the build.
# Unity build: each library compiles as a few large files (a third of the build time).
configure_log=$(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON 2>&1) ||
  { echo "$configure_log" >&2; exit 1; }
grep -F 'shardlm:' <<<"$configure_log" >&2 || true  # whether the CUDA backend is built
cmake --build build -j "$jobs"
