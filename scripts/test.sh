#!/usr/bin/env bash
# The whole test suite, as CI runs it: unit, golden, tokenizer parity, CLI and
# server tests under ASan+UBSan; the release build with CUDA (the binary, the
# gpu-labelled tests and the kernel lab are compiled; they run only on the GPU
# machine); bounded fuzzing. Each phase prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
fuzz_seconds=${HAYATE_FUZZ_SECONDS:-15}

[ -f assets/llama3_1/tokenizer.json ] || scripts/setup.sh

phase() { echo "== $1 (at ${SECONDS}s)"; }

phase "release build: binary, gpu tests, kernel lab (CUDA when nvcc is found)"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs" --target gpu_build

phase "sanitizer build"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
phase "sanitizer tests"
ctest --preset asan -j "$jobs"

phase "fuzz build"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"
phase "fuzzing (${fuzz_seconds}s per target)"
for f in build/fuzz/tests/fuzz/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f")
  corpus=tests/fuzz/corpus/${name#fuzz_}
  mkdir -p "build/fuzz/corpus/$name"
  echo "-- $name"
  "$f" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -print_final_stats=0 \
       "build/fuzz/corpus/$name" $( [ -d "$corpus" ] && echo "$corpus" ) 2>&1 | tail -3
done
echo "== all tests passed in ${SECONDS}s"
