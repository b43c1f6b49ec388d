#!/usr/bin/env bash
# Installs what shardlm needs from Debian 12's packages (only what is missing) and
# builds it into build/. Sourced by scripts/demo.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(g++ cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev libpcre2-dev
          libutf8proc-dev libgtest-dev libgmock-dev libbenchmark-dev xz-utils
          libcurl4-openssl-dev libssl-dev libcpp-httplib-dev openmpi-bin libopenmpi-dev
          clang-14 libclang-rt-14-dev python3-dev pybind11-dev python3-numpy python3-pytest)
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

jobs=$(nproc)
# -g1: line tables for backtraces, without the full debug info that costs a fifth of the build.
# Unity build: each library compiles as a few large files (a third of the build time).
configure_log=$(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON 2>&1) ||
  { echo "$configure_log" >&2; exit 1; }
grep -F 'shardlm:' <<<"$configure_log" >&2 || true  # whether the CUDA backend is built
cmake --build build -j "$jobs"
