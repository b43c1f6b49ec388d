#!/usr/bin/env bash
# Run here, before bench/device/check.sh runs on the GPU machine: that machine has CUDA,
# PyTorch and transformers but none of Debian's -dev packages and no network, so the
# binaries are built here (nvcc 13.0 for sm_90 + PTX, the toolkit the GPU machine has) and
# travel in .device-bundle/ with the shared libraries they need beyond glibc, libstdc++ and
# CUDA's own (which check.sh finds there).
#   bash bench/device/prepare.sh      then run with carry [".device-bundle"]:
#   bash bench/device/check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh >/dev/null
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "prepare.sh: no nvcc here" >&2; exit 1; }
cmake --build build --target shardlm_cli test_backends test_models >/dev/null
[ -f build/src/backends/libshardlm_cuda_kernels.a ] || { echo "prepare.sh: build/ has no CUDA backend" >&2; exit 1; }

bundle=.device-bundle
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for binary in build/bin/shardlm build/tests/backends/test_backends build/tests/models/test_models; do
  strip -o "$bundle/bin/$(basename "$binary")" "$binary"
done
# Every library the binaries load except the C/C++ runtime and CUDA's.
for binary in "$bundle"/bin/*; do ldd "$binary"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so|/usr/local/cuda|libcuda\.so' |
  while read -r library; do cp -L "$library" "$bundle/lib/"; done
du -sh "$bundle"
