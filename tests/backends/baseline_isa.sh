#!/usr/bin/env bash
# The library must run on any x86-64, AVX2 or not, on the portable kernel table: an AVX
# instruction reached before a CPU check would end the process with SIGILL there. This
# machine runs AVX, so no run here can show that; the object code can. Every object of the
# static libraries is disassembled:
# - objects of files built for an instruction set (named for it: *avx*, *amx*; the only
#   ones src/backends/CMakeLists.txt gives ISA flags, which is checked too) may use it, but
#   their entry points that run on every CPU (the table getters *_cpu_kernels() and the
#   CPU checks cpu_runs_* / cpu_has_*) must not;
# - every other object holds baseline instructions only, save the read and peak probes of
#   machine_limits.cpp that ask for wider vectors by target attribute and run after a check.
# Usage: baseline_isa.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$1
build_dir=$(realpath "$2")
isa_object='(avx|amx)[a-z0-9_]*\.cpp\.o$'
entry_point='_cpu_kernels\(\)|cpu_runs_|cpu_has_'
probe='sum_streams<|run_(bf16|int8)_dot_chains\(\)|run_fma_chains_avx(2|512)\(\)'
# AVX, AVX-512 and AMX instructions: VEX/EVEX mnemonics (v...), mask (k...) and tile
# (t...z / ldtilecfg) ones, and any use of a ymm, zmm, mask or tile register.
wide='^ +[0-9a-f]+:[[:space:]]+(v[a-z0-9]+|k[a-z]+|tdp[a-z0-9]+|tile[a-z]+|ldtilecfg)[[:space:]]|%[yz]mm|%k[0-7]|%tmm'

flagged=$(grep 'set_source_files_properties' -A2 "$source_dir/src/backends/CMakeLists.txt" |
  grep -o 'cpu/[a-z0-9_]*\.cpp' | sort -u)
for file in $flagged; do
  if ! grep -Eq '(avx|amx)' <<<"$file"; then
    echo "FAIL: $file is built with ISA flags but not named for its instruction set" >&2
    exit 1
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0 objects=0
while IFS= read -r library; do
  mkdir -p "$work/$(basename "$library")"
  (cd "$work/$(basename "$library")" && ar x "$library")
  for object in "$work/$(basename "$library")"/*.o; do
    objects=$((objects + 1))
    name=$(basename "$object")
    # function: each function's name, then its instructions that use wider registers.
    offenders=$(objdump -d --no-show-raw-insn -C "$object" |
      awk -v wide="$wide" '/^[0-9a-f]+ <.*>:$/ { fn = $0; next } $0 ~ wide { print fn }' | sort -u)
    if [[ $name =~ $isa_object ]]; then
      offenders=$(grep -E "$entry_point" <<<"$offenders" || true)
    elif [[ $name =~ cu\.o$ ]]; then
      offenders=""  # nvcc's host stubs: the CUDA backend runs on a GPU's host, checked there
    else
      offenders=$(grep -Ev "$probe" <<<"$offenders" || true)
    fi
    if [ -n "$offenders" ]; then
      echo "FAIL: $(basename "$library")/$name uses AVX or wider instructions in functions that may run on any CPU:" >&2
      echo "$offenders" >&2
      failures=$((failures + 1))
    fi
  done
done < <(find "$build_dir/src" -name '*.a')
if [ "$objects" -eq 0 ]; then
  echo "FAIL: no objects found under $build_dir/src" >&2
  exit 1
fi
[ "$failures" -eq 0 ] || exit 1
echo "$objects objects: baseline x86-64 outside the instruction-set files and their checked entry points"
