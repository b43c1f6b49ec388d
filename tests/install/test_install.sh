#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then two user projects built against what it
# installed, one through find_package(shardlm), one through pkg-config, each generating
# on the embedded model: their ids equal the installed CLI's and llama2.c's (run.c) golden.
# Also: the installed library exports only the public API, and its errors arrive as
# shardlm::Error in the user's program.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$1
source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
# shellcheck source=../checks.sh
source "$(dirname "$0")/../checks.sh"

cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1
check "cmake --install succeeds" test $? -eq 0
libdir=$(dirname "$(find "$prefix" -name 'libshardlm.so' | head -1)")
for file in bin/shardlm include/shardlm/shardlm.h include/shardlm/auto_model.h; do
  check "installs $file" test -e "$prefix/$file"
done
check "installs the library with its SONAME link" test -e "$libdir/libshardlm.so.0"
check "the SONAME is libshardlm.so.0" bash -c "readelf -d '$libdir/libshardlm.so' | grep -q 'SONAME.*libshardlm.so.0'"
check "installs the CMake package" test -e "$libdir/cmake/shardlm/shardlmConfig.cmake"
check "installs the pkg-config file" test -e "$libdir/pkgconfig/shardlm.pc"

golden=$(sed -n 's/^GEN_IDS: //p' "$source/tests/data/stories260K/once_upon_a_time.ids.txt" | tr ' ' '\n' | head -20 |
  paste -sd, -)
"$prefix/bin/shardlm" generate -p "Once upon a time" -n 20 --greedy -o ids >"$work/cli.txt" 2>"$work/cli.err"
check "the installed CLI generates llama2.c's ids" test "$(cat "$work/cli.txt")" = "$golden"

cmake -S "$source/tests/install/consumer" -B "$work/cmake-consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/cmake-consumer.log" 2>&1 && cmake --build "$work/cmake-consumer" >>"$work/cmake-consumer.log" 2>&1
check "a find_package(shardlm) project builds" test $? -eq 0 || cat "$work/cmake-consumer.log"
"$work/cmake-consumer/consumer" >"$work/cmake.txt" 2>"$work/cmake.err"
check "... and generates the CLI's ids" test "$(cat "$work/cmake.txt")" = "$golden"

export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046
c++ -o "$work/pc-consumer" "$source/tests/install/consumer/main.cpp" $(pkg-config --cflags --libs shardlm) \
  -Wl,-rpath,"$libdir" >"$work/pc-consumer.log" 2>&1
check "a pkg-config project builds" test $? -eq 0 || cat "$work/pc-consumer.log"
"$work/pc-consumer" >"$work/pc.txt" 2>"$work/pc.err"
check "... and generates the CLI's ids" test "$(cat "$work/pc.txt")" = "$golden"

"$work/pc-consumer" "$work/no-such-model" >"$work/bad.txt" 2>"$work/bad.err"
check "a bad path exits with the program's own error status" test $? -eq 2
check "... caught as shardlm::Error naming the path" contains "$work/bad.err" "shardlm::Error: "
check "... naming the path" contains "$work/bad.err" "$work/no-such-model"

nm -DC --defined-only "$libdir/libshardlm.so" >"$work/symbols.txt"
check "exports AutoModelForCausalLM::from_pretrained" contains "$work/symbols.txt" \
  "shardlm::AutoModelForCausalLM::from_pretrained"
check "exports AutoTokenizer::decode" contains "$work/symbols.txt" "shardlm::AutoTokenizer::decode"
check "exports shardlm::Error's type information" contains "$work/symbols.txt" "typeinfo for shardlm::Error"
check "exports no internal helper (str_cat, fail, io::, graph::, backends::, tokenizer::, std:: instances)" \
  bash -c "! grep -E '^[0-9a-f]+ . (std::|.*str_cat|shardlm::fail|shardlm::(core|io|graph|backends|tokenizer|models|generation|parallel|api|log|detail)::)' '$work/symbols.txt'"

echo "$failures failed"
exit $((failures > 0))
