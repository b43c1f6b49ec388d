#!/usr/bin/env bash
# The GPU check of issue "CUDA backend", in one run on the GPU machine (about 6 minutes),
# from the repository root after bench/device/prepare.sh made .device-bundle here:
#   1. builds the CUDA kernels with this machine's nvcc (the tested binaries come built
#      from prepare.sh: no Debian packages here);
#   2. the backend-consistency suite on cuda (every CUDA op against the CPU reference) and
#      the golden fixture tests on cuda;
#   3. a random bf16 model of Qwen3-0.6B's shape (bench/qwen3-0.6b-config.json) made here;
#   4. shardlm bench on cuda: decode batch 1 and 8 (128 tokens after 64), prefill of 2,048;
#   5. the peer in the same run: transformers, from_config, bf16, static cache, compiled
#      (bench/device/transformers_peer.py), which also measures the bf16 matrix peak;
#   6. one table;
#   7. the pjrt backend on the H200 through the XLA:CUDA plugin of the machine's own
#      jax-cuda13-pjrt (or -cuda12-) package: `shardlm devices`, the consistency suite and
#      the golden fixtures on pjrt, and shardlm bench --device pjrt (pp512, tg128) beside
#      --device cuda on the same bf16 model.
# Results land in $OUT (or /tmp/shardlm-device): check.log, peer.json, bench_*.json, table.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=$PWD/.device-bundle
out=${OUT:-/tmp/shardlm-device}
mkdir -p "$out"
exec > >(tee "$out/check.log") 2>&1
[ -x "$bundle/bin/shardlm" ] || { echo "check.sh: no $bundle: run bench/device/prepare.sh first"; exit 1; }

# CUDA's libraries: the toolkit's, else those PyTorch's wheels bring (cuBLASLt, NCCL, cudart).
cuda_dirs=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/lib*.so*")})))' 2>/dev/null)
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${cuda_dirs}:${LD_LIBRARY_PATH:-}"
export SHARDLM_TEST_DATA_DIR=$PWD/tests/data
shardlm=$bundle/bin/shardlm
status=0
step() { echo; echo "== $* ($(date +%T))"; }

step "GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
"$shardlm" devices

step "1. build: the CUDA kernels with this machine's nvcc"
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
for kernel in src/backends/cuda/*.cu; do
  "$nvcc_bin" -std=c++17 -O3 -arch=sm_90 -Isrc -Iinclude -c "$kernel" -o "/tmp/$(basename "$kernel").o" ||
    { echo "FAILED: nvcc $kernel"; status=1; }
done

step "2. consistency and golden fixtures on cuda"
"$bundle/bin/test_backends" --gtest_filter='*cuda*' --gtest_brief=1 || status=1
"$bundle/bin/test_models" --gtest_filter='*cuda*' --gtest_brief=1 || status=1
SHARDLM_CUDA_GRAPHS=0 "$bundle/bin/test_models" --gtest_filter='*qwen3_tiny_cuda*' --gtest_brief=1 || status=1

step "3. random Qwen3-0.6B-shaped bf16 model"
model=/tmp/shardlm-qwen3-0.6b-bf16
[ -f "$model/model.safetensors" ] ||
  "$shardlm" random-model --config bench/qwen3-0.6b-config.json --output "$model" --dtype bf16 || status=1

step "5. peer: transformers (static cache, compiled) and the bf16 matrix peak"
timeout 300 python3 bench/device/transformers_peer.py --config bench/qwen3-0.6b-config.json --output "$out/peer.json" ||
  echo "peer failed or timed out"
peak_gflops=$(python3 -c "import json; print(json.load(open('$out/peer.json'))['bf16_matmul_tflops'] * 1000)" 2>/dev/null || echo 790000)

step "4. shardlm bench on cuda"
common=(--model "$model" --device cuda --bandwidth-gbs 4800 --fma-peak-gflops "$peak_gflops" -r 3 --output json)
"$shardlm" bench "${common[@]}" -p 2048 -n 128 --tg-prompt 64 --batch 1 >"$out/bench_b1.json" || status=1
"$shardlm" bench "${common[@]}" -p 0 -n 128 --tg-prompt 64 --batch 8 >"$out/bench_b8.json" || status=1
SHARDLM_CUDA_GRAPHS=0 "$shardlm" bench "${common[@]}" -p 0 -n 64 --tg-prompt 64 --batch 1 >"$out/bench_b1_nograph.json" ||
  status=1

step "6. table"
python3 - "$out" <<'PY' | tee "$out/table.md"
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception:
        return {}
b1, b8, plain, peer = load("bench_b1.json"), load("bench_b8.json"), load("bench_b1_nograph.json"), load("peer.json")
def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "n/a"
print("| H200, Qwen3-0.6B shape, bf16 | shardlm | transformers (static, compiled) | ratio | target |")
print("|---|---|---|---|---|")
print(f"| decode batch 1 (tok/s) | {b1.get('tg_tok_s', 0):.0f} ({b1.get('tg_percent_of_roofline', 0):.0f}% of 4.8 TB/s) "
      f"| {peer.get('decode_b1_tok_s', 0):.0f} | {ratio(b1.get('tg_tok_s'), peer.get('decode_b1_tok_s'))} | >= 1500 and >= 3x |")
print(f"| decode batch 8 (tok/s, all rows) | {b8.get('tg_tok_s', 0):.0f} | {peer.get('decode_b8_tok_s', 0):.0f} "
      f"| {ratio(b8.get('tg_tok_s'), peer.get('decode_b8_tok_s'))} | |")
print(f"| decode batch 1 without CUDA graphs | {plain.get('tg_tok_s', 0):.0f} | | | |")
print(f"| prefill 2048 (tok/s) | {b1.get('pp_tok_s', 0):.0f} ({b1.get('pp_percent_of_fma_peak', 0):.1f}% of "
      f"{peer.get('bf16_matmul_tflops', 0):.0f} TFLOP/s bf16 peak) | {peer.get('prefill_2048_tok_s', 0):.0f} "
      f"| {ratio(b1.get('pp_tok_s'), peer.get('prefill_2048_tok_s'))} | >= 40% of peak |")
PY
step "7. pjrt on the H200: the XLA:CUDA plugin"
cuda_plugin=$(python3 - <<'PY' 2>/dev/null
import glob, importlib, os
for name in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
    try:
        module = importlib.import_module(name)
    except Exception:
        continue
    found = glob.glob(os.path.join(os.path.dirname(module.__file__), "xla_cuda_plugin.so"))
    if found:
        print(found[0])
        break
PY
)
if [ -z "$cuda_plugin" ]; then
  echo "FAILED: no XLA:CUDA PJRT plugin (jax-cuda13-pjrt or jax-cuda12-pjrt) installed here"; status=1
else
  export SHARDLM_PJRT_PLUGIN=$cuda_plugin
  echo "plugin: $cuda_plugin"
  "$shardlm" devices --pjrt-plugin "$cuda_plugin" || status=1
  "$bundle/bin/test_backends" --gtest_filter='*/pjrt' --gtest_brief=1 || status=1
  "$bundle/bin/test_models" --gtest_filter='*_pjrt*:-*TensorParallel*' --gtest_brief=1 || status=1
  for device in pjrt cuda pjrt cuda; do
    echo "--device $device:"
    "$shardlm" bench --model "$model" --device "$device" --compile-cache /tmp/shardlm-pjrt-cache -p 512 -n 128 \
      --tg-prompt 64 -r 1 --output json | tee -a "$out/bench_pjrt_vs_cuda.jsonl" || status=1
  done
fi

echo
[ $status -eq 0 ] && echo "check.sh: all steps passed" || echo "check.sh: some step FAILED (see above)"
exit $status
